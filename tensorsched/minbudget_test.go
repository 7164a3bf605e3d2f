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
	if raceEnabled {
		t.Skip("nine MinBudget searches in a row on one goroutine: 31 s under the race detector (TestMinBudget covers the cache from concurrent callers)")
	}
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
			checkCacheSeparates(t, "graphs that differ in op phase",
				func() (int64, int64, error) { return MinBudget(&g2, p, 0.2) },
				func() (int64, int64, error) { return MinBudget(g, p, 0.2) })
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
	checkCacheSeparates(t, "profiles with fp64 peaks 1e12 and 1e11",
		func() (int64, int64, error) { return MinBudget(g, fast, 0.1) },
		func() (int64, int64, error) { return MinBudget(g, slow, 0.1) })
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

// checkCacheSeparates asks two MinBudget questions that must have different
// answers, each on an empty cache, then asks the first again with the
// second's answer cached: it must get its own answer, not the other's.
func checkCacheSeparates(t *testing.T, what string, first, second func() (int64, int64, error)) {
	t.Helper()
	ask := func(q func() (int64, int64, error)) int64 {
		t.Helper()
		m, _, err := q()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ResetMinBudgetCache()
	want := ask(first)
	ResetMinBudgetCache()
	other := ask(second)
	if other == want {
		t.Fatalf("%s: both answer %d; the test needs questions that differ", what, want)
	}
	if got := ask(first); got != want {
		t.Errorf("%s: asked again after the other's answer (%d) is cached: MinBudget = %d, want its own answer %d", what, other, got, want)
	}
}

// TestBudgetCacheForgetsLeastRecentlyUsed: MinBudget's cache is bounded; past
// its size it forgets the entry asked least recently, keeps the others
// (the same entry, so a finished answer is not planned again), and a
// forgotten question gets a fresh entry.
func TestBudgetCacheForgetsLeastRecentlyUsed(t *testing.T) {
	c := newBudgetCache(2)
	key := func(batch int) budgetKey { return budgetKey{model: "m", batch: batch, device: "d"} }
	a, b := c.entry(key(1)), c.entry(key(2))
	a.min = 7
	if got := c.entry(key(1)); got != a {
		t.Fatalf("asking batch 1 again gave a new entry, want the cached one")
	}
	c.entry(key(3)) // forgets batch 2, asked least recently
	if n := c.c.Len(); n != 2 {
		t.Fatalf("cache holds %d entries, want its size 2", n)
	}
	if got := c.entry(key(1)); got != a || got.min != 7 {
		t.Errorf("batch 1 (asked recently) was forgotten: entry %p min %d, want %p min 7", got, got.min, a)
	}
	if got := c.entry(key(2)); got == b {
		t.Errorf("batch 2 (asked least recently) is still cached past the cache's size")
	}
}
