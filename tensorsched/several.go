package tensorsched

import (
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/gpu"
)

// SeveralResult is several co-located jobs running their plans, measured
// on the executor under the several-job accounting (see joint.go):
//
//   - every job runs Horizon iterations back to back; joint plans from
//     their start offsets, every other plan (sum-of-peaks, the baselines)
//     with none;
//   - ReservedBytes covers a run of CheckIterations (the plans run on
//     past the horizon: phases drift): joint reserves the device's
//     high-water mark over it; every other policy plans the jobs one by
//     one, so the GPU must reserve each job's own peak: the sum of the
//     jobs' own high-water marks over it (JobResult.RunPeakBytes). On the
//     same run the sum is never below the device's mark;
//   - MSR = 1 − ReservedBytes / SumOfVanillaJobPeaks, a job's vanilla peak
//     being its peak alone without a plan;
//   - EOR = mean over jobs of (the job's mean iteration time with the plans
//     / its mean iteration time co-located without plans, same offsets and
//     iterations) − 1; CBR = MSR / max(EOR, EORFloor). Jobs taking turns
//     by keys are timed by their periods over their steady windows
//     (steadyCounts) on both sides, and count at no less than 0.
type SeveralResult struct {
	// Joint is whether the plans ran from joint mode's start offsets.
	Joint bool `json:"joint"`
	// Turns is whether the jobs took turns by iterations (joint mode's
	// JointStats.Turns): a job's mean iteration time with the plans is
	// then its period (JobResult.PeriodSeconds), against its mean
	// iteration time interleaved without plans or offsets (by keys,
	// JointStats.TurnKeys: its period over its steady window, from
	// JobResult.IterationEnds, on both sides).
	Turns bool `json:"turns,omitempty"`
	// PacedTurns is whether their turns were paced by keys (joint mode's
	// JointStats.TurnKeys: jobs whose iterations differ in length).
	PacedTurns bool `json:"paced_turns,omitempty"`
	// Horizon is how many iterations every run took.
	Horizon      int       `json:"horizon"`
	StartOffsets []float64 `json:"start_offsets"`
	// ReservedBytes is what the GPU reserves for the jobs (see above);
	// CheckIterations how long a run the reservation covers (several
	// jobs).
	ReservedBytes        int64 `json:"reserved_bytes"`
	CheckIterations      int   `json:"check_iterations,omitempty"`
	SumOfVanillaJobPeaks int64 `json:"sum_of_vanilla_job_peaks"`
	// PeakBytes is the device peak of the last (steady) iteration with the
	// plans, RunPeakBytes the device's high-water mark over the whole run.
	PeakBytes    int64 `json:"peak_bytes"`
	RunPeakBytes int64 `json:"run_peak_bytes"`
	// VanillaPeakBytes is the device peak of the last iteration of the
	// jobs co-located without plans or offsets; VanillaRunPeakBytes the
	// same over the whole run.
	VanillaPeakBytes    int64 `json:"vanilla_peak_bytes"`
	VanillaRunPeakBytes int64 `json:"vanilla_run_peak_bytes"`
	// Seconds is the makespan of the last iteration with the plans,
	// VanillaSeconds without (same offsets).
	Seconds        float64 `json:"seconds"`
	VanillaSeconds float64 `json:"vanilla_seconds"`
	Metrics
	SwappedBytes  int64        `json:"swapped_bytes"`
	RecomputedOps int          `json:"recomputed_ops"`
	Jobs          []SeveralJob `json:"jobs"`
	// Result is the executor's result of the run with the plans.
	Result *Result `json:"-"`
}

// SeveralJob is one job of a SeveralResult.
type SeveralJob struct {
	Name string `json:"name"`
	// VanillaPeakBytes is the job's peak alone, without a plan.
	VanillaPeakBytes int64 `json:"vanilla_peak_bytes"`
	// PeakBytes is its own peak in the last iteration with the plans,
	// RunPeakBytes over the whole run and the check run (what sum-of-peaks
	// reserves for it).
	PeakBytes    int64 `json:"peak_bytes"`
	RunPeakBytes int64 `json:"run_peak_bytes"`
	// IterationSeconds is its mean iteration time with the plans,
	// VanillaIterationSeconds without (co-located, same offsets); EOR
	// their ratio minus one.
	IterationSeconds        float64 `json:"iteration_seconds"`
	VanillaIterationSeconds float64 `json:"vanilla_iteration_seconds"`
	EOR                     float64 `json:"eor"`
	SwappedBytes            int64   `json:"swapped_bytes"`
	RecomputedOps           int     `json:"recomputed_ops"`
	StallSeconds            float64 `json:"stall_seconds"`
}

// SeveralHorizon is how many iterations MeasureSeveral runs several jobs
// for when no planner statistics say otherwise: the joint horizon, which
// PlanJobs also reports (JointStats.Horizon) in both modes, so every
// policy is measured over the same run.
const SeveralHorizon = jointHorizon

