package tensorsched

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// Mode is how PlanJobs plans several jobs that share one GPU.
type Mode uint8

// Modes.
const (
	// SumOfPeaks plans each job alone, as if all jobs peaked at the same
	// time (TENSILE's authors' approach): a device budget is split between
	// the jobs in proportion to their vanilla peaks, and each job assumes
	// the copy engines are its own.
	SumOfPeaks Mode = iota
	// Joint plans every job on the combined timeline of the GPU: ops
	// interleaved as the compute engine runs them, copies of all jobs on
	// the shared copy engines, and the device's peak (not the sum of the
	// jobs' peaks) as the quantity to cut.
	Joint
)

var modeNames = [...]string{"sum-of-peaks", "joint"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// ParseMode parses the names Mode.String returns.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if strings.EqualFold(s, n) {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown planning mode %q (allowed: %s)", s, strings.Join(modeNames[:], ", "))
}

// MarshalText implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Several jobs on one GPU: the accounting both modes are measured by.
//
//   - Reserved memory. Sum-of-peaks (the published approach) plans each job
//     alone and must reserve, on the GPU, the sum of the jobs' planned peaks
//     (it assumes they all peak at once; each job is held to its own share).
//     Joint reserves the combined peak of the co-located jobs running their
//     plans from their start offsets, over the whole run (first iterations
//     included).
//   - MSR = 1 − reserved / Σ vanilla job peaks, where a job's vanilla peak is
//     its peak alone without memory scheduling: what peak-based placement
//     reserves for it.
//   - EOR is the mean over jobs of a job's iteration time co-located with
//     the plans over its iteration time co-located without plans, minus
//     one, both runs with the same start offsets (none for sum-of-peaks).
//     A job's iteration time is its mean over a run of Horizon iterations
//     (from its first op to the end of its last iteration, over Horizon):
//     a single iteration of offset co-located jobs is distorted by the ends
//     of the run (the first job starts alone, the last ends alone), the
//     mean over a run is the steady-state rate. The reference keeps the
//     offsets for the same reason; in the steady state copies alternate op
//     by op at any phase, so offsets cost no iteration time. A start
//     offset is a one-time delay before the first iteration, not part of
//     any iteration; JointStats reports it. (For one job, EOR is the
//     paper's: its measured iteration over vanilla.)
//
// Phase offsets. Co-located identical jobs started together run in
// lockstep (the compute engine alternates between them) and reach their
// activation peaks at the same moment. Joint mode may delay a job's first
// iteration (Job.StartOffset) so that in the steady state their peaks
// interleave: one job's forward pass, which builds up activations, runs
// while another's backward pass releases them, and one job's swap-outs use
// the D2H engine while another's swap-ins use the H2D engine. The offsets
// are chosen on the vanilla combined timeline (a few phase fractions per
// job, least combined peak); the greedy swap/recompute planner then runs on
// the combined timeline with those offsets.

// jointHorizon is how many iterations the several-job planning and
// predictions simulate (JointStats.Horizon): enough for co-located copies
// running identical plans to settle into their phases, so the reservation
// covers the steady state and not only a start-up.
const jointHorizon = 8

// jointCheckIterations is how many iterations joint mode runs its
// candidates to check what they reserve: co-located jobs of different
// lengths keep drifting through relative phases after the horizon, and
// the reservation must cover the phases they reach later (three jobs on
// an H100, two ResNet-50 b16 and an Inception-v3 b8, peak 9 % above their
// 8-iteration high-water mark by the 40th iteration). The reservation is
// the high-water mark over this many iterations (Horizon stays the window
// the other figures are measured on).
const jointCheckIterations = 40

// offsetHorizon is how many iterations each trial of a start offset
// simulates, and offsetPasses how many coordinate passes the search makes:
// enough to see copies settle into a phase, few enough to plan quickly.
// Under a time tolerance without budgets (the several-job table's
// targets), the candidates planned to the whole tolerance whose solo
// plans take warmHeadroom of it or more try offsets over
// offsetHorizonLong iterations instead:
// phases that look staggered over four iterations can drift back into
// step before the check run's end, which the reservation covers (four
// ResNet-50s on the H100 at 5 %: one candidate reserved 2.63 GiB over the
// horizon and 3.19 GiB over the check run). The candidate with the most
// headroom keeps the short trials: which offsets a greedy run does best
// from is path dependent, and the two horizons give different candidates
// (on the several-job table, long trials for every candidate lose 0.8
// points on three H100 ResNet-50s, where the short trials' offsets won).
// The candidates planned to sum-of-peaks' EOR keep the short trials (on
// the table the long ones changed none of their results), and so do
// budget targets (the runtime's, planned on every join and leave): long
// trials cost three times as much.
const (
	offsetHorizon     = 4
	offsetHorizonLong = 12
	offsetPasses      = 1
)

// phaseSteps is how many phase fractions of its solo iteration time joint
// mode tries as a job's start offset.
const phaseSteps = 8

// JointStats describes plans for the jobs of one GPU as the planner
// predicts they run together (see the accounting above).
type JointStats struct {
	Mode Mode `json:"mode"`
	// PeakBytes and Seconds are the predicted device peak and makespan of
	// the last iteration of the jobs running together with their plans and start
	// offsets; the Vanilla fields are the same without plans and offsets.
	PeakBytes        int64   `json:"peak_bytes"`
	Seconds          float64 `json:"seconds"`
	VanillaPeakBytes int64   `json:"vanilla_peak_bytes"`
	VanillaSeconds   float64 `json:"vanilla_seconds"`
	// Horizon is how many iterations the prediction runs (Execute with
	// ExecOptions.Iterations = Horizon measures the same): 2 for one job,
	// more for several, whose phases take a few iterations to settle.
	// PeakBytes, Seconds and the per-job figures are of the last one.
	Horizon int `json:"horizon"`
	// RunPeakBytes is the predicted device high-water mark over all
	// Horizon iterations, start-up included.
	RunPeakBytes int64 `json:"run_peak_bytes"`
	// ReservedBytes is the memory the mode reserves on the GPU: the sum of
	// the jobs' planned peaks (sum-of-peaks), or the combined high-water
	// mark over a run of CheckIterations iterations (joint).
	ReservedBytes int64 `json:"reserved_bytes"`
	// CheckIterations is how long a run joint mode's reservation covers
	// (0 in sum-of-peaks mode, which reserves the sum of its solo plans'
	// peaks; MeasureSeveral measures them co-located over the check run).
	CheckIterations int `json:"check_iterations,omitempty"`
	// SumOfVanillaJobPeaks adds up each job's vanilla peak alone.
	SumOfVanillaJobPeaks int64 `json:"sum_of_vanilla_job_peaks"`
	// MSR = 1 − ReservedBytes/SumOfVanillaJobPeaks; EOR is the mean of
	// JobEOR (jobs taking turns by keys: of max(JobEOR, 0), see
	// verifyJoint).
	MSR float64 `json:"msr"`
	EOR float64 `json:"eor"`
	// JobEOR is each job's co-located iteration time with the plans over
	// its co-located vanilla iteration time, minus one.
	JobEOR []float64 `json:"job_eor"`
	// StartOffsets is each job's one-time delay before its first iteration
	// (seconds; all zero in sum-of-peaks mode). Run the plans with
	// Job.StartOffset set to these.
	StartOffsets []float64 `json:"start_offsets"`
	// Turns is whether joint mode's plans run with the jobs taking turns
	// by iterations (Job.Turns; start offsets are then zero): run them
	// with Job.Turns set on every job.
	Turns bool `json:"turns,omitempty"`
	// TurnKeys, when jobs that are not copies of one job take turns, pace
	// them (Job.TurnKeys: set each job's, or run them through Apply): the
	// times their iterations end interleaved, so a job of short
	// iterations takes several turns while a long one takes one. Such
	// jobs are timed and checked over a longer run (Horizon =
	// CheckIterations, 40 or more), each by its period over the
	// iterations it ends interleaved while every job still runs
	// (steadyCounts) against its interleaved period over the same. Nil:
	// one iteration each per round.
	TurnKeys [][]float64 `json:"turn_keys,omitempty"`
	// SumOfJobPeaks adds up each job's own predicted peak co-located.
	SumOfJobPeaks int64 `json:"sum_of_job_peaks"`
	// JobIterationSeconds is each job's last iteration, first op start to
	// last op end (what Execute reports as IterationSeconds after Horizon
	// iterations).
	JobIterationSeconds []float64 `json:"job_iteration_seconds"`
	// JobPeakBytes is each job's own predicted peak with its plan,
	// co-located; JobAlonePeakBytes its planned peak alone (sum-of-peaks
	// reserves their sum).
	JobPeakBytes      []int64 `json:"job_peak_bytes"`
	JobAlonePeakBytes []int64 `json:"job_alone_peak_bytes,omitempty"`
	// Jobs holds per-job planner statistics (sum-of-peaks: each job as
	// planned alone; joint: one entry for the combined plan).
	Jobs     []PlanStats   `json:"jobs"`
	Planning time.Duration `json:"planning_ns"`
}

