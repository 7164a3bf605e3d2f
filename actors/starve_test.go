package actors

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/transport"
)

// smallMLP is an MLP training job at batch 1024: two fit on a test GPU at
// their vanilla peaks, so best fit puts the second beside the first.
func smallMLP(name string, prio int) string {
	return strings.Replace(mlpSpec(name, 1000000, prio), "batch: 4096", "batch: 1024", 1)
}

// busyService is an MLP inference service at priority prio whose requests
// arrive far faster than it serves them: its kernels leave no gaps, but
// placement cannot tell that from its spec (an inference service usually
// leaves gaps that FIKIT fills with lower priorities' kernels).
func busyService(name string, prio int) string {
	return fmt.Sprintf("name: %s\nmodel: mlp\nkind: infer\nbatch: 1024\nrequests: 1000000\npriority: %d\ntolerance: 0.2\narrivals: {poisson_rate: 1000000, seed: 1}\n", name, prio)
}

// A low-priority job is not placed beside a higher-priority training job,
// which leaves its kernels no gaps, while another GPU has room: best fit
// alone put it there (the lower GPU id of two equal choices), where it made
// no progress until it was moved.
func TestLowPriorityAvoidsHigherTraining(t *testing.T) {
	avoidsHigher(t, smallMLP("hi", 6), "training job")
}

// Nor beside a higher-priority inference service whose requests come back
// to back (no arrival process): it keeps the GPU as busy as training does.
// Before, only training counted, so in `make demo` the jobs placed beside
// the back-to-back BERT and ResNet-50 services starved and were moved.
func TestLowPriorityAvoidsHigherBackToBackService(t *testing.T) {
	avoidsHigher(t, "name: hi\nmodel: mlp\nkind: infer\nbatch: 1024\nrequests: 1000000\npriority: 6\ntolerance: 0.2\n", "back-to-back service")
}

// avoidsHigher submits hiSpec (a priority-6 job that leaves no kernel gaps,
// what says which kind) to a node of two GPUs, then a priority-0 MLP, and
// checks that the MLP starts on the other GPU and runs there unmoved.
func avoidsHigher(t *testing.T, hiSpec, what string) {
	t.Helper()
	tc := startCluster(t, 1, 2, testGPU, 100)
	hi := tc.submit(hiSpec)[0].ID
	rh := tc.waitState(hi, StateRunning, 20*time.Second)
	lo := tc.submit(smallMLP("lo", 0))[0].ID
	st := tc.waitEvent(lo, transport.EvStarted, 20*time.Second, nil)
	if st.GPU == rh.GPU {
		t.Fatalf("lo started beside the higher-priority %s on %s with the other GPU free", what, st.GPU)
	}
	tc.waitFor(20*time.Second, "lo progresses", func() bool { r := tc.job(lo); return r.Iteration > 0 && r.IterSeconds > 0 })
	if rq := tc.eventsOf(lo, transport.EvRequeued); len(rq) != 0 {
		t.Fatalf("lo requeued: %+v", rq)
	}
}