// MeasureSeveral runs jobs with plans (plans[j] for jobs[j]; nil: vanilla)
// co-located on a device like p with unbounded memory, with the
// correctness checker when check is set, and measures them under the
// several-job accounting (SeveralResult). st, when not nil, is what
// PlanJobs returned for the plans: its Horizon sets the iterations and, in
// joint mode, its StartOffsets the jobs' start offsets; without it (the
// baselines) the jobs run SeveralHorizon iterations from offset zero and
// are accounted as planned one by one. Jobs' own plans, budgets and start
// offsets are ignored.
func MeasureSeveral(p gpu.Profile, jobs []Job, plans []*Plan, st *JointStats, check bool) (SeveralResult, error) {
	var sr SeveralResult
	if len(jobs) == 0 {
		return sr, errors.New("no jobs to measure")
	}
	if len(plans) != len(jobs) {
		return sr, fmt.Errorf("%d plans for %d jobs", len(plans), len(jobs))
	}
	sr.Horizon = SeveralHorizon
	if st != nil && st.Horizon > 0 {
		sr.Horizon = st.Horizon
	}
	sr.StartOffsets = make([]float64, len(jobs))
	var keys [][]float64 // JointStats.TurnKeys
	if st != nil && st.Mode == Joint {
		if len(st.StartOffsets) != len(jobs) {
			return sr, fmt.Errorf("%d start offsets for %d jobs", len(st.StartOffsets), len(jobs))
		}
		sr.Joint = true
		copy(sr.StartOffsets, st.StartOffsets)
		sr.Turns = st.Turns && len(jobs) > 1
		if st.TurnKeys != nil {
			if len(st.TurnKeys) != len(jobs) {
				return sr, fmt.Errorf("%d jobs' turn keys for %d jobs", len(st.TurnKeys), len(jobs))
			}
			keys = st.TurnKeys
			sr.PacedTurns = sr.Turns
		}
	}
	dev := withUnboundedMemory(p)
	runJobs := func(withPlans, withOffsets bool) []Job {
		js := make([]Job, len(jobs))
		for j := range jobs {
			js[j] = jobs[j].unplanned()
			js[j].Budget = 0
			if withPlans {
				js[j].Plan = plans[j]
			}
			if withOffsets {
				js[j].StartOffset = sr.StartOffsets[j]
				js[j].Turns = sr.Turns
				if sr.Turns && keys != nil {
					js[j].TurnKeys = keys[j]
				}
			}
		}
		return js
	}
	run := func(withPlans, withOffsets bool, chk bool) (*Result, int64, error) {
		sim := gpu.NewSim(dev, gpu.SimOptions{})
		res, err := Execute(sim, runJobs(withPlans, withOffsets), ExecOptions{Check: chk, Iterations: sr.Horizon})
		if err != nil {
			return nil, 0, err
		}
		return res, sim.HighWater(), nil
	}
	// Each job alone without a plan: the peak placement reserves for it
	// (Execute's default iterations, as PlanJobs predicts it).
	sr.Jobs = make([]SeveralJob, len(jobs))
	alone := map[int]int64{}
	for j := range jobs {
		sr.Jobs[j].Name = jobName(&jobs[j], j)
		pk, ok := int64(0), false
		for k := 0; k < j && !ok; k++ {
			if sameJob(&jobs[k], &jobs[j]) {
				pk, ok = alone[k], true
			}
		}
		if !ok {
			js := jobs[j].unplanned()
			js.Budget = 0
			res, err := Execute(gpu.NewSim(dev, gpu.SimOptions{}), []Job{js}, ExecOptions{})
			if err != nil {
				return sr, fmt.Errorf("job %q alone: %w", sr.Jobs[j].Name, err)
			}
			pk = res.PeakBytes
		}
		alone[j] = pk
		sr.Jobs[j].VanillaPeakBytes = pk
		sr.SumOfVanillaJobPeaks += pk
	}
	van, vanRun, err := run(false, false, check)
	if err != nil {
		return sr, fmt.Errorf("vanilla co-located: %w", err)
	}
	sr.VanillaPeakBytes, sr.VanillaRunPeakBytes = van.PeakBytes, vanRun
	ref := van
	if sr.Joint && !sr.Turns {
		// The reference keeps the offsets (see joint.go); jobs taking
		// turns are timed against the jobs interleaved from no offsets,
		// van (turnsReference).
		if ref, _, err = run(false, true, check); err != nil {
			return sr, fmt.Errorf("vanilla co-located from the start offsets: %w", err)
		}
	}
	// The plans over the horizon and, for several jobs, on over the check
	// run (see below) in one pass: the check run repeats the horizon's
	// events until the first job ends its last horizon iteration.
	var res, long *Result
	var high, longHigh int64
	var longErr error
	if len(jobs) > 1 && jointCheckIterations > sr.Horizon && keys == nil {
		mr, shortErr, lerr := executeMarked(gpu.NewSim(dev, gpu.SimOptions{}), runJobs(true, true),
			ExecOptions{Check: check, Iterations: jointCheckIterations}, sr.Horizon)
		if shortErr != nil {
			return sr, shortErr
		}
		sr.CheckIterations = jointCheckIterations
		res, high, long, longHigh, longErr = mr.short, mr.shortHigh, mr.long, mr.longHigh, lerr
	} else {
		if res, high, err = run(true, true, check); err != nil {
			return sr, err
		}
		long, longHigh = res, high
		if keys != nil && sr.Turns {
			// Turns by keys: the horizon is their check run (see
			// PlanJobs).
			sr.CheckIterations = sr.Horizon
		} else if len(jobs) > 1 { // a horizon as long as the check run
			sr.CheckIterations = jointCheckIterations
			sim := gpu.NewSim(dev, gpu.SimOptions{})
			if long, longErr = Execute(sim, runJobs(true, true), ExecOptions{Check: check, Iterations: sr.CheckIterations}); longErr == nil {
				longHigh = sim.HighWater()
			}
		}
	}
	sr.Result = res
	sr.PeakBytes, sr.RunPeakBytes, sr.Seconds, sr.VanillaSeconds = res.PeakBytes, high, res.Seconds, ref.Seconds
	n := float64(sr.Horizon)
	var eor float64
	// Turns by keys: each job is timed by its period over its steady
	// window (steadyCounts) of the jobs interleaved, on both sides.
	var counts []int
	if keys != nil && sr.Turns && sr.Horizon > 1 {
		ends := make([][]float64, len(ref.Jobs))
		for j := range ref.Jobs {
			ends[j] = ref.Jobs[j].IterationEnds
		}
		counts = steadyCounts(ends)
	}
	for j, r := range res.Jobs {
		sj := &sr.Jobs[j]
		sj.PeakBytes, sj.RunPeakBytes = r.PeakBytes, r.RunPeakBytes
		sj.IterationSeconds = r.RunSeconds / n
		sj.VanillaIterationSeconds = ref.Jobs[j].RunSeconds / n
		if sr.Turns && sr.Horizon > 1 {
			// A job taking turns: its period (JobResult.PeriodSeconds);
			// by keys, against its interleaved period (see planTurns).
			sj.IterationSeconds = r.PeriodSeconds
			if counts != nil {
				sj.IterationSeconds = meanPeriod(r.IterationEnds, counts[j])
				sj.VanillaIterationSeconds = meanPeriod(ref.Jobs[j].IterationEnds, counts[j])
			}
		}
		if sj.VanillaIterationSeconds > 0 {
			sj.EOR = sj.IterationSeconds/sj.VanillaIterationSeconds - 1
		}
		sj.SwappedBytes, sj.RecomputedOps, sj.StallSeconds = r.SwappedOutBytes, r.RecomputedOps, r.StallSeconds
		sr.SwappedBytes += r.SwappedOutBytes
		sr.RecomputedOps += r.RecomputedOps
		if keys != nil && sr.Turns {
			// Turns by keys: no job ahead of its interleaved pace pays
			// for another's extra time (see verifyJoint); sj.EOR is the
			// job's own.
			eor += max(sj.EOR, 0) / float64(len(jobs))
			continue
		}
		eor += sj.EOR / float64(len(jobs))
	}
	// Reservations cover a run of CheckIterations (several jobs): the plans
	// run on past the horizon, where co-located jobs drift through other
	// relative phases and delay one another's copies.
	if longErr != nil {
		return sr, fmt.Errorf("the plans over %d iterations: %w", sr.CheckIterations, longErr)
	}
	if sr.Joint {
		sr.ReservedBytes = max(high, longHigh)
	} else {
		for j := range sr.Jobs {
			sj := &sr.Jobs[j]
			sj.RunPeakBytes = max(sj.RunPeakBytes, long.Jobs[j].RunPeakBytes)
			sr.ReservedBytes += sj.RunPeakBytes
		}
	}
	var msr float64
	if sr.SumOfVanillaJobPeaks > 0 {
		msr = 1 - float64(sr.ReservedBytes)/float64(sr.SumOfVanillaJobPeaks)
	}
	sr.Metrics = metricsOf(msr, eor)
	return sr, nil
}

// metricsOf completes MSR and EOR with CBR, as ComputeMetrics does.
func metricsOf(msr, eor float64) Metrics {
	if eor > -1e-12 && eor < 1e-12 {
		eor = 0
	}
	m := Metrics{MSR: msr, EOR: eor}
	if m.MSR > 0 {
		m.CBR = m.MSR / max(m.EOR, EORFloor)
	}
	return m
}
