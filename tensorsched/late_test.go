package tensorsched

import (
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// VGG16 batch 16 on the H100 with the whole iteration time to spare: the
// greedy without ops waiting for copies stopped at 1.92 GiB, 0.39 GiB above
// the op floor (the first fully connected layer's Adam step), because the
// copy engines are busy around the optimizer steps. The late moves (an op
// waits for a swap-out to end; a swap-in that came early comes after the
// peak instead) bring it within 15 % of the floor, the executor with the
// checker agreeing, and a budget between the two now fits.
func TestLateMovesNearTheFloor(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	g := buildGraph(t, "vgg16", 16)
	floor, _ := g.OpFloor()
	plan, st, err := PlanTensile(g, p, Target{Tolerance: 1})
	if err != nil {
		t.Fatal(err)
	}
	if lim := floor + floor*15/100; st.PeakBytes > lim {
		t.Errorf("peak %s, above the floor %s plus 15 %% (%s)", gpu.FormatBytes(st.PeakBytes), gpu.FormatBytes(floor), gpu.FormatBytes(lim))
	}
	if st.EOR > 1+1e-9 {
		t.Errorf("EOR %.3f over the tolerance 1", st.EOR)
	}
	synced := 0
	for _, a := range plan.Actions {
		if a.Kind == SwapOut && a.Before > a.After {
			synced++
		}
	}
	if synced == 0 {
		t.Error("no op waits for a swap-out: the late moves were not needed (the test no longer exercises them)")
	}
	got := execute(t, p, []Job{{Graph: g, Plan: plan}}).Jobs[0]
	if got.PeakBytes != st.PeakBytes || got.IterationSeconds != st.Seconds {
		t.Errorf("stats say %d B / %.6f s, the executor %d B / %.6f s", st.PeakBytes, st.Seconds, got.PeakBytes, got.IterationSeconds)
	}
	t.Logf("peak %s (floor %s), EOR %.3f, %d swap-outs waited for", gpu.FormatBytes(st.PeakBytes), gpu.FormatBytes(floor), st.EOR, synced)

	budget := int64(176) << 30 / 100 // 1.76 GiB
	bplan, bst, err := PlanTensile(g, p, Target{Budget: budget})
	if err != nil || bst.WaitsOnCopies {
		t.Fatalf("budget %s: %v (waiting fallback: %v); want the greedy to fit it", gpu.FormatBytes(budget), err, bst.WaitsOnCopies)
	}
	bgot := execute(t, withUnboundedMemory(p), []Job{{Graph: g, Plan: bplan}}).Jobs[0]
	if bgot.RunPeakBytes > budget || bgot.RunPeakBytes != max(bst.PeakBytes, bst.FirstIterationPeakBytes) {
		t.Errorf("budget %s: the executor's run peak %s, the stats' %s", gpu.FormatBytes(budget),
			gpu.FormatBytes(bgot.RunPeakBytes), gpu.FormatBytes(max(bst.PeakBytes, bst.FirstIterationPeakBytes)))
	}
}
