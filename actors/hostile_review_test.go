package actors

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
)

// What a device sends a job actor comes off the network. These tests send
// garbled messages straight to the job's actor, as a faulty or hostile
// device would, and check that the record, the store and the API keep what
// was accepted before, and that a log line names the GPU and the field.

// loggedCluster starts a coordinator whose log the test reads and one node
// of gpus test GPUs at time scale scale.
func loggedCluster(t *testing.T, gpus int, scale float64, ec ElasticConfig) (*testCluster, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: DefaultPlanner(), elastic: ec,
		log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	t.Cleanup(tc.stop)
	tc.startCoordinator()
	tc.addNode("n1", gpus, testGPU, scale)
	return tc, logs
}

// logged reports whether a line of logs holds every one of words.
func logged(logs *lockedBuffer, words ...string) bool {
	for _, l := range strings.Split(logs.String(), "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}

// storedRecord is job id's record as the store has it.
func (tc *testCluster) storedRecord(id string) (*JobRecord, error) {
	b, err := tc.co.Store.Get(JobKey(id))
	if err != nil {
		return nil, err
	}
	return decodeRecord(b)
}

// barrierOrEnd is barrier, or the job's end (a job actor that ends stops
// and handles no more messages).
func (tc *testCluster) barrierOrEnd(id, gpuName string, budget int64, why string) {
	tc.t.Helper()
	tc.co.System().Root.Send(tc.co.JobPID(id), &pb.BudgetRevised{JobId: id, Gpu: gpuName, OldBudget: budget, NewBudget: budget, Reason: why})
	tc.waitFor(10*time.Second, "the job handled "+why+", or ended", func() bool {
		for _, e := range tc.eventsOf(id, "") {
			if e.Type == transport.EvResized && e.Reason == why || e.Type == transport.EvCompleted || e.Type == transport.EvFailed {
				return true
			}
		}
		return false
	})
}

// reportOf is a progress report that says what record r says.
func reportOf(r *JobRecord) *pb.Progress {
	return &pb.Progress{JobId: r.ID, Gpu: r.GPU, Iteration: r.Iteration, Total: r.Total, IterationSeconds: r.IterSeconds,
		PeakBytes: r.PeakBytes, SwappedBytes: r.SwappedBytes, Budget: r.Budget, PlanVersion: r.PlanVersion,
		PlanActions: r.PlanActions, VirtualSeconds: r.VirtualSeconds, Batch: int32(r.Batch)}
}

// A progress report with a garbled field is ignored, with a log line that
// names the GPU and the field; the job keeps its record. Before, the job
// actor copied every field into the record: a NaN or infinite iteration
// time made the record unencodable as JSON, so the store was given an empty
// value in its place (the job was lost at the next restart) and the status
// and list verbs failed; an iteration count going back or a total of 1 was
// taken as the job's checkpoint (a requeue restarted it from there), a
// report that said finished short of the total completed the job, negative
// byte counts and virtual time were recorded (the virtual time seeds an
// elastic job's attained service), and a report for another job was taken
// as this one's. A good report is still taken, and the job runs on.
func TestGarbledProgressKeepsRecord(t *testing.T) {
	tc, logs := loggedCluster(t, 1, 2, ElasticConfig{})
	id := tc.submit(mlpSpec("a", 100000, 0))[0].ID
	tc.waitFor(20*time.Second, "a runs with a measured iteration time", func() bool {
		r := tc.job(id)
		return r.State == StateRunning && r.Iteration > 0 && r.IterSeconds > 0 && r.VirtualSeconds > 0 && r.PeakBytes > 0
	})
	// The device is held: from the first barrier on, the job's only
	// reports are the test's.
	n := tc.nodes[0]
	resume := holdMailbox(t, n.System(), n.DevicePID(0))
	var once sync.Once
	t.Cleanup(func() { once.Do(resume) })
	r0 := tc.job(id)
	tc.barrier(id, r0.GPU, r0.Budget, "test: settle")
	r0, _ = tc.co.Job(id)
	total := r0.Total

	type check func(before, after *JobRecord) string
	seen := 0 // progress events published before the case
	finite := func(before, after *JobRecord) string {
		if math.IsNaN(after.IterSeconds) || math.IsInf(after.IterSeconds, 0) || after.IterSeconds < 0 ||
			math.IsNaN(after.VirtualSeconds) || math.IsInf(after.VirtualSeconds, 0) || after.VirtualSeconds < 0 {
			return fmt.Sprintf("iteration time %v, virtual time %v recorded", after.IterSeconds, after.VirtualSeconds)
		}
		return ""
	}
	kept := func(before, after *JobRecord) string {
		if after.Iteration < before.Iteration || after.Iteration > after.Total || after.Total != total {
			return fmt.Sprintf("iteration %d of %d recorded; was %d of %d", after.Iteration, after.Total, before.Iteration, total)
		}
		return ""
	}
	bytesOK := func(before, after *JobRecord) string {
		if after.PeakBytes < 0 || after.SwappedBytes < 0 || after.Budget < 0 {
			return fmt.Sprintf("peak %d, swapped %d, budget %d recorded", after.PeakBytes, after.SwappedBytes, after.Budget)
		}
		// The barrier's revision sets the budget again: the events show
		// whether the garbled one was taken meanwhile.
		for _, e := range tc.eventsOf(id, transport.EvProgress)[seen:] {
			if e.PeakBytes < 0 || e.Swapped < 0 || e.Budget < 0 {
				return fmt.Sprintf("progress published with peak %d, swapped %d, budget %d", e.PeakBytes, e.Swapped, e.Budget)
			}
		}
		return ""
	}
	const spoofed = 10007
	for _, c := range []struct {
		name, field string
		bad         func(p *pb.Progress)
		check       check
	}{
		{"another job's report", "job_id", func(p *pb.Progress) { p.JobId, p.Iteration = "j-999999", p.Iteration+spoofed }, func(before, after *JobRecord) string {
			if after.Iteration == before.Iteration+spoofed {
				return "another job's iteration count recorded"
			}
			return ""
		}},
		{"NaN iteration time", "iteration_seconds", func(p *pb.Progress) { p.IterationSeconds = math.NaN() }, finite},
		{"infinite iteration time", "iteration_seconds", func(p *pb.Progress) { p.IterationSeconds = math.Inf(1) }, finite},
		{"negative iteration time", "iteration_seconds", func(p *pb.Progress) { p.IterationSeconds = -1 }, finite},
		{"NaN virtual time", "virtual_seconds", func(p *pb.Progress) { p.VirtualSeconds = math.NaN() }, finite},
		{"negative virtual time", "virtual_seconds", func(p *pb.Progress) { p.VirtualSeconds = -1e6 }, finite},
		{"iteration going back", "iteration", func(p *pb.Progress) { p.Iteration = 0 }, kept},
		{"negative iteration", "iteration", func(p *pb.Progress) { p.Iteration = -5 }, kept},
		{"iteration beyond the total", "iteration", func(p *pb.Progress) { p.Iteration = p.Total + 1 }, kept},
		{"another total", "total", func(p *pb.Progress) { p.Total, p.Iteration = 1, 1 }, kept},
		{"negative peak", "peak_bytes", func(p *pb.Progress) { p.PeakBytes = -1 << 30 }, bytesOK},
		{"negative swapped bytes", "swapped_bytes", func(p *pb.Progress) { p.SwappedBytes = -1 }, bytesOK},
		{"negative budget", "budget", func(p *pb.Progress) { p.Budget = -1 << 40 }, bytesOK},
		// Last: before, it completed the job.
		{"finished short of the total", "finished", func(p *pb.Progress) { p.Finished = true }, func(before, after *JobRecord) string {
			if after.State != StateRunning {
				return fmt.Sprintf("job %s at iteration %d of %d", after.State, after.Iteration, after.Total)
			}
			return ""
		}},
	} {
		before, err := tc.co.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		seen = len(tc.eventsOf(id, transport.EvProgress))
		p := reportOf(before)
		c.bad(p)
		tc.co.System().Root.Send(tc.co.JobPID(id), p)
		tc.barrierOrEnd(id, before.GPU, before.Budget, "test: after "+c.name)
		after, err := tc.co.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		if why := c.check(before, after); why != "" {
			t.Errorf("%s: %s", c.name, why)
		}
		if s, err := tc.storedRecord(id); err != nil || s.State != after.State || s.Iteration != after.Iteration {
			t.Errorf("%s: the store's record: %+v, %v; want the job's, %s at %d", c.name, s, err, after.State, after.Iteration)
		}
		if !logged(logs, "n1/gpu0", id, "field="+c.field+" ") {
			t.Errorf("%s: no log line names the GPU, the job and %q", c.name, c.field)
		}
		if after.State != StateRunning {
			break
		}
		// Put back what was there (a report that says what the record
		// said before), in case the garbled one was taken.
		tc.co.System().Root.Send(tc.co.JobPID(id), reportOf(before))
		tc.barrier(id, before.GPU, before.Budget, "test: put back after "+c.name)
	}
	if t.Failed() {
		return
	}
	// A garbled budget revision is ignored too.
	before, _ := tc.co.Job(id)
	tc.co.System().Root.Send(tc.co.JobPID(id), &pb.BudgetRevised{JobId: id, Gpu: before.GPU, OldBudget: before.Budget, NewBudget: -1, Reason: "test: garbled"})
	tc.barrier(id, before.GPU, before.Budget, "test: after the garbled revision")
	if r, _ := tc.co.Job(id); r.Budget != before.Budget || !logged(logs, "n1/gpu0", id, "field=new_budget ") {
		t.Fatalf("after a revision to budget -1: budget %d (was %d); want it kept, and a log line naming new_budget", r.Budget, before.Budget)
	}
	// A good report is taken, the API answers, and the job runs on.
	good := reportOf(before)
	good.Iteration++
	tc.co.System().Root.Send(tc.co.JobPID(id), good)
	tc.barrier(id, before.GPU, before.Budget, "test: after a good report")
	if r, _ := tc.co.Job(id); r.Iteration != good.Iteration {
		t.Fatalf("a good report at iteration %d: record at %d", good.Iteration, r.Iteration)
	}
	var list ListReply
	if err := transport.Request(tc.nc, transport.VerbList, struct{}{}, &list, 5*time.Second); err != nil || len(list.Jobs) != 1 {
		t.Fatalf("list: %v, %v", list.Jobs, err)
	}
	once.Do(resume)
	tc.waitFor(20*time.Second, "a runs on", func() bool { r := tc.job(id); return r.State == StateRunning && r.Iteration > good.Iteration })
}

// liar stands in front of a device: it forwards everything, but garbles the
// device's answers to budget requests and resize orders with lie.
type liar struct {
	to  *actor.PID
	mu  sync.Mutex
	lie func(any) // nil: none
}

func (l *liar) lies(lie func(any)) {
	l.mu.Lock()
	l.lie = lie
	l.mu.Unlock()
}

func (l *liar) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pb.BudgetRequest, *pb.Resize:
		res, err := ctx.RequestFuture(l.to, m, 5*time.Second).Result()
		if err != nil {
			return
		}
		res = proto.Clone(res.(proto.Message))
		l.mu.Lock()
		if l.lie != nil {
			l.lie(res)
		}
		l.mu.Unlock()
		ctx.Respond(res)
	case proto.Message:
		ctx.RequestWithCustomSender(l.to, m, ctx.Sender())
	}
}

