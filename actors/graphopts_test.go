package actors

import (
	"strings"
	"testing"

	"github.com/gpusched/gpusched/workload"
)

// A job spec's param_chunk and optimizer reach the run spec, the
// prediction's graph and its cache key: VGG16 with its large weight in
// chunks and their updates spread needs a smaller budget than as written,
// and the two are predicted apart.
func TestPredictGraphOptions(t *testing.T) {
	const base = "model: vgg16, batch: 8, iterations: 10, tolerance: 5%"
	specs, err := workload.ParseSpecsWith([]byte("jobs:\n- {name: a, "+base+"}\n- {name: b, "+base+", param_chunk: 4MiB, optimizer: spread}\n"), SubmitValidateOptions())
	if err != nil {
		t.Fatal(err)
	}
	std, spread := RunSpec("j-1", &specs[0]), RunSpec("j-2", &specs[1])
	if spread.ParamChunkBytes != 4<<20 || spread.Optimizer != "spread" || std.ParamChunkBytes != 0 || std.Optimizer != "" {
		t.Fatalf("run specs: chunk %d optimizer %q; standard chunk %d optimizer %q", spread.ParamChunkBytes, spread.Optimizer, std.ParamChunkBytes, std.Optimizer)
	}
	if demandKey(std, "h100-80gb") == demandKey(spread, "h100-80gb") {
		t.Fatal("the standard and spread specs share a demand key")
	}
	pred := NewZooPredictor(DefaultPlanner())
	ps, err := pred.Predict(std, "h100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	pp, err := pred.Predict(spread, "h100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for _, x := range pp.Graph.Tensors {
		if strings.HasPrefix(x.Name, "classifier.0.weight#") && x.Kind == workload.Param {
			chunks++
		}
	}
	if chunks < 90 || len(pp.Graph.Ops) <= len(ps.Graph.Ops) {
		t.Errorf("spread graph: %d chunks of classifier.0.weight, %d ops (standard %d)", chunks, len(pp.Graph.Ops), len(ps.Graph.Ops))
	}
	t.Logf("min budget at 5%%: standard %d, spread %d bytes", ps.Demand.MinBudget, pp.Demand.MinBudget)
	if pp.Demand.MinBudget >= ps.Demand.MinBudget {
		t.Errorf("min budget at 5%%: spread %d, standard %d bytes; want spread below", pp.Demand.MinBudget, ps.Demand.MinBudget)
	}
}
