// Package tensorsched is the per-GPU scheduler: it predicts op times, analyses
// memory peaks, plans tensor swapping and recomputation (TENSILE and
// baselines) for the jobs on one GPU, and executes plans on a gpu.Device.
//
// Planners are pure functions (graphs, profile and budgets in, a Plan out);
// the executor is the only code that touches a device.
package tensorsched

import (
	"fmt"
	"math"

	"github.com/gpusched/gpusched/workload"
)

// ActionKind is what a plan action does to a tensor.
type ActionKind uint8

// Action kinds.
const (
	// SwapOut copies the tensor to pinned host memory on the D2H engine,
	// issued when op After completes (After = -1: at iteration start). Its
	// device memory is released when the copy completes.
	SwapOut ActionKind = iota
	// SwapIn copies the tensor back on the H2D engine, issued when op After
	// completes (-1: at iteration start); device memory is allocated when the
	// copy starts. Op Before waits for the copy to finish. A SwapIn whose
	// After precedes the matching SwapOut in op order applies to the next
	// iteration (across-iteration prefetch of params and optimizer state);
	// a SwapIn of a tensor that is already resident does nothing.
	SwapIn
	// Drop frees the tensor without a copy when op After completes; a later
	// Recompute brings it back.
	Drop
	// Recompute re-runs the tensor's producing op just before op Before (its
	// inputs must be resident), allocating the tensor again. The tensor keeps
	// its version.
	Recompute
	// StartOnHost starts the run with the tensor (a parameter or optimizer
	// state tensor) on the host instead of the device: it reaches the
	// device only by the plan's first swap-in of it, which must come
	// before its first use in the first iteration (the op waits for the
	// copy like any other). Plans that swap such a tensor out after its
	// last use and back in during the next iteration start it there, so
	// the first iteration does not hold what every later one keeps off
	// the device. After and Before are unused.
	StartOnHost
	// Keep holds an activation or gradient on the device past its last
	// use in the graph, until op After completes (After must follow that
	// last use); it is then freed as at a last use. Recomputes read it in
	// between: the inputs of a concatenation kept this way let the plan
	// drop the concatenated copy and rebuild it from them (the
	// memory-efficient DenseNet's shared storage). Before is unused.
	Keep
)

func (k ActionKind) String() string {
	switch k {
	case SwapOut:
		return "swap-out"
	case SwapIn:
		return "swap-in"
	case Drop:
		return "drop"
	case Recompute:
		return "recompute"
	case StartOnHost:
		return "start-on-host"
	case Keep:
		return "keep"
	}
	return fmt.Sprintf("ActionKind(%d)", k)
}