// Apply returns copies of jobs set up to run as they were planned: each
// job's plan (when plans is not nil), start offset, turns and turn keys
// (Job.StartOffset, Job.Turns, Job.TurnKeys from StartOffsets, Turns and
// TurnKeys). Run joint mode's plans through it: jobs planned to take
// turns by keys run out of step without their keys.
func (st *JointStats) Apply(jobs []Job, plans []*Plan) []Job {
	run := append([]Job(nil), jobs...)
	for j := range run {
		if plans != nil {
			run[j].Plan = plans[j]
		}
		run[j].StartOffset, run[j].Turns, run[j].TurnKeys = 0, st.Turns, nil
		if j < len(st.StartOffsets) {
			run[j].StartOffset = st.StartOffsets[j]
		}
		if st.Turns && j < len(st.TurnKeys) {
			run[j].TurnKeys = st.TurnKeys[j]
		}
	}
	return run
}

// unplanned returns job j without what running it as planned sets up:
// its plan, start offset, turns and turn keys (the fields Apply sets).
func (j Job) unplanned() Job {
	j.Plan, j.StartOffset, j.Turns, j.TurnKeys = nil, 0, false, nil
	return j
}

// budgetShares splits a total budget among jobs in proportion to their
// vanilla peaks alone (sum: the sum of those peaks); one job gets it all.
func budgetShares(total int64, alone []*PeakReport, sum int64) []int64 {
	if len(alone) == 1 {
		return []int64{total}
	}
	shares := make([]int64, len(alone))
	for j, r := range alone {
		shares[j] = int64(float64(total) * float64(r.Bytes) / float64(sum))
	}
	return shares
}

// ownBudgets returns every job's own budget when each job has one and
// they add up to at most total.
func ownBudgets(jobs []Job, total int64) ([]int64, bool) {
	own := make([]int64, len(jobs))
	var sum int64
	for j, job := range jobs {
		if job.Budget <= 0 || job.Budget > total-sum {
			return nil, false
		}
		own[j] = job.Budget
		sum += job.Budget
	}
	return own, true
}

// anyJobBudget reports whether some job has its own budget.
func anyJobBudget(jobs []Job) bool {
	for _, j := range jobs {
		if j.Budget > 0 {
			return true
		}
	}
	return false
}

// PlanJobs plans the jobs sharing one GPU for target t. Job.Seconds (when
// set) are used as the op times; Job.Budget (when positive) is each job's
// own budget, which the plan must also respect; Job.StartOffset is ignored
// (joint mode chooses offsets and returns them in JointStats.StartOffsets).
// Plans are returned in job order. On ErrBudget the best plans found are
// still returned.
func PlanJobs(jobs []Job, p gpu.Profile, mode Mode, t Target) ([]*Plan, JointStats, error) {
	return PlanJobsMemo(jobs, p, mode, t, nil)
}