// An elastic move whose new GPU admits the job with a garbled demand is
// refused as if the GPU had refused it: the job keeps running where it was,
// the admission is released, and a log line names the GPU and the field.
// Before, the job took the demand as its own: a negative minimum budget
// became its reservation on the new GPU, which then showed room it did not
// have (placement's view of the GPU's reserved memory went negative), and
// a NaN iteration time made the record unencodable (stored empty).
func TestGarbledMoveAnswerRefused(t *testing.T) {
	for _, c := range []struct {
		name, field string
		lie         func(d *pb.Demand)
	}{
		{"negative minimum budget", "min_budget", func(d *pb.Demand) { d.MinBudget = -1 << 40 }},
		{"NaN iteration time", "iteration_seconds", func(d *pb.Demand) { d.IterationSeconds = math.NaN() }},
	} {
		t.Run(c.field, func(t *testing.T) {
			const scale = 100
			tc, logs := loggedCluster(t, 2, scale, ElasticConfig{Policy: "fifo", TimeScale: scale})
			id := tc.submit(elasticMLP("el", 1000000))[0].ID
			tc.waitMeasured(id)
			r0 := tc.job(id)
			if r0.GPU != "n1/gpu0" {
				t.Fatalf("job on %s, want n1/gpu0", r0.GPU)
			}
			sys := tc.co.System()
			l := &liar{to: tc.nodes[0].DevicePID(1), lie: func(m any) {
				if g, ok := m.(*pb.BudgetGrant); ok && g.Demand != nil {
					c.lie(g.Demand)
				}
			}}
			pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return l }))
			t.Cleanup(func() { sys.Root.Stop(pid) })
			sys.Root.Send(tc.co.JobPID(id), &reconfigure{batch: r0.Batch, targets: []target{{gpu: "n1/gpu1", node: "n1", device: pid}},
				restart: 1, reason: "test: a move to a garbling GPU"})
			var ch transport.Event
			tc.waitFor(20*time.Second, "the move's outcome", func() bool {
				rs := append(elasticChanges(tc, id), tc.eventsOf(id, transport.EvResizeRefused)...)
				if len(rs) == 0 {
					return false
				}
				ch = rs[0]
				return true
			})
			gs, err := tc.co.GPUs()
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gs {
				if g.Reserved < 0 {
					t.Errorf("GPU %s: %d bytes reserved", g.ID, g.Reserved)
				}
			}
			if s, err := tc.storedRecord(id); err != nil || s.State != StateRunning {
				t.Errorf("the store's record: %+v, %v", s, err)
			}
			if ch.Type != transport.EvResizeRefused {
				t.Fatalf("the move to a GPU that answered with a garbled demand: %s (%s); want resize_refused", ch.Type, ch.Reason)
			}
			if !strings.Contains(ch.Reason, c.field) || !logged(logs, "n1/gpu1", id, "field=demand."+c.field+" ") {
				t.Errorf("refused: %q; want it, and a log line, to name n1/gpu1 and %s", ch.Reason, c.field)
			}
			tc.waitFor(20*time.Second, "the job runs on n1/gpu0 alone, released on n1/gpu1", func() bool {
				r := tc.job(id)
				d := tc.findDevice("n1/gpu1")
				return r.State == StateRunning && r.GPU == "n1/gpu0" && len(r.AllGPUs()) == 1 && d != nil && replicaOn(d, id) == nil
			})
		})
	}
}

