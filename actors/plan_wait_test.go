package actors

import (
	"strings"
	"testing"
	"time"
)

// A job admitted to a GPU runs no iteration until the plan that includes
// it is installed (planning a GPU's jobs together can take seconds). Its
// record says so meanwhile, so `list`, `status` and the demo show why it
// sits at 0 %, and the reason goes once the job reports progress.
func TestRunningJobSaysItWaitsForItsPlan(t *testing.T) {
	held := newHeldPlans()
	tc := startClusterWith(t, held, 1, 1, testGPU, 2)
	held.hold()
	t.Cleanup(held.release)
	id := tc.submit(mlpSpec("a", 100000, 0))[0].ID
	r := tc.waitState(id, StateRunning, 20*time.Second)
	if !strings.Contains(r.Reason, "waiting for "+r.GPU+"'s memory plan") || !r.WaitsForPlan() || r.Iteration != 0 {
		t.Fatalf("running job whose plan is held: reason %q at iteration %d; want it waiting for %s's memory plan at 0", r.Reason, r.Iteration, r.GPU)
	}
	held.release()
	tc.waitFor(20*time.Second, "a progresses once its plan is installed", func() bool { return tc.job(id).Iteration > 0 })
	if r := tc.job(id); r.Reason != "" || r.State != StateRunning || r.WaitsForPlan() {
		t.Fatalf("after its first progress: state %s, reason %q; want running with no reason", r.State, r.Reason)
	}
}
