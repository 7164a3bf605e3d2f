package tensorsched

import (
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// A budget MinBudget gives is one PlanTensile meets: the runtime arbitrates
// budgets by MinBudget and the device plans to them. The least peak is not
// monotone in the tolerance (the MLP at batch 7168 on a 180 MiB V100 peaks
// at 113.4 MiB within 15 % and 118.7 MiB within 50 %), so a budget-first plan
// that misses falls back on the least-peak plans at MinBudget's levels.
func TestPlanBudgetMeetsMinBudget(t *testing.T) {
	small := gpu.MustProfile("v100-16gb")
	small.Name, small.MemoryBytes = "v100-180mb", 180<<20
	rtx := gpu.MustProfile("rtx2080ti-11gb")
	for _, c := range []struct {
		p     gpu.Profile
		model string
		batch int
		tol   float64
	}{
		{small, "mlp", 7168, 0.2},
		{small, "mlp", 3084, 0.2},
		{rtx, "resnet50", 16, 0.1},
		{rtx, "vgg16", 16, 0.3},
	} {
		g := buildGraph(t, c.model, c.batch)
		mb, _, err := MinBudget(g, c.p, c.tol)
		if err != nil {
			t.Fatalf("%s b%d: %v", c.model, c.batch, err)
		}
		plan, st, err := PlanTensile(g, c.p, Target{Budget: mb})
		if err != nil {
			t.Errorf("%s b%d on %s: MinBudget at %.0f %% is %s, and PlanTensile to it: %v", c.model, c.batch, c.p.Name, c.tol*100, gpu.FormatBytes(mb), err)
			continue
		}
		got := execute(t, withUnboundedMemory(c.p), []Job{{Graph: g, Plan: plan}}).Jobs[0]
		if got.RunPeakBytes > mb {
			t.Errorf("%s b%d: the executor's run peak %s is over the budget %s (stats %s)", c.model, c.batch,
				gpu.FormatBytes(got.RunPeakBytes), gpu.FormatBytes(mb), gpu.FormatBytes(max(st.PeakBytes, st.FirstIterationPeakBytes)))
		}
	}
}
