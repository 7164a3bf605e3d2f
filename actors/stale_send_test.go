package actors

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/transport"
)

// A stopped actor sends nothing more to its own name. Its timers (a
// device's 50 ms tick, a job's retry, the coordinator's elastic tick) and
// background work (a device's plan) sent to its PID after it stopped, and
// a PID whose actor stopped is resolved by name: the message went to the
// next actor spawned under that name in the process, even while
// protoactor was still setting up that actor's mailbox (it registers the
// name first), a data race the race detector reported in
// cmd/coordinator's demo tests (a node of the next demo spawning its
// devices as the last demo's device ticked) and a nil dispatcher if the
// send won. Here a node is stopped and an actor takes its device's name
// at once: it gets nothing in 6 ticks.
func TestStoppedDeviceSendsNothingToItsName(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 1000)
	n := tc.nodes[0]
	tc.nodes = nil
	id := n.DevicePID(0).Id
	n.Kill()
	got := make(chan string, 16)
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Stopped:
		default:
			select {
			case got <- fmt.Sprintf("%T", ctx.Message()):
			default:
			}
		}
	})
	sys := n.actors.System
	pid, err := sys.Root.SpawnNamed(props, id)
	if err != nil {
		t.Fatalf("spawn an actor named %s after the node stopped: %v", id, err)
	}
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()
	select {
	case m := <-got:
		t.Fatalf("the actor now named %s got a %s from the stopped device", id, m)
	case <-time.After(6 * 50 * time.Millisecond):
	}
}

// placeThroughGate places job id (submitted held) on n1/gpu0 through a gate
// that forwards everything to the device at once but holds the device's
// answer to the budget request, waits until the device has admitted the
// job, and restarts the coordinator in the process: the job's actor stops
// with its budget request unanswered, and the next coordinator spawns the
// job's actor again under its name. It returns the gate and when the
// request was sent.
func placeThroughGate(tc *testCluster, id string) (*gate, time.Time) {
	t := tc.t
	t.Helper()
	sys := tc.co.System()
	g := &gate{to: tc.nodes[0].DevicePID(0), open: true, grants: true}
	g.pid = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return g }))
	t.Cleanup(func() { _ = sys.Root.StopFuture(g.pid).Wait() })
	p, err := NewZooPredictor(tc.planner).Predict(RunSpec(id, &tc.job(id).Spec), testGPU)
	if err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	sys.Root.Send(tc.co.JobPID(id), &assign{gpu: "n1/gpu0", node: "n1", device: g.pid, demand: p.Demand})
	tc.waitState(id, StatePlaced, 10*time.Second)
	tc.waitFor(10*time.Second, "the device admits the job (its answer held)", func() bool {
		d := tc.findDevice("n1/gpu0")
		return d != nil && replicaOn(d, id) != nil
	})
	tc.restartCoordinator()
	// The next job actor finds the job placed and attaches to the device
	// through the gate, which passes the device's answer on at once.
	tc.waitEvent(id, transport.EvProgress, 20*time.Second, nil)
	return g, asked
}

// The answer to a stopped job actor's budget request does not act on the
// job's next actor. protoactor hands the answer to a request made with
// ReenterAfter to the requester's name, as a message to itself: when the
// coordinator was restarted in the process with the request in flight, the
// grant reached the job's next actor, which ran the stopped actor's
// continuation with its stale record and started the job a second time
// (a second started event, and the record replaced by the stopped actor's
// copy until the next report). The next actor had found the job on its
// device by attaching and started it already.
func TestStoppedJobActorsGrantReachesNoSuccessor(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 2)
	id := tc.submitHeld(mlpSpec("a", 1000000, 0))
	g, _ := placeThroughGate(tc, id)
	// The held grant goes to the stopped actor's request, which has not
	// timed out (10 s): its continuation is queued for the name before
	// the gate has stopped, and is handled before the reports after it.
	tc.waitState(id, StateRunning, 10*time.Second)
	mark := tc.lastSeq()
	tc.co.System().Root.Send(g.pid, &openGate{})
	_ = tc.co.System().Root.PoisonFuture(g.pid).Wait()
	tc.waitFor(20*time.Second, "two progress reports after the grant was passed on", func() bool {
		n := 0
		for _, e := range tc.eventsOf(id, transport.EvProgress) {
			if e.Seq > mark {
				n++
			}
		}
		return n >= 2
	})
	n := 0
	for _, e := range tc.eventsOf(id, transport.EvStarted) {
		if e.Seq > mark {
			n++
		}
	}
	if r := tc.job(id); n != 0 || r.State != StateRunning || r.Attempt != 0 {
		t.Fatalf("after the stopped job actor's grant came back: %d more started events, state %s, attempt %d; want none, running, 0", n, r.State, r.Attempt)
	}
}

