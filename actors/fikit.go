package actors

import (
	"fmt"
	"math"
	"sort"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/tensorsched/fikit"
	"github.com/gpusched/gpusched/workload"
)

// The device's kernel engine: how fast each job on a GPU runs when all of
// their kernels go through one FIKIT dispatcher and the memory plan decides
// when each kernel's tensors are resident.
//
// After every re-plan the device runs its jobs together through
// fikit.Simulate (mode fikit, the same Profiler and Dispatcher.Decide the
// benchmark uses) for a window of virtual time, and measures each job's
// steady rate in it: iterations (or requests) per virtual second between
// the end of the dispatcher's measurement phase and the moment the first job
// runs out of work. Those rates pace the jobs in wall-clock time, times
// --time-scale, exactly as the joint memory round's iteration times did
// before. A job that the dispatcher starves (a higher-priority job leaves it
// no gap it fits in) makes no progress until the plan changes.
//
// Memory readiness (Options.ReadyAt) follows each job's TENSILE plan:
//   - A swap-in issued at the end of op a is copied on the GPU's one
//     host-to-device engine (in issue order, shared by all jobs on it) and op
//     Before does not launch before the copy ends; a swap-out that op Before
//     waits for (vDNN's synchronisation) likewise on the device-to-host
//     engine. A copy is issued when the engine learns the previous kernel of
//     its job finished (a swap-in after the iteration's start is issued when
//     the iteration's host time begins).
//   - Recomputations are real kernels: each recompute run of the plan is a
//     copy of its producer op inserted before the op that needs it, so it
//     occupies the engine and is dispatched like any other kernel.
//
// Each job's own plan keeps it within its budget and budgets add up to at
// most the capacity, so the order in which the dispatcher interleaves the
// jobs' kernels cannot push the device over its capacity; the joint memory
// round (tensorsched.Execute) still measures peaks and swapped bytes.

// kernelJob is one job as the kernel engine sees it.
type kernelJob struct {
	Name     string
	Graph    *workload.Graph
	Plan     *tensorsched.Plan // nil: vanilla
	Priority int
	// Host times (seconds); zero ones leave the graph's own.
	PerIteration, PerKernel, PerRequest float64
	// Rate is an inference job's request arrival rate (0: back to back).
	Rate float64
}

// kernelOptions configure runKernelRound; zero values select the defaults.
type kernelOptions struct {
	Mode fikit.Mode // default fikit.FIKIT
	Seed uint64     // default 1
	// Jitter and HostJitter are the relative spread of kernel and host
	// times (default 3% and 5%; negative: none).
	Jitter, HostJitter float64
	// Margin is the dispatcher's allowed overrun (default 5%).
	Margin float64
	// MeasureUnits is the dispatcher's measurement phase (default 3).
	MeasureUnits int
	// Window is the virtual time to measure over, in units of the longest
	// job's exclusive iteration (default 4).
	Window float64
	// MaxKernels caps the kernels simulated per round (default 400 000); a
	// round that would need more is shortened.
	MaxKernels int
}

