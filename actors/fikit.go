package actors

import (
	"fmt"
	"math"
	"slices"
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
//     host-to-device engine (in issue order, shared by all jobs on it, and
//     not before the tensor's own swap-out has ended); a kernel that reads
//     the tensor does not launch before the copy ends. Swap-outs queue on
//     the device-to-host engine the same way, and an op that syncs on one
//     (vDNN's synchronisation) waits for it.
//   - Actions that do nothing on the executor (a swap-in of a resident
//     tensor, a recompute of resident tensors) are left out, following the
//     tensors' states through the plan as the executor does. A copy is issued when the engine learns the previous kernel of
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
	no, nt := len(g.Ops), len(g.Tensors)
	x := &expanded{issue: make([][]tensorsched.Action, no+1), bytes: make([]int64, nt)}
	for i := range g.Tensors {
		x.bytes[i] = g.Tensors[i].Bytes
	}
	lt := g.Lifetimes()
	acts := make([][]tensorsched.Action, no+1) // by After+1
	type run struct {
		producer int
		tensors  []int
		frees    []int // temporaries this run is the last reader of
	}
	runs := make([][]run, no) // recompute runs by Before, in producer order
	if plan != nil {
		var recs []tensorsched.Action
		for i, a := range plan.Actions {
			if a.Tensor < 0 || a.Tensor >= nt {
				return nil, fmt.Errorf("plan action %d: tensor %d does not exist", i, a.Tensor)
			}
			switch a.Kind {
			case tensorsched.SwapIn, tensorsched.SwapOut, tensorsched.Drop:
				if a.After < -1 || a.After >= no || (a.Kind == tensorsched.SwapIn && (a.Before <= a.After || a.Before >= no)) {
					return nil, fmt.Errorf("plan action %d (%s): after %d / before %d out of range", i, a.Kind, a.After, a.Before)
				}
				if a.Kind == tensorsched.SwapOut && (a.Before <= a.After || a.Before >= no) {
					a.Before = -1 // nobody waits for it, but it occupies the copy engine
				}
				acts[a.After+1] = append(acts[a.After+1], a)
			case tensorsched.Recompute:
				p := lt[a.Tensor].Def
				if a.Before < 0 || a.Before >= no || p < 0 || p >= a.Before {
					return nil, fmt.Errorf("plan action %d (recompute): before %d, producer %d", i, a.Before, p)
				}
				recs = append(recs, a)
			}
		}
		rank := map[tensorsched.ActionKind]int{tensorsched.Drop: 0, tensorsched.SwapOut: 1, tensorsched.SwapIn: 2}
		for k := range acts {
			sort.SliceStable(acts[k], func(a, b int) bool { return rank[acts[k][a].Kind] < rank[acts[k][b].Kind] })
		}
		sort.SliceStable(recs, func(a, b int) bool {
			ra, rb := recs[a], recs[b]
			if ra.Before != rb.Before {
				return ra.Before < rb.Before
			}
			if lt[ra.Tensor].Def != lt[rb.Tensor].Def {
				return lt[ra.Tensor].Def < lt[rb.Tensor].Def
			}
			return ra.Tensor < rb.Tensor
		})
		for _, a := range recs {
			rs := runs[a.Before]
			if n := len(rs); n > 0 && rs[n-1].producer == lt[a.Tensor].Def {
				rs[n-1].tensors = append(rs[n-1].tensors, a.Tensor)
			} else {
				rs = append(rs, run{producer: lt[a.Tensor].Def, tensors: []int{a.Tensor}})
			}
			runs[a.Before] = rs
		}
		// The executor frees a tensor recomputed only to feed other
		// recomputes before op b after the last of them that reads it,
		// unless the plan drops it itself (tensorsched's prepareRecFrees).
		lastDrop := map[int]int{}
		for _, l := range acts {
			for _, a := range l {
				if d, ok := lastDrop[a.Tensor]; a.Kind == tensorsched.Drop && (!ok || a.After > d) {
					lastDrop[a.Tensor] = a.After
				}
			}
		}
		for b, rs := range runs {
			for k := range rs {
				for _, t := range rs[k].tensors {
					if lt[t].LastUse >= b {
						continue
					}
					if d, ok := lastDrop[t]; ok && d >= b {
						continue
					}
					last := k
					for k2 := k + 1; k2 < len(rs); k2++ {
						if slices.Contains(g.Ops[rs[k2].producer].Inputs, t) {
							last = k2
						}
					}
					rs[last].frees = append(rs[last].frees, t)
				}
			}
		}
	}
	// Which actions and recomputations take effect in the steady state, as
	// the executor decides: a swap-in of a resident tensor, a swap-out of
	// one that is not resident and a recompute run whose tensors are all
	// resident do nothing. Tensor states follow the plan over two
	// iterations (the first warms the across-iteration state); the second
	// one's effective actions are kept.
	const (
		absent = iota
		device
		host
	)
	state := make([]uint8, nt)
	for t := range g.Tensors {
		if g.Tensors[t].Kind.Persistent() {
			state[t] = device
		}
	}
	effRuns := make([][]int, no)
	apply := func(k int, keep bool) {
		for _, a := range acts[k] {
			t := a.Tensor
			switch a.Kind {
			case tensorsched.Drop:
				if state[t] == device {
					state[t] = absent
				}
			case tensorsched.SwapOut:
				if state[t] != device {
					continue
				}
				state[t] = host
				if keep {
					x.issue[k] = append(x.issue[k], a)
				}
			case tensorsched.SwapIn:
				if state[t] == device {
					continue
				}
				state[t] = device
				if keep {
					x.issue[k] = append(x.issue[k], a)
				}
			}
		}
	}
	for it := 0; it < 2; it++ {
		keep := it == 1
		for t := range g.Tensors {
			if g.Tensors[t].Kind == workload.Input {
				state[t] = device
			}
		}
		apply(0, keep)
		for i := range g.Ops {
			for _, r := range runs[i] {
				need := false
				for _, t := range r.tensors {
					need = need || state[t] != device
				}
				if need {
					for _, t := range r.tensors {
						state[t] = device
					}
					if keep {
						effRuns[i] = append(effRuns[i], r.producer)
					}
				}
				for _, t := range r.frees {
					if state[t] == device {
						state[t] = absent
					}
				}
			}
			for _, t := range g.Ops[i].Outputs {
				state[t] = device
			}
			for t := range lt {
				if lt[t].LastUse == i && !g.Tensors[t].Kind.Persistent() {
					state[t] = absent
				}
			}
			apply(i+1, keep)
		}
	}
	ops := make([]workload.Op, 0, no)
	for k := range g.Ops {
		for i, p := range effRuns[k] {
			ops = append(ops, g.Ops[p])
			x.orig = append(x.orig, k)
			x.first = append(x.first, i == 0)
		}
		ops = append(ops, g.Ops[k])
		x.orig = append(x.orig, k)
		x.first = append(x.first, len(effRuns[k]) == 0)
	}
	for i := range ops {
		ops[i].ID = i
	}
	eg := *g
	eg.Ops = ops
	x.graph = &eg
	return x, nil
}

