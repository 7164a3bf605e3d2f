package actors

import (
	"testing"
	"time"

	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
)

// An elastic round is scheduled from a snapshot taken while the job runs its
// first attempt on n1/gpu0 at batch 4096, and ordered only after the job
// was requeued (the coordinator's requeueJob, as when its node dies) and
// placed again, on the same GPU at the same batch: its second attempt. The
// round's order (batch 4096 → 2048) was decided for the first attempt, and
// is not applied to the second; the next round decides again from the
// second attempt's record (batch 4096 → 3072), and that order is applied.
// The job actor handles the coordinator's orders in the order they were
// sent, so the job's first elastic change after its restart tells which
// order was applied.
func TestElasticOrderForEarlierAttemptNotApplied(t *testing.T) {
	const scale = 100
	tc := startElasticCluster(t, 1, 1, testGPU, scale, ElasticConfig{Policy: "fifo", TimeScale: scale, MoveCost: 1, Seed: 1})
	id := tc.submit(elasticMLP("el", 1000000))[0].ID
	tc.waitMeasured(id)
	if r := tc.job(id); r.GPU != "n1/gpu0" || r.Batch != 4096 || r.Attempt != 0 {
		t.Fatalf("first attempt: %s at batch %d, attempt %d", r.GPU, r.Batch, r.Attempt)
	}
	held, err := tc.co.holdAllocations(map[string]placement.Allocation{id: {PerNode: []int{1}, LocalBatch: 2048}})
	if err != nil {
		t.Fatalf("scheduling the round: %v", err)
	}

	tc.co.System().Root.Send(tc.co.JobPID(id), &requeueJob{reason: "test: node n1 died"})
	rq := tc.waitEvent(id, transport.EvRequeued, 20*time.Second, nil)
	st := tc.waitEvent(id, transport.EvStarted, 20*time.Second, func(e transport.Event) bool { return e.Seq > rq.Seq })
	tc.waitEvent(id, transport.EvProgress, 20*time.Second, func(e transport.Event) bool { return e.Seq > st.Seq })
	if r := tc.job(id); r.State != StateRunning || r.GPU != "n1/gpu0" || r.Batch != 4096 || r.Attempt != 1 {
		t.Fatalf("second attempt: %s on %s at batch %d, attempt %d", r.State, r.GPU, r.Batch, r.Attempt)
	}

	stale, err := tc.co.applyHeld(held)
	if err != nil {
		t.Fatalf("applying the held round: %v", err)
	}
	fresh, err := tc.co.applyAllocations(map[string]placement.Allocation{id: {PerNode: []int{1}, LocalBatch: 3072}})
	if err != nil || fresh != 1 {
		t.Fatalf("the next round: %d orders, %v", fresh, err)
	}
	var first transport.Event
	tc.waitFor(20*time.Second, "the job's first elastic change in its second attempt", func() bool {
		for _, e := range elasticChanges(tc, id) {
			if e.Seq > st.Seq {
				first = e
				return true
			}
		}
		return false
	})
	t.Logf("held round: %d orders sent; first change in attempt 1: batch %d → %d on %v: %s", stale, first.OldBatch, first.Batch, first.GPUIDs, first.Reason)
	if first.Batch == 2048 {
		t.Fatalf("stale order applied to the new placement: resize %d → %d on %v in attempt 1, ordered from attempt 0's snapshot", first.OldBatch, first.Batch, first.GPUIDs)
	}
	if first.OldBatch != 4096 || first.Batch != 3072 || len(first.GPUIDs) != 1 || first.GPUIDs[0] != "n1/gpu0" {
		t.Fatalf("the next round's order was not applied as decided: %+v", first)
	}
	if r := tc.job(id); r.Attempt != 1 || len(tc.eventsOf(id, transport.EvRequeued)) != 1 {
		t.Fatalf("attempt %d, %d requeues: want one", r.Attempt, len(tc.eventsOf(id, transport.EvRequeued)))
	}
}

// An order that reaches the job actor decided for another attempt of the
// job, or for other GPUs than it runs on, is not applied (the coordinator
// does not send one it can tell is stale; this is what the job actor does
// with one that got past it). Orders are handled in the order they were
// sent: the first elastic change after them is the one decided for the
// job as it is.
func TestElasticJobActorRefusesStaleOrder(t *testing.T) {
	const scale = 100
	tc := startElasticCluster(t, 1, 1, testGPU, scale, ElasticConfig{Policy: "fifo", TimeScale: scale, MoveCost: 1, Seed: 1})
	id := tc.submit(elasticMLP("el", 1000000))[0].ID
	tc.waitMeasured(id)
	sys, pid := tc.co.System(), tc.co.JobPID(id)
	sys.Root.Send(pid, &requeueJob{reason: "test: node n1 died"})
	rq := tc.waitEvent(id, transport.EvRequeued, 20*time.Second, nil)
	st := tc.waitEvent(id, transport.EvStarted, 20*time.Second, func(e transport.Event) bool { return e.Seq > rq.Seq })
	tc.waitEvent(id, transport.EvProgress, 20*time.Second, func(e transport.Event) bool { return e.Seq > st.Seq })
	if r := tc.job(id); r.GPU != "n1/gpu0" || r.Batch != 4096 || r.Attempt != 1 {
		t.Fatalf("second attempt: %s at batch %d, attempt %d", r.GPU, r.Batch, r.Attempt)
	}
	here := []target{{gpu: "n1/gpu0", node: "n1", device: tc.nodes[0].DevicePID(0)}}
	sys.Root.Send(pid, &reconfigure{batch: 2048, targets: here, restart: 1, reason: "test: decided for attempt 0",
		attempt: 0, from: []string{"n1/gpu0"}})
	sys.Root.Send(pid, &reconfigure{batch: 1024, targets: here, restart: 1, reason: "test: decided for the job on n1/gpu1",
		attempt: 1, from: []string{"n1/gpu1"}})
	sys.Root.Send(pid, &reconfigure{batch: 3072, targets: here, restart: 1, reason: "test: decided for the job as it is",
		attempt: 1, from: []string{"n1/gpu0"}})
	first := nthChange(tc, id, 1, "the job's first elastic change")
	t.Logf("first change: batch %d → %d on %v: %s", first.OldBatch, first.Batch, first.GPUIDs, first.Reason)
	if first.OldBatch != 4096 || first.Batch != 3072 {
		t.Fatalf("stale order applied: batch %d → %d (%s)", first.OldBatch, first.Batch, first.Reason)
	}
	if n := len(tc.eventsOf(id, transport.EvResizeRefused)); n != 0 {
		t.Fatalf("%d resize_refused events: a stale order is no device's refusal", n)
	}
}