// An in-place resize that the job's device accepts with another new batch
// than the one ordered is refused and undone there. Before, the job actor
// saw no change (new batch = old batch) and kept its batch, while the
// device ran the ordered one: every report after it was taken for a report
// made before the change and ignored, so the job's record stopped moving.
// An old batch that is the new one (a garbled one, or a device that ran the
// ordered batch already) did the same; the job now takes the batch the
// device accepted, the one ordered.
func TestGarbledResizeAnswer(t *testing.T) {
	for _, c := range []struct {
		field   string
		lie     func(r *pb.ResizeReply)
		refused bool // else applied
	}{
		{"new_batch", func(r *pb.ResizeReply) { r.NewBatch = r.OldBatch }, true},
		{"old_batch", func(r *pb.ResizeReply) { r.OldBatch = r.NewBatch }, false},
	} {
		t.Run(c.field, func(t *testing.T) {
			const scale = 100
			tc, logs := loggedCluster(t, 2, scale, ElasticConfig{Policy: "fifo", TimeScale: scale})
			id := tc.submit(elasticMLP("el", 1000000))[0].ID
			tc.waitMeasured(id)
			sys := tc.co.System()
			l := &liar{to: tc.nodes[0].DevicePID(1)}
			pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return l }))
			t.Cleanup(func() { sys.Root.Stop(pid) })
			to := []target{{gpu: "n1/gpu1", node: "n1", device: pid}}
			sys.Root.Send(tc.co.JobPID(id), &reconfigure{batch: 4096, targets: to, restart: 1, reason: "test: onto the liar"})
			if ch := nthChange(tc, id, 1, "the job moves onto n1/gpu1"); ch.GPU != "n1/gpu1" {
				t.Fatalf("moved to %s, want n1/gpu1", ch.GPU)
			}
			l.lies(func(m any) {
				if r, ok := m.(*pb.ResizeReply); ok && r.Accepted {
					c.lie(r)
				}
			})
			sys.Root.Send(tc.co.JobPID(id), &reconfigure{batch: 2048, targets: to, reason: "test: a resize the liar garbles"})
			want, since := 2048, int64(0)
			if c.refused {
				rf := tc.waitEvent(id, transport.EvResizeRefused, 20*time.Second, nil)
				if !strings.Contains(rf.Reason, c.field) || !logged(logs, "n1/gpu1", id, "field="+c.field+" ") {
					t.Errorf("refused: %q; want it, and a log line, to name n1/gpu1 and %s", rf.Reason, c.field)
				}
				want, since = 4096, rf.Iteration
			} else {
				since = nthChange(tc, id, 2, "the resize is applied").Iteration
			}
			l.lies(nil)
			tc.waitFor(20*time.Second, fmt.Sprintf("the device and the record at batch %d, the record moving on", want), func() bool {
				d := tc.findDevice("n1/gpu1")
				if d == nil {
					return false
				}
				rp, r := replicaOn(d, id), tc.job(id)
				return rp != nil && int(rp.Batch) == want && r.Batch == want && r.Iteration > since
			})
		})
	}
}