// residency implements fikit's ReadyAt from the jobs' memory plans, as the
// executor times them: a kernel waits for the swap-ins of the tensors it
// reads, and a graph op for the swap-outs it syncs on.
type residency struct {
	p        gpu.Profile
	xs       []*expanded
	pre      []float64   // host time before each unit's first kernel
	need     [][]float64 // per job, per graph op: when the swap-outs it syncs on end (this unit)
	inEnd    [][]float64 // per job, per tensor: when its latest swap-in ends
	outEnd   [][]float64 // per job, per tensor: when its latest swap-out ends
	h2d, d2h float64     // when each copy engine is free
}

func (r *residency) readyAt(job, unit, op int, t float64) float64 {
	x := r.xs[job]
	k := x.orig[op]
	need := r.need[job]
	issue := func(acts []tensorsched.Action, at float64) {
		for _, a := range acts {
			if a.Kind == tensorsched.SwapIn {
				// A copy back waits for the tensor's swap-out to end.
				start := math.Max(math.Max(at, r.h2d), r.outEnd[job][a.Tensor])
				r.h2d = start + r.p.H2DSeconds(x.bytes[a.Tensor])
				r.inEnd[job][a.Tensor] = r.h2d
				continue
			}
			start := math.Max(at, r.d2h)
			r.d2h = start + r.p.D2HSeconds(x.bytes[a.Tensor])
			r.outEnd[job][a.Tensor] = r.d2h
			if a.Before >= 0 {
				need[a.Before] = math.Max(need[a.Before], r.d2h)
			}
		}
	}
	if x.first[op] {
		if k == 0 {
			for i := range need {
				need[i] = 0 // a new unit: nothing issued yet
			}
			issue(x.issue[0], math.Max(0, t-r.pre[job]))
		} else {
			issue(x.issue[k], t) // actions after graph op k-1
		}
	}
	ready := t
	for _, in := range x.graph.Ops[op].Inputs {
		ready = math.Max(ready, r.inEnd[job][in])
	}
	if op+1 == len(x.orig) || x.orig[op+1] != k { // the graph op itself
		ready = math.Max(ready, need[k])
	}
	return ready
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
		res.outEnd = append(res.outEnd, make([]float64, len(j.Graph.Tensors)))
		res.inEnd = append(res.inEnd, make([]float64, len(j.Graph.Tensors)))
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