// PlanJobsMemo is PlanJobs with the jobs' solo plans looked up in memo
// (nil: none; see PlanMemo). The plans are the same as PlanJobs'.
func PlanJobsMemo(jobs []Job, p gpu.Profile, mode Mode, t Target, memo *PlanMemo) ([]*Plan, JointStats, error) {
	begin := time.Now()
	st := JointStats{Mode: mode}
	if len(jobs) == 0 {
		return nil, st, errors.New("tensile: no jobs to plan")
	}
	jobs = append([]Job(nil), jobs...)
	alone := make([]*PeakReport, len(jobs))
	for j := range jobs {
		jobs[j] = jobs[j].unplanned()
		rep, err := AnalyzePeak([]Job{{Name: jobs[j].Name, Graph: jobs[j].Graph, Seconds: jobs[j].Seconds}}, p)
		if err != nil {
			return nil, st, err
		}
		alone[j] = rep
		st.SumOfVanillaJobPeaks += rep.Bytes
	}
	var plans []*Plan
	var planErr error
	var checked int64 // joint, several jobs: the plans' high-water mark over the check run
	offsets := make([]float64, len(jobs))
	turns := false
	var keys [][]float64
	switch mode {
	case Joint:
		if t.Budget > 0 && t.Tolerance <= 0 && len(jobs) > 1 && !anyJobBudget(jobs) {
			// A total budget without a time cap: joint mode's solo
			// windows are planned to per-job budgets, so the total is
			// split among the jobs in proportion to their vanilla peaks
			// (as sum-of-peaks does); without them nothing would be
			// planned at all.
			for j, b := range budgetShares(t.Budget, alone, st.SumOfVanillaJobPeaks) {
				jobs[j].Budget = b
			}
		}
		var s PlanStats
		var err error
		plans, offsets, turns, keys, checked, s, err = planJoint(jobs, p, t, alone, memo)
		if err != nil && !errors.Is(err, ErrBudget) {
			return nil, st, err
		}
		planErr = err
		st.Jobs = []PlanStats{s}
	case SumOfPeaks:
		shares := make([]int64, len(jobs))
		switch own, ok := ownBudgets(jobs, t.Budget); {
		case ok:
			// Every job has its own budget and they fit the total (the
			// runtime's arbitrated budgets): those are the jobs' shares,
			// not a split in proportion to vanilla peaks, which would
			// hold a job whose minimum is a large part of its peak
			// (VGG16) below what it was granted.
			shares = own
		case t.Budget > 0:
			shares = budgetShares(t.Budget, alone, st.SumOfVanillaJobPeaks)
		}
		plans = make([]*Plan, len(jobs))
		for j := range jobs {
			job := jobs[j]
			tj := Target{Budget: shares[j], Tolerance: t.Tolerance, ResidentStart: t.ResidentStart}
			if job.Budget > 0 && (tj.Budget == 0 || job.Budget < tj.Budget) {
				tj.Budget = job.Budget
			}
			job.Budget = 0
			if k := copyOf(jobs, shares, j); k >= 0 {
				// A copy of an earlier job with the same share: same plan.
				plans[j] = plans[k]
				st.Jobs = append(st.Jobs, st.Jobs[k])
				st.JobAlonePeakBytes = append(st.JobAlonePeakBytes, st.JobAlonePeakBytes[k])
				st.ReservedBytes += st.JobAlonePeakBytes[k]
				continue
			}
			// One job alone is planned as PlanTensile plans it (see
			// planSolo1); several with the cheaper solo planner.
			ps, s, err := planTogetherMemo([]Job{job}, p, tj, len(jobs) == 1, memo)
			if len(jobs) > 1 && jobs[j].Budget > 0 && tj.Budget == jobs[j].Budget && errors.Is(err, ErrBudget) {
				// A budget of its own (the runtime sizes it by MinBudget,
				// which plans the job as PlanTensile does) that the cheaper
				// solo planner misses: plan the job as PlanTensile does.
				if rps, rs, rerr := planTogetherMemo([]Job{job}, p, tj, true, memo); rerr == nil || errors.Is(rerr, ErrBudget) && rs.PeakBytes < s.PeakBytes {
					ps, s, err = rps, rs, rerr
				}
			}
			if err != nil && !errors.Is(err, ErrBudget) {
				return nil, st, err
			}
			switch {
			case err != nil && planErr == nil:
				planErr = fmt.Errorf("job %q: %w", jobName(&jobs[j], j), err)
			case err != nil:
				// Every job over its share is named, not only the first.
				planErr = fmt.Errorf("%w; job %q: %v", planErr, jobName(&jobs[j], j), err)
			}
			plans[j] = ps[0]
			st.Jobs = append(st.Jobs, s)
			pk := max(s.PeakBytes, s.FirstIterationPeakBytes)
			st.JobAlonePeakBytes = append(st.JobAlonePeakBytes, pk)
			st.ReservedBytes += pk
		}
	default:
		return nil, st, fmt.Errorf("tensile: unknown mode %v", mode)
	}
	st.StartOffsets, st.Turns, st.TurnKeys = offsets, turns, keys
	// Predict the jobs running together, with and without the plans, over
	// Horizon iterations (jobs taking turns by keys: the check run).
	st.Horizon = simIterations
	if len(jobs) > 1 {
		st.Horizon = jointHorizon
		if keys != nil {
			// As long as planTurns ran them (the keys' length).
			st.Horizon = len(keys[0])
		}
	}
	m, err := newModel(jobs, p)
	if err != nil {
		return nil, st, err
	}
	m.sim.peaksOnly = true
	vr, err := m.sim.steadyN(nil, st.Horizon)
	if err != nil {
		return nil, st, err
	}
	st.VanillaPeakBytes, st.VanillaSeconds = vr.peak, vr.makespan
	// counts: turns by keys, each job's steady window (steadyCounts)
	// over the jobs interleaved, over which both sides are timed.
	var counts []int
	if keys != nil {
		counts = steadyCounts(simEnds(vr, st.Horizon))
	}
	secs := func(j int, sj *simJob) float64 {
		switch {
		case counts != nil:
			return sj.periodOver(counts[j])
		case len(jobs) > 1:
			return sj.iterSeconds()
		}
		return sj.lastEnd - sj.first
	}
	// Each job's reference time: co-located vanilla with the same start
	// offsets (a finite run of offset jobs has a first job that starts
	// alone and a last job that ends alone; the reference has the same).
	// Jobs taking turns are timed against the jobs interleaved from no
	// offsets, the run above (turnsReference; by keys, their interleaved
	// periods), and run their plans taking turns.
	vanSecs := make([]float64, len(jobs))
	if turns {
		for j, sj := range vr.jobs {
			vanSecs[j] = secs(j, sj)
		}
		jobs = st.Apply(jobs, nil)
		if m, err = newModel(jobs, p); err != nil {
			return nil, st, err
		}
		m.sim.peaksOnly = true
	} else {
		for j, ji := range m.jobs {
			ji.offset = offsets[j]
		}
		vo, err := m.sim.steadyN(nil, st.Horizon)
		if err != nil {
			return nil, st, err
		}
		for j, sj := range vo.jobs {
			vanSecs[j] = secs(j, sj)
		}
	}
	acts := make([][]Action, len(jobs))
	for j := range plans {
		if plans[j] != nil {
			acts[j] = plans[j].Actions
		}
	}
	pr, err := m.sim.steadyN(acts, st.Horizon)
	if err != nil {
		return nil, st, err
	}
	st.PeakBytes, st.Seconds, st.RunPeakBytes = pr.peak, pr.makespan, pr.firstPeak
	for _, sj := range pr.jobs {
		st.JobPeakBytes = append(st.JobPeakBytes, sj.peak)
		st.SumOfJobPeaks += sj.peak
		st.JobIterationSeconds = append(st.JobIterationSeconds, sj.lastEnd-sj.first)
	}
	for j, sj := range pr.jobs {
		e := 0.0
		if vanSecs[j] > 0 {
			e = secs(j, sj)/vanSecs[j] - 1
		}
		st.JobEOR = append(st.JobEOR, e)
		if keys != nil {
			// Turns by keys: no job ahead of its interleaved pace pays
			// for another's extra time (see verifyJoint).
			e = max(e, 0)
		}
		st.EOR += e / float64(len(jobs))
	}
	if mode == Joint {
		st.ReservedBytes = max(pr.peak, pr.firstPeak)
		if len(jobs) > 1 {
			// planJoint ran the chosen plans over the check run already
			// (verifyJoint): reserve that high-water mark.
			st.CheckIterations = jointCheckIterations
			if keys != nil {
				st.CheckIterations = st.Horizon
			}
			st.ReservedBytes = max(st.ReservedBytes, checked)
		}
	}
	if st.SumOfVanillaJobPeaks > 0 {
		st.MSR = 1 - float64(st.ReservedBytes)/float64(st.SumOfVanillaJobPeaks)
	}
	st.Planning = time.Since(begin)
	if planErr == nil && t.Budget > 0 && st.ReservedBytes > t.Budget {
		planErr = fmt.Errorf("%w: the jobs together need %s, budget %s", ErrBudget,
			gpu.FormatBytes(st.ReservedBytes), gpu.FormatBytes(t.Budget))
	}
	return plans, st, planErr
}