// A single absurd iteration time (1e-12 s or 1e12 s) from a device is not
// what the elastic policy learns: ONES's first iteration time for one of a
// job's shapes (GPUs, nodes, per-GPU batch) stands until the job's later
// reports there move its estimate, so one such report, taken just before
// the round that first sees the shape, would set its throughput model for
// that shape until then. An iteration time far outside the job's predicted
// one is logged and not learned; the round sees the job's last plausible
// one. A plausible change (the job twice as slow, as beside a new
// neighbour) is what the next round sees: ONES follows it.
func TestElasticIgnoresAbsurdIterationTime(t *testing.T) {
	const scale = 100
	tc, logs := loggedCluster(t, 1, scale, ElasticConfig{Policy: "ones", TimeScale: scale, Seed: 1})
	id := tc.submit(elasticMLP("el", 1000000))[0].ID
	tc.waitMeasured(id)
	n := tc.nodes[0]
	resume := holdMailbox(t, n.System(), n.DevicePID(0))
	t.Cleanup(resume)
	r0 := tc.job(id)
	tc.barrier(id, r0.GPU, r0.Budget, "test: settle")
	r0, _ = tc.co.Job(id)
	observed := func() []placement.Observation {
		t.Helper()
		// No allocations: the round only shows what the policy is given.
		rep, err := tc.co.ask(&elasticNow{run: true, allocs: map[string]placement.Allocation{}})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range rep.(*elasticReport).states {
			if st.ID == id {
				return st.Observed
			}
		}
		t.Fatalf("job %s is not in the round", id)
		return nil
	}
	if obs := observed(); len(obs) != 1 || obs[0].StepTime != r0.IterSeconds {
		t.Fatalf("the round before: %+v; want one observation, %g s", obs, r0.IterSeconds)
	}
	for _, absurd := range []float64{1e-12, 1e12} {
		p := reportOf(r0)
		p.IterationSeconds = absurd
		tc.co.System().Root.Send(tc.co.JobPID(id), p)
		tc.barrier(id, r0.GPU, r0.Budget, fmt.Sprintf("test: after %g", absurd))
		if obs := observed(); len(obs) != 1 || obs[0].StepTime != r0.IterSeconds {
			t.Errorf("after a report of %g s per iteration the round is given %+v; want the last plausible one, %g s", absurd, obs, r0.IterSeconds)
		}
		if !logged(logs, id, "n1/gpu0", "iteration time") {
			t.Errorf("no log line names the job, its GPU and the iteration time of %g s", absurd)
		}
		tc.co.System().Root.Send(tc.co.JobPID(id), reportOf(r0))
	}
	slower := reportOf(r0)
	slower.IterationSeconds = 2 * r0.IterSeconds
	tc.co.System().Root.Send(tc.co.JobPID(id), slower)
	tc.barrier(id, r0.GPU, r0.Budget, "test: after a plausible change")
	if obs := observed(); len(obs) != 1 || obs[0].StepTime != 2*r0.IterSeconds {
		t.Errorf("after a report of twice the time the round is given %+v; want the new time, %g s", obs, 2*r0.IterSeconds)
	}
}

