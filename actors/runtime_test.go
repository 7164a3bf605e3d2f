package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/transport"
)

// testGPU is a small simulated device (V100 speeds, 180 MiB) on which two
// MLP training jobs at batch 4096 (minimum ≈ 85 MiB, vanilla peak ≈ 98 MiB
// each) fit together only below their vanilla peaks, so budgets must be
// negotiated, while planning stays cheap enough for the race detector.
const testGPU = "test-180mb"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpusched-actors-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	p := gpu.MustProfile("v100-16gb")
	yaml := fmt.Sprintf("name: %s\nmemory_bytes: %d\npeak_flops: {fp32: %g, fp16: %g}\nmem_bandwidth: %g\nh2d_bandwidth: %g\nd2h_bandwidth: %g\nlaunch_overhead: %g\nsource: test device\n",
		testGPU, 180<<20, p.PeakFLOPS["fp32"], p.PeakFLOPS["fp16"], p.MemBandwidth, p.H2DBandwidth, p.D2HBandwidth, p.LaunchOverhead)
	f := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err == nil {
		_, err = gpu.LoadProfiles(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "register test profile:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// mlpSpec is a training job that runs about iters × 5 ms of virtual time
// alone on testGPU.
func mlpSpec(name string, iters, prio int) string {
	return fmt.Sprintf("name: %s\nmodel: mlp\nkind: train\nbatch: 4096\niterations: %d\npriority: %d\ntolerance: 0.2\n", name, iters, prio)
}

// waitEvent waits for an event of job (any job if "") and type that
// satisfies ok (nil: any), and returns it.
func (tc *testCluster) waitEvent(job, typ string, d time.Duration, ok func(transport.Event) bool) transport.Event {
	tc.t.Helper()
	var got transport.Event
	tc.waitFor(d, fmt.Sprintf("%s event of job %q", typ, job), func() bool {
		for _, e := range tc.eventsOf(job, typ) {
			if ok == nil || ok(e) {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

// devices returns every live node's device states.
func (tc *testCluster) devices() []*pb.DeviceStatus {
	tc.t.Helper()
	var out []*pb.DeviceStatus
	for _, n := range tc.nodes {
		st, err := n.Status(5 * time.Second)
		if err != nil {
			tc.t.Fatal(err)
		}
		out = append(out, st.Devices...)
	}
	return out
}

func (tc *testCluster) device(gpuName string) *pb.DeviceStatus {
	tc.t.Helper()
	d := tc.findDevice(gpuName)
	if d == nil {
		tc.t.Fatalf("no device %s", gpuName)
	}
	return d
}

// findDevice is the state of one device, or nil while it does not answer
// (restarting, or its node is gone).
func (tc *testCluster) findDevice(gpuName string) *pb.DeviceStatus {
	for _, n := range tc.nodes {
		st, err := n.Status(5 * time.Second)
		if err != nil {
			continue
		}
		for _, d := range st.Devices {
			if d.Gpu == gpuName {
				return d
			}
		}
	}
	return nil
}

// watchCapacity checks, every 50 ms until the test ends, that no device has
// budgeted more than its capacity and that its memory high-water mark and
// current joint-plan peak stay within capacity.
func (tc *testCluster) watchCapacity() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	nodes := append([]*Node(nil), tc.nodes...)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			for _, n := range nodes {
				st, err := n.Status(time.Second)
				if err != nil {
					continue // a node the test stopped
				}
				for _, d := range st.Devices {
					if d.Budgeted > d.Capacity || d.HighWater > d.Capacity || d.UsedBytes > d.Capacity {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("%s: budgeted %d, high-water %d, used %d, capacity %d", d.Gpu, d.Budgeted, d.HighWater, d.UsedBytes, d.Capacity))
						mu.Unlock()
					}
				}
			}
		}
	}()
	tc.t.Cleanup(func() {
		close(stop)
		wg.Wait()
		if len(bad) > 0 {
			tc.t.Errorf("capacity exceeded %d time(s), first: %s", len(bad), bad[0])
		}
	})
}

// A second job arrives on the GPU of a running one (the other node's GPU is
// busy too, so no GPU has room for it at its vanilla peak): the first one's
// budget shrinks (a resized event with the old and new budget), the device
// re-plans, and budgets and memory stay within capacity throughout; both
// complete.
func TestSecondJobShrinksFirstBudget(t *testing.T) {
	tc := startCluster(t, 2, 1, testGPU, 2)
	tc.watchCapacity()
	a := tc.submit(mlpSpec("a", 1200, 0))[0].ID
	ra := tc.waitState(a, StateRunning, 20*time.Second)
	if ra.Budget != ra.VanillaPeak {
		t.Fatalf("alone, a should get its vanilla peak %d, got %d", ra.VanillaPeak, ra.Budget)
	}
	tc.occupyOtherGPU(ra.GPU)
	before := tc.device(ra.GPU)
	b := tc.submit(mlpSpec("b", 300, 0))[0].ID
	rb := tc.waitState(b, StateRunning, 20*time.Second)
	if rb.GPU != ra.GPU {
		t.Fatalf("b placed on %s, want a's GPU %s (best fit)", rb.GPU, ra.GPU)
	}
	ev := tc.waitEvent(a, transport.EvResized, 10*time.Second, nil)
	if ev.OldBudget != ra.VanillaPeak || ev.Budget >= ev.OldBudget || ev.Budget < ra.MinBudget {
		t.Fatalf("resized %d → %d, want a shrink from the vanilla peak %d to no less than the minimum %d", ev.OldBudget, ev.Budget, ra.VanillaPeak, ra.MinBudget)
	}
	t.Logf("a on %s: min %s, vanilla %s; resized %s → %s (%s), plan %d", ev.GPU, gpu.FormatBytes(ra.MinBudget), gpu.FormatBytes(ra.VanillaPeak), gpu.FormatBytes(ev.OldBudget), gpu.FormatBytes(ev.Budget), ev.Reason, ev.PlanVersion)
	if !strings.Contains(ev.Reason, b) || ev.GPU != ra.GPU {
		t.Fatalf("resized event %+v should name the GPU and the job that joined", ev)
	}
	after := tc.device(ra.GPU)
	if after.PlanVersion <= before.PlanVersion || len(after.Jobs) != 2 {
		t.Fatalf("device did not re-plan for two jobs: plan %d → %d, jobs %d", before.PlanVersion, after.PlanVersion, len(after.Jobs))
	}
	if after.Budgeted > after.Capacity {
		t.Fatalf("budgeted %d > capacity %d", after.Budgeted, after.Capacity)
	}
	tc.waitState(b, StateCompleted, 30*time.Second)
	// a grows back once b has gone, then completes.
	tc.waitEvent(a, transport.EvResized, 10*time.Second, func(e transport.Event) bool { return e.Budget > e.OldBudget })
	r := tc.waitState(a, StateCompleted, 30*time.Second)
	if r.Resizes < 2 || r.Iteration != r.Total {
		t.Fatalf("a: %d resizes, %d/%d iterations", r.Resizes, r.Iteration, r.Total)
	}
}

// Cancelling a running job: a cancelled event, its budget goes back to the
// device, and its neighbour's budget grows.
func TestCancelFreesBudget(t *testing.T) {
	tc := startCluster(t, 2, 1, testGPU, 1)
	tc.watchCapacity()
	a := tc.submit(mlpSpec("a", 100000, 0))[0].ID
	ra := tc.waitState(a, StateRunning, 20*time.Second)
	tc.occupyOtherGPU(ra.GPU)
	b := tc.submit(mlpSpec("b", 100000, 0))[0].ID
	tc.waitState(b, StateRunning, 20*time.Second)
	shrunk := tc.waitEvent(a, transport.EvResized, 10*time.Second, func(e transport.Event) bool { return e.Budget < e.OldBudget })
	two := tc.device(ra.GPU)
	if len(two.Jobs) != 2 {
		t.Fatalf("want a and b on %s, device has %d job(s)", ra.GPU, len(two.Jobs))
	}
	var rec JobRecord
	if err := transport.Request(tc.nc, transport.VerbCancel, JobRequest{Job: b}, &rec, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	tc.waitEvent(b, transport.EvCancelled, 10*time.Second, nil)
	rb := tc.waitState(b, StateCancelled, 10*time.Second)
	if rb.Reason == "" {
		t.Fatalf("cancelled job without a reason: %+v", rb)
	}
	grown := tc.waitEvent(a, transport.EvResized, 10*time.Second, func(e transport.Event) bool { return e.Budget > e.OldBudget })
	if grown.OldBudget != shrunk.Budget || grown.Budget != ra.VanillaPeak {
		t.Fatalf("a grew %d → %d; want %d → its vanilla peak %d", grown.OldBudget, grown.Budget, shrunk.Budget, ra.VanillaPeak)
	}
	tc.waitFor(5*time.Second, "b's budget released on the device", func() bool {
		d := tc.device(ra.GPU)
		return len(d.Jobs) == 1 && d.Jobs[0].JobId == a && d.Budgeted == ra.VanillaPeak
	})
	tc.waitFor(5*time.Second, "b's reservation released by placement", func() bool {
		g, _ := tc.co.GPUs()
		for _, x := range g {
			if x.ID == ra.GPU {
				return len(x.Jobs) == 1 && x.Jobs[0] == a
			}
		}
		return false
	})
	// Cancelling again is an error naming the state.
	err := transport.Request(tc.nc, transport.VerbCancel, JobRequest{Job: b}, &rec, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "already cancelled") {
		t.Fatalf("second cancel: %v", err)
	}
	// An unknown job: the error says how to list the jobs, as status's does.
	err = transport.Request(tc.nc, transport.VerbCancel, JobRequest{Job: "j-99"}, &rec, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), `no job "j-99"`) || !strings.Contains(err.Error(), "coordinator list") {
		t.Fatalf("cancel j-99: %v; want no job \"j-99\" and how to list the jobs", err)
	}
}

// A node that leaves gracefully and a node that dies (gossip and actors
// stopped without a goodbye): their jobs are re-queued from their last
// checkpoint and complete on the remaining node.
func TestNodeLossRequeues(t *testing.T) {
	for _, how := range []string{"leave", "die"} {
		t.Run(how, func(t *testing.T) {
			tc := startCluster(t, 1, 1, testGPU, 2)
			a := tc.submit(mlpSpec("a", 1500, 0))[0].ID
			ra := tc.waitState(a, StateRunning, 20*time.Second)
			if ra.Node != "n1" {
				t.Fatalf("a on %s, want n1 (the only node)", ra.Node)
			}
			tc.addNode("n2", 1, testGPU, 2)
			tc.waitFor(20*time.Second, "a has made progress", func() bool { return tc.job(a).Iteration > 0 })
			n1 := tc.nodes[0]
			tc.nodes = tc.nodes[1:]
			if how == "leave" {
				n1.Leave()
			} else {
				n1.Kill()
			}
			if _, err := n1.Status(time.Second); err == nil {
				t.Fatal("n1's node actor still answers after it stopped")
			}
			want := map[string]string{"leave": transport.EvLeft, "die": transport.EvDead}[how]
			tc.waitEvent("", want, 10*time.Second, func(e transport.Event) bool { return e.Node == "n1" })
			rq := tc.waitEvent(a, transport.EvRequeued, 10*time.Second, nil)
			if rq.GPU != ra.GPU || !strings.Contains(rq.Reason, "n1") || rq.Attempt != 1 {
				t.Fatalf("requeued event %+v", rq)
			}
			pl := tc.waitEvent(a, transport.EvPlaced, 20*time.Second, func(e transport.Event) bool { return e.Node == "n2" })
			if pl.Attempt != 1 {
				t.Fatalf("placed on n2 with attempt %d", pl.Attempt)
			}
			st := tc.waitEvent(a, transport.EvStarted, 20*time.Second, func(e transport.Event) bool { return e.Node == "n2" })
			if st.Iteration <= 0 {
				t.Fatalf("restarted on n2 from iteration %d, want its checkpoint", st.Iteration)
			}
			r := tc.waitState(a, StateCompleted, 30*time.Second)
			if r.Node != "n2" || r.Iteration != r.Total || r.Attempt != 1 {
				t.Fatalf("completed record %+v", r)
			}
		})
	}
}

// Restarting the coordinator on the same data directory: running and queued
// jobs come back from the store and complete; event sequence numbers keep
// increasing across the restart.
func TestCoordinatorRestartRecovers(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 3)
	// a and b fill the GPU's minimums; c waits for room.
	a := tc.submit(mlpSpec("a", 1500, 0))[0].ID
	b := tc.submit(mlpSpec("b", 1500, 0))[0].ID
	tc.waitState(a, StateRunning, 20*time.Second)
	tc.waitState(b, StateRunning, 20*time.Second)
	c := tc.submit(mlpSpec("c", 200, 0))[0].ID
	tc.waitFor(10*time.Second, "c waits", func() bool {
		r := tc.job(c)
		return r.State == StatePending && strings.Contains(r.Reason, "largest free")
	})
	tc.waitFor(20*time.Second, "a has made progress", func() bool { return tc.job(a).Iteration > 0 })
	last := tc.lastSeq()
	tc.restartCoordinator()
	if tc.co.Recovered != 3 {
		t.Fatalf("recovered %d unfinished jobs, want 3", tc.co.Recovered)
	}
	for _, id := range []string{a, b, c} {
		r := tc.waitState(id, StateCompleted, 40*time.Second)
		if r.Iteration != r.Total {
			t.Fatalf("%s completed at %d/%d", id, r.Iteration, r.Total)
		}
	}
	for _, e := range tc.eventsOf("", "") {
		if e.Seq <= last {
			t.Fatalf("event %+v after the restart has seq %d ≤ %d from before it", e, e.Seq, last)
		}
	}
	if n := len(tc.eventsOf(a, transport.EvRequeued)); n != 0 {
		t.Fatalf("a was requeued %d time(s); it should re-attach to its device", n)
	}
}

// A device actor that crashes is restarted by its node and re-plans its
// jobs, which go on to complete; a job actor that crashes is restarted by
// the coordinator and recovers its state from the store.
func TestCrashedActorsRecover(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 2)
	tc.watchCapacity()
	a := tc.submit(mlpSpec("a", 600, 0))[0].ID
	b := tc.submit(mlpSpec("b", 600, 0))[0].ID
	ra := tc.waitState(a, StateRunning, 20*time.Second)
	tc.waitState(b, StateRunning, 20*time.Second)
	tc.waitFor(20*time.Second, "a has made progress", func() bool { return tc.job(a).Iteration > 0 })
	// A job is running once its device admits it, before the re-plan that
	// budgets it next to the other job lands: compare against a device
	// whose plan covers both.
	tc.waitFor(20*time.Second, "both jobs budgeted by one plan", func() bool {
		d := tc.findDevice(ra.GPU)
		if d == nil || len(d.Jobs) != 2 {
			return false
		}
		for _, j := range d.Jobs {
			if j.Budget == 0 {
				return false
			}
		}
		return true
	})
	before := tc.device(ra.GPU)
	n := tc.nodes[0]
	restarted := restarts(t, n.System(), n.DevicePID(0))
	n.System().Root.Send(n.DevicePID(0), &pb.Crash{Reason: "test"})
	waitClosed(t, restarted, 10*time.Second, "the node restarts the crashed device actor")
	tc.waitFor(10*time.Second, "device re-planned", func() bool {
		d := tc.findDevice(ra.GPU)
		return d != nil && d.Restarts == before.Restarts+1 && d.PlanVersion > before.PlanVersion && len(d.Jobs) == 2
	})
	after := tc.device(ra.GPU)
	if after.Budgeted != before.Budgeted || after.Jobs[0].Iteration < before.Jobs[0].Iteration {
		t.Fatalf("device state lost across the restart: budgeted %d → %d, a at %d → %d",
			before.Budgeted, after.Budgeted, before.Jobs[0].Iteration, after.Jobs[0].Iteration)
	}

	rb := tc.job(b)
	restarted = restarts(t, tc.co.System(), tc.co.JobPID(b))
	tc.co.System().Root.Send(tc.co.JobPID(b), &pb.Crash{Reason: "test"})
	waitClosed(t, restarted, 10*time.Second, "the coordinator restarts the crashed job actor")
	tc.waitFor(10*time.Second, "b progresses after its actor restarted", func() bool {
		r := tc.job(b)
		return r.State == StateRunning && r.Iteration > rb.Iteration
	})
	if r := tc.job(b); r.GPU != rb.GPU || r.Budget != rb.Budget || r.Attempt != 0 {
		t.Fatalf("b's record changed across its actor's restart: %+v → %+v", rb, r)
	}
	for _, id := range []string{a, b} {
		r := tc.waitState(id, StateCompleted, 30*time.Second)
		if r.Iteration != r.Total || r.Attempt != 0 {
			t.Fatalf("%s: %d/%d iterations, %d requeues (%+v)", id, r.Iteration, r.Total, r.Attempt, tc.eventsOf(id, transport.EvRequeued))
		}
	}
}

// restarts returns a channel closed when sys's supervisor restarts pid.
func restarts(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	sub := sys.EventStream.Subscribe(func(ev any) {
		if e, ok := ev.(*actor.SupervisorEvent); ok && e.Child.Equal(pid) && e.Directive == actor.RestartDirective {
			once.Do(func() { close(ch) })
		}
	})
	t.Cleanup(func() { sys.EventStream.Unsubscribe(sub) })
	return ch
}

func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting until %s", d, what)
	}
}

