package actors

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
)

// A job admitted to a GPU runs no iteration until the plan that includes
// it is installed (planning a GPU's jobs together can take seconds). Its
// record says so meanwhile, so `list`, `status` and the demo show why it
// sits at 0 %, and the reason goes once the job reports progress.
func TestRunningJobSaysItWaitsForItsPlan(t *testing.T) {
	tc, held := startHeldPlanCluster(t)
	id := tc.submit(mlpSpec("a", 100000, 0))[0].ID
	r := tc.waitState(id, StateRunning, 20*time.Second)
	if !strings.Contains(r.Reason, "waiting for "+r.GPU+"'s memory plan") || !r.WaitsForPlan() || r.Iteration != 0 {
		t.Fatalf("running job whose plan is held: reason %q at iteration %d; want it waiting for %s's memory plan at 0", r.Reason, r.Iteration, r.GPU)
	}
	releaseUntilProgress(tc, held, id)
}

// startHeldPlanCluster starts a cluster of one node with one GPU whose
// plans are held until the test releases them (released at cleanup too).
func startHeldPlanCluster(t *testing.T) (*testCluster, *heldPlans) {
	t.Helper()
	held := newHeldPlans()
	tc := startClusterWith(t, held, 1, 1, testGPU, 2)
	held.hold()
	t.Cleanup(held.release)
	return tc, held
}

// releaseUntilProgress releases the held plans, waits until job id has
// progressed, and checks that it runs with no reason left.
func releaseUntilProgress(tc *testCluster, held *heldPlans, id string) *JobRecord {
	tc.t.Helper()
	held.release()
	tc.waitFor(20*time.Second, id+" progresses once its plan is installed", func() bool { return tc.job(id).Iteration > 0 })
	r := tc.job(id)
	if r.Reason != "" || r.State != StateRunning || r.WaitsForPlan() {
		tc.t.Fatalf("after its first progress: state %s, reason %q; want running with no reason", r.State, r.Reason)
	}
	return r
}

// A job actor that restarts while its job waits for its first plan attaches
// to the job's device again, which answers with a report of the job as it
// is: admitted, not run yet. That report cleared the reason, and the record
// said running with no reason while the plan was still being made.
func TestJobActorRestartKeepsWaitingForPlan(t *testing.T) {
	tc, held := startHeldPlanCluster(t)
	id := tc.submit(mlpSpec("a", 100000, 0))[0].ID
	if r := tc.waitState(id, StateRunning, 20*time.Second); !r.WaitsForPlan() {
		t.Fatalf("running job whose plan is held: reason %q; want it waiting for its plan", r.Reason)
	}
	sys := tc.co.System()
	restarted := restarts(t, sys, tc.co.JobPID(id))
	sys.Root.Send(tc.co.JobPID(id), &pb.Crash{Reason: "test"})
	waitClosed(t, restarted, 10*time.Second, "the coordinator restarts the crashed job actor")
	// The device sends no report while the job waits: this is the answer
	// to the restarted actor's attach.
	tc.waitEvent(id, transport.EvProgress, 10*time.Second, nil)
	if r := tc.job(id); !r.WaitsForPlan() || r.Iteration != 0 {
		t.Fatalf("re-attached while its plan is held: state %s, reason %q, iteration %d; want running, waiting for %s's memory plan, at 0",
			r.State, r.Reason, r.Iteration, r.GPU)
	}
	releaseUntilProgress(tc, held, id)
}

// The same when the job actor crashes with its budget request in flight: its
// next incarnation finds the job placed, attaches, and starts it from the
// device's answer. It started it with no reason, though the device had just
// admitted it and was making the plan that includes it.
func TestJobActorRestartBeforeGrantWaitsForPlan(t *testing.T) {
	tc, held := startHeldPlanCluster(t)
	n := tc.nodes[0]
	resumeDevice := holdMailbox(t, n.System(), n.DevicePID(0))
	id := tc.submit(mlpSpec("a", 100000, 0))[0].ID
	// Placed: its budget request is in the device's held mailbox.
	tc.waitEvent(id, transport.EvPlaced, 20*time.Second, nil)
	sys := tc.co.System()
	restarted := restarts(t, sys, tc.co.JobPID(id))
	sys.Root.Send(tc.co.JobPID(id), &pb.Crash{Reason: "test"})
	waitClosed(t, restarted, 10*time.Second, "the coordinator restarts the crashed job actor")
	resumeDevice()
	tc.waitEvent(id, transport.EvProgress, 10*time.Second, nil) // the attach's answer, after the start
	if r := tc.job(id); !r.WaitsForPlan() || r.Iteration != 0 {
		t.Fatalf("started by its restarted actor while its plan is held: state %s, reason %q, iteration %d; want running, waiting for %s's memory plan, at 0",
			r.State, r.Reason, r.Iteration, r.GPU)
	}
	if r := releaseUntilProgress(tc, held, id); r.Attempt != 0 {
		t.Fatalf("after its first progress: attempt %d, want 0", r.Attempt)
	}
}

// An elastic move of a job that waits for its first plan (fifo and tiresias
// move a job started on fewer GPUs than it asks for as soon as it runs)
// takes it to GPUs whose plans it waits for in turn. Its reason kept naming
// the GPU it had left, so the record no longer said it waited for a plan
// (WaitsForPlan: the demo showed 0 %) and named a GPU it was not on.
func TestElasticMoveWhileWaitingForPlanNamesNewGPU(t *testing.T) {
	const scale = 100
	held := newHeldPlans()
	tc := startElasticClusterWith(t, held, 2, 1, testGPU, scale, ElasticConfig{Policy: "fifo", TimeScale: scale, MoveCost: 1})
	held.hold()
	t.Cleanup(held.release)
	id := tc.submit(elasticMLP("el", 1000000))[0].ID
	r := tc.waitState(id, StateRunning, 20*time.Second)
	if !r.WaitsForPlan() {
		t.Fatalf("running job whose plan is held: reason %q; want it waiting for its plan", r.Reason)
	}
	per, to := []int{0, 1}, "n2/gpu0"
	if r.GPU == "n2/gpu0" {
		per, to = []int{1, 0}, "n1/gpu0"
	}
	if n, err := tc.co.applyAllocations(map[string]placement.Allocation{id: {PerNode: per, LocalBatch: 4096}}); err != nil || n != 1 {
		t.Fatalf("move: %d orders, %v", n, err)
	}
	mv := nthChange(tc, id, 1, "el moves to the other node")
	if !slices.Equal(mv.GPUIDs, []string{to}) {
		t.Fatalf("moved to %v; want %s", mv.GPUIDs, to)
	}
	if r := tc.job(id); r.GPU != to || !r.WaitsForPlan() || strings.Contains(r.Reason, mv.OldGPUIDs[0]) {
		t.Fatalf("moved to %s while its plans are held: on %s, reason %q; want it waiting for %s's memory plan", to, r.GPU, r.Reason, to)
	}
	held.release()
	tc.waitFor(20*time.Second, "el progresses once its plan is installed", func() bool { return tc.job(id).Iteration > 0 })
	if r := tc.job(id); r.Reason != "" || r.State != StateRunning {
		t.Fatalf("after its first progress: state %s, reason %q; want running with no reason", r.State, r.Reason)
	}
}