// fakeNode answers a status request with status, as a node actor would.
type fakeNode struct{ status *pb.NodeStatus }

func (f *fakeNode) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*pb.NodeStatusRequest); ok {
		ctx.Respond(proto.Clone(f.status))
	}
}

// A node whose status has a device round time that is not a number is
// reported with an error naming the node, the device and the field, and a
// log line; the other nodes are reported as before. Before, the nodes verb
// failed as a whole: its reply could not be encoded as JSON.
func TestGarbledNodeStatusReported(t *testing.T) {
	tc, logs := loggedCluster(t, 1, 1000, ElasticConfig{})
	sys := tc.co.System()
	f := &fakeNode{status: &pb.NodeStatus{Name: "fake", Address: tc.co.Address(), DeviceType: testGPU,
		Devices: []*pb.DeviceStatus{{Gpu: "fake/gpu0", Node: "fake", DeviceType: testGPU, RoundSeconds: math.NaN()}}}}
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return f }), NodeActorName("fake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Root.Stop(pid) })
	sys.Root.Send(tc.co.pid, &memberEv{ev: transport.MemberEvent{Type: transport.EvJoined, Addr: "127.0.0.1:1",
		Meta: transport.Meta{Name: "fake", Role: transport.RoleNode, Address: tc.co.Address(), GPUs: 1, DeviceType: testGPU}}})
	tc.waitFor(10*time.Second, "the fake node joined", func() bool {
		ns, _ := tc.co.Nodes()
		return len(ns) == 2
	})
	var rep NodesReply
	if err := transport.Request(tc.nc, transport.VerbNodes, struct{}{}, &rep, 10*time.Second); err != nil {
		t.Fatalf("nodes: %v", err)
	}
	for _, n := range rep.Nodes {
		switch n.Name {
		case "fake":
			if len(n.Devices) != 0 || !strings.Contains(n.Error, "fake/gpu0") || !strings.Contains(n.Error, "round_seconds") {
				t.Errorf("fake node: devices %v, error %q; want none, and an error naming fake/gpu0 and round_seconds", n.Devices, n.Error)
			}
		case "n1":
			if len(n.Devices) != 1 || n.Error != "" {
				t.Errorf("n1: devices %v, error %q; want its device", n.Devices, n.Error)
			}
		}
	}
	if !logged(logs, "fake", "fake/gpu0", "round_seconds") {
		t.Errorf("no log line names the node, its device and round_seconds")
	}
}