// The timeout of a stopped job actor's budget request does not act on the
// job's next actor. When the coordinator was restarted in the process with
// the request in flight, the timeout reached the job's next actor, which
// ran the stopped actor's continuation: it re-queued the job (a requeued
// event, attempt 1 in the record) and released it on its device, while the
// next actor, which had found the job there, still followed it as running.
// The job ran nowhere and was never placed again.
func TestStoppedJobActorsTimeoutReachesNoSuccessor(t *testing.T) {
	const timeout = 5 * time.Second
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: DefaultPlanner(),
		coordConfig: func(c *CoordinatorConfig) { c.budgetAnswerTimeout = timeout }}
	tc.startCoordinator()
	tc.addNode("n1", 1, testGPU, 2)
	t.Cleanup(tc.stop)
	id := tc.submitHeld(mlpSpec("a", 1000000, 0))
	_, asked := placeThroughGate(tc, id)
	if d := time.Since(asked); d > timeout-500*time.Millisecond {
		t.Fatalf("the restart ended %s after the budget request, too close to its timeout (%s) for this test", d, timeout)
	}
	tc.waitFor(2*timeout, "the stopped actor's request to time out", func() bool { return time.Since(asked) > timeout+300*time.Millisecond })
	it := tc.job(id).Iteration
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, d := tc.job(id), tc.findDevice("n1/gpu0")
		on := d != nil && replicaOn(d, id) != nil
		n := len(tc.eventsOf(id, transport.EvRequeued))
		if r.State == StateRunning && r.Iteration > it && on && n == 0 && r.Attempt == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the stopped job actor's request timed out: %d requeued events, state %s, attempt %d, iteration %d (%d at the timeout), on its device: %v; want 0, running, 0, progress, true",
				n, r.State, r.Attempt, r.Iteration, it, on)
		}
	}
}

// resizeAnswersHeld runs an elastic job on two replicas at 2048 per GPU
// behind gates, orders it to 1024 per GPU with the devices' answers held
// (timeout: how long the job actor waits for them, 0 for the default), and
// returns once both devices run the resize; behind finds the job on a gate's
// device.
func resizeAnswersHeld(t *testing.T, timeout time.Duration, reason string) (*testCluster, string, []*gate, func(*gate) *pb.JobOnDevice) {
	t.Helper()
	return resizeAnswersHeldTo(t, timeout, reason, 1024, 0)
}

// resizeAnswersHeldTo is resizeAnswersHeld with the resize's per-GPU batch
// and extra micro-steps.
func resizeAnswersHeldTo(t *testing.T, timeout time.Duration, reason string, batch, accum int) (*testCluster, string, []*gate, func(*gate) *pb.JobOnDevice) {
	t.Helper()
	tc, id, gates, targets := onTheGates(t, 2, ElasticConfig{MoveCost: 1})
	sys := tc.co.System()
	tc.waitFor(20*time.Second, "two replicas at 2048 per GPU", func() bool {
		r, why := consistentReplicas(tc, id)
		return why == "" && len(r.AllGPUs()) == 2 && r.Batch == 4096
	})
	behind := func(g *gate) *pb.JobOnDevice { return replicaBehind(t, sys, g, id) }
	for _, g := range gates {
		sys.Root.Send(g.pid, &holdAnswers{})
	}
	sys.Root.Send(tc.co.JobPID(id), &reconfigure{batch: batch, accum: accum, targets: targets, reason: reason, timeout: timeout})
	tc.waitFor(10*time.Second, "both devices run the resize (their answers held)", func() bool {
		for _, g := range gates {
			if rj := behind(g); rj == nil || rj.Batch != int32(batch) || rj.AccumSteps != int32(accum) {
				return false
			}
		}
		return true
	})
	return tc, id, gates, behind
}