// planSolo1 plans joint mode's one job alone on the GPU, as PlanTensile
// (and sum-of-peaks, for one job) does: for t, or the job's own budget
// when that is tighter. The several-job modes plan their solo windows
// with jointSoloPaths, the exchange search only on the keeping path
// (like for like; see the README), but one job is compared with nothing,
// and the runtime sizes its budget by MinBudget, which the budget-first
// greedy alone cannot always reach (BERT-base b64 on the H100 at 20 %:
// 1.70 GiB answered, 2.46 GiB reached).
func planSolo1(job Job, p gpu.Profile, t Target, memo *PlanMemo) ([]*Plan, PlanStats, error) {
	tj := t
	if job.Budget > 0 && (tj.Budget == 0 || job.Budget < tj.Budget) {
		tj.Budget = job.Budget
	}
	job.Budget, job.Plan, job.StartOffset = 0, nil, 0
	return planTogetherMemo([]Job{job}, p, tj, true, memo)
}

// copyOf returns an earlier job that job j is a copy of (sameJob) with the
// same budget share, or -1.
func copyOf(jobs []Job, shares []int64, j int) int {
	for k := 0; k < j; k++ {
		if shares[k] == shares[j] && sameJob(&jobs[k], &jobs[j]) {
			return k
		}
	}
	return -1
}

// planJoint is joint mode. Candidates, each checked over jointHorizon
// iterations on the combined timeline:
//  1. every job's solo plan (planned alone, as sum-of-peaks plans it),
//     started together: joint reserves their combined peak, not the sum;
//  2. for solo plans made with the whole tolerance, warmHeadroom of it
//     and warmHeadroom² of it (leaving time for the combined timeline;
//     planned concurrently), start
//     offsets chosen on the combined timeline of those plans, then the
//     greedy on the combined timeline with the offsets, cutting the
//     device's peak over the whole run while every job's iteration time
//     stays within the tolerance of its vanilla co-located time (same
//     offsets); copies of a job get identical plans;
//  3. when candidate 1 is within the tolerance with room to spare
//     (eorMargin), instead of the first candidate of 2: the same at the
//     whole and warmHeadroom of a tolerance equal to candidate 1's mean
//     EOR (every job within it, so their mean is too). The combined
//     greedy at the whole tolerance takes more time than the solo plans
//     then (copies of a model: the EOR guard below rejects it, and the
//     headroom fractions undershoot; jobs of different lengths, the
//     five-model mix: slowed unevenly); these spend the solo plans' time
//     (three ResNet-50s on an RTX 2080 Ti at 10 %: 1.97 GiB reserved at
//     EOR 0.043 against sum-of-peaks' 0.075, 1.76 GiB at 0.072 with
//     them).
//  4. for a time tolerance without budgets (unless Target.NoTurns): the
//     jobs taking turns by iterations, each running its solo plan made for
//     sum-of-peaks' EOR (planTurns), timed against the jobs interleaved;
//     jobs that are not copies take turns paced by keys, over a longer
//     run (pacedIterations) and with more candidates, the greedy on their
//     turns' timeline among them.
//
// The candidate reserving the least within the tolerance, at a mean EOR no
// higher than candidate 1's, wins (pickJoint). Without budgets candidate 1
// runs exactly sum-of-peaks' plans, with sum-of-peaks' EOR, and reserves
// their combined peak, at most the sum of their own peaks: joint saves at
// least as much memory as sum-of-peaks at no more extra time.
func planJoint(jobs []Job, p gpu.Profile, t Target, alone []*PeakReport, memo *PlanMemo) ([]*Plan, []float64, bool, [][]float64, int64, PlanStats, error) {
	zero := make([]float64, len(jobs))
	if len(jobs) == 1 {
		// One job: planned alone, as sum-of-peaks and PlanTensile plan
		// it (with the exchange search, and the least-peak plan when the
		// budget-first greedy stops short of a budget MinBudget answered).
		pl, st, err := planSolo1(jobs[0], p, t, memo)
		return pl, zero, false, nil, 0, st, err
	}
	fracs := []float64{1, warmHeadroom, warmHeadroom * warmHeadroom}
	if t.Tolerance <= 0 {
		// Every fraction of no tolerance is the same: one candidate
		// (budget targets without a time cap, as the runtime plans).
		fracs = fracs[:1]
	}
	refs := &refCache{}
	cands := make([]jointCand, 1+len(fracs))
	verify := func(c *jointCand) {
		c.res, c.slow, c.eor, c.fail = verifyJoint(jobs, p, c.plans, c.offsets, jointHorizon, jointCheckIterations, refs)
	}
	// plan makes candidate c: solo plans at fraction frac of tolerance
	// tt.Tolerance (ws when given), offsets, then the combined greedy.
	plan := func(c *jointCand, tt Target, frac float64, ws *warmStart) {
		if ws == nil {
			var err error
			at := tt
			at.Tolerance = frac * tt.Tolerance
			w, err := soloWindows(jobs, p, at, false, nil)
			if err != nil {
				c.fail = err
				return
			}
			ws = &w
		}
		oh := offsetHorizon
		if frac >= warmHeadroom && tt.Budget <= 0 && tt.Tolerance > 0 && tt.Tolerance == t.Tolerance {
			oh = offsetHorizonLong
		}
		offsets, err := chooseOffsets(jobs, p, alone, *ws, tt, refs, oh)
		if err != nil {
			c.fail = err
			return
		}
		withOff := append([]Job(nil), jobs...)
		for j := range withOff {
			withOff[j].StartOffset = offsets[j]
		}
		pl, st, err := planWindows(withOff, p, tt, *ws, jointHorizon)
		if pl == nil {
			c.fail = err
			return
		}
		c.plans, c.offsets, c.st, c.err = pl.output(), offsets, st, err
		verify(c)
	}
	// The candidates are independent: plan them concurrently, the other
	// fractions while the solo plans at the whole tolerance (which
	// candidates 0 and 1 share) are made and checked.
	var wg sync.WaitGroup
	for i := 1; i < len(fracs); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			plan(&cands[1+i], t, fracs[i], nil)
		}()
	}
	warm, err := soloWindows(jobs, p, t, true, memo)
	if err != nil {
		wg.Wait()
		return nil, nil, false, nil, 0, PlanStats{}, err
	}
	// Candidate 0: every job's solo plan, started together.
	m, err := newModel(jobs, p)
	if err != nil {
		wg.Wait()
		return nil, nil, false, nil, 0, PlanStats{}, err
	}
	cands[0] = jointCand{plans: warmPlanner(m, t, warm).output(), offsets: zero}
	// Only a time tolerance without a budget may plan candidates 3, and
	// only candidate 0's EOR says whether: otherwise plan candidate 1
	// while candidate 0 is checked.
	mayMore := t.Budget <= 0 && t.Tolerance > 0
	if !mayMore {
		wg.Add(1)
		go func() {
			defer wg.Done()
			plan(&cands[1], t, 1, &warm)
		}()
	}
	verify(&cands[0])
	c0 := &cands[0]
	// Candidate 4, taking turns (planTurns): only for a time tolerance
	// without budgets, the device's or a job's own (the runtime's budget
	// targets run their plans interleaved).
	var turnCands []jointCand
	if mayMore && !anyJobBudget(jobs) && !t.NoTurns && c0.fail == nil {
		tau := t.Tolerance
		if c0.slow <= 1+t.Tolerance+1e-9 {
			tau = min(tau, c0.eor)
		}
		if tau > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				turnCands = planTurns(jobs, p, t, tau, memo, refs)
			}()
		}
	}
	if mayMore && c0.fail == nil && c0.eor < t.Tolerance-eorMargin && c0.eor > eorMargin {
		// Candidates 3 instead of candidate 1, whose greedy from the solo
		// plans spends the tolerance they leave, more time than they
		// take: the EOR guard rejects it.
		tt := t
		tt.Tolerance = c0.eor
		more := make([]jointCand, 2)
		for i, f := range []float64{1, warmHeadroom} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				plan(&more[i], tt, f, nil)
			}()
		}
		wg.Wait()
		cands = append(cands[:1], append(cands[2:], more...)...)
	} else {
		if mayMore {
			plan(&cands[1], t, 1, &warm)
		}
		wg.Wait()
	}
	cands = append(cands, turnCands...)
	for _, c := range cands {
		if c.fail != nil {
			return nil, nil, false, nil, 0, PlanStats{}, c.fail
		}
	}
	// Tolerance 0 is no time cap only beside a budget (target a); without
	// one it is the least peak at no extra time (target b), as the
	// planner's own limit has it.
	capped := t.Tolerance > 0 || (t.Budget <= 0 && !anyJobBudget(jobs))
	c := &cands[pickJoint(cands, t.Tolerance, capped)]
	return c.plans, c.offsets, c.turns, c.keys, c.res, c.st, c.err
}