// A job actor with two replicas that restarts takes its replicas' progress
// from their devices again (attach): the job is as far as its slowest
// replica, and a replica not heard from yet is at the job's checkpoint.
// Before, such a replica counted as at iteration 0, so the first answer
// recorded and published the job at iteration 0 (its checkpoint, had it
// been requeued then), the next one back where it was.
func TestReplicasRestartKeepCheckpoint(t *testing.T) {
	const scale = 100
	tc := startElasticCluster(t, 1, 2, testGPU, scale, ElasticConfig{Policy: "fifo", TimeScale: scale})
	id := tc.submit(elasticMLP("el", 1000000))[0].ID
	tc.waitMeasured(id)
	if n, err := tc.co.applyAllocations(map[string]placement.Allocation{id: {PerNode: []int{2}, LocalBatch: 2048}}); err != nil || n != 1 {
		t.Fatalf("two replicas: %d orders, %v", n, err)
	}
	grow := nthChange(tc, id, 1, "the job runs two replicas")
	tc.waitEvent(id, transport.EvProgress, 20*time.Second, func(e transport.Event) bool { return e.Seq > grow.Seq && e.Iteration > grow.Iteration })
	restarted := restarts(t, tc.co.System(), tc.co.JobPID(id))
	before := len(tc.eventsOf(id, transport.EvProgress))
	tc.co.System().Root.Send(tc.co.JobPID(id), &pb.Crash{Reason: "test"})
	waitClosed(t, restarted, 10*time.Second, "the coordinator restarts the crashed job actor")
	tc.waitFor(20*time.Second, "three more progress reports", func() bool { return len(tc.eventsOf(id, transport.EvProgress)) >= before+3 })
	var prev transport.Event
	for _, e := range tc.eventsOf(id, transport.EvProgress) {
		if e.Iteration < prev.Iteration {
			t.Fatalf("progress went back from iteration %d (event %d) to %d (event %d)", prev.Iteration, prev.Seq, e.Iteration, e.Seq)
		}
		prev = e
	}
}

