package actors

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/transport"
)

// A coordinator that could not list the stored jobs at start logged the
// error and started with none recovered and its job numbers from 1 again,
// so the next submission overwrote the record of a job already accepted.
// It now refuses to start, naming the store, and a start once the store
// answers recovers the job and numbers new ones after it.
func TestCoordinatorStartRefusesUnreadableStore(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 3)
	a := tc.submit(mlpSpec("a", 1500, 0))[0].ID
	tc.waitState(a, StateRunning, 20*time.Second)
	tc.nc.Close()
	tc.co.Stop()

	co, err := StartCoordinator(CoordinatorConfig{DataDir: tc.dataDir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0",
		Gossip: "127.0.0.1:0", Log: quiet, Predictor: NewZooPredictor(tc.planner),
		listJobs: func(*transport.Store) ([]string, error) { return nil, errors.New("test: listing timed out") }})
	if err == nil {
		n := co.Recovered
		co.Stop()
		t.Fatalf("started with the stored jobs unreadable (recovered %d, job numbers from 1 again, so a's record %s would be overwritten); want an error", n, a)
	}
	if !strings.Contains(err.Error(), "stored jobs") || !strings.Contains(err.Error(), "test: listing timed out") {
		t.Fatalf("error %q; want it to say the stored jobs could not be listed, and why", err)
	}

	tc.startCoordinator()
	if tc.co.Recovered != 1 {
		t.Fatalf("recovered %d jobs once the store answers, want 1 (a)", tc.co.Recovered)
	}
	if b := tc.submit(mlpSpec("b", 10, 0))[0].ID; b == a {
		t.Fatalf("new job got %s, a's id", b)
	}
	tc.waitState(a, StateCompleted, 40*time.Second)
}

// After a crash of the coordinator actor, a listing of the stored jobs
// that fails is tried again: before, the restarted actor logged the error
// and never restarted the job actors it had lost, so a running job was
// never seen to complete.
func TestCoordinatorCrashRetriesUnreadableStore(t *testing.T) {
	var mu sync.Mutex
	armed, failures := false, 0
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: DefaultPlanner(), coordConfig: func(c *CoordinatorConfig) {
		c.listJobs = func(s *transport.Store) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			if armed && failures == 0 {
				failures++
				return nil, errors.New("test: listing timed out")
			}
			return s.Keys("job.")
		}
	}}
	t.Cleanup(tc.stop)
	tc.startCoordinator()
	tc.addNode("n1", 1, testGPU, 100)
	id := tc.submit(mlpSpec("steady", 3000, 0))[0].ID
	tc.waitState(id, StateRunning, 20*time.Second)
	mu.Lock()
	armed = true // the restarted coordinator actor's listing fails once
	mu.Unlock()
	sys := tc.co.System()
	pid := actor.NewPID(tc.co.actors.Address(), CoordinatorActorName)
	restarted := restarts(t, sys, pid)
	sys.Root.Send(pid, &pb.Crash{Reason: "test"})
	waitClosed(t, restarted, 10*time.Second, "the coordinator actor restarts")
	if r := tc.waitState(id, StateCompleted, 60*time.Second); r.Iteration != r.Total {
		t.Fatalf("%s completed at %d/%d iterations", id, r.Iteration, r.Total)
	}
	mu.Lock()
	defer mu.Unlock()
	if failures != 1 {
		t.Fatalf("the listing failed %d times, want once", failures)
	}
}