// warmPlanner returns a planner for m's jobs holding the windows and keep
// tables of w (solo plans made by soloWindows), planned for t.
func warmPlanner(m *model, t Target, w warmStart) *planner {
	pl := newPlanner(m, t)
	for _, win := range w.wins {
		pl.addOne(win)
	}
	pl.setKeeps(w.keep)
	return pl
}

// turnFracs are the fractions of planTurns' tolerance its candidates'
// solo plans are made with, in order until one is within it: the whole,
// then a little less for when the copy engines shared at the turns'
// boundaries add a little time. keyedTurnFracs are those of jobs taking
// turns by keys, whose times scatter a little about their plans' extra
// time (see planTurns).
var (
	turnFracs      = []float64{1, 0.9}
	keyedTurnFracs = []float64{1, 0.9, 0.75, 0.5}
)

// planTurns makes joint mode's candidate that takes turns (Job.Turns): the
// jobs run whole iterations one at a time, so only one job's activations
// are on the device at a time while the others hold what they keep
// between iterations (the published approach assumes every job peaks at
// once; interleaved offsets only shift peaks that drift back together).
// Every job runs its solo plan (the plans sum-of-peaks makes) made for tol
// × the first fraction of turnFracs whose candidate is within tol: in its
// turn a job runs as alone, so its plan's extra time is its extra time in
// the round (jobs taking turns by keys also get the greedy's plans, below). tol is sum-of-peaks' EOR (or the tolerance when that is
// less), so that the candidate takes no more time than sum-of-peaks'
// plans. Its jobs are timed against the jobs interleaved
// (turnsReference).
//
// Copies of one job take one turn each per round, in job order, timed
// over the horizon. Other jobs' iterations differ in length (the
// five-model mix: 13 to 36 ms alone on an RTX 2080 Ti), and interleaved a
// job of short iterations runs several while a long one runs one: they
// take turns by keys (Job.TurnKeys), the times their iterations end
// interleaved (turnKeys), each turn going to the job whose next iteration
// ends first there. Without plans every
// iteration then ends no later than interleaved (the GPU runs one op at a
// time either way, and the turns replay the interleaved order without
// the waits). They are planned, timed and checked over a run of
// pacedIterations (at least the check run), each job by its period over
// its steady window (steadyCounts: its iterations that end interleaved
// while every job still runs) against its interleaved period over the
// same iterations: over the horizon a job of long iterations runs its few
// while the short ones wait, which the first iteration's end flatters or
// penalises by a whole round, and over a whole run the jobs that run on
// alone at its end hide the plans' extra time. Their per-job times
// scatter about 1 % about the plans' extra time, so the candidate holds
// the mean to tol and each job to the tolerance, as pickJoint holds every
// candidate, with more fractions (keyedTurnFracs), and the greedy on
// their timeline from solo plans at no extra time. It returns no candidate when none is within
// tol (a greedy on the round-robin timeline from zero-extra-time plans was
// tried for mixes and never qualified against the interleaved reference).
func planTurns(jobs []Job, p gpu.Profile, t Target, tol float64, memo *PlanMemo, refs *refCache) []jointCand {
	tj := append([]Job(nil), jobs...)
	var keys [][]float64
	iters, fracs, slowTol := jointHorizon, turnFracs, tol
	if slices.ContainsFunc(jobs[1:], func(j Job) bool { return !sameJob(&jobs[0], &j) }) {
		k40, err := turnKeys(jobs, p, jointCheckIterations)
		if err != nil {
			return nil
		}
		iters = pacedIterations(k40)
		if keys = k40; iters > jointCheckIterations {
			if keys, err = turnKeys(jobs, p, iters); err != nil {
				return nil
			}
		}
		fracs, slowTol = keyedTurnFracs, max(tol, t.Tolerance)
	}
	for j := range tj {
		tj[j].Turns = true
		if keys != nil {
			tj[j].TurnKeys = keys[j]
		}
	}
	zero := make([]float64, len(jobs))
	ok := func(c *jointCand) bool {
		c.res, c.slow, c.eor, c.fail = verifyJoint(tj, p, c.plans, zero, iters, jointCheckIterations, refs)
		return c.fail == nil && c.eor <= tol+1e-9 && c.slow <= 1+slowTol+1e-9
	}
	// Jobs taking turns by keys also get the greedy on the turns'
	// timeline from their solo plans at no extra time (planned beside the
	// fractions' candidates): their plans then spend the time where the
	// device peaks, in the turns of the job whose activations are largest
	// (the five-model mix: 3.02 GiB reserved on the H100 at EOR 0.018, the
	// solo plans' candidate more at a higher EOR).
	var greedy []jointCand
	var wg sync.WaitGroup
	if keys != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := t
			at.Tolerance = 0
			w, err := soloWindows(jobs, p, at, true, memo)
			if err != nil {
				return
			}
			gt := t
			gt.Tolerance = tol
			if pl, _, _ := planWindows(tj, p, gt, w, iters); pl != nil {
				c := jointCand{plans: pl.output(), offsets: zero, turns: true, keys: keys}
				if ok(&c) {
					greedy = append(greedy, c)
				}
			}
		}()
	}
	var out []jointCand
	for _, f := range fracs {
		at := t
		at.Tolerance = f * tol
		w, err := soloWindows(jobs, p, at, true, memo)
		if err != nil {
			break
		}
		m, err := newModel(tj, p)
		if err != nil {
			break
		}
		c := jointCand{plans: warmPlanner(m, t, w).output(), offsets: zero, turns: true, keys: keys}
		if ok(&c) {
			out = append(out, c)
			break
		}
	}
	wg.Wait()
	return append(out, greedy...)
}

