package tensorsched

import (
	"maps"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

func TestMinBudget(t *testing.T) {
	ResetMinBudgetCache()
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "resnet50", 8)
	const callers = 4
	mins := make([]int64, callers)
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m, _, err := MinBudget(g, p, 0.1)
			if err != nil {
				t.Error(err)
			}
			mins[i] = m
		}(i)
	}
	wg.Wait()
	min, vanilla, err := MinBudget(g, p, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mins {
		if m != min {
			t.Fatalf("concurrent callers got %v, later call %d", mins, min)
		}
	}
	if min <= 0 || min >= vanilla {
		t.Fatalf("min budget %d, vanilla peak %d", min, vanilla)
	}
	// The job runs within its min budget (every iteration) and within tolerance.
	plan, st, err := PlanTensile(g, p, Target{Budget: min, Tolerance: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	res := execute(t, p, []Job{{Graph: g, Plan: plan, Budget: min}})
	van := execute(t, p, []Job{{Graph: g}})
	if eor := res.Seconds/van.Seconds - 1; eor > 0.1+1e-9 {
		t.Errorf("EOR %.3f over the tolerance at the min budget (predicted %.3f)", eor, st.EOR)
	}
	// A looser tolerance never needs more memory.
	loose, _, err := MinBudget(g, p, 0.5)
	if err != nil || loose > min {
		t.Errorf("tolerance 0.5: min budget %d (tolerance 0.1: %d), err %v", loose, min, err)
	}
}

// MinBudget never grows with the tolerance, whatever path the greedy takes
// at each one.
func TestMinBudgetMonotone(t *testing.T) {
	ResetMinBudgetCache()
	p := gpu.MustProfile("h100-80gb")
	g := buildGraph(t, "inception-v3", 8)
	prev := int64(-1)
	for _, tol := range []float64{0, 0.03, 0.05, 0.1, 0.16, 0.26, 0.3, 0.61, 1} {
		m, v, err := MinBudget(g, p, tol)
		if err != nil {
			t.Fatal(err)
		}
		if m <= 0 || m > v || (prev >= 0 && m > prev) {
			t.Fatalf("tolerance %.2f: min budget %d (previous %d, vanilla %d)", tol, m, prev, v)
		}
		prev = m
	}
}

// Two graphs that differ only in what the planner reads of their ops'
// phases (an optimizer op's outputs are never recomputed) or kinds (a
// forward concat's inputs may be kept) have different answers, so the
// cache must not hand one the other's.
func TestMinBudgetCacheKeyOpPhaseAndKind(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "mlp", 16)
	variants := []struct {
		name   string
		change func(op *workload.Op)
	}{
		{"phase", func(op *workload.Op) { op.Phase = workload.Optimizer }},
		{"kind", func(op *workload.Op) { op.Kind = "concat" }},
	}
	for _, v := range variants {
		name, change := v.name, v.change
		g2 := *g
		g2.Ops = append([]workload.Op(nil), g.Ops...)
		for i := range g2.Ops {
			change(&g2.Ops[i])
		}
		if name == "phase" {
			ResetMinBudgetCache()
			fresh, _, err := MinBudget(&g2, p, 0.2)
			if err != nil {
				t.Fatal(err)
			}
			ResetMinBudgetCache()
			orig, _, err := MinBudget(g, p, 0.2)
			if err != nil {
				t.Fatal(err)
			}
			if fresh == orig {
				t.Fatalf("%s: the two graphs have the same answer %d; the test needs graphs that differ", name, orig)
			}
			got, _, err := MinBudget(&g2, p, 0.2)
			if err != nil {
				t.Fatal(err)
			}
			if got != fresh {
				t.Errorf("%s: MinBudget after the original graph's answer (%d) is cached = %d, want its own answer %d", name, orig, got, fresh)
			}
		}
		if graphFingerprint(g) == graphFingerprint(&g2) {
			t.Errorf("%s: graphs that differ in op %s have the same fingerprint", name, name)
		}
	}
}

// A profile's peak for a precision other than the four common ones (a
// profile file may name any) changes the op times of graphs in that
// precision, so two such profiles must not share an answer.
func TestMinBudgetCacheKeyOtherPrecision(t *testing.T) {
	base := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "mlp", 64).Clone()
	for i := range g.Ops {
		g.Ops[i].DType = "fp64"
	}
	with := func(peak float64) gpu.Profile {
		p := base
		p.PeakFLOPS = maps.Clone(base.PeakFLOPS)
		p.PeakFLOPS["fp64"] = peak
		return p
	}
	slow, fast := with(1e11), with(1e12)
	ResetMinBudgetCache()
	want, _, err := MinBudget(g, fast, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	ResetMinBudgetCache()
	other, _, err := MinBudget(g, slow, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if other == want {
		t.Fatalf("both profiles answer %d; the test needs profiles that differ", want)
	}
	if got, _, err := MinBudget(g, fast, 0.1); err != nil || got != want {
		t.Errorf("fp64 peak 1e12 after 1e11's answer (%d) is cached: MinBudget = %d (err %v), want its own %d", other, got, err, want)
	}
}

// TestMinBudgetRefusesNaNTolerance: a NaN tolerance is an error naming it,
// not the widest level's answer (every "level > tolerance" test is false
// for NaN, so every level was planned, as for a tolerance of 2).
func TestMinBudgetRefusesNaNTolerance(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "mlp", 64)
	m, v, err := MinBudget(g, p, math.NaN())
	if err == nil || !strings.Contains(err.Error(), "tolerance") {
		t.Fatalf("MinBudget at a NaN tolerance = %d (vanilla %d), error %v; want an error naming the tolerance", m, v, err)
	}
}
