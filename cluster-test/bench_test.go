package clustertest

import (
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/transport"
)

// BenchmarkSubmitToPlaced measures the latency from sending a submit request
// through the NATS API (gpusched.api.submit, the path `coordinator submit`
// takes) to seeing the job's `placed` event on gpusched.events.job.<id>. The
// cluster runs in this process: a coordinator with embedded NATS and two
// nodes with two simulated h100-80gb GPUs each on the process's one actor
// system (actor messages are local; NATS and memberlist gossip go over
// loopback). Jobs are tiny MLP inference jobs
// submitted one after another; a warm-up job fills the coordinator's peak
// prediction cache first, and at most one job per GPU is in flight when the
// next is submitted, so the figures are a steady state. ns/op is the full
// submit → placed round; p50-ms, p99-ms and max-ms are percentiles of the
// per-job latencies. For a stable p99 give it enough jobs:
//
//	go test ./cluster-test/ -run '^$' -bench SubmitToPlaced -benchtime 2000x
func BenchmarkSubmitToPlaced(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	co, err := actors.StartCoordinator(actors.CoordinatorConfig{DataDir: b.TempDir(), NATSListen: "127.0.0.1:0",
		Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0", Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer co.Stop()
	const nodes, gpus = 2, 2
	for i := 0; i < nodes; i++ {
		n, err := actors.StartNode(actors.NodeConfig{Name: fmt.Sprintf("n%d", i+1), Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0",
			Join: []string{co.GossipAddr()}, GPUs: gpus, Profile: gpu.MustProfile("h100-80gb"), TimeScale: 1000, Log: quiet})
		if err != nil {
			b.Fatal(err)
		}
		defer n.Kill()
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		g, err := co.GPUs()
		if err == nil && len(g) == nodes*gpus {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d GPUs joined within 15 s (%v)", len(g), nodes*gpus, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	nc, err := transport.Connect(co.NATSURL(), "bench-submit-to-placed")
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	w := newEventWaiter()
	if _, err := nc.Subscribe(transport.AllJobEvents, w.onEvent); err != nil {
		b.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	var inflight []string
	// settle waits until at most keep submitted jobs are still unfinished.
	settle := func(keep int) {
		for len(inflight) > keep {
			if _, ok := w.wait(w.ended, inflight[0], 30*time.Second); !ok {
				b.Fatalf("job %s did not end within 30 s", inflight[0])
			}
			inflight = inflight[1:]
		}
	}
	submit := func(i int) {
		spec := fmt.Sprintf("name: bench-%d\nmodel: mlp\nkind: infer\nbatch: 1\nrequests: 10\n", i)
		sent := time.Now()
		var rep actors.SubmitReply
		if err := transport.Request(nc, transport.VerbSubmit, actors.SubmitRequest{YAML: spec}, &rep, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		if len(rep.Jobs) != 1 {
			b.Fatalf("submit accepted %v", rep.Jobs)
		}
		id := rep.Jobs[0].ID
		at, ok := w.wait(w.placed, id, 10*time.Second)
		if !ok {
			b.Fatalf("no placed event for %s within 10 s", id)
		}
		lat = append(lat, at.Sub(sent))
		inflight = append(inflight, id)
	}
	// Warm-up: fills the peak prediction cache for this model and batch.
	submit(-1)
	settle(0)
	lat = lat[:0]

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Keep the GPUs about as busy as a steady cluster: one job in flight
		// per GPU. Each device re-plans all its jobs together on every
		// arrival, so an unbounded backlog would measure the planners, not
		// the submit path.
		b.StopTimer()
		settle(nodes*gpus - 1)
		b.StartTimer()
		submit(i)
	}
	b.StopTimer()
	settle(0)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// percentile returns the q-quantile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// eventWaiter records when each job's first placed event and its end
// (completed, failed or cancelled) arrive; an event may arrive before the
// submit reply that names the job.
type eventWaiter struct {
	mu     sync.Mutex
	placed map[string]chan time.Time
	ended  map[string]chan time.Time
}

func newEventWaiter() *eventWaiter {
	return &eventWaiter{placed: map[string]chan time.Time{}, ended: map[string]chan time.Time{}}
}

func (w *eventWaiter) chanFor(m map[string]chan time.Time, job string) chan time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := m[job]
	if c == nil {
		c = make(chan time.Time, 1)
		m[job] = c
	}
	return c
}

func (w *eventWaiter) onEvent(msg *nats.Msg) {
	at := time.Now()
	e, err := transport.ParseEvent(msg.Data)
	if err != nil {
		return
	}
	var m map[string]chan time.Time
	switch e.Type {
	case transport.EvPlaced:
		m = w.placed
	case transport.EvCompleted, transport.EvFailed, transport.EvCancelled:
		m = w.ended
	default:
		return
	}
	select {
	case w.chanFor(m, e.Job) <- at:
	default: // a later placement of the same job (after a requeue)
	}
}

// wait returns when the job's event of kind m (w.placed or w.ended) arrived.
func (w *eventWaiter) wait(m map[string]chan time.Time, job string, d time.Duration) (time.Time, bool) {
	c := w.chanFor(m, job)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case at := <-c:
		return at, true
	case <-t.C:
		return time.Time{}, false
	}
}
