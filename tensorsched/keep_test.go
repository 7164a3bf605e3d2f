package tensorsched

import (
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// keepGraph: x (input, 1 B), a and b (10 B each), c = concat(a, b)
// (20 B), d (5 B), e (5 B), h (1 B); every op takes 1 s.
//
//	op0: a = p(x)
//	op1: b = q(x)
//	op2: c = concat(a, b)
//	op3: d = f(c)
//	op4: e = g(d)
//	op5: h = k(e, c)
func keepGraph() *workload.Graph {
	return &workload.Graph{Model: "keep", Kind: workload.Train, Batch: 1,
		Tensors: []workload.Tensor{
			{ID: 0, Name: "x", Bytes: 1, Kind: workload.Input},
			{ID: 1, Name: "a", Bytes: 10, Kind: workload.Activation},
			{ID: 2, Name: "b", Bytes: 10, Kind: workload.Activation},
			{ID: 3, Name: "c", Bytes: 20, Kind: workload.Activation},
			{ID: 4, Name: "d", Bytes: 5, Kind: workload.Activation},
			{ID: 5, Name: "e", Bytes: 5, Kind: workload.Activation},
			{ID: 6, Name: "h", Bytes: 1, Kind: workload.Activation},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "p", Inputs: []int{0}, Outputs: []int{1}, MeasuredSeconds: 1, Phase: workload.Forward},
			{ID: 1, Name: "q", Inputs: []int{0}, Outputs: []int{2}, MeasuredSeconds: 1, Phase: workload.Forward},
			{ID: 2, Name: "cat", Kind: "concat", Inputs: []int{1, 2}, Outputs: []int{3}, MeasuredSeconds: 1, Phase: workload.Forward},
			{ID: 3, Name: "f", Inputs: []int{3}, Outputs: []int{4}, MeasuredSeconds: 1, Phase: workload.Forward},
			{ID: 4, Name: "g", Inputs: []int{4}, Outputs: []int{5}, MeasuredSeconds: 1, Phase: workload.Forward},
			{ID: 5, Name: "k", Inputs: []int{5, 3}, Outputs: []int{6}, MeasuredSeconds: 1, Phase: workload.Forward},
		},
	}
}

// Keep holds a concatenation's inputs past their last use so that the
// concatenation can be dropped and re-run from them: the executor and its
// checker accept the plan, frees the kept tensors after the op the Keep
// names, and AnalyzePeak predicts the run exactly. Without the keeps the
// re-run reads freed tensors.
func TestExecuteKeep(t *testing.T) {
	p := testProfile(1<<20, 100)
	g := keepGraph()
	drop := []Action{
		{Kind: Drop, Tensor: 3, After: 3, Before: -1},
		{Kind: Recompute, Tensor: 3, After: -1, Before: 5},
	}
	keeps := []Action{
		{Kind: Keep, Tensor: 1, After: 5, Before: -1},
		{Kind: Keep, Tensor: 2, After: 5, Before: -1},
	}
	plan := &Plan{Policy: "t", Actions: append(append([]Action(nil), keeps...), drop...)}
	jobs := []Job{{Name: "j", Graph: g, Plan: plan}}
	res, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, ExecOptions{Iterations: 1, RecordTimeline: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	// a and b stay until op5 ends (t = 7); c is dropped after op3 (t = 4)
	// and re-run before op5 (t = 5..6), which then starts at t = 6.
	want := []MemSample{{0, 11}, {1, 21}, {2, 40}, {3, 45}, {4, 30}, {5, 45}, {6, 46}, {7, 0}}
	if len(res.Timeline) != len(want) {
		t.Fatalf("timeline %v, want %v", res.Timeline, want)
	}
	for i := range want {
		if res.Timeline[i] != want[i] {
			t.Fatalf("timeline %v, want %v", res.Timeline, want)
		}
	}
	if res.PeakBytes != 46 || res.Seconds != 7 || res.Jobs[0].RecomputedOps != 1 {
		t.Errorf("peak %d, %vs, %d recomputed ops; want 46, 7 s, 1", res.PeakBytes, res.Seconds, res.Jobs[0].RecomputedOps)
	}
	for _, iters := range []int{1, 2, 3} {
		res, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, ExecOptions{Iterations: iters, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := AnalyzePeak(jobs, p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := newModel(jobs, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.sim.steadyN([][]Action{plan.Actions}, iters)
		if err != nil {
			t.Fatal(err)
		}
		if r.peak != res.PeakBytes || r.makespan != res.Seconds || (iters == 2 && rep.Bytes != res.PeakBytes) {
			t.Errorf("%d iterations: predicted peak %d, %vs; executor %d, %vs", iters, r.peak, r.makespan, res.PeakBytes, res.Seconds)
		}
	}
	// Without the keeps the re-run reads a and b after they were freed.
	bare := []Job{{Name: "j", Graph: g, Plan: &Plan{Policy: "t", Actions: drop}}}
	if _, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), bare, ExecOptions{Iterations: 1, Check: true}); err == nil || !strings.Contains(err.Error(), "freed") {
		t.Errorf("recompute without keeps: error %v, want a read of a freed tensor", err)
	}
	if _, err := AnalyzePeak(bare, p); err == nil {
		t.Error("AnalyzePeak accepted a recompute from freed tensors")
	}
	// A keep must end after the tensor's last use, and only produced
	// tensors can be kept.
	for _, a := range []Action{{Kind: Keep, Tensor: 1, After: 2}, {Kind: Keep, Tensor: 0, After: 5}, {Kind: Keep, Tensor: 1, After: 6}} {
		j := []Job{{Name: "j", Graph: g, Plan: &Plan{Policy: "t", Actions: []Action{a}}}}
		if _, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), j, ExecOptions{Iterations: 1}); err == nil {
			t.Errorf("executor accepted %+v", a)
		}
		if _, err := AnalyzePeak(j, p); err == nil {
			t.Errorf("AnalyzePeak accepted %+v", a)
		}
	}
}

