package tensorsched

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// The op floor counts what one op reads and writes, a tensor updated in
// place once, and picks the largest op.
func TestOpFloorHandChecked(t *testing.T) {
	g := &workload.Graph{
		Model: "hand", Kind: workload.Train, Batch: 1,
		Tensors: []workload.Tensor{
			{ID: 0, Name: "x", Bytes: 100, Kind: workload.Input},
			{ID: 1, Name: "w", Bytes: 50, Kind: workload.Param},
			{ID: 2, Name: "y", Bytes: 200, Kind: workload.Activation},
			{ID: 3, Name: "dw", Bytes: 50, Kind: workload.Gradient},
			{ID: 4, Name: "m", Bytes: 50, Kind: workload.OptimizerState},
			{ID: 5, Name: "v", Bytes: 50, Kind: workload.OptimizerState},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "fwd", Kind: "matmul", Inputs: []int{0, 1}, Outputs: []int{2}},               // 350
			{ID: 1, Name: "bwd", Kind: "matmul", Inputs: []int{0, 2}, Outputs: []int{3}},               // 350
			{ID: 2, Name: "adam", Kind: "adam", Inputs: []int{1, 3, 4, 5}, Outputs: []int{1, 4, 5, 1}}, // 200: w, m, v once
		},
	}
	if b, op := g.OpFloor(); b != 350 || op != 0 {
		t.Fatalf("OpFloor = %d bytes at op %d, want 350 at op 0 (the first of the two largest)", b, op)
	}
	g.Tensors[4].Bytes, g.Tensors[5].Bytes = 1000, 1000
	if b, op := g.OpFloor(); b != 2100 || op != 2 {
		t.Fatalf("OpFloor = %d bytes at op %d, want 2100 at op 2 (w, dw, m, v, each once)", b, op)
	}
	if b, op := (&workload.Graph{}).OpFloor(); b != 0 || op != -1 {
		t.Fatalf("OpFloor of a graph without ops = %d, %d; want 0, -1", b, op)
	}
}

// No plan goes below the op floor — tensile's and every baseline's, as
// the executor with the checker measures them — and on VGG16 the floor is
// the first fully connected layer's Adam step, above half the vanilla
// peak: no plan of whole tensors reaches MSR 0.5 there (the H100 target
// the README reports as not met).
func TestOpFloorBoundsEveryPlan(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	for _, model := range []string{"vgg16", "resnet50"} {
		g := buildGraph(t, model, 16)
		fl, op := g.OpFloor()
		van := execute(t, p, []Job{{Graph: g}})
		if fl <= 0 || fl > van.PeakBytes {
			t.Fatalf("%s: floor %d outside (0, vanilla peak %d]", model, fl, van.PeakBytes)
		}
		plans := map[string]*Plan{
			"checkpoint": PlanCheckpoint(g, p),
			"vdnn-all":   PlanVDNNAll(g, p),
			"capuchin":   PlanCapuchin(g, p),
		}
		for _, tol := range []float64{0.05, 1} {
			plan, _, err := PlanTensile(g, p, Target{Tolerance: tol})
			if err != nil {
				t.Fatalf("%s tensile at %.0f%%: %v", model, tol*100, err)
			}
			plans[fmt.Sprintf("tensile %.0f%%", tol*100)] = plan
		}
		for name, plan := range plans {
			res := execute(t, p, []Job{{Graph: g, Plan: plan}})
			if res.PeakBytes < fl {
				t.Errorf("%s %s peaks at %s, below the op floor %s (op %s): the floor is not a floor",
					model, name, gpu.FormatBytes(res.PeakBytes), gpu.FormatBytes(fl), g.Ops[op].Name)
			}
			t.Logf("%s %-11s peak %s, floor %s (%s), ceiling MSR %.3f", model, name,
				gpu.FormatBytes(res.PeakBytes), gpu.FormatBytes(fl), g.Ops[op].Name, 1-float64(fl)/float64(van.PeakBytes))
		}
		if model != "vgg16" {
			continue
		}
		if ceil := 1 - float64(fl)/float64(van.PeakBytes); g.Ops[op].Kind != "adam" || ceil >= 0.5 {
			t.Errorf("vgg16: floor at op %s (%s), MSR ceiling %.3f; want an Adam step and a ceiling below 0.5", g.Ops[op].Name, g.Ops[op].Kind, ceil)
		}
	}
}

// A budget below the op floor fails with ErrBudget and says that no plan
// can fit it, naming the op; one above it says nothing of the floor.
func TestPlanBudgetBelowFloorSaysSo(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "mlp", 8)
	fl, op := g.OpFloor()
	_, _, err := PlanTensile(g, p, Target{Budget: fl - 1})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("budget one byte below the floor: err = %v, want ErrBudget", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "no plan can fit it") || !strings.Contains(msg, g.Ops[op].Name) {
		t.Errorf("error %q does not say that no plan fits below the floor of op %s", msg, g.Ops[op].Name)
	}
	if note := floorNote(g, fl); note != "" {
		t.Errorf("a budget at the floor got the note %q", note)
	}
}