// MarshalText implements encoding.TextMarshaler.
func (k ActionKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Action is one step of a memory plan for one job.
type Action struct {
	Kind   ActionKind `json:"kind"`
	Tensor int        `json:"tensor"`
	// After is the op whose completion issues the action (-1: iteration start).
	// Unused for Recompute.
	After int `json:"after"`
	// Before is the op that needs the tensor (SwapIn, Recompute). On a
	// SwapOut, an op later than After makes that op wait for the copy to end
	// (vDNN's per-layer synchronisation); -1 means nothing waits.
	Before int `json:"before"`
}

// Plan is the memory schedule of one job: actions in any order (the executor
// indexes them by op). An empty plan is vanilla execution.
type Plan struct {
	Policy  string   `json:"policy"`
	Actions []Action `json:"actions"`
}

// Job is one job to execute on a device: its graph, its plan (nil means
// vanilla), and its memory budget (0: only the device capacity applies).
type Job struct {
	Name   string
	Graph  *workload.Graph
	Plan   *Plan
	Budget int64
	// Seconds, when set, overrides the cost model per op (len == len(Graph.Ops)):
	// the executor runs what the profiles say, e.g. measured moving averages.
	Seconds []float64
	// StartOffset delays the job's first iteration by this many seconds (a
	// one-time phase offset chosen by joint planning so that co-located
	// jobs' memory peaks interleave instead of stacking; later iterations
	// follow back to back). Params and optimizer state are resident from
	// t = 0 regardless, except those the plan starts on the host
	// (StartOnHost).
	StartOffset float64
	// Turns makes the co-located jobs take turns by whole iterations: set
	// on every job of the device (or on none), the jobs run their
	// iterations one at a time in job order, round after round (job 0's
	// first, job 1's first, ..., job 0's second, ...; with TurnKeys, in
	// the keys' order): a job starts an iteration when the one before it
	// in that order ends one, and only
	// one job's activations are on the device at a time, while the others
	// hold what they keep between iterations. The compute engine is as
	// busy as when their ops interleave (it runs one op at a time either
	// way): a vanilla round takes the jobs' iterations alone added up.
	// But each job runs one iteration per round, where interleaved a job
	// of short iterations runs many while a long one runs one: turns suit
	// jobs of like iteration times (several-job accounting times them
	// against the jobs interleaved, see PlanJobs). Swaps still share the
	// copy engines with the neighbours' turns. Start offsets are ignored
	// (the order sets the phases, for good). Several jobs' mean iteration
	// time is then the period between the ends of a job's consecutive
	// iterations (a round), not a span of the run. One job, or a job
	// without ops, takes no turns.
	Turns bool
	// TurnKeys orders the turns of jobs taking turns (Job.Turns) whose
	// iterations differ in length: when a turn ends, the next goes to the
	// job, among those with iterations left, whose next iteration has the
	// least key (TurnKeys[k] for its k-th iteration from 0; past the end,
	// the last key plus the mean spacing per iteration), the earlier job
	// on ties. Joint planning sets them to the times the jobs' iterations
	// end when they run interleaved (JointStats.TurnKeys), so that each
	// job takes its turns at its interleaved pace: a job of short
	// iterations runs several turns while a long one runs one. Without
	// keys (nil on every job), a job's k-th iteration has key k: one
	// iteration each per round, in job order. Set on every job taking
	// turns or on none; keys are finite and non-decreasing.
	TurnKeys []float64
}

// takeTurns reports whether jobs run in turns (Job.Turns): set on every
// job, more than one job, each with ops. Set on some jobs only is an error.
func takeTurns(jobs []Job) (bool, error) {
	n := 0
	for j := range jobs {
		if jobs[j].Turns {
			n++
		}
	}
	if n == 0 {
		for j := range jobs {
			if jobs[j].TurnKeys != nil {
				return false, fmt.Errorf("tensile: job %d has Job.TurnKeys but takes no turns: set Job.Turns on every job of the device, or drop the keys", j)
			}
		}
		return false, nil
	}
	if n != len(jobs) {
		return false, fmt.Errorf("tensile: %d of %d jobs take turns: set Job.Turns on every job of the device or on none", n, len(jobs))
	}
	keyed := 0
	for j := range jobs {
		keys := jobs[j].TurnKeys
		if keys == nil {
			continue
		}
		keyed++
		for k, v := range keys {
			if math.IsNaN(v) || math.IsInf(v, 0) || (k > 0 && v < keys[k-1]) {
				return false, fmt.Errorf("tensile: job %d: Job.TurnKeys[%d] = %g: turn keys must be finite and non-decreasing (the times the job's iterations end interleaved)", j, k, v)
			}
		}
	}
	if keyed != 0 && keyed != len(jobs) {
		return false, fmt.Errorf("tensile: %d of %d jobs taking turns have Job.TurnKeys: set them on every job or on none", keyed, len(jobs))
	}
	if len(jobs) < 2 {
		return false, nil
	}
	for j := range jobs {
		if jobs[j].Graph != nil && len(jobs[j].Graph.Ops) == 0 {
			return false, nil
		}
	}
	return true, nil
}

// turnKey is the key of iteration k (from 0) of a job taking turns with
// keys (Job.TurnKeys): keys[k], past the end the last key plus the mean
// spacing per iteration; k itself without keys.
func turnKey(keys []float64, k int) float64 {
	n := len(keys)
	switch {
	case n == 0:
		return float64(k)
	case k < n:
		return keys[k]
	case n == 1:
		return keys[0] * float64(k+1)
	}
	return keys[n-1] + float64(k-n+1)*(keys[n-1]-keys[0])/float64(n-1)
}

// nextTurn returns the job whose turn comes next among n jobs taking
// turns (Job.TurnKeys): the least key of a next iteration, the earlier job
// on ties; next(j) returns job j's key and whether it has iterations
// left. -1: none has.
func nextTurn(n int, next func(j int) (float64, bool)) int {
	best, bestKey := -1, 0.0
	for j := 0; j < n; j++ {
		if k, ok := next(j); ok && (best < 0 || k < bestKey) {
			best, bestKey = j, k
		}
	}
	return best
}

// ExecOptions configure Execute.
type ExecOptions struct {
	// Iterations to run; the last one is measured (default 2: the first warms
	// the across-iteration state, the second is the steady state).
	Iterations int
	// Check runs the correctness checker: every op reads only resident
	// tensors holding the right version; any violation is an error.
	Check bool
	// RecordTimeline records device memory over the measured iteration.
	RecordTimeline bool
}

// JobResult is what one job did during the measured iteration.
type JobResult struct {
	Name string `json:"name"`
	// IterationSeconds is from the job's first op start to its last op end.
	IterationSeconds float64 `json:"iteration_seconds"`
	// PeakBytes is the job's own resident high-water mark.
	PeakBytes int64 `json:"peak_bytes"`
	// RunSeconds is from the job's first op start in the first iteration
	// to its last op end in the last (its start offset excluded):
	// RunSeconds / ExecOptions.Iterations is its mean iteration time, the
	// several-job accounting's measure. RunPeakBytes is the job's own
	// high-water mark over every iteration (what a budget, which holds in
	// every iteration, must cover).
	RunSeconds float64 `json:"run_seconds"`
	// PeriodSeconds, over more than one iteration, is the mean time
	// between the ends of the job's consecutive iterations (0 over one):
	// the several-job accounting's measure for jobs taking turns (a round
	// of every job's turn; jobs taking turns by keys are timed over their
	// steady windows instead, from IterationEnds).
	PeriodSeconds float64 `json:"period_seconds,omitempty"`
	// IterationEnds is when each of the job's iterations ended (seconds
	// from the run's start): the several-job accounting's steady window
	// for jobs taking turns by keys (steadyCounts).
	IterationEnds   []float64 `json:"-"`
	RunPeakBytes    int64     `json:"run_peak_bytes"`
	SwappedOutBytes int64     `json:"swapped_out_bytes"`
	SwappedInBytes  int64     `json:"swapped_in_bytes"`
	RecomputedOps   int       `json:"recomputed_ops"`
	StallSeconds    float64   `json:"stall_seconds"` // time ops waited on copies
	// OpStart and OpEnd are the measured iteration's op times, relative to
	// the iteration's start.
	OpStart []float64 `json:"-"`
	OpEnd   []float64 `json:"-"`
}

// MemSample is device memory in use from time T on, within the measured iteration.
type MemSample struct {
	T     float64 `json:"t"`
	Bytes int64   `json:"bytes"`
}

// Result is the outcome of Execute.
type Result struct {
	Jobs []JobResult `json:"jobs"`
	// PeakBytes is the device high-water mark over the measured iteration.
	PeakBytes int64 `json:"peak_bytes"`
	// Seconds is the measured iteration's makespan across all jobs.
	Seconds  float64     `json:"seconds"`
	Timeline []MemSample `json:"timeline,omitempty"`
}
