package tensorsched

import (
	"errors"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// densenetAtVDNNAll is DenseNet-121 batch 16 on the RTX 2080 Ti and its
// run under vdnn-all (every saved activation swapped out synchronously,
// parameters and optimizer state resident), whose peak is below every plan
// the greedy finds without making ops wait for copies.
func densenetAtVDNNAll(t *testing.T) (gpu.Profile, *workload.Graph, JobResult) {
	t.Helper()
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "densenet121", 16)
	return p, g, execute(t, withUnboundedMemory(p), []Job{{Graph: g, Plan: PlanVDNNAll(g, p)}}).Jobs[0]
}

// At vdnn-all's peak the greedy fits the budget itself, making ops wait
// for copies only where nothing else cuts the peak (lateMoves): checked by
// the executor, and faster than vdnn-all and than the waiting fallback
// (planStalling, which starts from vdnn-all's plan) at the same memory.
// The fallback still fits the budget on its own, faster than vdnn-all.
// With a time cap the plan stays within it or the budget is reported
// missed.
func TestPlanBudgetWaitsOnCopies(t *testing.T) {
	if raceEnabled {
		t.Skip("planning DenseNet-121 twice takes a minute under the race detector")
	}
	p, g, vd := densenetAtVDNNAll(t)
	budget := vd.RunPeakBytes

	plan, st, err := PlanTensile(g, p, Target{Budget: budget, ResidentStart: true})
	if err != nil {
		t.Fatalf("budget %s (vdnn-all's): %v", gpu.FormatBytes(budget), err)
	}
	if st.WaitsOnCopies {
		t.Fatalf("the greedy missed %s and the fallback planned it", gpu.FormatBytes(budget))
	}
	got := execute(t, withUnboundedMemory(p), []Job{{Graph: g, Plan: plan}}).Jobs[0]
	if got.RunPeakBytes > budget {
		t.Errorf("run peak %s over the budget %s", gpu.FormatBytes(got.RunPeakBytes), gpu.FormatBytes(budget))
	}
	if got.IterationSeconds != st.Seconds || got.RunPeakBytes != st.FirstIterationPeakBytes {
		t.Errorf("stats say %.6f s / %d B, the executor %.6f s / %d B", st.Seconds, st.FirstIterationPeakBytes, got.IterationSeconds, got.RunPeakBytes)
	}
	if got.StallSeconds == 0 {
		t.Errorf("the plan never waits on a copy: the test no longer exercises the late moves")
	}

	fb, fst, ok := planStalling(Job{Graph: g}, p, budget, 0, st)
	if !ok || !fst.WaitsOnCopies {
		t.Fatalf("the waiting fallback missed %s (ok %v)", gpu.FormatBytes(budget), ok)
	}
	fgot := execute(t, withUnboundedMemory(p), []Job{{Graph: g, Plan: fb}}).Jobs[0]
	if fgot.IterationSeconds != fst.Seconds || fgot.RunPeakBytes != fst.FirstIterationPeakBytes {
		t.Errorf("fallback: stats say %.6f s / %d B, the executor %.6f s / %d B", fst.Seconds, fst.FirstIterationPeakBytes, fgot.IterationSeconds, fgot.RunPeakBytes)
	}
	if fgot.RunPeakBytes > budget || fgot.IterationSeconds >= vd.IterationSeconds {
		t.Errorf("fallback: run peak %s (budget %s), %.1f ms per iteration against vdnn-all's %.1f ms",
			gpu.FormatBytes(fgot.RunPeakBytes), gpu.FormatBytes(budget), fgot.IterationSeconds*1e3, vd.IterationSeconds*1e3)
	}
	if got.IterationSeconds >= fgot.IterationSeconds {
		t.Errorf("greedy %.1f ms per iteration, the fallback %.1f ms at the same memory: no better", got.IterationSeconds*1e3, fgot.IterationSeconds*1e3)
	}
	t.Logf("budget %s: vdnn-all %.1f ms, fallback %.1f ms, tensile %.1f ms (EOR %.2f)",
		gpu.FormatBytes(budget), vd.IterationSeconds*1e3, fgot.IterationSeconds*1e3, got.IterationSeconds*1e3, st.EOR)

	const limit = 0.25
	capped, cst, err := PlanTensile(g, p, Target{Budget: budget, Tolerance: limit, ResidentStart: true})
	switch {
	case err == nil && (cst.EOR > limit+1e-9 || max(cst.PeakBytes, cst.FirstIterationPeakBytes) > budget):
		t.Errorf("with a %.0f%% time cap: EOR %.3f, peak %s (budget %s)", limit*100, cst.EOR, gpu.FormatBytes(max(cst.PeakBytes, cst.FirstIterationPeakBytes)), gpu.FormatBytes(budget))
	case err != nil && (!errors.Is(err, ErrBudget) || capped == nil || cst.EOR > limit+1e-9):
		t.Errorf("with a %.0f%% time cap: err %v, plan %v, EOR %.3f; want ErrBudget with the best plan within the cap", limit*100, err, capped != nil, cst.EOR)
	}
}
