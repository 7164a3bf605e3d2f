package tensorsched

import (
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// Scheduler is the local tensor scheduler of one GPU: a state machine
// holding the jobs placed on the GPU, their memory budgets, op-time profiles
// and current plans. It does no I/O and starts no goroutines; the device
// actor calls it and runs what Jobs returns.
//
// It re-plans all of its jobs together (mode Joint or SumOfPeaks) when a job
// joins or leaves, changes batch size (a new graph), its budget changes, or
// its measured iteration time moves by more than ReplanThreshold from the
// time its plan was made with. The first plan of a job is made before it
// has run, from the cost model (cold start). A Scheduler is not safe for
// concurrent use.
type Scheduler struct {
	prof      gpu.Profile
	mode      Mode
	tolerance float64
	jobs      []*schedJob
	stats     JointStats
	lastErr   error
	replans   int
}

type schedJob struct {
	name   string
	graph  *workload.Graph
	budget int64
	prof   *OpProfile
	plan   *Plan
}

// NewScheduler returns an empty scheduler for a GPU with profile p. Plans
// fit each job's budget with the least extra time, capped at tolerance
// (0: no cap); jobs without a budget get the least peak within tolerance.
func NewScheduler(p gpu.Profile, mode Mode, tolerance float64) *Scheduler {
	return &Scheduler{prof: p, mode: mode, tolerance: tolerance}
}

func (s *Scheduler) find(name string) (int, *schedJob) {
	for i, j := range s.jobs {
		if j.name == name {
			return i, j
		}
	}
	return -1, nil
}

// AddJob places a job on the GPU with a memory budget (0: none) and
// re-plans. A plan that cannot fit a budget is still installed (the best
// found) and the ErrBudget is returned. Any other planning error (e.g. a
// broken graph) leaves the scheduler as it was: the job is not added.
func (s *Scheduler) AddJob(name string, g *workload.Graph, budget int64) error {
	if name == "" {
		return errors.New("scheduler: a job needs a name")
	}
	if g == nil {
		return fmt.Errorf("scheduler: job %q has no graph", name)
	}
	if _, j := s.find(name); j != nil {
		return fmt.Errorf("scheduler: job %q is already on this GPU (use SetBatch or SetBudget to change it)", name)
	}
	if budget < 0 {
		return fmt.Errorf("scheduler: job %q: budget %d must not be negative", name, budget)
	}
	s.jobs = append(s.jobs, &schedJob{name: name, graph: g, budget: budget, prof: NewOpProfile(g, s.prof)})
	return s.change(func() { s.jobs = s.jobs[:len(s.jobs)-1] })
}

// RemoveJob takes a job off the GPU and re-plans the others.
func (s *Scheduler) RemoveJob(name string) error {
	i, j := s.find(name)
	if j == nil {
		return fmt.Errorf("scheduler: no job %q on this GPU", name)
	}
	s.jobs = append(s.jobs[:i], s.jobs[i+1:]...)
	return s.replan()
}

// SetBudget changes a job's budget and re-plans when it differs.
func (s *Scheduler) SetBudget(name string, budget int64) error {
	_, j := s.find(name)
	if j == nil {
		return fmt.Errorf("scheduler: no job %q on this GPU", name)
	}
	if budget < 0 {
		return fmt.Errorf("scheduler: job %q: budget %d must not be negative", name, budget)
	}
	if j.budget == budget {
		return nil
	}
	j.budget = budget
	return s.replan()
}

// SetBatch replaces a job's graph (a new batch size) with a cold-start
// profile and re-plans. When the new graph cannot be planned at all the
// job keeps its old graph, profile and plan.
func (s *Scheduler) SetBatch(name string, g *workload.Graph) error {
	_, j := s.find(name)
	if j == nil {
		return fmt.Errorf("scheduler: no job %q on this GPU", name)
	}
	if g == nil {
		return fmt.Errorf("scheduler: job %q: nil graph", name)
	}
	if g == j.graph || graphFingerprint(g) == graphFingerprint(j.graph) {
		// The same graph (the batch did not change): nothing to re-plan,
		// and the measured profile still holds.
		return nil
	}
	oldGraph, oldProf := j.graph, j.prof
	j.graph = g
	j.prof = NewOpProfile(g, s.prof)
	return s.change(func() { j.graph, j.prof = oldGraph, oldProf })
}

// ReportIteration folds one measured iteration of a job into its profile:
// per-op seconds when opSeconds is non-nil (len must match the graph),
// otherwise the total iteration seconds (first op start to last op end,
// as Execute's IterationSeconds). A total is compared with the iteration
// time the last plan predicted for the job (Stats().JobIterationSeconds:
// co-located, the other jobs' kernels sharing the compute engine, with
// the plan's stalls), not with the sum of its op times: the op times are
// scaled by measured/predicted. It re-plans, and reports true, when the
// job's predicted iteration time has moved by more than ReplanThreshold
// since its plan was made.
func (s *Scheduler) ReportIteration(name string, opSeconds []float64, total float64) (replanned bool, err error) {
	i, j := s.find(name)
	if j == nil {
		return false, fmt.Errorf("scheduler: no job %q on this GPU", name)
	}
	if opSeconds != nil {
		err = j.prof.Observe(opSeconds)
	} else {
		if i < len(s.stats.JobIterationSeconds) && s.stats.JobIterationSeconds[i] > 0 && j.prof.planned > 0 {
			// The op times that would have made the planned iteration
			// take total.
			total *= j.prof.planned / s.stats.JobIterationSeconds[i]
		}
		err = j.prof.ObserveTotal(total)
	}
	if err != nil {
		return false, fmt.Errorf("scheduler: job %q: %w", name, err)
	}
	if !j.prof.NeedsReplan() {
		return false, nil
	}
	return true, s.replan()
}

// change re-plans after a change to the jobs or the mode; when nothing
// could be planned at all (an error other than ErrBudget, no plans), it
// undoes the change and leaves the plans, stats, Err and Replans as they
// were, so that one bad request does not break the jobs already there.
func (s *Scheduler) change(undo func()) error {
	replans, lastErr := s.replans, s.lastErr
	installed, err := s.plan()
	if !installed {
		undo()
		s.replans, s.lastErr = replans, lastErr
	}
	return err
}

func (s *Scheduler) replan() error {
	_, err := s.plan()
	return err
}

// plan re-plans every job; installed is false when PlanJobs returned no
// plans (the old ones stay).
func (s *Scheduler) plan() (installed bool, err error) {
	s.replans++
	if len(s.jobs) == 0 {
		s.stats, s.lastErr = JointStats{Mode: s.mode}, nil
		return true, nil
	}
	jobs := s.buildJobs(false)
	plans, st, err := PlanJobs(jobs, s.prof, s.mode, Target{Tolerance: s.tolerance})
	if plans == nil {
		if err == nil {
			err = errors.New("scheduler: the planner returned no plans")
		}
		s.lastErr = err
		return false, err
	}
	for i, j := range s.jobs {
		j.plan = plans[i]
		j.prof.MarkPlanned()
	}
	s.stats, s.lastErr = st, err
	return true, err
}

func (s *Scheduler) buildJobs(withPlans bool) []Job {
	jobs := make([]Job, len(s.jobs))
	plans := make([]*Plan, len(s.jobs))
	for i, j := range s.jobs {
		jobs[i] = Job{Name: j.name, Graph: j.graph, Budget: j.budget, Seconds: j.prof.Seconds()}
		plans[i] = j.plan
	}
	if !withPlans {
		return jobs
	}
	// The plans with the offsets, turns and keys they were made for.
	return s.stats.Apply(jobs, plans)
}

// Jobs returns the jobs with their current plans, budgets, profiled op
// times and start offsets (joint mode: a one-time delay before a job's
// first iteration, see JointStats.StartOffsets) or turns (JointStats.Turns),
// in the order they joined:
// what the executor runs.
func (s *Scheduler) Jobs() []Job { return s.buildJobs(true) }

// Plans returns each job's current plan by name.
func (s *Scheduler) Plans() map[string]*Plan {
	m := make(map[string]*Plan, len(s.jobs))
	for _, j := range s.jobs {
		m[j.name] = j.plan
	}
	return m
}

// Stats is the prediction of the last plan; Err its error (nil, or an
// ErrBudget when a budget could not be met); Replans counts re-plans.
func (s *Scheduler) Stats() JointStats { return s.stats }

// Err is the error of the last re-plan (nil, or an ErrBudget).
func (s *Scheduler) Err() error { return s.lastErr }

// Replans counts the re-plans made so far.
func (s *Scheduler) Replans() int { return s.replans }

// Mode is the scheduler's planning mode.
func (s *Scheduler) Mode() Mode { return s.mode }

// SetMode changes the planning mode and re-plans.
func (s *Scheduler) SetMode(m Mode) error {
	if m == s.mode {
		return nil
	}
	old := s.mode
	s.mode = m
	return s.change(func() { s.mode = old })
}
