package tensorsched

import (
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// FuzzMinBudgetIsMet checks MinBudget's promise to placement on random
// training graphs (genGraph): the budget it gives for a tolerance is one
// the planner meets. For every input, with tol in [0, 1]:
//   - MinBudget succeeds, reports the executor's vanilla peak, and its
//     budget lies between the op floor and the vanilla run's peak;
//   - PlanTensile to that budget alone (as a device plans its jobs) meets
//     it, and the plan runs within it on the executor, with the checker;
//   - PlanTensile to that budget with tol as its time cap meets both.
func FuzzMinBudgetIsMet(f *testing.F) {
	for _, s := range []struct {
		seed uint64
		data []byte
	}{
		{1, nil}, {2, []byte{3, 6, 10}}, {3, []byte{0, 4, 12}}, {4, []byte{6, 1, 13, 9, 9, 9}}, {5, []byte{5, 0, 8, 8, 10, 10}},
	} {
		f.Add(s.seed, s.data)
	}
	f.Fuzz(func(t *testing.T, seed uint64, data []byte) {
		src := newFuzzSource(seed, data)
		g := genGraph(src)
		if err := g.Validate(); err != nil {
			t.Fatalf("the generator made an invalid graph: %v", err)
		}
		p := fuzzProfile(src)
		tol := src.Unit()
		van, err := runChecked(p, []Job{{Name: "fuzz", Graph: g}})
		if err != nil {
			t.Fatalf("%s on %s: vanilla: %v", describe(g), p.Name, err)
		}
		what := fmt.Sprintf("%s on %s, tolerance %.4f (vanilla peak %d, run peak %d)", describe(g), p.Name, tol, van.PeakBytes, van.Jobs[0].RunPeakBytes)
		mb, vp, err := MinBudget(g, p, tol)
		if err != nil {
			t.Fatalf("%s: MinBudget: %v", what, err)
		}
		if vp != van.PeakBytes {
			t.Errorf("%s: MinBudget's vanilla peak %d, the executor's %d", what, vp, van.PeakBytes)
		}
		if fl, op := g.OpFloor(); mb < fl || mb > van.Jobs[0].RunPeakBytes {
			t.Errorf("%s: MinBudget %d outside [op floor %d (op %d), vanilla run peak]", what, mb, fl, op)
		}
		for _, tg := range []Target{{Budget: mb}, {Budget: mb, Tolerance: tol}} {
			plan, st, err := PlanTensile(g, p, tg)
			if err != nil {
				t.Errorf("%s: MinBudget gives %s, and PlanTensile to %+v: %v", what, gpu.FormatBytes(mb), tg, err)
				continue
			}
			res, err := runChecked(p, []Job{{Name: "fuzz", Graph: g, Plan: plan, Budget: mb}})
			if err != nil {
				t.Fatalf("%s: executing the plan for %+v (%d actions, %+v): %v", what, tg, len(plan.Actions), statsNoClock(st), err)
			}
			jr := res.Jobs[0]
			if jr.RunPeakBytes > mb {
				t.Errorf("%s: the plan for %+v peaks at %d over the run, above the budget", what, tg, jr.RunPeakBytes)
			}
			if tg.Tolerance > 0 && !withinTolerance(jr.IterationSeconds, van.Jobs[0].IterationSeconds, tol) {
				t.Errorf("%s: the plan for %+v takes %.9fs an iteration, vanilla %.9fs: EOR %.6f", what, tg,
					jr.IterationSeconds, van.Jobs[0].IterationSeconds, jr.IterationSeconds/van.Jobs[0].IterationSeconds-1)
			}
		}
	})
}
