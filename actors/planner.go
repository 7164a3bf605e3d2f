package actors

import (
	"errors"
	"fmt"

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

// RoundPlanner is a Planner that checks its plans by running the round the
// device runs (runPlanned) and returns that run, so the device does not run
// it a second time.
type RoundPlanner interface {
	Planner
	PlanRound(p gpu.Profile, jobs []tensorsched.Job) (*tensorsched.Result, error)
}

// runPlanned runs jobs (their plans set) as the device does: one round on a
// fresh sim device of profile p, the jobs started together, each held to
// its budget.
func runPlanned(p gpu.Profile, jobs []tensorsched.Job) (*tensorsched.Result, error) {
	return tensorsched.Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, tensorsched.ExecOptions{})
}

// Plan implements Planner (see PlanRound).
func (t *TensilePlanner) Plan(p gpu.Profile, jobs []tensorsched.Job) error {
	_, err := t.PlanRound(p, jobs)
	return err
}

// PlanRound implements RoundPlanner: every job keeps within its own budget,
// and the jobs together within the sum of their budgets. Plans are checked
// the way the device runs them (runPlanned): a plan made for the jobs'
// combined timeline can miss a job's budget by a few MiB when they start at
// other offsets, and planning each job alone misses it when co-located
// copies delay its swaps. So joint mode is tried first, then sum-of-peaks,
// each with the budgets as given and then a little tighter
// (planAgainShrink); the first plan whose run keeps every job within its
// budget is used, else the fallback planner's.
func (t *TensilePlanner) PlanRound(p gpu.Profile, jobs []tensorsched.Job) (*tensorsched.Result, error) {
	var err error
	for _, mode := range []tensorsched.Mode{tensorsched.Joint, tensorsched.SumOfPeaks} {
		for _, f := range append([]float64{1}, planAgainShrink...) {
			var res *tensorsched.Result
			if res, err = planTight(p, jobs, mode, f); err == nil {
				return res, nil
			}
			if !errors.Is(err, tensorsched.ErrBudget) && !tensorsched.IsOOM(err) {
				break // not a matter of memory: tighter budgets will not help
			}
		}
		if len(jobs) < 2 {
			break // one job: both modes plan it alone
		}
	}
	if t.Fallback == nil {
		return nil, err
	}
	if ferr := t.Fallback.Plan(p, jobs); ferr != nil {
		// Both failed: the first error is kept (wrapped) because it names
		// the job that missed its budget, which the device uses to decide
		// whose budget to raise.
		return nil, fmt.Errorf("%w; the baseline plans do not fit either: %v", err, ferr)
	}
	return runPlanned(p, jobs)
}

// planAgainShrink are the fractions of their budgets PlanRound plans the
// jobs to again when a plan misses a budget.
var planAgainShrink = []float64{0.99, 0.97}

// planTight plans jobs in mode with every budget scaled by f and runs the
// plans as the device will, against the budgets as given; when the run
// holds, the plans are set on jobs and the run returned.
func planTight(p gpu.Profile, jobs []tensorsched.Job, mode tensorsched.Mode, f float64) (*tensorsched.Result, error) {
	tight := append([]tensorsched.Job(nil), jobs...)
	var sum int64
	for i := range tight {
		tight[i].Budget = int64(float64(tight[i].Budget) * f)
		sum += tight[i].Budget
	}
	plans, _, err := tensorsched.PlanJobs(tight, p, mode, tensorsched.Target{Budget: min(sum, p.MemoryBytes)})
	if err != nil {
		return nil, err
	}
	run := append([]tensorsched.Job(nil), jobs...)
	for i := range run {
		run[i].Plan, run[i].StartOffset = plans[i], 0
	}
	res, err := runPlanned(p, run)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		jobs[i].Plan = plans[i]
	}
	return res, nil
}