// occupyOtherGPU runs a long job alone at its vanilla peak on the GPU of a
// two-GPU cluster that is not gpuName, so the next job has no room at its
// vanilla peak anywhere and placement squeezes it in next to a job.
func (tc *testCluster) occupyOtherGPU(gpuName string) {
	tc.t.Helper()
	c := tc.submit(mlpSpec("occupant", 1000000, 0))[0].ID
	r := tc.waitState(c, StateRunning, 20*time.Second)
	if r.GPU == gpuName || r.Budget != r.VanillaPeak {
		tc.t.Fatalf("occupant on %s with budget %d; want the other GPU at its vanilla peak %d", r.GPU, r.Budget, r.VanillaPeak)
	}
}

func (tc *testCluster) lastSeq() uint64 {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var s uint64
	for _, e := range tc.events {
		s = max(s, e.Seq)
	}
	return s
}

// restartCoordinator stops the coordinator (its actor and job actors, its
// gossip member and NATS) and starts a new one on the same data directory
// (its KV bucket) and the process's actor system, where the new coordinator
// actor takes the old one's name; it forgets the events seen so far.
func (tc *testCluster) restartCoordinator() {
	tc.t.Helper()
	tc.nc.Close()
	tc.co.Stop()
	tc.mu.Lock()
	tc.events = nil
	tc.mu.Unlock()
	tc.startCoordinator()
}