// A low-priority job placed beside a higher-priority job that turned out to
// leave its kernels no gaps (a service busier than placement can know) made
// no progress at all (iteration time 0) while the other GPU stood idle, and
// would have waited there until the other job ended. It is moved to the GPU
// where no job outranks it, and runs.
func TestStarvedJobMovesToFreeGPU(t *testing.T) {
	tc := startCluster(t, 1, 2, testGPU, 100)
	hi := tc.submit(busyService("hi", 6))[0].ID
	rh := tc.waitState(hi, StateRunning, 20*time.Second)
	lo := tc.submit(smallMLP("lo", 0))[0].ID
	tc.waitEvent(lo, transport.EvStarted, 20*time.Second, nil)
	if s := tc.eventsOf(lo, transport.EvStarted); s[0].GPU != rh.GPU {
		t.Fatalf("lo started on %s, hi runs on %s: the case this test is about is lo placed beside hi", s[0].GPU, rh.GPU)
	}
	rq := tc.waitEvent(lo, transport.EvRequeued, 20*time.Second, nil)
	if rq.GPU != rh.GPU || !strings.Contains(rq.Reason, "starved") {
		t.Fatalf("lo requeued from %s (%q); want from %s, starved", rq.GPU, rq.Reason, rh.GPU)
	}
	tc.waitFor(20*time.Second, "lo progresses on the other GPU", func() bool {
		r := tc.job(lo)
		return r.State == StateRunning && r.GPU != rh.GPU && r.Iteration > 0 && r.IterSeconds > 0
	})
	if r := tc.job(hi); r.GPU != rh.GPU || r.Attempt != 0 {
		t.Fatalf("hi moved or was requeued: %s, attempt %d", r.GPU, r.Attempt)
	}
	if n := len(tc.eventsOf(lo, transport.EvRequeued)); n != 1 {
		t.Fatalf("lo requeued %d times; want once", n)
	}
	// The GPU that starved lo would starve another job of its priority:
	// the next one goes where it runs (best fit alone put it beside hi,
	// the lower GPU id of two equal choices).
	lo2 := tc.submit(smallMLP("lo2", 0))[0].ID
	st := tc.waitEvent(lo2, transport.EvStarted, 20*time.Second, nil)
	if st.GPU == rh.GPU {
		t.Fatalf("lo2 started beside hi on %s, where lo was starved", st.GPU)
	}
	tc.waitFor(20*time.Second, "lo2 progresses", func() bool { r := tc.job(lo2); return r.Iteration > 0 })
	if rq := tc.eventsOf(lo2, transport.EvRequeued); len(rq) != 0 {
		t.Fatalf("lo2 requeued: %+v", rq)
	}
}

// With nowhere better to go, a starved job stays where it is (it runs when
// its neighbour ends or leaves it time): it is not requeued back and forth.
func TestStarvedJobStaysWithoutBetterGPU(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 100)
	hi := tc.submit(smallMLP("hi", 6))[0].ID
	tc.waitState(hi, StateRunning, 20*time.Second)
	lo := tc.submit(smallMLP("lo", 0))[0].ID
	tc.waitState(lo, StateRunning, 20*time.Second)
	// Progress reports saying it is starved (iteration time 0, planned).
	tc.waitFor(20*time.Second, "three starved progress reports of lo", func() bool {
		n := 0
		for _, e := range tc.eventsOf(lo, transport.EvProgress) {
			if e.IterSeconds == 0 && e.PeakBytes > 0 {
				n++
			}
		}
		return n >= 3
	})
	if rq := tc.eventsOf(lo, transport.EvRequeued); len(rq) != 0 {
		t.Fatalf("lo requeued with no other GPU: %+v", rq)
	}
	if r := tc.job(lo); r.State != StateRunning || r.Attempt != 0 {
		t.Fatalf("lo %s, attempt %d; want running, never requeued", r.State, r.Attempt)
	}
}

// A device's refusal of a budget request requeues the job, which is still
// placed (not running) then. The guard that keeps a stale starvation move
// from requeueing a job that moved meanwhile must not swallow it: the job
// would stay placed for good, on a GPU that never admitted it.
func TestRefusedBudgetRequestRequeuesPlacedJob(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 100)
	// A device type the cluster lacks keeps it pending; the test places it.
	id := tc.submitHeld(mlpSpec("a", 300, 0))
	// A minimum above the GPU's capacity: the device refuses it.
	huge := &pb.Demand{MinBudget: 1 << 40, VanillaPeak: 1 << 40}
	tc.co.System().Root.Send(tc.co.JobPID(id), &assign{gpu: "n1/gpu0", node: "n1", device: tc.nodes[0].DevicePID(0), demand: huge})
	rq := tc.waitEvent(id, transport.EvRequeued, 20*time.Second, nil)
	if rq.GPU != "n1/gpu0" || !strings.Contains(rq.Reason, "refused the budget request") {
		t.Fatalf("requeued from %s (%q); want n1/gpu0's refusal", rq.GPU, rq.Reason)
	}
	if r := tc.job(id); r.State != StatePending || r.GPU != "" {
		t.Fatalf("after the refusal the job is %s on %q; want pending, on no GPU", r.State, r.GPU)
	}
}

