package actors

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors/pb"
)

// typeFailingPredictor fails to predict any job's demand on one device type.
type typeFailingPredictor struct {
	Predictor
	failOn string
}

func (p *typeFailingPredictor) Predict(s *pb.JobSpec, deviceType string) (*Prediction, error) {
	if deviceType == p.failOn {
		return nil, fmt.Errorf("no prediction on %s", deviceType)
	}
	return p.Predictor.Predict(s, deviceType)
}

// A job whose demand could be predicted on some device types but not on
// others is placed only on GPUs of the types it has a demand for: Fit took
// the missing types' demand as zero (FitRequest.Demand, unset), chose the
// GPU of the failing type as the best fit, and the coordinator crashed
// reading that type's demand (nil).
func TestPlacementSkipsTypesWithoutDemand(t *testing.T) {
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: DefaultPlanner()}
	tc.pred = &typeFailingPredictor{Predictor: NewZooPredictor(tc.planner), failOn: testGPU}
	tc.startCoordinator()
	t.Cleanup(tc.stop)
	tc.addNode("small", 1, testGPU, 1)
	tc.addNode("big", 1, "v100-16gb", 1)
	id := tc.submit(mlpSpec("a", 1_000_000, 0))[0].ID
	r := tc.waitState(id, StateRunning, 30*time.Second)
	if r.GPU != "big/gpu0" {
		t.Fatalf("job %s runs on %s, want big/gpu0 (no demand is known on %s)", id, r.GPU, testGPU)
	}
}

// A budget request with a demand that cannot be arbitrated (a negative
// minimum, or one so large the sum of minimums wraps int64) is refused:
// admission let it in, every arbitration on the device failed from then on,
// and no job admitted later was ever planned or run there.
func TestDeviceRefusesUnarbitrableDemand(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 1)
	keep := tc.submit(mlpSpec("keep", 1_000_000, 0))[0].ID
	tc.waitState(keep, StateRunning, 30*time.Second)
	pid := tc.nodes[0].DevicePID(0)
	for i, dm := range []*pb.Demand{
		{MinBudget: -1 << 40, VanillaPeak: 1 << 20},
		{MinBudget: math.MaxInt64 - 1<<20, VanillaPeak: math.MaxInt64},
	} {
		req := &pb.BudgetRequest{Spec: &pb.JobSpec{Id: fmt.Sprintf("bad%d", i), Model: "mlp", Kind: "train", Batch: 4096, Iterations: 5, Tolerance: 0.2}, Demand: dm}
		r, err := tc.co.System().Root.RequestFuture(pid, req, 5*time.Second).Result()
		g, ok := r.(*pb.BudgetGrant)
		if err != nil || !ok || g.Accepted {
			t.Fatalf("request with demand %v: answer %v, %v; want a refusal", dm, r, err)
		}
	}
	// The device still plans: a job that fits next to keep runs.
	b := tc.submit(mlpSpec("b", 1_000_000, 0))[0].ID
	tc.waitFor(20*time.Second, "b progresses next to keep", func() bool { return tc.job(b).Iteration > 0 })
	if d := tc.device("n1/gpu0"); len(d.Jobs) != 2 {
		t.Fatalf("device runs %v, want keep and b", d.Jobs)
	}
}

// A job whose spec names a device type runs only on GPUs of that type, even
// where a GPU of another type is the better fit: best fit takes the
// tightest GPU that fits (the 180 MiB test GPU, as a job without a
// preference shows), and a job asking for a V100 must get the V100.
func TestPlacementKeepsPreferredDeviceType(t *testing.T) {
	tc := startCluster(t, 0, 0, testGPU, 1)
	tc.addNode("small", 1, testGPU, 1)
	tc.addNode("big", 1, "v100-16gb", 1)
	pinned := tc.submit(mlpSpec("pinned", 1_000_000, 0) + "device: v100-16gb\n")[0].ID
	if r := tc.waitState(pinned, StateRunning, 30*time.Second); r.GPU != "big/gpu0" {
		t.Fatalf("job asking for v100-16gb runs on %s, want big/gpu0", r.GPU)
	}
	free := tc.submit(mlpSpec("free", 1_000_000, 0))[0].ID
	if r := tc.waitState(free, StateRunning, 30*time.Second); r.GPU != "small/gpu0" {
		t.Fatalf("job without a preference runs on %s, want small/gpu0 (the tightest fit)", r.GPU)
	}
}