// pacedSteady is how many iterations each job's steady window
// (steadyCounts) should hold when jobs take turns by keys, and
// pacedMaxIterations the longest run they are timed over for it.
const (
	pacedSteady        = 8
	pacedMaxIterations = 320
)

// pacedIterations returns how many iterations jobs taking turns by keys
// are planned, timed and checked over: the check run, lengthened so that
// the job of the slowest pace ends about pacedSteady iterations while
// every job is still running interleaved (keys: turnKeys over the check
// run, whose mean spacing is each job's pace), at most pacedMaxIterations.
// The five-model mix: 117 iterations (DenseNet-121 b2 takes 13
// times as long per iteration as VGG-16 b2 interleaved).
func pacedIterations(keys [][]float64) int {
	lo, hi := math.Inf(1), 0.0
	for _, k := range keys {
		pace := turnKey(k, len(k)) - turnKey(k, len(k)-1)
		lo, hi = min(lo, pace), max(hi, pace)
	}
	if lo <= 0 || math.IsInf(lo, 1) {
		return jointCheckIterations
	}
	n := int(math.Ceil(1.1 * pacedSteady * hi / lo))
	return min(max(n, jointCheckIterations), pacedMaxIterations)
}

// eorMargin is how far below the tolerance (and above zero) the EOR of
// sum-of-peaks' plans must be for joint mode to plan again within it.
const eorMargin = 0.005

// jointCand is one candidate of planJoint.
type jointCand struct {
	plans   []*Plan
	offsets []float64
	st      PlanStats
	err     error // the planner's (ErrBudget)
	fail    error // planning or verifying failed
	// turns: the jobs take turns by iterations (Job.Turns; offsets zero),
	// paced by keys when set (Job.TurnKeys).
	turns bool
	keys  [][]float64
	// res, slow and eor are verifyJoint's.
	res  int64
	slow float64
	eor  float64
}

// pickJoint chooses among planJoint's candidates (cands[0]: the solo
// plans started together, sum-of-peaks' plans when no budget applies).
// A candidate qualifies when every job stays within the tolerance and
// its mean EOR is no more than cands[0]'s (when cands[0] is itself within
// the tolerance): joint mode never buys memory with more time than
// sum-of-peaks' plans take together. The qualifying candidate reserving
// the least wins (the earlier on ties); when none qualifies, the one
// whose slowest job is least slow. Without capped (a budget target with
// tolerance 0) every candidate is within the tolerance. It returns the
// winner's index.
func pickJoint(cands []jointCand, tol float64, capped bool) int {
	within := func(slow float64) bool { return !capped || slow <= 1+tol+1e-9 }
	guard := within(cands[0].slow)
	ok := func(c *jointCand) bool {
		return within(c.slow) && (!guard || c.eor <= cands[0].eor+1e-9)
	}
	best := -1
	for i := range cands {
		c := &cands[i]
		if best < 0 {
			best = i
			continue
		}
		b := &cands[best]
		cOK, bOK := ok(c), ok(b)
		switch {
		case cOK && !bOK, cOK && bOK && c.res < b.res, !cOK && !bOK && c.slow < b.slow:
			best = i
		}
	}
	return best
}

// warmHeadroom is the fraction of the tolerance the second set of solo
// plans joint mode starts from may use: the rest is left to the greedy on
// the combined timeline (offset co-located jobs share the copy engines
// differently from a job alone).
const warmHeadroom = 0.6

// soloWindows plans every job alone (once per distinct job) for the least
// peak within t.Tolerance, or its own budget (t.Budget is not used;
// t.ResidentStart is), and returns the windows, each job's under its
// index, with the jobs' keep tables. With asSum the plans are exactly
// those sum-of-peaks makes (planSolo: the best of several greedy step
// sizes and, for a graph with concatenations, the keeping path, whose
// kept inputs only the keep tables hold); otherwise one greedy run per
// job (cheaper).
func soloWindows(jobs []Job, p gpu.Profile, t Target, asSum bool, memo *PlanMemo) (warmStart, error) {
	type jobKey struct {
		g      *workload.Graph
		secs   *float64
		budget int64
	}
	type soloWins struct {
		wins []window
		keep []int32
	}
	solo := map[jobKey]soloWins{}
	var warm warmStart
	for j := range jobs {
		k := jobKey{g: jobs[j].Graph, budget: jobs[j].Budget}
		if len(jobs[j].Seconds) > 0 {
			k.secs = &jobs[j].Seconds[0]
		}
		sw, ok := solo[k]
		if !ok {
			job := jobs[j]
			tj := Target{Tolerance: t.Tolerance, ResidentStart: t.ResidentStart}
			if job.Budget > 0 {
				tj.Budget = job.Budget
			}
			job.Budget, job.StartOffset = 0, 0
			if asSum {
				sp := memo.solo(job, p, tj, false)
				if !sp.ok {
					return warmStart{}, sp.err
				}
				sw = soloWins{sp.wins, sp.keep}
			} else {
				pl, _, err := planWindows([]Job{job}, p, tj, warmStart{}, simIterations)
				if pl == nil {
					return warmStart{}, err
				}
				sw = soloWins{pl.wins, pl.keepOf(0)}
			}
			solo[k] = sw
		}
		for _, w := range sw.wins {
			w.job = int32(j)
			warm.wins = append(warm.wins, w)
		}
		if sw.keep != nil {
			if warm.keep == nil {
				warm.keep = make([][]int32, len(jobs))
			}
			warm.keep[j] = sw.keep
		}
	}
	return warm, nil
}