// A progress report at iteration time 0 from a GPU where no job outranks
// the job (as the coordinator knows it: a report made under the plan in
// force before the outranking neighbour left, while the device re-plans) is
// not starvation by a higher priority: the job stays, although another GPU
// has room. The report is sent to the job's actor as its device would.
func TestStaleStarvedReportDoesNotMoveJob(t *testing.T) {
	tc := startCluster(t, 1, 2, testGPU, 100)
	lo := tc.submit(smallMLP("lo", 0))[0].ID
	tc.waitFor(20*time.Second, "lo progresses", func() bool {
		r := tc.job(lo)
		return r.State == StateRunning && r.Iteration > 0 && r.IterSeconds > 0 && r.PeakBytes > 0
	})
	// The device is held while the report is made from the record and
	// sent: a report behind the job's record would be ignored.
	n := tc.nodes[0]
	r := tc.job(lo)
	var gi int
	if _, err := fmt.Sscanf(r.GPU, "n1/gpu%d", &gi); err != nil {
		t.Fatalf("lo on %q: %v", r.GPU, err)
	}
	resume := holdMailbox(t, n.System(), n.DevicePID(gi))
	tc.barrier(lo, r.GPU, r.Budget, "test: settle")
	r, _ = tc.co.Job(lo)
	before := len(tc.eventsOf(lo, transport.EvProgress))
	tc.co.System().Root.Send(tc.co.JobPID(lo), &pb.Progress{JobId: lo, Gpu: r.GPU, Iteration: r.Iteration, Total: r.Total,
		PeakBytes: r.PeakBytes, Budget: r.Budget, PlanVersion: r.PlanVersion})
	tc.waitEvent(lo, transport.EvProgress, 10*time.Second, func(e transport.Event) bool { return e.IterSeconds == 0 })
	resume()
	// Had the coordinator asked for a move, the job's actor would requeue it
	// before it handled the device's next reports but one.
	tc.waitFor(20*time.Second, "two more progress reports of lo, or its requeue", func() bool {
		return len(tc.eventsOf(lo, transport.EvProgress)) >= before+3 || len(tc.eventsOf(lo, transport.EvRequeued)) > 0
	})
	if rq := tc.eventsOf(lo, transport.EvRequeued); len(rq) != 0 {
		t.Fatalf("lo, alone on %s, was moved on a report at iteration time 0: %+v", r.GPU, rq[0])
	}
}

// A GPU that starved a job of priority p is avoided for the next job of
// priority p also when the job that starved it is an inference service,
// which the rule against higher-priority training jobs does not mark down:
// that rule must not place the job there ahead of the starvation record.
// The service here takes more memory than lo, so best fit alone prefers
// its GPU.
func TestStarvingGPUAvoidedBesideBusyService(t *testing.T) {
	tc := startCluster(t, 1, 2, testGPU, 100)
	hi := tc.submit(strings.Replace(busyService("hi", 6), "batch: 1024", "batch: 8192", 1))[0].ID
	rh := tc.waitState(hi, StateRunning, 20*time.Second)
	lo := tc.submit(smallMLP("lo", 0))[0].ID
	if s := tc.waitEvent(lo, transport.EvStarted, 20*time.Second, nil); s.GPU != rh.GPU {
		t.Fatalf("lo started on %s, hi runs on %s: the case this test is about is lo placed beside hi", s.GPU, rh.GPU)
	}
	tc.waitFor(20*time.Second, "lo moved off hi's GPU and progressing", func() bool {
		r := tc.job(lo)
		return r.State == StateRunning && r.GPU != rh.GPU && r.Iteration > 0 && r.IterSeconds > 0
	})
	lo2 := tc.submit(smallMLP("lo2", 0))[0].ID
	if st := tc.waitEvent(lo2, transport.EvStarted, 20*time.Second, nil); st.GPU == rh.GPU {
		t.Fatalf("lo2 started beside hi on %s, where lo was starved", st.GPU)
	}
}
