package actors

import (
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/workload"
)

// DefaultPlanner is the planner the runtime uses: TENSILE, planning the
// co-located jobs of a GPU on their joint timeline, with the baseline
// planner as a fallback when TENSILE cannot meet a budget.
func DefaultPlanner() Planner { return &TensilePlanner{Fallback: &BaselinePlanner{}} }

// TensilePlanner plans with tensorsched's TENSILE implementation.
type TensilePlanner struct {
	Fallback Planner
}

// Name implements Planner.
func (t *TensilePlanner) Name() string { return "tensile" }

// MinBudget implements Planner.
func (t *TensilePlanner) MinBudget(g *workload.Graph, p gpu.Profile, tolerance float64) (int64, int64, error) {
	min, vanilla, err := tensorsched.MinBudget(g, p, tolerance)
	if err != nil && t.Fallback != nil {
		return t.Fallback.MinBudget(g, p, tolerance)
	}
	return min, vanilla, err
}

// Plan implements Planner: every job keeps within its own budget, and the
// jobs together within the sum of their budgets.
func (t *TensilePlanner) Plan(p gpu.Profile, jobs []tensorsched.Job) error {
	var sum int64
	for i := range jobs {
		sum += jobs[i].Budget
	}
	if sum > p.MemoryBytes {
		sum = p.MemoryBytes
	}
	plans, _, err := tensorsched.PlanJobs(jobs, p, tensorsched.Joint, tensorsched.Target{Budget: sum})
	if err != nil {
		if t.Fallback != nil {
			return t.Fallback.Plan(p, jobs)
		}
		return err
	}
	for i := range jobs {
		jobs[i].Plan = plans[i]
	}
	return nil
}
