package tensorsched

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpusched/gpusched/gpu"
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

// JointStats describes plans for the jobs of one GPU as the planner
// predicts they run together.
type JointStats struct {
	Mode Mode `json:"mode"`
	// PeakBytes and Seconds are the predicted device peak and makespan of
	// the jobs running together with their plans; the Vanilla fields are
	// the same without plans.
	PeakBytes        int64   `json:"peak_bytes"`
	Seconds          float64 `json:"seconds"`
	VanillaPeakBytes int64   `json:"vanilla_peak_bytes"`
	VanillaSeconds   float64 `json:"vanilla_seconds"`
	MSR              float64 `json:"msr"`
	EOR              float64 `json:"eor"`
	// SumOfJobPeaks adds up each job's own predicted peak: the memory the
	// sum-of-peaks approach reserves.
	SumOfJobPeaks int64 `json:"sum_of_job_peaks"`
	// JobPeakBytes is each job's own predicted peak with its plan.
	JobPeakBytes []int64 `json:"job_peak_bytes"`
	// Jobs holds per-job planner statistics (sum-of-peaks: each job as
	// planned alone; joint: one entry for the combined plan).
	Jobs     []PlanStats   `json:"jobs"`
	Planning time.Duration `json:"planning_ns"`
}

// PlanJobs plans the jobs sharing one GPU for target t. Job.Seconds (when
// set) are used as the op times; Job.Budget (when positive) is each job's
// own budget, which the plan must also respect. Plans are returned in job
// order. On ErrBudget the best plans found are still returned.
func PlanJobs(jobs []Job, p gpu.Profile, mode Mode, t Target) ([]*Plan, JointStats, error) {
	begin := time.Now()
	st := JointStats{Mode: mode}
	if len(jobs) == 0 {
		return nil, st, errors.New("tensile: no jobs to plan")
	}
	var plans []*Plan
	var planErr error
	switch mode {
	case Joint:
		ps, s, err := planTogether(jobs, p, t)
		if err != nil && !errors.Is(err, ErrBudget) {
			return nil, st, err
		}
		plans, planErr = ps, err
		st.Jobs = []PlanStats{s}
	case SumOfPeaks:
		shares := make([]int64, len(jobs))
		if t.Budget > 0 {
			// Split the budget in proportion to the vanilla peaks.
			peaks := make([]int64, len(jobs))
			var total int64
			for j := range jobs {
				rep, err := AnalyzePeak([]Job{{Name: jobs[j].Name, Graph: jobs[j].Graph, Seconds: jobs[j].Seconds}}, p)
				if err != nil {
					return nil, st, err
				}
				peaks[j] = rep.Bytes
				total += rep.Bytes
			}
			for j := range jobs {
				shares[j] = int64(float64(t.Budget) * float64(peaks[j]) / float64(total))
			}
		}
		plans = make([]*Plan, len(jobs))
		for j := range jobs {
			job := jobs[j]
			job.Plan = nil
			tj := Target{Budget: shares[j], Tolerance: t.Tolerance}
			if job.Budget > 0 && (tj.Budget == 0 || job.Budget < tj.Budget) {
				tj.Budget = job.Budget
			}
			job.Budget = 0
			ps, s, err := planTogether([]Job{job}, p, tj)
			if err != nil && !errors.Is(err, ErrBudget) {
				return nil, st, err
			}
			if err != nil && planErr == nil {
				planErr = fmt.Errorf("job %q: %w", jobName(&jobs[j], j), err)
			}
			plans[j] = ps[0]
			st.Jobs = append(st.Jobs, s)
		}
	default:
		return nil, st, fmt.Errorf("tensile: unknown mode %v", mode)
	}
	// Predict the jobs running together, with and without the plans.
	together := make([]Job, len(jobs))
	vanilla := make([]Job, len(jobs))
	for j := range jobs {
		together[j] = jobs[j]
		together[j].Plan = plans[j]
		vanilla[j] = jobs[j]
		vanilla[j].Plan = nil
	}
	vr, err := AnalyzePeak(vanilla, p)
	if err != nil {
		return nil, st, err
	}
	pr, err := AnalyzePeak(together, p)
	if err != nil {
		return nil, st, err
	}
	st.PeakBytes, st.Seconds = pr.Bytes, pr.Seconds
	st.VanillaPeakBytes, st.VanillaSeconds = vr.Bytes, vr.Seconds
	st.JobPeakBytes = pr.JobPeaks
	for _, b := range pr.JobPeaks {
		st.SumOfJobPeaks += b
	}
	if st.VanillaPeakBytes > 0 {
		st.MSR = 1 - float64(st.PeakBytes)/float64(st.VanillaPeakBytes)
	}
	if st.VanillaSeconds > 0 {
		st.EOR = st.Seconds/st.VanillaSeconds - 1
	}
	st.Planning = time.Since(begin)
	if planErr == nil && t.Budget > 0 && st.PeakBytes > t.Budget {
		planErr = fmt.Errorf("%w: the jobs together peak at %s, budget %s", ErrBudget,
			gpu.FormatBytes(st.PeakBytes), gpu.FormatBytes(t.Budget))
	}
	return plans, st, planErr
}
