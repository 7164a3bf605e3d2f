package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

// A job actor that crashes while its budget request is in flight: the
// device admits the job, the grant goes to the crashed incarnation (which
// ignores it), and the next incarnation finds the job on its device by
// attaching. The job must start as it would from the grant: state running,
// a start time, and exactly one started event.
func TestJobActorCrashDuringBudgetRequest(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 2)
	// It asks for a device type the cluster does not have, so the
	// coordinator leaves it pending and the test places it through a gate.
	id := tc.submitHeld(mlpSpec("a", 600, 0))
	sys := tc.co.System()
	g := &gate{to: tc.nodes[0].DevicePID(0)} // closed: holds the budget request
	g.pid = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return g }))
	t.Cleanup(func() { sys.Root.Stop(g.pid) })
	p, err := NewZooPredictor(tc.planner).Predict(RunSpec(id, &tc.job(id).Spec), testGPU)
	if err != nil {
		t.Fatal(err)
	}
	sys.Root.Send(tc.co.JobPID(id), &assign{gpu: "n1/gpu0", node: "n1", device: g.pid, demand: p.Demand})
	tc.waitState(id, StatePlaced, 10*time.Second)
	// The crash is handled after onAssign, which sent the budget request
	// to the gate: the next incarnation's attach follows it there.
	restarted := restarts(t, sys, tc.co.JobPID(id))
	sys.Root.Send(tc.co.JobPID(id), &pb.Crash{Reason: "test"})
	waitClosed(t, restarted, 10*time.Second, "the coordinator restarts the crashed job actor")
	sys.Root.Send(g.pid, &openGate{})
	tc.waitEvent(id, transport.EvProgress, 20*time.Second, nil)
	r := tc.job(id)
	if n := len(tc.eventsOf(id, transport.EvStarted)); n != 1 || r.StartedAt.IsZero() || r.State != StateRunning || r.Budget <= 0 {
		t.Fatalf("after its actor restarted during the budget request: %d started events, state %s, started at %v, budget %d; want 1, running, a start time, a budget",
			n, r.State, r.StartedAt, r.Budget)
	}
	tc.waitState(id, StateCompleted, 30*time.Second)
	if n := len(tc.eventsOf(id, transport.EvStarted)); n != 1 {
		t.Fatalf("%d started events, want 1", n)
	}
}

// A node declared dead by gossip may still be running (a false suspicion: a
// stalled process, a partition that heals). Its jobs are re-queued from
// their checkpoints and run elsewhere; the job's old device must be told to
// let it go, as the other replicas of a job with several are, or it keeps
// running it unseen, holding memory its node's GPU is no longer reserved
// for by the coordinator.
func TestRequeueAfterNodeDeathReleasesOldDevice(t *testing.T) {
	tc := startCluster(t, 2, 1, testGPU, 2)
	id := tc.submit(mlpSpec("a", 100000, 0))[0].ID
	r0 := tc.waitState(id, StateRunning, 20*time.Second)
	tc.co.System().Root.Send(tc.co.pid, &memberEv{ev: transport.MemberEvent{Type: transport.EvDead,
		Meta: transport.Meta{Name: r0.Node, Role: transport.RoleNode}}})
	tc.waitFor(20*time.Second, "the job runs on the other node", func() bool {
		r := tc.job(id)
		return r.State == StateRunning && r.GPU != "" && r.GPU != r0.GPU && r.Attempt == 1
	})
	tc.waitFor(10*time.Second, "the job's old device lets it go", func() bool {
		d := tc.findDevice(r0.GPU)
		return d != nil && replicaOn(d, id) == nil
	})
}

// heldPlanner is DefaultPlanner whose MinBudget waits until release is
// closed: a device using it cannot answer a budget request meanwhile.
type heldPlanner struct {
	Planner
	release chan struct{}
}

func (h heldPlanner) MinBudget(g *workload.Graph, p gpu.Profile, tol float64) (int64, int64, error) {
	<-h.release
	return h.Planner.MinBudget(g, p, tol)
}

// A budget request the device does not answer in time is not a refusal: the
// job is requeued and placed again on the same GPU, where it runs once the
// device answers. (Before, the timeout was recorded as the GPU refusing the
// job, and a GPU is offered again only when something leaves it: on a
// cluster of one GPU the job stayed pending for good.) The device is held
// in its prediction of the job until the request has timed out.
func TestBudgetRequestTimeoutIsNotARefusal(t *testing.T) {
	held := heldPlanner{Planner: DefaultPlanner(), release: make(chan struct{})}
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: held, pred: NewZooPredictor(DefaultPlanner()),
		coordConfig: func(c *CoordinatorConfig) { c.budgetAnswerTimeout = 300 * time.Millisecond }}
	tc.startCoordinator()
	tc.addNode("n1", 1, testGPU, 100)
	t.Cleanup(tc.stop)
	id := tc.submit(mlpSpec("a", 300, 0))[0].ID
	rq := tc.waitEvent(id, transport.EvRequeued, 20*time.Second, nil)
	if !strings.Contains(rq.Reason, "no answer") {
		t.Fatalf("requeued: %q, want the budget request's timeout", rq.Reason)
	}
	close(held.release)
	r := tc.waitState(id, StateCompleted, 30*time.Second)
	if r.GPU != "n1/gpu0" || r.Attempt < 1 {
		t.Fatalf("completed on %s after %d requeues; want n1/gpu0 after at least 1", r.GPU, r.Attempt)
	}
}

// submitHeld submits spec asking for a device type the test cluster lacks
// (h100-80gb), so the coordinator leaves the job pending and a test can
// place it by hand; it returns once the job waits for that type.
func (tc *testCluster) submitHeld(spec string) string {
	tc.t.Helper()
	id := tc.submit(spec + "device: h100-80gb\n")[0].ID
	tc.waitFor(20*time.Second, "the job waits for its device type", func() bool {
		r := tc.job(id)
		return r.State == StatePending && strings.Contains(r.Reason, "no GPU of the requested device type")
	})
	return id
}