// The answers to a stopped job actor's elastic resize do not act on the
// job's next actor. The job runs two replicas through gates that hold the
// devices' answers; a resize from 2048 to 1024 per GPU is applied by both
// devices, and the coordinator is restarted in the process before the
// answers come back. The job's next actor runs the job as recorded (2048
// per GPU), so the stopped actor's change must be undone on the devices.
// Before, the answers reached the next actor, which ran the stopped one's
// continuation: it recorded the resize (1024 per GPU) from the stopped
// actor's copy while the next actor, at 2048, took every report of the
// devices for one sent before its last change and dropped it, so the job's
// record stopped advancing for good.
func TestStoppedJobActorsResizeAnswerReachesNoSuccessor(t *testing.T) {
	tc, id, gates, behind := resizeAnswersHeld(t, 0, "test: resize in flight across a restart")
	sys := tc.co.System()
	var r *JobRecord
	why := ""
	tc.restartCoordinator()
	// The held answers go to the stopped actor's requests (10 s to time
	// out); their continuations are queued for the name before a gate
	// passes on anything after them.
	for _, g := range gates {
		sys.Root.Send(g.pid, &openGate{})
		behind(g)
	}
	from := tc.job(id).Iteration
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, why = consistentReplicas(tc, id)
		if why == "" && len(r.AllGPUs()) == 2 && r.Batch == 4096 && r.Iteration > from {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the stopped actor's resize answers: %q, batch %d on %v, iteration %d (%d when the answers came); want consistent, 4096 on two GPUs, progress",
				why, r.Batch, r.AllGPUs(), r.Iteration, from)
		}
	}
	if r, why = consistentReplicas(tc, id); why != "" || r.Batch != 4096 || r.Attempt != 0 {
		t.Fatalf("after the stopped actor's resize answers: %s (batch %d, attempt %d)", why, r.Batch, r.Attempt)
	}
}

// A change the devices applied but whose answers no job actor heard (the
// coordinator stopped with the resize in flight and its answers were lost,
// as they are when its process dies) is undone when the next job actor
// attaches: the record says 2048 per GPU, the devices ran 1024, and every
// report was dropped as "sent before the device applied the job's last
// change", so the job's progress froze in the record for good.
func TestUnheardResizeUndoneOnAttach(t *testing.T) {
	// The stopped actor's wait outlasts the test (a dead process never
	// times out its requests), so its continuation cannot undo the change.
	tc, id, gates, behind := resizeAnswersHeld(t, time.Hour, "test: resize whose answers are lost")
	sys := tc.co.System()
	var r *JobRecord
	why := ""
	for _, g := range gates {
		sys.Root.Send(g.pid, &dropHeld{})
		behind(g)
	}
	tc.restartCoordinator()
	from := tc.job(id).Iteration
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, why = consistentReplicas(tc, id)
		if why == "" && len(r.AllGPUs()) == 2 && r.Iteration > from {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a resize whose answers were lost: %q, batch %d on %v, iteration %d (%d at the restart); want consistent on two GPUs, progress",
				why, r.Batch, r.AllGPUs(), r.Iteration, from)
		}
	}
	if r.Batch != 4096 {
		t.Errorf("batch %d after the restart, want the recorded 4096 (the unheard change undone)", r.Batch)
	}
}

// The same for a change of micro-steps alone (same per-GPU batch, two
// micro-steps): the next job actor undoes it too. Before, it compared the
// devices' batch only, left them at two micro-steps, and their reports
// turned the record into batch 8192 with no change recorded.
func TestUnheardAccumChangeUndoneOnAttach(t *testing.T) {
	tc, id, gates, behind := resizeAnswersHeldTo(t, time.Hour, "test: micro-steps whose answers are lost", 2048, 1)
	sys := tc.co.System()
	for _, g := range gates {
		sys.Root.Send(g.pid, &dropHeld{})
		behind(g)
	}
	tc.restartCoordinator()
	from := tc.job(id).Iteration
	var r *JobRecord
	why := ""
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, why = consistentReplicas(tc, id)
		if why == "" && len(r.AllGPUs()) == 2 && r.Batch == 4096 && r.Accum == 0 && r.Iteration > from {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after micro-steps whose answers were lost: %q, batch %d in %d micro-steps on %v, iteration %d (%d at the restart); "+
				"want consistent, 4096 in one step on two GPUs, progress", why, r.Batch, r.Accum+1, r.AllGPUs(), r.Iteration, from)
		}
	}
	for _, g := range gates {
		if rj := behind(g); rj == nil || rj.Batch != 2048 || rj.AccumSteps != 0 {
			t.Fatalf("replica %+v, want 2048 in one step", rj)
		}
	}
}

