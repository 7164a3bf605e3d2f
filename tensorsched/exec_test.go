package tensorsched

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// testProfile is a device with the given capacity and copy bandwidth
// (bytes/s both ways); op times in these tests come from Job.Seconds.
func testProfile(mem int64, bw float64) gpu.Profile {
	p := gpu.MustProfile("rtx2080ti-11gb")
	p.Name = "test"
	p.MemoryBytes = mem
	p.H2DBandwidth, p.D2HBandwidth = bw, bw
	return p
}

// smallGraph: W (param, 100 B), X (input, 10 B), a (20 B), b (30 B), c (40 B).
//
//	op0: a = f(X, W)   1 s
//	op1: b = g(X, W)   2 s
//	op2: c = h(a, b)   3 s
//	op3: W = u(c, W)   4 s (in-place update)
func smallGraph() (*workload.Graph, []float64) {
	g := &workload.Graph{
		Model: "small", Kind: workload.Train, Batch: 1,
		Tensors: []workload.Tensor{
			{ID: 0, Name: "W", Bytes: 100, Kind: workload.Param},
			{ID: 1, Name: "X", Bytes: 10, Kind: workload.Input},
			{ID: 2, Name: "a", Bytes: 20, Kind: workload.Activation},
			{ID: 3, Name: "b", Bytes: 30, Kind: workload.Activation},
			{ID: 4, Name: "c", Bytes: 40, Kind: workload.Gradient},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "f", Kind: "matmul", Inputs: []int{1, 0}, Outputs: []int{2}},
			{ID: 1, Name: "g", Kind: "relu", Inputs: []int{1, 0}, Outputs: []int{3}, Phase: workload.Forward},
			{ID: 2, Name: "h", Kind: "loss", Inputs: []int{2, 3}, Outputs: []int{4}, Phase: workload.Backward},
			{ID: 3, Name: "u", Kind: "sgd", Inputs: []int{4, 0}, Outputs: []int{0}, Phase: workload.Optimizer},
		},
	}
	return g, []float64{1, 2, 3, 4}
}

func runSmall(t *testing.T, p gpu.Profile, plan *Plan, budget int64, opt ExecOptions) (*Result, *gpu.Sim, error) {
	t.Helper()
	g, secs := smallGraph()
	dev := gpu.NewSim(p, gpu.SimOptions{})
	res, err := Execute(dev, []Job{{Name: "j", Graph: g, Plan: plan, Budget: budget, Seconds: secs}}, opt)
	return res, dev, err
}

func TestExecuteVanillaAccounting(t *testing.T) {
	want := []MemSample{{0, 130}, {1, 160}, {3, 190}, {6, 140}, {10, 100}}
	for _, iters := range []int{1, 2, 3} {
		res, dev, err := runSmall(t, testProfile(1<<20, 1e9), nil, 0, ExecOptions{Iterations: iters, RecordTimeline: true, Check: true})
		if err != nil {
			t.Fatalf("iterations %d: %v", iters, err)
		}
		if !reflect.DeepEqual(res.Timeline, want) {
			t.Errorf("iterations %d: timeline %v, want %v", iters, res.Timeline, want)
		}
		if res.PeakBytes != 190 || res.Jobs[0].PeakBytes != 190 {
			t.Errorf("iterations %d: peak device %d job %d, want 190", iters, res.PeakBytes, res.Jobs[0].PeakBytes)
		}
		if res.Seconds != 10 || res.Jobs[0].IterationSeconds != 10 {
			t.Errorf("iterations %d: seconds %v / %v, want 10", iters, res.Seconds, res.Jobs[0].IterationSeconds)
		}
		if !reflect.DeepEqual(res.Jobs[0].OpStart, []float64{0, 1, 3, 6}) || !reflect.DeepEqual(res.Jobs[0].OpEnd, []float64{1, 3, 6, 10}) {
			t.Errorf("iterations %d: op times %v %v", iters, res.Jobs[0].OpStart, res.Jobs[0].OpEnd)
		}
		if dev.InUse() != 100 {
			t.Errorf("iterations %d: %d bytes left after the run, want the 100 B param", iters, dev.InUse())
		}
		if res.Jobs[0].StallSeconds != 0 || res.Jobs[0].SwappedOutBytes != 0 {
			t.Errorf("iterations %d: vanilla run stalled or swapped: %+v", iters, res.Jobs[0])
		}
	}
}

