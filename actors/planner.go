package actors

import (
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/workload"
)

// DefaultPlanner is the planner the runtime uses: TENSILE, planning the
// co-located jobs of a GPU on their joint timeline, with the baseline
// planner as a fallback when TENSILE cannot meet a budget.
func DefaultPlanner() Planner {
	return &TensilePlanner{Fallback: &BaselinePlanner{}, Memo: tensorsched.NewPlanMemo(soloMemoSize)}
}

// soloMemoSize is how many solo plans DefaultPlanner remembers (a few per
// job on each GPU it plans for: each budget a job was planned to).
const soloMemoSize = 256

// TensilePlanner plans with tensorsched's TENSILE implementation.
type TensilePlanner struct {
	Fallback Planner
	// Memo, if set, remembers the jobs' solo plans across the tries of a
	// plan and across plans (see tensorsched.PlanMemo): the same plans,
	// made once. It may be shared by every GPU the planner plans for.
	Memo *tensorsched.PlanMemo
	// planJobs plans the jobs of a try (nil: tensorsched.PlanJobsMemo); a
	// test counts the tries through it. A field, not a package variable,
	// so that setting it cannot race a planning still running for another
	// test's devices.
	planJobs func([]tensorsched.Job, gpu.Profile, tensorsched.Mode, tensorsched.Target, *tensorsched.PlanMemo) ([]*tensorsched.Plan, tensorsched.JointStats, error)
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
// each with the budgets as given and then, when the plans were made but
// their run broke a job's budget, with that job planned to a little less
// (planAgainShrink; every job when the run names none); the first plan
// whose run keeps every job within its budget is used, else the fallback
// planner's. Only the job that broke its budget is tightened: another may
// already be at the least its planner reaches (GPT-2 at its minimum), and
// a tighter budget for it would fail the plan outright. A tighter try
// whose plans are those of the try before is not run (its run would break
// the budget the same way): the next mode is tried.
func (t *TensilePlanner) PlanRound(p gpu.Profile, jobs []tensorsched.Job) (*tensorsched.Result, error) {
	var err error
	var named error // the last run that broke a job's budget
	for _, mode := range []tensorsched.Mode{tensorsched.Joint, tensorsched.SumOfPeaks} {
		tight := make([]int64, len(jobs))
		for i := range jobs {
			tight[i] = jobs[i].Budget
		}
		var prev []*tensorsched.Plan // the last attempt's plans
		for attempt := 0; ; attempt++ {
			plans, perr := t.planTight(p, jobs, mode, tight)
			if perr != nil {
				// The planner itself missed a budget, and a tighter one
				// is harder still.
				err = perr
				break
			}
			if samePlans(plans, prev) {
				// The tighter budget changed no plan (a job whose
				// budget-first plan falls short is given its least-peak
				// plan, whatever the budget): the run would break the
				// budget the same way. err is still that run's.
				break
			}
			prev = plans
			var res *tensorsched.Result
			if res, err = runPlans(p, jobs, plans); err == nil {
				return res, nil
			}
			if missedBudget(err) != "" {
				named = err
			}
			if attempt == len(planAgainShrink) || !tighten(jobs, tight, err, planAgainShrink[attempt]) {
				break
			}
		}
		if len(jobs) < 2 {
			break // one job: both modes plan it alone
		}
	}
	if missedBudget(err) == "" && named != nil {
		// A later try failed otherwise (a tighter plan could not be
		// made): the device raises the job the error names.
		err = named
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

// planAgainShrink are the fractions of its budget PlanRound plans a job
// to again when the run of its plan breaks that budget.
var planAgainShrink = []float64{0.99, 0.97}

// tighten sets tight (the budgets to plan to) for another try after the
// run of the plans failed with err: the job err names as over its budget
// gets frac of its budget, or every job when err is out-of-memory without
// a job. It reports false when err is not about memory.
func tighten(jobs []tensorsched.Job, tight []int64, err error, frac float64) bool {
	if id := missedBudget(err); id != "" {
		for i := range jobs {
			if jobs[i].Name == id {
				tight[i] = int64(float64(jobs[i].Budget) * frac)
				return true
			}
		}
	}
	if !tensorsched.IsOOM(err) {
		return false
	}
	for i := range jobs {
		tight[i] = int64(float64(jobs[i].Budget) * frac)
	}
	return true
}

// planTight plans jobs in mode with budgets (one per job), solo plans
// looked up in t.Memo (nil: none).
func (t *TensilePlanner) planTight(p gpu.Profile, jobs []tensorsched.Job, mode tensorsched.Mode, budgets []int64) ([]*tensorsched.Plan, error) {
	tight := append([]tensorsched.Job(nil), jobs...)
	var sum int64
	for i := range tight {
		tight[i].Budget = budgets[i]
		sum += tight[i].Budget
	}
	plan := t.planJobs
	if plan == nil {
		plan = tensorsched.PlanJobsMemo
	}
	plans, _, err := plan(tight, p, mode, tensorsched.Target{Budget: min(sum, p.MemoryBytes)}, t.Memo)
	return plans, err
}

// runPlans runs jobs with plans as the device will, against the jobs'
// budgets; when the run holds, the plans are set on jobs and the run
// returned.
func runPlans(p gpu.Profile, jobs []tensorsched.Job, plans []*tensorsched.Plan) (*tensorsched.Result, error) {
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

// samePlans reports whether a and b (one plan per job, nil: none yet) are
// the same plans: the device's run of them is the same.
func samePlans(a, b []*tensorsched.Plan) bool {
	if a == nil || b == nil || len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || a[i] != nil && !slices.Equal(a[i].Actions, b[i].Actions) {
			return false
		}
	}
	return true
}