// refusingPlanner is the baseline planner, except that it cannot plan job
// refuse next to any other job, so a device refuses that job whenever it has
// neighbours.
type refusingPlanner struct {
	BaselinePlanner
	refuse string
}

func (p *refusingPlanner) Plan(prof gpu.Profile, jobs []tensorsched.Job) error {
	for _, j := range jobs {
		if j.Name == p.refuse && len(jobs) > 1 {
			return fmt.Errorf("test: job %s cannot share a GPU", p.refuse)
		}
	}
	return p.BaselinePlanner.Plan(prof, jobs)
}

// A device that refuses a job is not offered that job again until something
// leaves it: the job waits (status says which GPU refused it and why) instead
// of being re-queued onto the same GPU over and over, and runs there once
// the neighbour has gone.
func TestRefusedJobWaitsForChange(t *testing.T) {
	tc := startClusterWith(t, &refusingPlanner{refuse: "j-2"}, 1, 1, testGPU, 1)
	a := tc.submit(mlpSpec("a", 600, 0))[0].ID
	ra := tc.waitState(a, StateRunning, 20*time.Second)
	b := tc.submit(strings.Replace(mlpSpec("b", 500, 0), "batch: 4096", "batch: 512", 1))[0].ID
	if b != "j-2" {
		t.Fatalf("b is %s, the planner refuses j-2", b)
	}
	rq := tc.waitEvent(b, transport.EvRequeued, 10*time.Second, nil)
	if rq.GPU != ra.GPU || !strings.Contains(rq.Reason, "cannot share") {
		t.Fatalf("requeued event %+v", rq)
	}
	tc.waitFor(10*time.Second, "b waits, saying why", func() bool {
		r := tc.job(b)
		return r.State == StatePending && strings.Contains(r.Reason, ra.GPU+" refused it") && strings.Contains(r.Reason, "cannot share")
	})
	tc.waitState(a, StateCompleted, 30*time.Second)
	r := tc.waitState(b, StateCompleted, 30*time.Second)
	if r.GPU != ra.GPU || r.Attempt != 1 {
		t.Fatalf("b ran on %s after %d requeue(s); want %s after exactly one", r.GPU, r.Attempt, ra.GPU)
	}
	tc.waitEvent(b, transport.EvCompleted, 10*time.Second, nil) // events arrive on their own goroutine
	if n := len(tc.eventsOf(b, transport.EvPlaced)); n != 2 {
		t.Fatalf("b was placed %d times, want 2 (refused once, then after a left)", n)
	}
}