func TestExecuteHostSecondsPerIteration(t *testing.T) {
	g, secs := smallGraph()
	g.HostSecondsPerIteration = 5
	res, err := Execute(gpu.NewSim(testProfile(1<<20, 1e9), gpu.SimOptions{}), []Job{{Graph: g, Seconds: secs}}, ExecOptions{RecordTimeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// The measured iteration starts when the first one ends (t = 15): the
	// host works for 5 s, the input arrives, then the ops run.
	if got := res.Jobs[0].OpStart; !reflect.DeepEqual(got, []float64{5, 6, 8, 11}) {
		t.Errorf("op starts %v, want [5 6 8 11]", got)
	}
	want := []MemSample{{0, 100}, {5, 130}, {6, 160}, {8, 190}, {11, 140}, {15, 100}}
	if !reflect.DeepEqual(res.Timeline, want) {
		t.Errorf("timeline %v, want %v", res.Timeline, want)
	}
}

func TestExecuteOOM(t *testing.T) {
	_, _, err := runSmall(t, testProfile(180, 1e9), nil, 0, ExecOptions{})
	var oom *gpu.OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("want a device OOM, got %v", err)
	}
	if oom.Request != 40 || oom.Capacity != 180 || oom.InUse != 150 || oom.At != 3 {
		t.Errorf("OOM %+v, want request 40 capacity 180 in use 150 at t=3", oom)
	}
	for _, s := range []string{`job "j"`, "tensor 4 (c)", "request of 40 B", "capacity 180 B", "in use 150 B"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if !IsOOM(err) {
		t.Error("IsOOM = false")
	}
}

func TestExecuteBudget(t *testing.T) {
	_, _, err := runSmall(t, testProfile(1<<20, 1e9), nil, 180, ExecOptions{})
	var be *BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("want a budget error, got %v", err)
	}
	if be.Job != "j" || be.Tensor != 4 || be.Budget != 180 || be.InUse != 150 || be.Request != 40 {
		t.Errorf("budget error %+v", be)
	}
	for _, s := range []string{`job "j"`, "tensor 4 (c)", "budget 180 B", "in use 150 B"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	// The vanilla peak fits exactly.
	if _, _, err := runSmall(t, testProfile(1<<20, 1e9), nil, 190, ExecOptions{}); err != nil {
		t.Errorf("budget 190: %v", err)
	}
}

// TestExecuteSwapStall: a is swapped out after op0 and back in after op1
// for op2; at 10 B/s each copy takes 2 s, so op2 waits 2 s.
func TestExecuteSwapStall(t *testing.T) {
	plan := &Plan{Policy: "t", Actions: []Action{
		{Kind: SwapOut, Tensor: 2, After: 0, Before: -1},
		{Kind: SwapIn, Tensor: 2, After: 1, Before: 2},
	}}
	res, dev, err := runSmall(t, testProfile(1<<20, 10), plan, 0, ExecOptions{Iterations: 1, RecordTimeline: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Jobs[0]
	if j.StallSeconds != 2 || j.IterationSeconds != 12 {
		t.Errorf("stall %v iteration %v, want 2 and 12", j.StallSeconds, j.IterationSeconds)
	}
	if j.SwappedOutBytes != 20 || j.SwappedInBytes != 20 {
		t.Errorf("swapped %d/%d, want 20/20", j.SwappedOutBytes, j.SwappedInBytes)
	}
	// t=1: b allocated; t=3: X freed, a's swap-out ends (free) and its
	// swap-in starts (alloc); t=5 c; t=8 a, b freed; t=12 c freed.
	want := []MemSample{{0, 130}, {1, 160}, {3, 150}, {5, 190}, {8, 140}, {12, 100}}
	if !reflect.DeepEqual(res.Timeline, want) {
		t.Errorf("timeline %v, want %v", res.Timeline, want)
	}
	if dev.HostHighWater() != 20 || dev.HostInUse() != 0 {
		t.Errorf("host memory high %d in use %d, want 20 and 0", dev.HostHighWater(), dev.HostInUse())
	}
}

// TestExecuteSwapOutSync: a swap-out with Before set makes that op wait for
// the copy (vDNN's per-layer synchronisation), so a's memory is released
// before op1 allocates b.
func TestExecuteSwapOutSync(t *testing.T) {
	plan := &Plan{Policy: "t", Actions: []Action{
		{Kind: SwapOut, Tensor: 2, After: 0, Before: 1},
		{Kind: SwapIn, Tensor: 2, After: 1, Before: 2},
	}}
	res, _, err := runSmall(t, testProfile(1<<20, 10), plan, 0, ExecOptions{Iterations: 1, RecordTimeline: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Jobs[0]
	// op1 waits for the swap-out (1..3), op2 for the swap-in (5..7).
	if j.StallSeconds != 4 || j.IterationSeconds != 14 || !reflect.DeepEqual(j.OpStart, []float64{0, 3, 7, 10}) {
		t.Errorf("stall %v iteration %v starts %v, want 4, 14, [0 3 7 10]", j.StallSeconds, j.IterationSeconds, j.OpStart)
	}
	// t=3: a leaves as b arrives; t=5: X freed, a's swap-in starts; t=7 c.
	want := []MemSample{{0, 130}, {3, 140}, {5, 150}, {7, 190}, {10, 140}, {14, 100}}
	if !reflect.DeepEqual(res.Timeline, want) {
		t.Errorf("timeline %v, want %v", res.Timeline, want)
	}
}

// TestExecuteAcrossIteration: W is swapped out after the optimizer and
// prefetched at the next iteration's start (100 B at 100 B/s = 1 s each).
func TestExecuteAcrossIteration(t *testing.T) {
	plan := &Plan{Policy: "t", Actions: []Action{
		{Kind: SwapOut, Tensor: 0, After: 3, Before: -1},
		{Kind: SwapIn, Tensor: 0, After: -1, Before: 0},
	}}
	res, _, err := runSmall(t, testProfile(1<<20, 100), plan, 0, ExecOptions{Iterations: 2, RecordTimeline: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Jobs[0]
	// Iteration 2 starts at 10; the swap-in waits for the swap-out (10..11)
	// and copies 11..12, so op0 starts at 12: 2 s of stall.
	if j.StallSeconds != 2 || j.OpStart[0] != 2 || j.IterationSeconds != 10 {
		t.Errorf("stall %v first op %v iteration %v, want 2, 2, 10", j.StallSeconds, j.OpStart[0], j.IterationSeconds)
	}
	if j.SwappedInBytes != 100 || j.SwappedOutBytes != 100 {
		t.Errorf("swapped in %d out %d, want 100 each", j.SwappedInBytes, j.SwappedOutBytes)
	}
	// At 10 c is freed and X arrives; W leaves at 11 (t=1 relative) and
	// comes back at once as the swap-in starts; after the iteration it
	// leaves again (t=13).
	want := []MemSample{{0, 110}, {1, 110}, {2, 130}, {3, 160}, {5, 190}, {8, 140}, {12, 100}, {13, 0}}
	if !reflect.DeepEqual(res.Timeline, want) {
		t.Errorf("timeline %v, want %v", res.Timeline, want)
	}
}

// TestExecuteRecompute: b is dropped after op1 and recomputed from a (still
// resident) just before op3.
func TestExecuteRecompute(t *testing.T) {
	g := &workload.Graph{
		Model: "rec",
		Tensors: []workload.Tensor{
			{ID: 0, Name: "W", Bytes: 100, Kind: workload.Param},
			{ID: 1, Name: "a", Bytes: 20, Kind: workload.Activation},
			{ID: 2, Name: "b", Bytes: 30, Kind: workload.Activation},
			{ID: 3, Name: "c", Bytes: 40, Kind: workload.Activation},
			{ID: 4, Name: "d", Bytes: 10, Kind: workload.Activation},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "f", Inputs: []int{0}, Outputs: []int{1}},
			{ID: 1, Name: "g", Inputs: []int{1}, Outputs: []int{2}},
			{ID: 2, Name: "h", Inputs: []int{0}, Outputs: []int{3}},
			{ID: 3, Name: "k", Inputs: []int{1, 2, 3}, Outputs: []int{4}},
		},
	}
	plan := &Plan{Policy: "t", Actions: []Action{
		{Kind: Drop, Tensor: 2, After: 1, Before: -1},
		{Kind: Recompute, Tensor: 2, After: -1, Before: 3},
	}}
	jobs := []Job{{Name: "r", Graph: g, Plan: plan, Seconds: []float64{1, 2, 3, 4}}}
	res, err := Execute(gpu.NewSim(testProfile(1<<20, 1e9), gpu.SimOptions{}), jobs, ExecOptions{Iterations: 2, Check: true, RecordTimeline: true})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Jobs[0]
	if j.RecomputedOps != 1 || j.IterationSeconds != 12 || j.StallSeconds != 0 {
		t.Errorf("recomputed %d iteration %v stall %v, want 1, 12, 0", j.RecomputedOps, j.IterationSeconds, j.StallSeconds)
	}
	if !reflect.DeepEqual(j.OpStart, []float64{0, 1, 3, 8}) {
		t.Errorf("op starts %v, want [0 1 3 8]", j.OpStart)
	}
	// b leaves at 3, so op2 runs with 160 B instead of 190; the recompute
	// allocates b again at 6, d comes at 8, everything but W goes at 12.
	want := []MemSample{{0, 120}, {1, 150}, {3, 160}, {6, 190}, {8, 200}, {12, 100}}
	if !reflect.DeepEqual(res.Timeline, want) {
		t.Errorf("timeline %v, want %v", res.Timeline, want)
	}
}

// TestExecuteRecomputeFreesTemporaries: b is dropped after op2 and
// recomputed before op4 from t, which the graph no longer reads after op2,
// so t is recomputed first. With no drop of t in the plan, t is freed as
// soon as b's recompute (its last reader) ends instead of staying resident
// into the next iteration; with a drop after op4, it stays until then.
func TestExecuteRecomputeFreesTemporaries(t *testing.T) {
	g := &workload.Graph{
		Model: "temps",
		Tensors: []workload.Tensor{
			{ID: 0, Name: "W", Bytes: 100, Kind: workload.Param},
			{ID: 1, Name: "a", Bytes: 20, Kind: workload.Activation},
			{ID: 2, Name: "t", Bytes: 30, Kind: workload.Activation},
			{ID: 3, Name: "b", Bytes: 40, Kind: workload.Activation},
			{ID: 4, Name: "c", Bytes: 10, Kind: workload.Activation},
			{ID: 5, Name: "d", Bytes: 10, Kind: workload.Activation},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "f", Inputs: []int{0}, Outputs: []int{1}},
			{ID: 1, Name: "g", Inputs: []int{1}, Outputs: []int{2}},
			{ID: 2, Name: "h", Inputs: []int{2}, Outputs: []int{3}},
			{ID: 3, Name: "m", Inputs: []int{0}, Outputs: []int{4}},
			{ID: 4, Name: "k", Inputs: []int{1, 3, 4}, Outputs: []int{5}},
		},
	}
	plan := &Plan{Policy: "t", Actions: []Action{
		{Kind: Drop, Tensor: 3, After: 2, Before: -1},
		{Kind: Recompute, Tensor: 2, After: -1, Before: 4},
		{Kind: Recompute, Tensor: 3, After: -1, Before: 4},
	}}
	jobs := []Job{{Name: "r", Graph: g, Plan: plan, Seconds: []float64{1, 2, 3, 4, 5}}}
	dev := gpu.NewSim(testProfile(1<<20, 1e9), gpu.SimOptions{})
	res, err := Execute(dev, jobs, ExecOptions{Iterations: 2, Check: true, RecordTimeline: true})
	if err != nil {
		t.Fatal(err)
	}
	if j := res.Jobs[0]; j.RecomputedOps != 2 || j.IterationSeconds != 20 {
		t.Errorf("recomputed %d iteration %v, want 2 and 20", j.RecomputedOps, j.IterationSeconds)
	}
	// t recomputed at 10, b at 12; t goes when b's recompute ends (15), as
	// d arrives; everything but W goes at 20.
	want := []MemSample{{0, 120}, {1, 150}, {3, 190}, {6, 130}, {10, 160}, {12, 200}, {15, 180}, {20, 100}}
	if !reflect.DeepEqual(res.Timeline, want) {
		t.Errorf("timeline %v, want %v", res.Timeline, want)
	}
	if res.PeakBytes != 200 || dev.InUse() != 100 {
		t.Errorf("peak %d, %d B left; want 200 (t held with d would be 210) and the 100 B param", res.PeakBytes, dev.InUse())
	}
	// A plan that drops t itself after op4 keeps t until then.
	plan.Actions = append(plan.Actions, Action{Kind: Drop, Tensor: 2, After: 4, Before: -1})
	dev = gpu.NewSim(testProfile(1<<20, 1e9), gpu.SimOptions{})
	res, err = Execute(dev, jobs, ExecOptions{Iterations: 2, Check: true, RecordTimeline: true})
	if err != nil {
		t.Fatal(err)
	}
	want = []MemSample{{0, 120}, {1, 150}, {3, 190}, {6, 130}, {10, 160}, {12, 200}, {15, 210}, {20, 100}}
	if !reflect.DeepEqual(res.Timeline, want) {
		t.Errorf("with the drop: timeline %v, want %v", res.Timeline, want)
	}
}

func TestCheckerCatchesBrokenPlans(t *testing.T) {
	cases := []struct {
		name string
		plan []Action
		want string // "" = passes
	}{
		{"swap-out without swap-in", []Action{{Kind: SwapOut, Tensor: 2, After: 0, Before: -1}},
			`op 2 (h) reads tensor 2 (a), which was swapped out after op 0`},
		{"drop without recompute", []Action{{Kind: Drop, Tensor: 3, After: 1, Before: -1}},
			`op 2 (h) reads tensor 3 (b), which was dropped after op 1`},
		{"swap-in of a never swapped tensor", []Action{{Kind: SwapIn, Tensor: 3, After: 1, Before: 2}},
			""}, // resident: a no-op
		{"recompute needing a freed input", []Action{
			{Kind: Drop, Tensor: 2, After: 1, Before: -1},
			{Kind: Recompute, Tensor: 2, Before: 2}},
			`needs tensor 1 (X), which is not resident`},
		{"swap in and out", []Action{
			{Kind: SwapOut, Tensor: 3, After: 1, Before: -1},
			{Kind: SwapIn, Tensor: 3, After: 1, Before: 2}}, ""},
		{"param swapped out and back", []Action{
			{Kind: SwapOut, Tensor: 0, After: 1, Before: -1},
			{Kind: SwapIn, Tensor: 0, After: 2, Before: 3}}, ""},
		{"param swapped out, never back", []Action{{Kind: SwapOut, Tensor: 0, After: 1, Before: -1}},
			`op 3 (u) reads tensor 0 (W), which was swapped out after op 1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := runSmall(t, testProfile(1<<20, 1e6), &Plan{Policy: "t", Actions: c.plan}, 0, ExecOptions{Check: true})
			if c.want == "" {
				if err != nil {
					t.Fatalf("correct plan failed: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestCheckerStaleRecompute: a is updated in place by op1; dropping it and
// recomputing it from op0 would bring back the old version.
func TestCheckerStaleRecompute(t *testing.T) {
	g := &workload.Graph{
		Model: "inplace",
		Tensors: []workload.Tensor{
			{ID: 0, Name: "W", Bytes: 8, Kind: workload.Param},
			{ID: 1, Name: "a", Bytes: 8, Kind: workload.Activation},
			{ID: 2, Name: "c", Bytes: 8, Kind: workload.Activation},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "f", Inputs: []int{0}, Outputs: []int{1}},
			{ID: 1, Name: "inc", Inputs: []int{1}, Outputs: []int{1}},
			{ID: 2, Name: "g", Inputs: []int{0}, Outputs: []int{2}},
			{ID: 3, Name: "h", Inputs: []int{1, 2}, Outputs: []int{2}},
		},
	}
	plan := &Plan{Actions: []Action{
		{Kind: Drop, Tensor: 1, After: 1, Before: -1},
		{Kind: Recompute, Tensor: 1, Before: 3},
	}}
	jobs := []Job{{Name: "s", Graph: g, Plan: plan, Seconds: []float64{1, 1, 1, 1}}}
	_, err := Execute(gpu.NewSim(testProfile(1<<20, 1e9), gpu.SimOptions{}), jobs, ExecOptions{Check: true})
	if err == nil || !strings.Contains(err.Error(), "op 3 (h) reads tensor 1 (a), whose device copy is stale (version 1, current 2)") {
		t.Fatalf("error %v, want a stale read of a", err)
	}
	// Without the drop the same graph passes.
	jobs[0].Plan = nil
	if _, err := Execute(gpu.NewSim(testProfile(1<<20, 1e9), gpu.SimOptions{}), jobs, ExecOptions{Check: true}); err != nil {
		t.Fatal(err)
	}
}

func TestExecuteRejectsBadPlans(t *testing.T) {
	cases := []struct {
		a    Action
		want string
	}{
		{Action{Kind: SwapIn, Tensor: 2, After: 2, Before: 1}, "before = 1 must be an op after op 2"},
		{Action{Kind: SwapOut, Tensor: 9, After: 0}, "tensor does not exist"},
		{Action{Kind: Drop, Tensor: 2, After: 7}, "after = 7 is not an op"},
		{Action{Kind: SwapOut, Tensor: 2, After: 0, Before: 4}, "before = 4 is not an op (1..3)"},
		{Action{Kind: Recompute, Tensor: 0, Before: 2}, "has no producing op"},
		{Action{Kind: Recompute, Tensor: 3, Before: 1}, "does not precede op 1"},
	}
	for _, c := range cases {
		_, _, err := runSmall(t, testProfile(1<<20, 1e9), &Plan{Policy: "bad", Actions: []Action{c.a}}, 0, ExecOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.a, err, c.want)
		}
	}
}

// chainGraph is a forward/backward chain of n layers for determinism and
// interleaving tests.
func chainGraph(n int, host float64) *workload.Graph {
	g := &workload.Graph{Model: "chain", Kind: workload.Train, Batch: 1, HostSecondsPerIteration: host}
	add := func(name string, b int64, k workload.TensorKind) int {
		g.Tensors = append(g.Tensors, workload.Tensor{ID: len(g.Tensors), Name: name, Bytes: b, Kind: k})
		return len(g.Tensors) - 1
	}
	op := func(name string, in, out []int, flops float64, ph workload.Phase) {
		g.Ops = append(g.Ops, workload.Op{ID: len(g.Ops), Name: name, Inputs: in, Outputs: out, FLOPs: flops, Phase: ph})
	}
	x := add("x", 1<<20, workload.Input)
	acts := []int{x}
	var ws []int
	for i := 0; i < n; i++ {
		w := add("w", int64(1+i%3)<<16, workload.Param)
		ws = append(ws, w)
		a := add("a", int64(1+i%4)<<20, workload.Activation)
		op("fwd", []int{acts[len(acts)-1], w}, []int{a}, float64(1+i%5)*1e9, workload.Forward)
		acts = append(acts, a)
	}
	grad := add("g", 1<<20, workload.Gradient)
	op("loss", []int{acts[len(acts)-1]}, []int{grad}, 1e8, workload.Backward)
	for i := n - 1; i >= 0; i-- {
		gw := add("gw", g.Tensors[ws[i]].Bytes, workload.Gradient)
		gi := add("gi", g.Tensors[acts[i]].Bytes, workload.Gradient)
		op("bwd", []int{grad, acts[i], ws[i]}, []int{gw, gi}, float64(2+i%5)*1e9, workload.Backward)
		op("sgd", []int{gw, ws[i]}, []int{ws[i]}, 1e6, workload.Optimizer)
		grad = gi
	}
	return g
}

func TestExecuteDeterministic(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	run := func() *Result {
		jobs := []Job{{Graph: chainGraph(20, 0.001)}, {Graph: chainGraph(13, 0)}, {Graph: chainGraph(7, 0.002)}}
		res, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, ExecOptions{Iterations: 3, RecordTimeline: true, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of the same jobs differ")
	}
	if a.PeakBytes <= 0 || a.Seconds <= 0 || len(a.Timeline) < 10 {
		t.Fatalf("implausible result: peak %d seconds %v timeline %d", a.PeakBytes, a.Seconds, len(a.Timeline))
	}
}

func TestInterleaveOrder(t *testing.T) {
	one := func(host float64, secs ...float64) Job {
		g := &workload.Graph{Model: "m", HostSecondsPerIteration: host}
		for i := range secs {
			g.Ops = append(g.Ops, workload.Op{ID: i, Name: "k"})
		}
		return Job{Graph: g, Seconds: secs}
	}
	cases := []struct {
		name  string
		jobs  []Job
		order []OpRef
		start [][]float64
	}{
		{"tie goes to the lower index",
			[]Job{one(0, 1, 1), one(0, 1, 1)},
			[]OpRef{{0, 0}, {1, 0}, {0, 1}, {1, 1}},
			[][]float64{{0, 2}, {1, 3}}},
		{"host time lets the other job run",
			[]Job{one(2.5, 1, 1), one(0, 1, 2, 1)},
			[]OpRef{{1, 0}, {1, 1}, {0, 0}, {1, 2}, {0, 1}},
			[][]float64{{3, 5}, {0, 1, 4}}},
		{"earliest ready wins",
			[]Job{one(0, 3, 1), one(1, 1, 1)},
			[]OpRef{{0, 0}, {1, 0}, {0, 1}, {1, 1}},
			[][]float64{{0, 4}, {3, 5}}},
	}
	p := testProfile(1<<30, 1e9)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			order, start, _ := Interleave(p, c.jobs)
			if !reflect.DeepEqual(order, c.order) || !reflect.DeepEqual(start, c.start) {
				t.Fatalf("order %v start %v, want %v %v", order, start, c.order, c.start)
			}
			res, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), c.jobs, ExecOptions{Iterations: 1})
			if err != nil {
				t.Fatal(err)
			}
			for j := range c.jobs {
				if !reflect.DeepEqual(res.Jobs[j].OpStart, c.start[j]) {
					t.Errorf("Execute job %d starts %v, Interleave %v", j, res.Jobs[j].OpStart, c.start[j])
				}
			}
		})
	}
}

func TestExecuteMultiJobMatchesInterleave(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	jobs := []Job{{Graph: chainGraph(10, 0.003)}, {Graph: chainGraph(6, 0)}}
	_, start, end := Interleave(p, jobs)
	res, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, ExecOptions{Iterations: 1, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	for j := range jobs {
		for i := range start[j] {
			if math.Abs(res.Jobs[j].OpStart[i]-start[j][i]) > 1e-12 || math.Abs(res.Jobs[j].OpEnd[i]-end[j][i]) > 1e-12 {
				t.Fatalf("job %d op %d: Execute %v..%v, Interleave %v..%v", j, i, res.Jobs[j].OpStart[i], res.Jobs[j].OpEnd[i], start[j][i], end[j][i])
			}
		}
	}
	// Two jobs share the device: the device peak is at least each job's peak
	// and at most their sum.
	a, b := res.Jobs[0].PeakBytes, res.Jobs[1].PeakBytes
	if res.PeakBytes < max(a, b) || res.PeakBytes > a+b {
		t.Errorf("device peak %d, job peaks %d and %d", res.PeakBytes, a, b)
	}
}

func zooGraph(tb testing.TB, model string, kind workload.JobKind, batch int) *workload.Graph {
	tb.Helper()
	g, err := zoo.Build(model, kind, batch, zoo.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// TestExecuteZooVanilla runs every zoo model once with the checker: the
// measured peak must hold at least the persistent bytes plus the largest
// op's footprint, and vanilla runs never stall.
func TestExecuteZooVanilla(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	for _, m := range zoo.Models() {
		for _, kind := range []workload.JobKind{workload.Train, workload.Infer} {
			g := zooGraph(t, m, kind, 2)
			res, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), []Job{{Graph: g}}, ExecOptions{Check: true})
			if err != nil {
				t.Fatalf("%s %s: %v", m, kind, err)
			}
			j := res.Jobs[0]
			if j.PeakBytes < g.PersistentBytes() || j.PeakBytes != res.PeakBytes || j.StallSeconds != 0 {
				t.Errorf("%s %s: peak %d (persistent %d, device %d), stall %v", m, kind, j.PeakBytes, g.PersistentBytes(), res.PeakBytes, j.StallSeconds)
			}
			if want := p.GraphSeconds(g); math.Abs(j.IterationSeconds-want) > 1e-9*want {
				t.Errorf("%s %s: iteration %v s, sum of op times %v s", m, kind, j.IterationSeconds, want)
			}
		}
	}
}

// BenchmarkExecuteResNet50Vanilla simulates one ResNet-50 batch-16 training
// iteration (vanilla) on the sim device (target: under 2 ms).
func BenchmarkExecuteResNet50Vanilla(b *testing.B) {
	g := zooGraph(b, "resnet50", workload.Train, 16)
	p := gpu.MustProfile("rtx2080ti-11gb")
	jobs := []Job{{Graph: g}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, ExecOptions{Iterations: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckerRecomputeOverwritesCoOutput: op0 writes a and b; op1 updates b
// in place. Re-running op0 to bring a back before op3 writes b again with
// op0's result, undoing op1's update, so op3 reads a stale b.
func TestCheckerRecomputeOverwritesCoOutput(t *testing.T) {
	g := &workload.Graph{
		Model: "co-output",
		Tensors: []workload.Tensor{
			{ID: 0, Name: "W", Bytes: 8, Kind: workload.Param},
			{ID: 1, Name: "a", Bytes: 8, Kind: workload.Activation},
			{ID: 2, Name: "b", Bytes: 8, Kind: workload.Activation},
			{ID: 3, Name: "c", Bytes: 8, Kind: workload.Activation},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "f", Inputs: []int{0}, Outputs: []int{1, 2}},
			{ID: 1, Name: "inc", Inputs: []int{2}, Outputs: []int{2}},
			{ID: 2, Name: "g", Inputs: []int{0}, Outputs: []int{3}},
			{ID: 3, Name: "h", Inputs: []int{1, 2, 3}, Outputs: []int{3}},
		},
	}
	plan := &Plan{Actions: []Action{
		{Kind: Drop, Tensor: 1, After: 0, Before: -1},
		{Kind: Recompute, Tensor: 1, Before: 3},
	}}
	jobs := []Job{{Name: "s", Graph: g, Plan: plan, Seconds: []float64{1, 1, 1, 1}}}
	_, err := Execute(gpu.NewSim(testProfile(1<<20, 1e9), gpu.SimOptions{}), jobs, ExecOptions{Check: true})
	if err == nil || !strings.Contains(err.Error(), "op 3 (h) reads tensor 2 (b), whose device copy is stale (version 1, current 2)") {
		t.Fatalf("error %v, want a stale read of b", err)
	}
	// Recomputing a before op1 (b still as op0 wrote it) is fine.
	g.Ops[1].Inputs = []int{1, 2}
	plan.Actions[1].Before = 1
	if _, err := Execute(gpu.NewSim(testProfile(1<<20, 1e9), gpu.SimOptions{}), jobs, ExecOptions{Check: true}); err != nil {
		t.Fatal(err)
	}
}