// The planner keeps a concatenation's inputs only where a recompute reads
// them: DenseNet-121 on the RTX 2080 Ti at its 16 % tolerance drops the
// dense layers' concatenations and rebuilds them from kept layer outputs.
func TestPlanKeepsConcatInputs(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "densenet121", 8)
	if !hasConcatKeeps(g) || hasConcatKeeps(buildGraph(t, "resnet50", 8)) {
		t.Fatal("DenseNet-121 has concatenation inputs to keep and ResNet-50 none")
	}
	plan, st, err := PlanTensile(g, p, Target{Tolerance: 0.16})
	if err != nil {
		t.Fatal(err)
	}
	keeps, recCats := 0, 0
	recomputed := map[int]bool{}
	for _, a := range plan.Actions {
		switch a.Kind {
		case Keep:
			keeps++
		case Recompute:
			recomputed[a.Tensor] = true
		}
	}
	for t := range recomputed {
		if def := g.Lifetimes()[t].Def; def >= 0 && g.Ops[def].Kind == "concat" {
			recCats++
		}
	}
	if keeps == 0 || recCats == 0 {
		t.Fatalf("plan keeps %d tensors and recomputes %d concatenations; want both", keeps, recCats)
	}
	res := execute(t, p, []Job{{Graph: g, Plan: plan}})
	if res.PeakBytes != st.PeakBytes {
		t.Errorf("predicted peak %d, executor %d", st.PeakBytes, res.PeakBytes)
	}
	t.Logf("densenet121 b8: MSR %.3f EOR %.3f, %d keeps, %d concatenations recomputed", st.MSR, st.EOR, keeps, recCats)
}

// A recompute may keep small sources the graph frees before it: VGG16's
// first fully connected layer's weight gradient (392 MiB at batch 16) is
// rebuilt before the optimizer step from the layer's input and output
// gradient, kept since the backward pass, instead of staying on the device
// through the backward pass's peak.
func TestPlanKeepsSmallSources(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "vgg16", 16)
	plan, st, err := PlanTensile(g, p, Target{Tolerance: 0.26})
	if err != nil {
		t.Fatal(err)
	}
	lt := g.Lifetimes()
	var kept int64
	rebuilt := false
	for _, a := range plan.Actions {
		switch a.Kind {
		case Keep:
			kept += g.Tensors[a.Tensor].Bytes
		case Recompute:
			if g.Tensors[a.Tensor].Name == "classifier.0.weight.grad" && lt[a.Tensor].LastUse >= a.Before {
				rebuilt = true
			}
		}
	}
	if !rebuilt || kept == 0 || kept*keepRatio > 392<<20 {
		t.Fatalf("fc1 weight gradient rebuilt %v, %d B kept; want it rebuilt from under 1/%d of its size", rebuilt, kept, keepRatio)
	}
	res := execute(t, p, []Job{{Graph: g, Plan: plan}})
	if res.PeakBytes != st.PeakBytes {
		t.Errorf("predicted peak %d, executor %d", st.PeakBytes, res.PeakBytes)
	}
	t.Logf("vgg16 b16: MSR %.3f EOR %.3f, %d keeps (%d B)", st.MSR, st.EOR, st.Keeps, kept)
}
