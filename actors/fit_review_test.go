package actors

import (
	"fmt"
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
