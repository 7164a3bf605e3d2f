package tensorsched

import (
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// dearCheapGraph: A is dear to recompute (a slow op), B cheap (a fast op
// on the input, twice A's size); both wait through the peak (op 3 makes a
// large D) for their backward use. The copy engine's idle time before the
// peak (op 2) fits one of the two swap-outs, not both; after it there is
// time to swap both back in.
func dearCheapGraph() *workload.Graph {
	const gb = int64(1) << 30
	return &workload.Graph{Model: "dear-cheap", Kind: workload.Train, Batch: 1,
		Tensors: []workload.Tensor{
			{ID: 0, Name: "x", Bytes: 1 << 20, Kind: workload.Input},
			{ID: 1, Name: "A", Bytes: gb, Kind: workload.Activation},
			{ID: 2, Name: "B", Bytes: 2 * gb, Kind: workload.Activation},
			{ID: 3, Name: "C", Bytes: 1 << 20, Kind: workload.Activation},
			{ID: 4, Name: "D", Bytes: 3 * gb, Kind: workload.Activation},
			{ID: 5, Name: "E", Bytes: 1 << 20, Kind: workload.Gradient},
			{ID: 6, Name: "F", Bytes: 1 << 20, Kind: workload.Gradient},
			{ID: 7, Name: "G", Bytes: 1 << 20, Kind: workload.Gradient},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "slow", Inputs: []int{0}, Outputs: []int{1}, MeasuredSeconds: 0.050},
			{ID: 1, Name: "fast", Inputs: []int{0}, Outputs: []int{2}, MeasuredSeconds: 0.001},
			{ID: 2, Name: "mid", Inputs: []int{0}, Outputs: []int{3}, MeasuredSeconds: 0.180},
			{ID: 3, Name: "peak", Inputs: []int{3}, Outputs: []int{4}, MeasuredSeconds: 0.010},
			{ID: 4, Name: "reduce", Phase: workload.Backward, Inputs: []int{4}, Outputs: []int{5}, MeasuredSeconds: 0.010},
			{ID: 5, Name: "gap", Phase: workload.Backward, Inputs: []int{5}, Outputs: []int{7}, MeasuredSeconds: 0.200},
			{ID: 6, Name: "back1", Phase: workload.Backward, Inputs: []int{7, 1}, Outputs: []int{6}, MeasuredSeconds: 0.200},
			{ID: 7, Name: "back2", Phase: workload.Backward, Inputs: []int{6, 2, 0}, MeasuredSeconds: 0.200},
		},
	}
}

// The dear-first order puts the tensor dearest to recompute per byte
// first, even when it is the smaller one; size order puts the larger first.
func TestSwapOrderDearFirst(t *testing.T) {
	g := dearCheapGraph()
	m, err := newModel([]Job{{Graph: g}}, gpu.MustProfile("rtx2080ti-11gb"))
	if err != nil {
		t.Fatal(err)
	}
	pl := newPlanner(m, Target{Tolerance: 0.1})
	pl.iters = simIterations
	r, err := pl.simulate()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pl.focus(r); !ok {
		t.Fatal("no peak to cut")
	}
	pos := func(cs []candidate) (a, b int) {
		a, b = -1, -1
		for i, c := range cs {
			switch g.Tensors[c.tensor].Name {
			case "A":
				a = i
			case "B":
				b = i
			}
		}
		return a, b
	}
	cands := pl.candidates(r)
	a, b := pos(cands)
	if a < 0 || b < 0 || b > a {
		t.Fatalf("candidates (largest first): A at %d, B at %d; want both, B first", a, b)
	}
	a, b = pos(pl.swapOrder(cands))
	if a < 0 || b < 0 || a > b {
		t.Fatalf("dear-first order: A at %d, B at %d; want A (dear to recompute) first", a, b)
	}
}

// End to end: the planner swaps the tensor that is dear to recompute and
// recomputes the cheap one, and the executor's checker accepts the plan.
func TestPlanTensileRecomputesCheapSwapsDear(t *testing.T) {
	g := dearCheapGraph()
	p := gpu.MustProfile("rtx2080ti-11gb")
	plan, st, err := PlanTensile(g, p, Target{Tolerance: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]map[ActionKind]bool{}
	for _, a := range plan.Actions {
		n := g.Tensors[a.Tensor].Name
		if kinds[n] == nil {
			kinds[n] = map[ActionKind]bool{}
		}
		kinds[n][a.Kind] = true
	}
	if !kinds["A"][SwapOut] || kinds["A"][Recompute] {
		t.Errorf("A (dear to recompute): actions %v, want a swap and no recompute", kinds["A"])
	}
	if !kinds["B"][Recompute] || kinds["B"][SwapOut] {
		t.Errorf("B (cheap to recompute): actions %v, want a recompute and no swap", kinds["B"])
	}
	van := execute(t, p, []Job{{Graph: g}})
	res := execute(t, p, []Job{{Graph: g, Plan: plan}})
	if res.PeakBytes != st.PeakBytes || res.PeakBytes >= van.PeakBytes {
		t.Errorf("peak: executor %d, predicted %d, vanilla %d", res.PeakBytes, st.PeakBytes, van.PeakBytes)
	}
	// Both off at the peak: only D (half the vanilla peak) and small
	// tensors remain; largest first would keep A there.
	if msr := 1 - float64(res.PeakBytes)/float64(van.PeakBytes); msr < 0.45 {
		t.Errorf("MSR %.3f, want at least 0.45 with A swapped and B recomputed", msr)
	}
	if eor := res.Seconds/van.Seconds - 1; eor > 0.05+1e-9 {
		t.Errorf("EOR %.3f over the tolerance 0.05", eor)
	}
	t.Logf("MSR %.3f EOR %.3f actions %v", 1-float64(res.PeakBytes)/float64(van.PeakBytes), res.Seconds/van.Seconds-1, plan.Actions)
}