func (o kernelOptions) withDefaults() kernelOptions {
	if o.Mode == "" {
		o.Mode = fikit.FIKIT
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Jitter == 0 {
		o.Jitter = 0.03
	}
	if o.HostJitter == 0 {
		o.HostJitter = 0.05
	}
	if o.Margin == 0 {
		o.Margin = 0.05
	}
	if o.MeasureUnits == 0 {
		o.MeasureUnits = 3
	}
	if o.Window <= 0 {
		o.Window = 4
	}
	if o.MaxKernels <= 0 {
		o.MaxKernels = 400_000
	}
	return o
}

// kernelRate is one job's measured speed on the shared GPU.
type kernelRate struct {
	// IterationSeconds is virtual seconds per iteration (request) under
	// dispatch; +Inf when the job made no progress in the window.
	IterationSeconds float64
	// Latency is an inference job's mean request latency over the run
	// (arrival to response, host time included); 0 for training.
	Latency float64
	// Exclusive is the job's iteration time alone on the GPU, predicted
	// from the cost model and its host times (what the window is sized by).
	Exclusive float64
}

// kernelRound is the outcome of one run of the kernel engine.
type kernelRound struct {
	Jobs []kernelRate
	// From and To bound the measurement window (virtual seconds).
	From, To float64
	// GapFill is the dispatcher's gap-fill ratio over the whole run.
	GapFill float64
	Kernels int
}

// expanded is a job's graph with its plan's recompute runs inserted as
// kernels, and where its plan makes kernels wait for copies.
type expanded struct {
	graph *workload.Graph
	orig  []int  // expanded op -> graph op
	first []bool // expanded op is the first one launched for its graph op
	// issue[a+1]: actions issued when graph op a ends (a = -1: iteration start).
	issue [][]tensorsched.Action
	bytes []int64 // tensor sizes
}

func expandPlan(g *workload.Graph, plan *tensorsched.Plan) (*expanded, error) {
	no := len(g.Ops)
	x := &expanded{issue: make([][]tensorsched.Action, no+1), bytes: make([]int64, len(g.Tensors))}
	for i := range g.Tensors {
		x.bytes[i] = g.Tensors[i].Bytes
	}
	recs := map[int][]int{} // before op -> producer ops, one per recompute run
	if plan != nil {
		def := make([]int, len(g.Tensors))
		for i := range def {
			def[i] = -1
		}
		for k := range g.Ops {
			for _, t := range g.Ops[k].Outputs {
				if def[t] < 0 {
					def[t] = k
				}
			}
		}
		for i, a := range plan.Actions {
			if a.Tensor < 0 || a.Tensor >= len(g.Tensors) {
				return nil, fmt.Errorf("plan action %d: tensor %d does not exist", i, a.Tensor)
			}
			switch a.Kind {
			case tensorsched.SwapIn, tensorsched.SwapOut:
				if a.After < -1 || a.After >= no || (a.Kind == tensorsched.SwapIn && (a.Before <= a.After || a.Before >= no)) {
					return nil, fmt.Errorf("plan action %d (%s): after %d / before %d out of range", i, a.Kind, a.After, a.Before)
				}
				if a.Kind == tensorsched.SwapOut && (a.Before <= a.After || a.Before >= no) {
					continue // nobody waits for it
				}
				x.issue[a.After+1] = append(x.issue[a.After+1], a)
			case tensorsched.Recompute:
				p := def[a.Tensor]
				if a.Before < 0 || a.Before >= no || p < 0 || p >= a.Before {
					return nil, fmt.Errorf("plan action %d (recompute): before %d, producer %d", i, a.Before, p)
				}
				if !containsInt(recs[a.Before], p) {
					recs[a.Before] = append(recs[a.Before], p)
				}
			}
		}
	}
	ops := make([]workload.Op, 0, no)
	for k := range g.Ops {
		ps := recs[k]
		sort.Ints(ps) // the executor runs them in producer order
		for i, p := range ps {
			ops = append(ops, g.Ops[p])
			x.orig = append(x.orig, k)
			x.first = append(x.first, i == 0)
		}
		ops = append(ops, g.Ops[k])
		x.orig = append(x.orig, k)
		x.first = append(x.first, len(ps) == 0)
	}
	for i := range ops {
		ops[i].ID = i
	}
	eg := *g
	eg.Ops = ops
	x.graph = &eg
	return x, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// residency implements fikit's ReadyAt from the jobs' memory plans.
type residency struct {
	p        gpu.Profile
	xs       []*expanded
	pre      []float64   // host time before each unit's first kernel
	need     [][]float64 // per job, per graph op: when its copies end (this unit)
	h2d, d2h float64     // when each copy engine is free
}

func (r *residency) readyAt(job, unit, op int, t float64) float64 {
	x := r.xs[job]
	k := x.orig[op]
	if !x.first[op] {
		return t
	}
	need := r.need[job]
	issue := func(acts []tensorsched.Action, at float64) {
		for _, a := range acts {
			var end float64
			if a.Kind == tensorsched.SwapIn {
				start := math.Max(at, r.h2d)
				end = start + r.p.H2DSeconds(x.bytes[a.Tensor])
				r.h2d = end
			} else {
				start := math.Max(at, r.d2h)
				end = start + r.p.D2HSeconds(x.bytes[a.Tensor])
				r.d2h = end
			}
			need[a.Before] = math.Max(need[a.Before], end)
		}
	}
	if k == 0 {
		for i := range need {
			need[i] = 0 // a new unit: nothing issued yet
		}
		issue(x.issue[0], math.Max(0, t-r.pre[job]))
	}
	if k > 0 {
		issue(x.issue[k], t) // actions after graph op k-1
	}
	return math.Max(t, need[k])
}

// runKernelRound runs jobs together on a GPU of profile p through the FIKIT
// dispatcher (or o.Mode) and measures each job's steady speed. It is
// deterministic for a given o.Seed.
func runKernelRound(p gpu.Profile, jobs []kernelJob, o kernelOptions) (*kernelRound, error) {
	o = o.withDefaults()
	if len(jobs) == 0 {
		return &kernelRound{}, nil
	}
	res := &residency{p: p}
	fj := make([]fikit.Job, len(jobs))
	excl := make([]float64, len(jobs))
	weights := make([][]float64, len(jobs))
	longest := 0.0
	for i := range jobs {
		j := &jobs[i]
		x, err := expandPlan(j.Graph, j.Plan)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.Name, err)
		}
		res.xs = append(res.xs, x)
		res.need = append(res.need, make([]float64, len(j.Graph.Ops)))
		f := fikit.Job{Name: j.Name, Graph: x.graph, Priority: min(max(j.Priority, 0), fikit.MaxPriority),
			HostPerKernel: j.PerKernel}
		hpk := j.PerKernel
		if hpk == 0 {
			hpk = j.Graph.HostSecondsPerKernel
		}
		var pre, post float64
		if j.Graph.Kind == workload.Infer {
			f.HostPre = j.PerIteration + j.PerRequest/2
			f.HostPost = j.PerRequest / 2
			f.Rate = j.Rate
			pre, post = f.HostPre, f.HostPost
		} else {
			f.HostPerIteration = j.PerIteration
			pre = j.PerIteration
			if pre == 0 {
				pre = j.Graph.HostSecondsPerIteration
			}
		}
		res.pre = append(res.pre, pre)
		w := make([]float64, len(x.graph.Ops))
		var sum float64
		for k := range x.graph.Ops {
			w[k] = p.OpSeconds(&x.graph.Ops[k])
			sum += w[k]
		}
		for k := range w {
			if sum > 0 {
				w[k] /= sum
			} else {
				w[k] = 1 / float64(len(w))
			}
		}
		weights[i] = w
		excl[i] = pre + post + math.Max(sum, hpk*float64(len(w)))
		if j.Rate > 0 {
			excl[i] = math.Max(excl[i], 1/j.Rate)
		}
		longest = math.Max(longest, excl[i])
		fj[i] = f
	}
	// Size the run: every job gets enough units to stay busy for the whole
	// window even alone, so the window ends with the first job to finish.
	window := o.Window * longest
	units := func(w float64) (us []int, kernels int) {
		us = make([]int, len(jobs))
		for i := range jobs {
			us[i] = o.MeasureUnits + 2 + int(math.Ceil(1.2*w/excl[i]))
			kernels += us[i] * len(fj[i].Graph.Ops)
		}
		return us, kernels
	}
	us, kernels := units(window)
	for kernels > o.MaxKernels && window > longest {
		window = math.Max(longest, window*float64(o.MaxKernels)/float64(kernels)*0.9)
		us, kernels = units(window)
	}
	for i := range fj {
		if fj[i].Graph.Kind == workload.Infer {
			fj[i].Requests = us[i]
		} else {
			fj[i].Iterations = us[i]
		}
	}
	so := fikit.DefaultOptions(p)
	so.Mode, so.Seed, so.Margin, so.MeasureUnits = o.Mode, o.Seed, o.Margin, o.MeasureUnits
	so.Jitter, so.HostJitter, so.ModelError = math.Max(o.Jitter, 0), math.Max(o.HostJitter, 0), 0
	so.ReadyAt, so.Timeline = res.readyAt, true
	sr, err := fikit.Simulate(fj, so)
	if err != nil {
		return nil, err
	}
	// Unit ends and the measurement window.
	top := 0
	for i := range fj {
		top = max(top, fj[i].Priority)
	}
	lastEnd := make([]float64, len(fj))
	unitEnd := make([][]float64, len(fj))
	for i := range unitEnd {
		unitEnd[i] = make([]float64, us[i])
	}
	for _, sp := range sr.Timeline {
		lastEnd[sp.Job] = math.Max(lastEnd[sp.Job], sp.End)
		if sp.Op == len(fj[sp.Job].Graph.Ops)-1 {
			unitEnd[sp.Job][sp.Unit] = math.Max(unitEnd[sp.Job][sp.Unit], sp.End)
		}
	}
	to := math.Inf(1)
	for i := range lastEnd {
		to = math.Min(to, lastEnd[i])
	}
	from := 0.0
	for i := range fj {
		if fj[i].Priority == top && o.MeasureUnits < us[i] {
			from = math.Max(from, unitEnd[i][o.MeasureUnits])
		}
	}
	if !(to-from > 0.25*to) {
		from = 0
	}
	// A kernel preempted in share mode has several spans: weigh each span
	// by its share of the kernel's time.
	type kid struct{ job, unit, op int }
	ktime := map[kid]float64{}
	for _, sp := range sr.Timeline {
		ktime[kid{sp.Job, sp.Unit, sp.Op}] += sp.End - sp.Start
	}
	progress := make([][2]float64, len(fj))
	for _, sp := range sr.Timeline {
		total := ktime[kid{sp.Job, sp.Unit, sp.Op}]
		if total <= 0 {
			continue
		}
		w := weights[sp.Job][sp.Op] / total
		for k, at := range [2]float64{from, to} {
			progress[sp.Job][k] += w * math.Max(0, math.Min(sp.End, at)-sp.Start)
		}
	}
	out := &kernelRound{From: from, To: to, GapFill: sr.GapFill}
	for i := range fj {
		it := math.Inf(1)
		if dp := progress[i][1] - progress[i][0]; dp > 1e-9 && to > from {
			it = (to - from) / dp
		}
		out.Jobs = append(out.Jobs, kernelRate{IterationSeconds: it, Exclusive: excl[i], Latency: sr.Jobs[i].Mean})
		out.Kernels += sr.Jobs[i].Kernels
	}
	return out, nil
}

// arrivalRate is an inference spec's mean request arrival rate (requests per
// second): the Poisson rate, or an explicit list's count over its span; 0
// for back-to-back requests. The device's kernel engine draws its own
// Poisson arrivals at this rate.
func arrivalRate(s *workload.Spec) float64 {
	a := s.Arrivals
	if a == nil {
		return 0
	}
	if a.PoissonRate > 0 && !math.IsInf(a.PoissonRate, 0) {
		return a.PoissonRate
	}
	if n := len(a.Times); n > 1 && a.Times[n-1] > 0 {
		return float64(n) / a.Times[n-1]
	}
	return 0
}
