package tensorsched

import (
	"sync"
	"testing"

	"github.com/gpusched/gpusched/gpu"
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