// The coordinator actor survives repeated crashes: its supervisor restarts
// it, it recovers its jobs from the store each time and answers again, and
// a running job completes. (Before, each start reported its recovery on a
// one-slot channel read only once, at start-up: the second restart blocked
// on it for good, and every request after timed out.)
func TestCoordinatorSurvivesRepeatedCrashes(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 100)
	id := tc.submit(mlpSpec("steady", 3000, 0))[0].ID
	tc.waitState(id, StateRunning, 20*time.Second)
	sys := tc.co.System()
	pid := actor.NewPID(tc.co.actors.Address(), CoordinatorActorName)
	for i := 1; i <= 3; i++ {
		restarted := restarts(t, sys, pid)
		sys.Root.Send(pid, &pb.Crash{Reason: fmt.Sprintf("test %d", i)})
		waitClosed(t, restarted, 10*time.Second, fmt.Sprintf("the coordinator actor restarts after crash %d", i))
		if _, err := tc.co.ElasticRounds(); err != nil {
			t.Fatalf("after crash %d the coordinator does not answer: %v", i, err)
		}
	}
	if r := tc.waitState(id, StateCompleted, 60*time.Second); r.Iteration != r.Total {
		t.Fatalf("%s completed at %d/%d iterations", id, r.Iteration, r.Total)
	}
}