// TestUnstorableUpdateKeepsRecord: a job update whose record JSON cannot
// carry (a NaN iteration time) used to be stored as an empty value (the job
// lost at the coordinator's next restart) and kept in memory, so `status`
// could not encode it. The coordinator now keeps the last good record, in
// the store and in memory, and applies nothing of that update.
func TestUnstorableUpdateKeepsRecord(t *testing.T) {
	tc := startCluster(t, 0, 0, testGPU, 1)
	id := tc.submit("name: a\nmodel: mlp\nbatch: 2\niterations: 3\n")[0].ID
	before := tc.job(id)
	bad := before.clone()
	bad.State, bad.IterSeconds, bad.Iteration = StateRunning, math.NaN(), 2
	tc.co.System().Root.Send(tc.co.pid, &jobUpdate{rec: bad})
	// The status request reaches the coordinator after the update.
	got := tc.job(id)
	if got.State != before.State || got.Iteration != before.Iteration {
		t.Errorf("after an unstorable update: state %s iteration %d, want the last good record's %s %d", got.State, got.Iteration, before.State, before.Iteration)
	}
	stored, err := tc.storedRecord(id)
	if err != nil || stored.State != before.State || stored.ID != id {
		t.Fatalf("stored record after an unstorable update: %+v, %v; want the last good record (%s)", stored, err, before.State)
	}
}

// A node whose actor port speaks plaintext cannot be reached by a
// coordinator whose port requires mutual TLS (and the other way round):
// gossip carries each side's setting, and the coordinator ignores a node
// whose setting differs from its own, naming the node and the flags to
// fix, instead of placing jobs on GPUs it cannot reach (every budget
// request would time out and the job be re-queued).
func TestNodeWithOtherTLSSettingIgnored(t *testing.T) {
	tc, logs := loggedCluster(t, 1, 1000, ElasticConfig{})
	sys := tc.co.System()
	join := func(name string, tls bool) {
		sys.Root.Send(tc.co.pid, &memberEv{ev: transport.MemberEvent{Type: transport.EvJoined, Addr: "127.0.0.1:1",
			Meta: transport.Meta{Name: name, Role: transport.RoleNode, Address: tc.co.Address(), GPUs: 1, DeviceType: testGPU, TLS: tls}}})
	}
	join("tls-node", true)
	join("plain-node", false) // handled after tls-node's join: when it is listed, tls-node's was decided
	tc.waitFor(10*time.Second, "the plaintext node joined", func() bool {
		ns, _ := tc.co.Nodes()
		return slices.ContainsFunc(ns, func(n NodeReport) bool { return n.Name == "plain-node" })
	})
	ns, _ := tc.co.Nodes()
	if slices.ContainsFunc(ns, func(n NodeReport) bool { return n.Name == "tls-node" }) {
		t.Errorf("nodes %v: the node with TLS on joined a coordinator without it", ns)
	}
	if !logged(logs, "tls-node", "--tls-cert") {
		t.Errorf("no log line names the node and the TLS flags")
	}
}