// verifyJoint runs jobs with plans from offsets for iters iterations on the
// planner's model and returns the device high-water mark over a run of
// check iterations (at least iters: what joint mode reserves), the
// slowest job's mean iteration time over the first iters over its time
// without plans (same offsets), and the mean over jobs of that ratio
// minus one (the EOR PlanJobs reports; jobs taking turns by keys count no
// job below its reference, see below). The two runs are simulated in one
// pass (simulator.runMarked).
func verifyJoint(jobs []Job, p gpu.Profile, plans []*Plan, offsets []float64, iters, check int, refs *refCache) (int64, float64, float64, error) {
	m, err := newModel(jobs, p)
	if err != nil {
		return 0, 0, 0, err
	}
	m.sim.peaksOnly = true
	for j, ji := range m.jobs {
		ji.offset = offsets[j]
	}
	var ref []float64
	var counts []int // turns by keys: the steady windows (steadyCounts)
	if m.turns {
		// Jobs taking turns are timed against the jobs interleaved
		// (turnsReference).
		ref, counts, err = turnsReference(jobs, p, iters, refs)
	} else {
		ref, err = refs.get(m, iters)
	}
	if err != nil {
		return 0, 0, 0, err
	}
	acts := make([][]Action, len(jobs))
	for j := range plans {
		if plans[j] != nil {
			acts[j] = plans[j].Actions
		}
	}
	var high int64
	var slow, eor float64
	// Jobs taking turns by keys: a job ahead of its interleaved pace (a
	// short job, whose iterations end early over a finite run while the
	// turns replay the interleaved order without its waits) does not pay
	// for another's extra time; eor counts each job at no less than its
	// reference.
	keyed := counts != nil
	// times adds each job's time in r (secs) over its reference to slow
	// and eor.
	times := func(r *simResult, secs func(int, *simJob) float64) {
		for j, sj := range r.jobs {
			if ref[j] > 0 {
				x := secs(j, sj) / ref[j]
				slow = math.Max(slow, x)
				if keyed {
					x = max(x, 1)
				}
				eor += (x - 1) / float64(len(r.jobs))
			}
		}
	}
	var horizonErr error
	horizon := func(r *simResult) {
		if horizonErr = r.err; r.err != nil {
			return
		}
		times(r, func(j int, sj *simJob) float64 {
			if keyed {
				return sj.periodOver(counts[j])
			}
			return sj.iterSeconds()
		})
		high = max(r.peak, r.firstPeak)
	}
	if m.turns && check > iters {
		// Jobs taking turns run the horizon's iterations in the check
		// run exactly as in a run of their own (the first job's next
		// iteration starts when the last ends its iters-th): one run of
		// check iterations, the horizon's times read off it.
		r, err := m.sim.steadyN(acts, check)
		if err != nil {
			return 0, 0, 0, err
		}
		times(r, func(_ int, sj *simJob) float64 { return sj.periodOver(iters) })
		return max(r.peak, r.firstPeak), slow, eor, nil
	}
	if check <= iters {
		r, err := m.sim.steadyN(acts, iters)
		if err != nil {
			return 0, 0, 0, err
		}
		horizon(r)
		return high, slow, eor, nil
	}
	r := m.sim.runMarked(acts, iters, check, horizon)
	if horizonErr != nil {
		return 0, 0, 0, horizonErr
	}
	if r.err != nil {
		return 0, 0, 0, r.err
	}
	return max(high, r.peak, r.firstPeak), slow, eor, nil
}

// chooseOffsets picks each job's start offset on the combined timeline of
// the jobs running the plans of windows over iters iterations: from
// all-zero offsets or copies spread evenly over a solo iteration, whichever
// is better, then for every job but the first in turn (offsetPasses), the
// phase fraction k/phaseSteps of its solo iteration time that gives the
// least combined peak over the whole run while every job stays within the
// time tolerance (t.Tolerance) of its vanilla time with the same offsets;
// the smaller offset on ties. The plans start tensors on the host unless
// t.ResidentStart is set.
func chooseOffsets(jobs []Job, p gpu.Profile, alone []*PeakReport, windows warmStart, t Target, refs *refCache, iters int) ([]float64, error) {
	tol := t.Tolerance
	m, err := newModel(jobs, p)
	if err != nil {
		return nil, err
	}
	m.sim.peaksOnly = true
	pl := warmPlanner(m, Target{ResidentStart: t.ResidentStart}, windows)
	pl.buildPlans()
	offsets := make([]float64, len(jobs))
	// eval scores the offsets: the whole-run peak, or more than any score
	// within the tolerance when over it. A trial can only replace best
	// when it scores no more, so with best within the tolerance a run
	// stops (scoring rejected) once its peak passes it. The reference
	// times the tolerance is checked against (vanilla co-located from the
	// same offsets) are simulated only for a trial that ran to its end:
	// one stopped early is rejected whatever its times.
	var best int64 = -1
	const rejected = math.MaxInt64
	var secs []float64
	eval := func() (int64, error) {
		for j, ji := range m.jobs {
			ji.offset = offsets[j]
		}
		if best >= 0 && best < math.MaxInt64/2 {
			m.sim.abort = simAbort{peak: best, wholeRun: true}
		}
		r, err := m.sim.steadyN(pl.plans, iters)
		m.sim.abort = simAbort{}
		if errors.Is(err, errAborted) {
			return rejected, nil
		}
		if err != nil {
			return 0, err
		}
		pk := max(r.peak, r.firstPeak)
		if tol <= 0 {
			return pk, nil
		}
		// r is the simulator's: read it before the references run.
		secs = secs[:0]
		for _, sj := range r.jobs {
			secs = append(secs, sj.iterSeconds())
		}
		ref, err := refs.get(m, iters)
		if err != nil {
			return 0, err
		}
		for j, s := range secs {
			if ref[j] > 0 && s/ref[j] > 1+tol+1e-9 {
				return math.MaxInt64/2 + pk, nil // over the tolerance
			}
		}
		return pk, nil
	}
	best, err = eval()
	if err != nil {
		return nil, err
	}
	// Also start from copies spread evenly over a solo iteration (the
	// i-th of n copies of a job at i/n of it), which coordinate steps from
	// all-zero offsets may not reach.
	spread := make([]float64, len(jobs))
	seen := map[*workload.Graph]int{}
	count := map[*workload.Graph]int{}
	for j := range jobs {
		count[jobs[j].Graph]++
	}
	for j := range jobs {
		g := jobs[j].Graph
		spread[j] = alone[j].Seconds * float64(seen[g]) / float64(count[g])
		seen[g]++
	}
	zero := offsets
	offsets = spread
	if slices.Equal(spread, zero) {
		// No job has a copy: the spread is all-zero offsets, which
		// scored best already (the same run would score the same).
		offsets = zero
	} else if pk, err := eval(); err != nil {
		return nil, err
	} else if pk < best {
		best = pk
	} else {
		offsets = zero
	}
	for pass := 0; pass < offsetPasses; pass++ {
		improved := false
		for j := 1; j < len(jobs); j++ {
			cur := offsets[j]
			for k := 0; k < phaseSteps; k++ {
				o := alone[j].Seconds * float64(k) / phaseSteps
				if o == cur {
					continue
				}
				offsets[j] = o
				pk, err := eval()
				if err != nil {
					return nil, err
				}
				if pk < best || (pk == best && o < cur) {
					best, cur, improved = pk, o, true
				}
			}
			offsets[j] = cur
		}
		if !improved {
			break
		}
	}
	return offsets, nil
}

// turnsReference returns the reference times of jobs taking turns: each
// job's mean iteration time without plans, interleaved (no turns, no
// offsets; what the GPU does by default and what candidate 0 is timed
// against). Vanilla taking turns would hide what turns cost a short job:
// interleaved, a job of short iterations runs many of them while a long
// one runs one, and taking turns it runs one per round (an MLP beside a
// ResNet-50 took 20 times as long per iteration).
func turnsReference(jobs []Job, p gpu.Profile, iters int, refs *refCache) ([]float64, []int, error) {
	m, err := interleavedModel(jobs, p)
	if err != nil {
		return nil, nil, err
	}
	if jobs[0].TurnKeys != nil && iters > 1 {
		// Jobs taking turns by keys: their interleaved periods over
		// their steady windows (steadyCounts, see planTurns).
		return refs.getPeriods(m, iters)
	}
	ref, err := refs.get(m, iters)
	return ref, nil, err
}