// A move's admission the new GPU granted but no actor heard (the
// coordinator stopped with the move in flight, its answers lost) left the
// job running there for no one: the next job actor runs it where it was
// recorded, ignored the reports from the move's GPU, and that replica ran
// on, unseen by placement, until it finished. The job actor now has such a
// replica released once it reports.
func TestUnheardMoveAdmissionReleased(t *testing.T) {
	// The stopped actor's wait outlasts the test (a dead process never
	// times out its requests), so its continuation cannot release n1/gpu1.
	tc, id, gates := moveAdmissionHeld(t, time.Hour, "test: a move whose admission answer is lost")
	sys := tc.co.System()
	sys.Root.Send(gates[1].pid, &dropHeld{})
	replicaBehind(t, sys, gates[1], id)
	tc.restartCoordinator()
	from := tc.job(id).Iteration
	var r *JobRecord
	why := ""
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r, why = consistentReplicas(tc, id); why == "" && r.Iteration > from {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a move whose admission answer was lost: %q, batch %d on %v, iteration %d (%d at the restart); want the job only where recorded, progressing",
				why, r.Batch, r.AllGPUs(), r.Iteration, from)
		}
	}
	if g := r.AllGPUs(); len(g) != 1 || g[0] != "n1/gpu0" {
		t.Errorf("job on %v after the restart, want n1/gpu0 as recorded", g)
	}
}

// A job actor spawned again after the coordinator actor crashed starts from
// the updates its predecessor sent, not from the store alone. The
// predecessor's last update (here: the job re-queued, and released on its
// device) can still be in the coordinator's mailbox when the coordinator
// restarts, since its supervisor restarts it ahead of its user messages:
// the new job actor read the store, found the job running on a device that
// no longer had it, and re-queued it as refused by that GPU, so on a
// cluster of one GPU it waited for good ("n1/gpu0 refused it"). The
// restarted coordinator is held in its listing of the store while the
// update is queued.
func TestRestartedJobActorSeesPredecessorsLastUpdate(t *testing.T) {
	var mu sync.Mutex
	var armed bool
	entered, release := make(chan struct{}), make(chan struct{})
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: DefaultPlanner(), coordConfig: func(c *CoordinatorConfig) {
		c.listJobs = func(s *transport.Store) ([]string, error) {
			mu.Lock()
			hold := armed
			armed = false
			mu.Unlock()
			if hold {
				close(entered)
				<-release
			}
			return s.Keys("job.")
		}
	}}
	t.Cleanup(tc.stop)
	tc.startCoordinator()
	tc.addNode("n1", 1, testGPU, 2)
	id := tc.submit(mlpSpec("a", 1000000, 0))[0].ID
	r := tc.waitState(id, StateRunning, 20*time.Second)
	// What the job actor does when it is re-queued: its device lets the
	// job go, and its update is sent to the coordinator.
	sys := tc.co.System()
	sys.Root.Send(tc.nodes[0].DevicePID(0), &pb.ReleaseJob{JobId: id, Reason: "requeued: test"})
	tc.waitFor(10*time.Second, "the device lets the job go", func() bool {
		d := tc.findDevice(r.GPU)
		return d != nil && replicaOn(d, id) == nil
	})
	stale := *r
	stale.State, stale.Reason, stale.Attempt = StatePending, "test: requeued as the coordinator crashed", r.Attempt+1
	stale.GPU, stale.Node, stale.DeviceAddr, stale.DeviceID, stale.GPUs, stale.Replicas, stale.Budget = "", "", "", "", nil, nil, 0
	mu.Lock()
	armed = true
	mu.Unlock()
	pid := actor.NewPID(tc.co.actors.Address(), CoordinatorActorName)
	restarted := restarts(t, sys, pid)
	sys.Root.Send(pid, &pb.Crash{Reason: "test"})
	waitClosed(t, entered, 10*time.Second, "the restarted coordinator lists the store")
	sys.Root.Send(pid, &jobUpdate{rec: &stale, ev: &transport.Event{Type: transport.EvRequeued, Job: id, GPU: r.GPU,
		Attempt: stale.Attempt, Reason: stale.Reason}})
	close(release)
	waitClosed(t, restarted, 10*time.Second, "the coordinator actor restarts")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		now := tc.job(id)
		d := tc.findDevice(r.GPU)
		if now.State == StateRunning && now.Attempt == 1 && d != nil && replicaOn(d, id) != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the crash: %s, attempt %d, %q; want running again on %s, attempt 1", now.State, now.Attempt, now.Reason, r.GPU)
		}
	}
}
