package tensorsched

import (
	"slices"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// The memo changes no plan: PlanJobsMemo, with an empty memo and again
// with a warm one, gives the plans and figures PlanJobs gives, in both
// modes, and the second call plans no job again. Jobs at their own budgets
// as the runtime plans them (DenseNet-121 at its minimum, which sum-of-peaks
// plans a second time with the refined planner, beside BERT), and two
// copies of a model with the same budget (same graph, another name).
func TestPlanMemoGivesThePlansPlanJobsGives(t *testing.T) {
	if raceEnabled {
		t.Skip("compares plans made one after another: 74 s under the race detector (TestPlanJointTakesTurns and TestMeasureSeveral run joint planning's goroutines there)")
	}
	p := gpu.MustProfile("h100-80gb")
	build := func(model string, batch int) *workload.Graph {
		g, err := zoo.Build(model, workload.Train, batch, zoo.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	dn, bert, r50 := build("densenet121", 16), build("bert-base", 64), build("resnet50", 16)
	budget := func(g *workload.Graph, tol float64) int64 {
		mn, _, err := MinBudget(g, p, tol)
		if err != nil {
			t.Fatal(err)
		}
		return mn
	}
	sets := map[string][]Job{
		"DenseNet-121 at its minimum beside BERT": {{Name: "dn", Graph: dn, Budget: budget(dn, 0.25)}, {Name: "bert", Graph: bert, Budget: budget(bert, 0.25)}},
		"two ResNet-50s": {{Name: "a", Graph: r50, Budget: budget(r50, 0.2)}, {Name: "b", Graph: r50, Budget: budget(r50, 0.2)}},
	}
	for name, jobs := range sets {
		var total int64
		for _, j := range jobs {
			total += j.Budget
		}
		for _, mode := range []Mode{Joint, SumOfPeaks} {
			t.Run(name+"/"+mode.String(), func(t *testing.T) {
				tg := Target{Budget: total}
				want, wst, werr := PlanJobs(jobs, p, mode, tg)
				memo := NewPlanMemo(16)
				for pass, label := range []string{"empty memo", "warm memo"} {
					got, gst, gerr := PlanJobsMemo(jobs, p, mode, tg, memo)
					if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
						t.Fatalf("%s: error %v; PlanJobs: %v", label, gerr, werr)
					}
					if len(got) != len(want) {
						t.Fatalf("%s: %d plans; PlanJobs: %d", label, len(got), len(want))
					}
					for i := range want {
						if !slices.Equal(got[i].Actions, want[i].Actions) {
							t.Errorf("%s: job %s's plan differs from PlanJobs' (%d actions against %d)", label, jobs[i].Name, len(got[i].Actions), len(want[i].Actions))
						}
					}
					if gst.ReservedBytes != wst.ReservedBytes || gst.PeakBytes != wst.PeakBytes || gst.EOR != wst.EOR || !slices.Equal(gst.StartOffsets, wst.StartOffsets) {
						t.Errorf("%s: reserved %d, peak %d, EOR %v, offsets %v; PlanJobs: %d, %d, %v, %v", label,
							gst.ReservedBytes, gst.PeakBytes, gst.EOR, gst.StartOffsets, wst.ReservedBytes, wst.PeakBytes, wst.EOR, wst.StartOffsets)
					}
					hits, misses := memo.Stats()
					if pass == 0 && (misses == 0 || hits > misses) {
						t.Errorf("%s: %d hits, %d misses; want the jobs planned", label, hits, misses)
					}
					if pass == 1 && hits == 0 {
						t.Errorf("%s: no plan found in the memo (%d misses)", label, misses)
					}
				}
				if _, misses := memo.Stats(); misses > 2*int64(len(jobs)) {
					t.Errorf("%d misses over two calls for %d jobs; the second call planned again", misses, len(jobs))
				}
			})
		}
	}
}

// The memo remembers the fallback that waits on copies (planStalling), which
// PlanJobs tries when the greedy misses a budget, so planning the job again
// at the same budget gives the same plan without the fallback's executor
// search, most of the cost (before, only the greedy's attempt was
// remembered). Since the greedy's late moves, no zoo case we tried has the
// greedy miss a budget the fallback meets (TestPlanBudgetWaitsOnCopies),
// so the memo's fallback entry is asked for directly, at vdnn-all's peak.
func TestPlanMemoRemembersTheStallingFallback(t *testing.T) {
	if raceEnabled {
		t.Skip("the fallback's executor search on DenseNet-121 batch 16 is slow under the race detector")
	}
	p, g, vd := densenetAtVDNNAll(t)
	job := Job{Name: "dn", Graph: g}
	tg := Target{Budget: vd.RunPeakBytes, ResidentStart: true}
	vr := execute(t, withUnboundedMemory(p), []Job{{Graph: g}}).Jobs[0]
	van := PlanStats{VanillaPeakBytes: vr.PeakBytes, VanillaSeconds: vr.IterationSeconds}
	memo := NewPlanMemo(4)
	first := memo.stalling(job, p, tg, van)
	if !first.ok || !first.st.WaitsOnCopies {
		t.Fatalf("the fallback missed %s", gpu.FormatBytes(tg.Budget))
	}
	if hits, misses := memo.Stats(); hits != 0 || misses != 1 {
		t.Fatalf("first call: %d hits, %d misses; want 0, 1", hits, misses)
	}
	again := memo.stalling(job, p, tg, van)
	if hits, misses := memo.Stats(); hits != 1 || misses != 1 {
		t.Errorf("second call: %d hits, %d misses; want 1, 1", hits, misses)
	}
	if again.plans[0] != first.plans[0] || again.st.Seconds != first.st.Seconds {
		t.Error("the second call planned the fallback again instead of taking the remembered plan")
	}
	other := tg
	other.Budget += 1 << 20
	if memo.stalling(job, p, other, van); func() int64 { _, m := memo.Stats(); return m }() != 2 {
		t.Error("another budget took the remembered plan")
	}
}