// refCache holds each job's vanilla iteration time (simJob.iterSeconds)
// co-located from given start offsets over given iterations: the
// reference of the time tolerance, the same for every candidate plan with
// those offsets, so concurrent candidates share it (one of them simulates
// a key while the others wait for it). Entries are pure functions of their
// key, so sharing does not make results depend on scheduling.
type refCache struct {
	mu sync.Mutex
	m  map[string]*refEntry
}

type refEntry struct {
	done chan struct{}
	ref  []float64
	// counts: getPeriods' steady windows (steadyCounts).
	counts []int
	err    error
}

// get returns the reference times of m's jobs at their offsets over iters
// iterations, simulating them on m's simulator when not cached.
func (c *refCache) get(m *model, iters int) ([]float64, error) {
	e, err := c.lookup(m, iters, false)
	if err != nil {
		return nil, err
	}
	return e.ref, nil
}

// getPeriods is get with the jobs' periods over their steady windows
// (steadyCounts, which it also returns) instead of their mean iteration
// times: the reference of jobs taking turns by keys.
func (c *refCache) getPeriods(m *model, iters int) ([]float64, []int, error) {
	e, err := c.lookup(m, iters, true)
	if err != nil {
		return nil, nil, err
	}
	return e.ref, e.counts, nil
}

func (c *refCache) lookup(m *model, iters int, periods bool) (*refEntry, error) {
	key := make([]byte, 0, 8*(len(m.jobs)+1)+2)
	key = binary.LittleEndian.AppendUint64(key, uint64(iters))
	if m.turns {
		key = append(key, 't')
	}
	if periods {
		key = append(key, 'p')
	}
	for _, ji := range m.jobs {
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(ji.offset))
	}
	c.mu.Lock()
	e, ok := c.m[string(key)]
	if !ok {
		if c.m == nil {
			c.m = map[string]*refEntry{}
		}
		e = &refEntry{done: make(chan struct{})}
		c.m[string(key)] = e
	}
	c.mu.Unlock()
	if ok {
		<-e.done
		if e.err != nil {
			return nil, e.err
		}
		return e, nil
	}
	defer close(e.done)
	vr, err := m.sim.steadyN(nil, iters)
	if err != nil {
		e.err = err
		return nil, err
	}
	e.ref = make([]float64, len(vr.jobs))
	if periods {
		e.counts = steadyCounts(simEnds(vr, iters))
	}
	for j, sj := range vr.jobs {
		e.ref[j] = sj.iterSeconds()
		if periods {
			e.ref[j] = sj.periodOver(e.counts[j])
		}
	}
	return e, nil
}

// simEnds returns when each job's first iters iterations ended in r.
func simEnds(r *simResult, iters int) [][]float64 {
	ends := make([][]float64, len(r.jobs))
	for j, sj := range r.jobs {
		ends[j] = make([]float64, iters)
		for k := range ends[j] {
			ends[j][k] = sj.its[k].lastEnd
		}
	}
	return ends
}

// steadyCounts returns, for jobs run interleaved (ends: when each job's
// iterations ended), each job's steady window: how many of its first
// iterations end while every job is still running (by the first job's last
// iteration end; at least 2, at most all). Jobs taking turns by keys are
// timed by their periods over these iterations on both sides: after the
// first job ends its run the others speed up interleaved, and taking turns
// the short jobs end early, so a whole finite run would credit the plans'
// extra time to whoever runs on alone (the five-model mix over 40
// iterations: EOR 0.010 on the H100, 0.018 over 150).
func steadyCounts(ends [][]float64) []int {
	counts := endedWhileAllRun(ends)
	for j, e := range ends {
		counts[j] = min(max(counts[j], 2), len(e))
	}
	return counts
}

// endedWhileAllRun returns how many of each job's first iterations end by
// the first job's last iteration end (ends: when each job's iterations
// ended).
func endedWhileAllRun(ends [][]float64) []int {
	cut := math.Inf(1)
	for _, e := range ends {
		if len(e) > 0 {
			cut = min(cut, e[len(e)-1])
		}
	}
	counts := make([]int, len(ends))
	for j, e := range ends {
		for counts[j] < len(e) && e[counts[j]] <= cut {
			counts[j]++
		}
	}
	return counts
}

// meanPeriod is the mean time between the ends of a job's first c
// iterations (ends: when its iterations ended), 0 for fewer than 2.
func meanPeriod(ends []float64, c int) float64 {
	if c < 2 || c > len(ends) {
		return 0
	}
	return (ends[c-1] - ends[0]) / float64(c-1)
}

// interleavedModel is the planner's model of jobs interleaved without
// plans from no offsets (no turns, no keys), simulating peaks only: the
// reference of jobs taking turns (turnsReference) and their keys
// (interleavedEnds).
func interleavedModel(jobs []Job, p gpu.Profile) (*model, error) {
	inter := append([]Job(nil), jobs...)
	for j := range inter {
		inter[j] = inter[j].unplanned()
	}
	m, err := newModel(inter, p)
	if err != nil {
		return nil, err
	}
	m.sim.peaksOnly = true
	return m, nil
}

// interleavedEnds returns when each job's iterations end (seconds from
// the start) when the jobs run iters iterations interleaved without plans
// from no offsets: the keys that pace jobs taking turns (Job.TurnKeys).
func interleavedEnds(jobs []Job, p gpu.Profile, iters int) ([][]float64, error) {
	m, err := interleavedModel(jobs, p)
	if err != nil {
		return nil, err
	}
	r, err := m.sim.steadyN(nil, iters)
	if err != nil {
		return nil, err
	}
	return simEnds(r, iters), nil
}

// turnKeys returns the keys of jobs taking turns by keys (Job.TurnKeys)
// for n iterations: when the jobs' iterations end interleaved without
// plans over n iterations each, while every job is still running; from
// the end of the first job's last iteration on (after it the others speed
// up), each job's keys go on at its pace until then, which turnKey also
// carries on past the last key. So a job's turns keep its steady
// interleaved pace however long the jobs run (the runtime runs them until
// it plans again).
func turnKeys(jobs []Job, p gpu.Profile, n int) ([][]float64, error) {
	ends, err := interleavedEnds(jobs, p, n)
	if err != nil {
		return nil, err
	}
	for j, c := range endedWhileAllRun(ends) {
		e := ends[j]
		if c == 0 || c == n {
			continue
		}
		pace := e[0]
		if c > 1 {
			pace = meanPeriod(e, c)
		}
		for k := c; k < n; k++ {
			e[k] = e[c-1] + float64(k-c+1)*pace
		}
	}
	return ends, nil
}
