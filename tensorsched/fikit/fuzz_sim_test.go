package fikit

// Property-based fuzz tests of the simulator and the profiler.
//
// The generator (genSimCase) builds one to five random jobs on one GPU:
// priorities 0–9 with frequent ties, training jobs and inference services
// (closed loop, explicit arrivals with ties and far-off starts, Poisson
// rates), one to six kernels each with durations from zero (the cost model
// with no launch overhead) through picoseconds to a second, mostly near a
// time scale drawn per case so that kernels fit some gaps and not others,
// host times (per request, per iteration, per kernel) from zero to half a
// second, kernel ids sometimes shared between jobs, an optional ReadyAt
// hook, and every Options field (jitters including out-of-range values
// that are clamped, slices, switch costs, margins, measurement phases,
// profiler weights). A third of the cases are exact (no jitter, no
// cost-model error, no hook, distinct kernel ids), where FIKIT's
// predictions can be right. Every choice comes from the fuzz input's bytes,
// then from a PCG stream seeded by its seed, so an input always gives the
// same case. Each case runs under every mode, and the properties below are
// checked on each run and across them.

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/internal/fuzzsrc"
	"github.com/gpusched/gpusched/workload"
)

// simSource yields the generator's choices (see fuzzsrc).
type simSource struct{ *fuzzsrc.Source }

func newSimSource(seed uint64, data []byte) *simSource { return &simSource{fuzzsrc.New(seed, data)} }

// pick is one of xs.
func (s *simSource) pick(xs ...float64) float64 { return xs[s.Intn(len(xs))] }

func (s *simSource) u64() uint64 {
	var x uint64
	for range 8 {
		x = x<<8 | uint64(s.Byte())
	}
	return x
}

// simCase is one generated input.
type simCase struct {
	jobs []Job
	o    Options // Mode is set per run
	// hook is the ReadyAt salt (0: no hook); sharedIDs is set when two
	// ops may have the same kernel id with different durations.
	hook      uint64
	sharedIDs bool
}

// readyAtHook delays some kernels by a hashed amount and answers an
// earlier time for others (which the simulator ignores). It depends only
// on (job, unit, op) and shifts with t, so a job's own timeline does not
// depend on when its units start. remap maps the simulator's job index to
// the generated one (a job simulated alone is job 0).
func readyAtHook(salt uint64, remap func(int) int, calls *int) func(job, unit, op int, t float64) float64 {
	return func(job, unit, op int, t float64) float64 {
		*calls++
		h := mix(salt ^ mix(uint64(remap(job))<<40^uint64(unit)<<20^uint64(op)))
		switch h % 4 {
		case 0:
			return t - 1
		case 1:
			return t + float64(h>>40%100)*1e-5
		}
		return t
	}
}

func (c *simCase) options(m Mode, calls *int, remap func(int) int) Options {
	o := c.o
	o.Mode = m
	o.Timeline = true
	if c.hook != 0 {
		if remap == nil {
			remap = func(j int) int { return j }
		}
		o.ReadyAt = readyAtHook(c.hook, remap, calls)
	}
	return o
}

func (c *simCase) String() string {
	var b strings.Builder
	o := c.o
	fmt.Fprintf(&b, "options: seed %d jitter %g host %g model %g slice %g switch %g margin %g measure %d alpha %g launch %g hook %x shared %v",
		o.Seed, o.Jitter, o.HostJitter, o.ModelError, o.Slice, o.SwitchCost, o.Margin, o.MeasureUnits, o.Alpha, o.Profile.LaunchOverhead, c.hook, c.sharedIDs)
	for i := range c.jobs {
		j := &c.jobs[i]
		fmt.Fprintf(&b, "\n  job %d %s prio %d", i, j.Graph.Kind, j.Priority)
		if j.Graph.Kind == workload.Infer {
			fmt.Fprintf(&b, " requests %d rate %g arrivals %v pre %g post %g", j.Requests, j.Rate, j.Arrivals, j.HostPre, j.HostPost)
		} else {
			fmt.Fprintf(&b, " iterations %d pre %g (graph %g)", j.Iterations, j.HostPerIteration, j.Graph.HostSecondsPerIteration)
		}
		fmt.Fprintf(&b, " per kernel %g (graph %g) ops", j.HostPerKernel, j.Graph.HostSecondsPerKernel)
		for k := range j.Graph.Ops {
			op := &j.Graph.Ops[k]
			fmt.Fprintf(&b, " %s:%g", op.Kind, o.Profile.OpSeconds(op))
		}
	}
	return b.String()
}

// hostTimeOf is a random host time: often zero, mostly near the case's
// time scale, sometimes from a microsecond to tens of milliseconds.
func hostTimeOf(src *simSource, scale float64) float64 {
	if src.Chance(1, 3) {
		return 0
	}
	if src.Chance(1, 4) {
		return src.pick(1e-6, 1e-4, 1e-3, 0.03) * (0.5 + src.Unit())
	}
	return scale * src.pick(0.3, 1, 3, 10) * (0.5 + src.Unit())
}

// kernelCost sets op's cost: mostly near the case's time scale, so that
// kernels fit some gaps and not others; sometimes zero work (the launch
// overhead, or nothing), the cost model, or anything from a picosecond to
// a second.
func kernelCost(src *simSource, op *workload.Op, scale float64) {
	switch r := src.Intn(12); {
	case r == 0: // launch overhead only
	case r == 1:
		op.FLOPs, op.MemBytes = src.Unit()*1e13, src.Unit()*1e10
	case r < 4:
		op.MeasuredSeconds = src.pick(1e-12, 1e-9, 1e-6, 1e-4, 1e-2, 0.2, 1) * (0.5 + src.Unit())
	default:
		op.MeasuredSeconds = scale * src.pick(0.1, 0.3, 1, 3) * (0.5 + src.Unit())
	}
}

func genSimCase(src *simSource) *simCase {
	c := &simCase{}
	o := Options{Profile: gpu.MustProfile("h100-80gb"), Seed: src.u64()}
	if src.Chance(1, 3) {
		o.Profile.LaunchOverhead = 0 // an op with no work takes no time
	}
	// A third of the cases are exact: no randomness in durations, so
	// predictions can be right. Out-of-range jitters are clamped to
	// [0, 0.3].
	exact := src.Chance(1, 3)
	if !exact {
		o.Jitter = src.pick(0, 0, 0.03, 0.3, 0.6, -0.1)
		o.HostJitter = src.pick(0, 0, 0.05, 0.3, 1)
		o.ModelError = src.pick(0, 0, 0.1, 0.3, -1)
	}
	o.Slice = src.pick(0, 1e-6, 1e-4, 2e-3, 0.05)
	o.SwitchCost = src.pick(0, 0, 1e-5, 1e-3)
	o.Margin = src.pick(0, 0, 0.05, 0.5, 3)
	o.MeasureUnits = src.Intn(4)
	o.Alpha = src.pick(0, 0.2, 0.5, 1, 1e-3, -1, 7)
	if !exact && src.Chance(1, 3) {
		c.hook = src.u64() | 1
	}
	c.sharedIDs = !exact && src.Chance(1, 3)
	scale := src.pick(1e-5, 1e-3, 0.03)
	n := 1 + src.Intn(5)
	var work float64
	for i := range n {
		j := Job{Name: fmt.Sprintf("j%d", i)}
		if src.Chance(1, 2) {
			j.Priority = []int{0, 9, 9, 3}[src.Intn(4)]
		} else {
			j.Priority = src.Intn(MaxPriority + 1)
		}
		kind := workload.Train
		if src.Chance(1, 2) {
			kind = workload.Infer
		}
		g := &workload.Graph{Model: j.Name, Kind: kind, Batch: 1}
		if src.Chance(1, 4) {
			g.HostSecondsPerKernel = hostTimeOf(src, scale)
		}
		if src.Chance(1, 4) {
			g.HostSecondsPerIteration = hostTimeOf(src, scale)
		}
		var opSum float64
		for k := range 1 + src.Intn(6) {
			g.Tensors = append(g.Tensors, workload.Tensor{ID: k, Bytes: int64(1024 * (k + 1)), Kind: workload.Activation})
			op := workload.Op{ID: k, Outputs: []int{k}, Kind: fmt.Sprintf("j%d-op%d", i, k)}
			if c.sharedIDs && src.Chance(1, 2) {
				op.Kind = fmt.Sprintf("shared%d", src.Intn(2)) // same id as another job's op k
			}
			kernelCost(src, &op, scale)
			g.Ops = append(g.Ops, op)
			opSum += o.Profile.OpSeconds(&op)
		}
		j.Graph = g
		units := 1 + src.Intn(8)
		if kind == workload.Train {
			j.Iterations = units
			if src.Chance(1, 2) {
				j.HostPerIteration = hostTimeOf(src, scale)
			}
		} else {
			switch src.Intn(3) {
			case 0: // closed loop
				j.Requests = units
			case 1:
				if src.Chance(1, 2) {
					j.Requests = units
				}
				// Ties, and starts far off: at 1e14 s a 2 ms slice is
				// below the clock's resolution.
				a := src.pick(0, 0, 1e-3, 1, 1e3, 1e14)
				for range units + src.Intn(2) {
					j.Arrivals = append(j.Arrivals, a)
					a += src.pick(0, scale, 10*scale, 1e-3, 0.1) * src.Unit()
				}
			case 2:
				j.Requests = units
				j.Rate = src.pick(1, 50, 1000, 1e5)
			}
			j.HostPre, j.HostPost = hostTimeOf(src, scale), hostTimeOf(src, scale)
		}
		if src.Chance(1, 2) {
			j.HostPerKernel = hostTimeOf(src, scale)
		}
		work += float64(units) * opSum
		c.jobs = append(c.jobs, j)
	}
	// Share mode takes a step per slice of kernel time; keep it to about
	// 20 000 steps so that one input runs in milliseconds.
	slice := o.Slice
	if slice <= 0 {
		slice = DefaultSlice
	}
	if work*1.3/20000 > slice {
		o.Slice = work * 1.3 / 20000
	}
	c.o = o
	return c
}

// kernelDurations is how long every kernel of c's jobs runs, as the
// simulator models it (package documentation): cost model × per-id model
// error × per-launch jitter, both clamped and floored as Simulate does.
func kernelDurations(c *simCase) [][][]float64 {
	o := c.o
	jit, me := clamp(o.Jitter, 0, 0.3), clamp(o.ModelError, 0, 0.3)
	d := make([][][]float64, len(c.jobs))
	for i := range c.jobs {
		j := &c.jobs[i]
		units := j.Iterations
		if j.Graph.Kind == workload.Infer {
			units = j.Requests
			if units == 0 {
				units = len(j.Arrivals)
			}
		}
		g := j.Graph
		d[i] = make([][]float64, units)
		for u := range units {
			d[i][u] = make([]float64, len(g.Ops))
			for k := range g.Ops {
				op := &g.Ops[k]
				prior := o.Profile.OpSeconds(op)
				base := prior * math.Max(1+me*hnorm(o.Seed, tagModel, KernelID(op, g), 0, 0), 0.01)
				f := 1.0
				if jit != 0 {
					f = 1 + jit*hnorm(o.Seed, tagKernel, uint64(i), uint64(u), uint64(k))
				}
				d[i][u][k] = base * math.Max(f, 0.01)
			}
		}
	}
	return d
}

// FuzzSimulateRandomJobs checks the simulator's promises on random job
// sets under every mode; simProperties lists them.
func FuzzSimulateRandomJobs(f *testing.F) {
	for _, s := range []struct {
		seed uint64
		data []byte
	}{
		{1, nil},
		{2, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{3, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{4, nil},
		{5, nil},
		{6, nil},
		{7, nil},
		{8, nil},
		// Requests at 1e14 s, where a 2 ms slice is below the clock's
		// resolution: Share mode spun for ever (30). Exact FIKIT cases
		// whose bound fails if the remaining gap ignores the time already
		// spent in it: between kernels (558), in pre-processing (205).
		{30, nil},
		{205, nil},
		{558, nil},
	} {
		f.Add(s.seed, s.data)
	}
	f.Fuzz(fuzzSimulate)
}

// fuzzSimulate is FuzzSimulateRandomJobs' check of one input.
func fuzzSimulate(t *testing.T, seed uint64, data []byte) {
	c := genSimCase(newSimSource(seed, data))
	durs := kernelDurations(c)
	res := map[Mode]*Result{}
	for _, m := range Modes {
		calls := 0
		r, err := Simulate(c.jobs, c.options(m, &calls, nil))
		if err != nil {
			t.Fatalf("%s: a valid case was refused: %v\n%v", m, err, c)
		}
		kernels := 0
		for _, jr := range r.Jobs {
			kernels += jr.Kernels
		}
		if c.hook != 0 && calls != kernels {
			t.Errorf("%s: ReadyAt called %d times for %d kernels", m, calls, kernels)
		}
		// Determinism, and the timeline changes nothing else.
		again, err := Simulate(c.jobs, c.options(m, &calls, nil))
		if err != nil || !reflect.DeepEqual(r, again) {
			t.Errorf("%s: two runs of the same case differ (%v)", m, err)
		}
		o := c.options(m, &calls, nil)
		o.Timeline = false
		quiet, err := Simulate(c.jobs, o)
		if err != nil || quiet.Timeline != nil {
			t.Errorf("%s: without a timeline: %v, %d spans", m, err, len(quiet.Timeline))
		} else if quiet.Timeline = r.Timeline; !reflect.DeepEqual(r, quiet) {
			t.Errorf("%s: keeping the timeline changed the result", m)
		}
		simProperties(t, c, m, r, durs)
		res[m] = r
		if t.Failed() {
			t.Fatalf("case:\n%v", c)
		}
	}
	crossModeProperties(t, c, res)
	if t.Failed() {
		t.Fatalf("case:\n%v", c)
	}
}

// within is a ≤ b up to rounding at the scale of the times involved.
func within(a, b, scale float64) bool { return a <= b+1e-9*math.Max(1, scale) }

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// doneTimes is when each request or iteration of job i was done, where the
// result shows it: explicit arrivals plus latency, the running sum of
// closed-loop latencies, the last kernel's end of a training iteration;
// nil where it does not (Poisson arrivals).
func doneTimes(j *Job, jr JobResult, spans []Span, i int) []float64 {
	switch {
	case j.Graph.Kind != workload.Infer:
		done := make([]float64, j.Iterations)
		for _, sp := range spans {
			if sp.Job == i && sp.Op == len(j.Graph.Ops)-1 {
				done[sp.Unit] = sp.End
			}
		}
		return done
	case len(j.Arrivals) > 0:
		done := make([]float64, len(jr.Latencies))
		for u, l := range jr.Latencies {
			done[u] = j.Arrivals[u] + l
		}
		return done
	case j.Rate == 0:
		done := make([]float64, len(jr.Latencies))
		var t float64
		for u, l := range jr.Latencies {
			t += l
			done[u] = t
		}
		return done
	}
	return nil
}

// simProperties checks one run r of case c under mode m:
//
//   - every figure is a finite number >= 0, the gap fill in [0, 1];
//   - every kernel of every job runs exactly once (Share: in one or more
//     spans that follow each other), in stream order, for the duration
//     the model gives it; Busy is their sum; no two spans overlap (one
//     compute engine, in every mode);
//   - no kernel starts before its request arrives, a job completes when
//     its last unit is done, requests are answered in order, and the
//     latency percentiles are nearest-rank order statistics of the
//     latencies;
//   - the gap fill figures follow from the spans and the completion
//     times as the package documentation defines them;
//   - Exclusive: no kernel starts while a job of higher priority is
//     active;
//   - FIKIT: no lower-priority kernel starts during a top job's
//     measurement phase, and when one job alone has the top priority its
//     kernels waited in all at most the lengths of the lower-priority
//     kernels each of them started right after (a low-priority kernel
//     can hold it up once, by its own length, and never twice).
func simProperties(t *testing.T, c *simCase, m Mode, r *Result, durs [][][]float64) {
	t.Helper()
	if r.Mode != m || len(r.Jobs) != len(c.jobs) {
		t.Fatalf("%s: result for mode %s with %d jobs", m, r.Mode, len(r.Jobs))
	}
	scale := r.Makespan
	for _, x := range []float64{r.Makespan, r.HPIdle, r.LPFill, r.GapFill} {
		if !finite(x) || x < 0 {
			t.Errorf("%s: makespan %g HP idle %g LP fill %g gap fill %g", m, r.Makespan, r.HPIdle, r.LPFill, r.GapFill)
			break
		}
	}
	if r.GapFill > 1 || !within(r.LPFill, r.HPIdle, scale) {
		t.Errorf("%s: gap fill %g: LP fill %g of HP idle %g", m, r.GapFill, r.LPFill, r.HPIdle)
	}
	for _, e := range []ErrorStats{r.DurErr, r.GapErr} {
		if e.N < 0 || e.Unscorable < 0 || !finite(e.SumAbs) || !finite(e.SumAbsPct) || !finite(e.SumActual) ||
			e.SumAbs < 0 || e.SumAbsPct < 0 || e.SumActual < 0 || !finite(e.MAPE()) || !finite(e.WAPE()) || e.MAPE() < 0 || e.WAPE() < 0 {
			t.Errorf("%s: error stats %+v (MAPE %g WAPE %g)", m, e, e.MAPE(), e.WAPE())
		}
	}

	// The timeline: one engine, kernels in stream order, modelled
	// durations.
	type kernel struct{ job, unit, op int }
	ran := map[kernel]float64{}
	pieces := map[kernel]int{}
	lastOf := make([]kernel, len(c.jobs))
	for i := range lastOf {
		lastOf[i] = kernel{i, 0, -1}
	}
	firstStart := make([]float64, len(c.jobs))
	lastEnd := make([]float64, len(c.jobs))
	unitStart := make([][]float64, len(c.jobs))
	for i := range unitStart {
		firstStart[i] = math.Inf(1)
		unitStart[i] = make([]float64, len(durs[i]))
		for u := range unitStart[i] {
			unitStart[i][u] = math.Inf(1)
		}
	}
	prevEnd := 0.0
	for n, sp := range r.Timeline {
		if !finite(sp.Start) || !finite(sp.End) || sp.Start < 0 || sp.End < sp.Start {
			t.Fatalf("%s: span %d %+v", m, n, sp)
		}
		if sp.Job < 0 || sp.Job >= len(c.jobs) || sp.Unit < 0 || sp.Unit >= len(durs[sp.Job]) || sp.Op < 0 || sp.Op >= len(durs[sp.Job][sp.Unit]) {
			t.Fatalf("%s: span %d %+v names no kernel", m, n, sp)
		}
		if !within(prevEnd, sp.Start, scale) {
			t.Errorf("%s: span %d %+v starts before the last one ended at %g", m, n, sp, prevEnd)
		}
		prevEnd = sp.End
		k := kernel{sp.Job, sp.Unit, sp.Op}
		last := lastOf[sp.Job]
		next := kernel{last.job, last.unit, last.op + 1}
		if next.op == len(durs[sp.Job][0]) {
			next = kernel{last.job, last.unit + 1, 0}
		}
		switch {
		case k == next:
		case k == last && m == Share: // a preempted kernel resumes
		default:
			t.Errorf("%s: span %d runs kernel %+v after %+v", m, n, k, last)
		}
		lastOf[sp.Job] = k
		ran[k] += sp.End - sp.Start
		pieces[k]++
		firstStart[sp.Job] = math.Min(firstStart[sp.Job], sp.Start)
		lastEnd[sp.Job] = math.Max(lastEnd[sp.Job], sp.End)
		unitStart[sp.Job][sp.Unit] = math.Min(unitStart[sp.Job][sp.Unit], sp.Start)
	}
	for i := range c.jobs {
		j, jr := &c.jobs[i], r.Jobs[i]
		units := len(durs[i])
		if jr.Name != j.Name || jr.Priority != j.Priority {
			t.Errorf("%s: job %d reported as %q priority %d", m, i, jr.Name, jr.Priority)
		}
		if jr.Kernels != units*len(j.Graph.Ops) {
			t.Errorf("%s: job %d ran %d kernels of %d", m, i, jr.Kernels, units*len(j.Graph.Ops))
		}
		var busy float64
		for u := range units {
			for k, d := range durs[i][u] {
				busy += d
				got, ok := ran[kernel{i, u, k}]
				if !ok {
					t.Errorf("%s: kernel %d/%d/%d never ran", m, i, u, k)
				} else if math.Abs(got-d) > 1e-9*math.Max(d, 1e-3)+1e-12*float64(pieces[kernel{i, u, k}])*math.Max(1, scale) {
					t.Errorf("%s: kernel %d/%d/%d ran %g s, modelled %g s", m, i, u, k, got, d)
				}
			}
		}
		if math.Abs(jr.Busy-busy) > 1e-9*math.Max(busy, 1e-3) {
			t.Errorf("%s: job %d busy %g, its kernels take %g", m, i, jr.Busy, busy)
		}
		for _, x := range []float64{jr.JCT, jr.P50, jr.P99, jr.Mean, jr.Busy, jr.Delay} {
			if !finite(x) || x < 0 {
				t.Errorf("%s: job %d: JCT %g p50 %g p99 %g mean %g busy %g delay %g", m, i, jr.JCT, jr.P50, jr.P99, jr.Mean, jr.Busy, jr.Delay)
				break
			}
		}
		if jr.Preemptions < 0 || (m != Share && jr.Preemptions != 0) {
			t.Errorf("%s: job %d preempted %d times", m, i, jr.Preemptions)
		}
		if !within(lastEnd[i], jr.JCT, scale) || (j.Graph.Kind == workload.Train && jr.JCT != lastEnd[i]) {
			t.Errorf("%s: job %d completed at %g, its last kernel ended at %g", m, i, jr.JCT, lastEnd[i])
		}
		if jr.JCT > r.Makespan {
			t.Errorf("%s: job %d completed at %g, after the makespan %g", m, i, jr.JCT, r.Makespan)
		}

		// Requests: counts, arrival, order, percentiles.
		if j.Graph.Kind != workload.Infer {
			if len(jr.Latencies) != 0 || jr.P50 != 0 || jr.P99 != 0 || jr.Mean != 0 {
				t.Errorf("%s: training job %d has request latencies %v", m, i, jr.Latencies)
			}
		} else {
			if len(jr.Latencies) != units {
				t.Errorf("%s: job %d answered %d requests of %d", m, i, len(jr.Latencies), units)
				continue
			}
			for u, l := range jr.Latencies {
				if !finite(l) || l < 0 {
					t.Errorf("%s: job %d request %d latency %g", m, i, u, l)
				}
				if len(j.Arrivals) > 0 && unitStart[i][u] < j.Arrivals[u] {
					t.Errorf("%s: job %d request %d arrived at %g, its first kernel started at %g", m, i, u, j.Arrivals[u], unitStart[i][u])
				}
			}
			sorted := slices.Clone(jr.Latencies)
			sort.Float64s(sorted)
			if jr.P50 != Percentile(sorted, 0.5) || jr.P99 != Percentile(sorted, 0.99) || jr.P50 > jr.P99 ||
				jr.P50 < sorted[0] || jr.P99 > sorted[len(sorted)-1] ||
				!within(sorted[0], jr.Mean, sorted[len(sorted)-1]) || !within(jr.Mean, sorted[len(sorted)-1], sorted[len(sorted)-1]) {
				t.Errorf("%s: job %d p50 %g p99 %g mean %g of latencies %v", m, i, jr.P50, jr.P99, jr.Mean, jr.Latencies)
			}
		}
		if done := doneTimes(j, jr, r.Timeline, i); done != nil {
			for u := range done {
				if u > 0 && !within(done[u-1], done[u], scale) { // arrival + latency rounds
					t.Errorf("%s: job %d unit %d done at %g, before unit %d at %g", m, i, u, done[u], u-1, done[u-1])
				}
			}
			if d := done[len(done)-1]; math.Abs(d-jr.JCT) > 1e-9*math.Max(1, scale)*float64(len(done)) {
				t.Errorf("%s: job %d last unit done at %g, completion %g", m, i, d, jr.JCT)
			}
		}
	}

	// Gap fill, from its definition.
	hp := -1
	for i := range c.jobs {
		hp = max(hp, c.jobs[i].Priority)
	}
	winStart, winEnd := math.Inf(1), 0.0
	for i := range c.jobs {
		if c.jobs[i].Priority == hp {
			winStart, winEnd = math.Min(winStart, firstStart[i]), math.Max(winEnd, r.Jobs[i].JCT)
		}
	}
	var hpBusy, lpIn float64
	for _, sp := range r.Timeline {
		if c.jobs[sp.Job].Priority == hp {
			hpBusy += sp.End - sp.Start
		} else {
			lpIn += math.Max(0, math.Min(sp.End, winEnd)-math.Max(sp.Start, winStart))
		}
	}
	idle := math.Max(0, winEnd-winStart-hpBusy)
	tol := 1e-9 * math.Max(1, scale) * float64(len(r.Timeline)+1)
	if math.Abs(idle-r.HPIdle) > tol || math.Abs(lpIn-r.LPFill) > tol {
		t.Errorf("%s: HP idle %g LP fill %g, the spans give %g and %g", m, r.HPIdle, r.LPFill, idle, lpIn)
	}
	if want := math.Min(1, lpIn/idle); idle > tol && math.Abs(want-r.GapFill) > 1e-6 {
		t.Errorf("%s: gap fill %g, the spans give %g", m, r.GapFill, want)
	}

	switch m {
	case Exclusive:
		for _, sp := range r.Timeline {
			for h := range c.jobs {
				if c.jobs[h].Priority > c.jobs[sp.Job].Priority && !within(r.Jobs[h].JCT, sp.Start, scale) {
					t.Errorf("exclusive: job %d (priority %d) ran %+v while job %d (priority %d) was active until %g",
						sp.Job, c.jobs[sp.Job].Priority, sp, h, c.jobs[h].Priority, r.Jobs[h].JCT)
				}
			}
		}
	case FIKIT:
		// Measurement phase: low priority waits for every top job that
		// is active and has not completed MeasureUnits units.
		for i := range c.jobs {
			if c.jobs[i].Priority != hp {
				continue
			}
			done := doneTimes(&c.jobs[i], r.Jobs[i], r.Timeline, i)
			if done == nil {
				continue
			}
			measured := 0.0
			if mu := c.o.MeasureUnits; mu > 0 {
				measured = done[min(mu, len(done))-1]
			}
			for _, sp := range r.Timeline {
				if c.jobs[sp.Job].Priority < hp && sp.Start < measured && sp.Start < r.Jobs[i].JCT &&
					!within(measured, sp.Start, scale) {
					t.Errorf("fikit: %+v started during job %d's measurement phase (until %g)", sp, i, measured)
				}
			}
		}
		if top := uniqueTop(c); top >= 0 {
			// Each of the top job's kernels waits for at most the one
			// lower-priority kernel it found running.
			var held float64
			for n := 1; n < len(r.Timeline); n++ {
				a, b := r.Timeline[n-1], r.Timeline[n]
				if b.Job == top && a.Job != top && b.Start == a.End {
					held += a.End - a.Start
				}
			}
			if !within(r.Jobs[top].Delay, held, scale*float64(len(r.Timeline))) {
				t.Errorf("fikit: top job %d waited %g s in all, more than the %g s of the low-priority kernels it started after",
					top, r.Jobs[top].Delay, held)
			}
		}
	}
}

// uniqueTop is the one job at the highest priority, or -1 when several
// share it.
func uniqueTop(c *simCase) int {
	top, n := -1, 0
	for i := range c.jobs {
		switch {
		case top < 0 || c.jobs[i].Priority > c.jobs[top].Priority:
			top, n = i, 1
		case c.jobs[i].Priority == c.jobs[top].Priority:
			n++
		}
	}
	if n > 1 {
		return -1
	}
	return top
}

// crossModeProperties compares the runs of one case under every mode:
//
//   - every mode sees the same kernel durations, so each job's busy time
//     is the same;
//   - sharing can only delay a job: no job completes, and no request of
//     it is answered or served, faster than alone (simulated alone where
//     the randomness allows it: no jitter, no Poisson arrivals, since
//     those are hashed from the job's index), and a job alone at the top
//     priority runs under Exclusive exactly as alone, so no mode beats
//     Exclusive for it;
//   - FIKIT with exact predictions (no jitter, no cost-model error, no
//     ReadyAt delays, distinct kernel ids) and a top job whose gaps are
//     all host time (training, or a closed-loop service): the top job is
//     held up at most by the margin, as a fraction of its idle time alone,
//     and with no margin not at all.
func crossModeProperties(t *testing.T, c *simCase, res map[Mode]*Result) {
	t.Helper()
	ex := res[Exclusive]
	scale := 0.0
	for _, r := range res {
		scale = math.Max(scale, r.Makespan)
	}
	for i := range c.jobs {
		for _, m := range Modes {
			if res[m].Jobs[i].Busy != ex.Jobs[i].Busy {
				t.Errorf("job %d: busy %g under %s, %g under exclusive", i, res[m].Jobs[i].Busy, m, ex.Jobs[i].Busy)
			}
		}
	}
	exact := clamp(c.o.Jitter, 0, 0.3) == 0 && clamp(c.o.HostJitter, 0, 0.3) == 0
	for i := range c.jobs {
		j := &c.jobs[i]
		var alone *Result
		if exact && j.Rate == 0 {
			calls := 0
			r, err := Simulate([]Job{*j}, c.options(Exclusive, &calls, func(int) int { return i }))
			if err != nil {
				t.Fatalf("job %d alone: %v", i, err)
			}
			alone = r
		} else if uniqueTop(c) == i {
			alone = &Result{Jobs: []JobResult{ex.Jobs[i]}}
		}
		if alone == nil {
			continue
		}
		a := alone.Jobs[0]
		for _, m := range Modes {
			jr := res[m].Jobs[i]
			if !within(a.JCT, jr.JCT, scale) {
				t.Errorf("job %d completed at %g under %s, faster than alone (%g)", i, jr.JCT, m, a.JCT)
			}
			for u := range min(len(a.Latencies), len(jr.Latencies)) {
				if !within(a.Latencies[u], jr.Latencies[u], scale) {
					t.Errorf("job %d request %d: latency %g under %s, %g alone", i, u, jr.Latencies[u], m, a.Latencies[u])
				}
			}
		}
	}

	top := uniqueTop(c)
	if top < 0 || !exact || clamp(c.o.ModelError, 0, 0.3) != 0 || c.hook != 0 || c.sharedIDs {
		return
	}
	if j := &c.jobs[top]; j.Graph.Kind == workload.Infer && (len(j.Arrivals) > 0 || j.Rate > 0) {
		return // waits for requests are predicted, not known
	}
	fk := res[FIKIT]
	slack := c.o.Margin * ex.HPIdle
	if !within(fk.Jobs[top].JCT, ex.Jobs[top].JCT+slack, scale*float64(len(fk.Timeline))) {
		t.Errorf("fikit with exact predictions: top job %d completed at %g, exclusive %g + margin %g × idle %g",
			top, fk.Jobs[top].JCT, ex.Jobs[top].JCT, c.o.Margin, ex.HPIdle)
	}
	if c.o.Margin == 0 {
		for u, l := range fk.Jobs[top].Latencies {
			if !within(l, ex.Jobs[top].Latencies[u], scale*float64(len(fk.Timeline))) {
				t.Errorf("fikit with exact predictions and no margin: top job %d request %d latency %g, exclusive %g",
					top, u, l, ex.Jobs[top].Latencies[u])
			}
		}
	}
}

// badFloat is a value no time, rate or fraction may take: NaN, an
// infinity, or a negative number (tiny to huge), or random bits that
// decode to one of those; negative is false for fields where a negative
// value has a documented meaning, and gives NaN or an infinity only.
func badFloat(src *simSource, negative bool) float64 {
	var x float64
	switch src.Intn(6) {
	case 0:
		x = math.NaN()
	case 1:
		x = math.Inf(1)
	case 2:
		x = math.Inf(-1)
	case 3:
		x = -src.pick(5e-324, 1e-9, 1, math.MaxFloat64)
	default:
		x = math.Float64frombits(src.u64())
	}
	if !negative && finite(x) {
		return math.Inf(1)
	}
	if finite(x) && x >= 0 {
		return -x - 1
	}
	return x
}

// cloneGraph copies g deep enough to change its fields and ops.
func cloneGraph(g *workload.Graph) *workload.Graph {
	c := *g
	c.Ops = slices.Clone(g.Ops)
	return &c
}

// corruption breaks one field of a valid case; want is what the error must
// mention (case-insensitive): the field, in the words Simulate uses.
type corruption struct {
	name, want string
	apply      func(src *simSource, jobs []Job, o *Options, i int)
}

var corruptions = []corruption{
	{"mode", "mode", func(src *simSource, _ []Job, o *Options, _ int) {
		o.Mode = Mode(fmt.Sprintf("mode-%x", src.u64()))
		if src.Chance(1, 4) {
			o.Mode = "FIKIT" // names are case-sensitive
		}
	}},
	{"jitter", "Jitter", func(src *simSource, _ []Job, o *Options, _ int) { o.Jitter = badFloat(src, false) }},
	{"host jitter", "HostJitter", func(src *simSource, _ []Job, o *Options, _ int) { o.HostJitter = badFloat(src, false) }},
	{"model error", "ModelError", func(src *simSource, _ []Job, o *Options, _ int) { o.ModelError = badFloat(src, false) }},
	{"slice", "Slice", func(src *simSource, _ []Job, o *Options, _ int) {
		o.Slice = badFloat(src, false)
		if src.Chance(1, 2) {
			o.Slice = MinSlice * src.pick(0.5, 1e-10, 1e-300)
		}
	}},
	{"switch cost", "SwitchCost", func(src *simSource, _ []Job, o *Options, _ int) { o.SwitchCost = badFloat(src, true) }},
	{"margin", "Margin", func(src *simSource, _ []Job, o *Options, _ int) { o.Margin = badFloat(src, true) }},
	{"measure units", "MeasureUnits", func(src *simSource, _ []Job, o *Options, _ int) { o.MeasureUnits = -1 - src.Intn(256) }},
	{"alpha", "Alpha", func(src *simSource, _ []Job, o *Options, _ int) { o.Alpha = badFloat(src, false) }},
	{"profile", "mem_bandwidth", func(src *simSource, _ []Job, o *Options, _ int) { o.Profile.MemBandwidth = badFloat(src, true) }},
	{"priority", "priority", func(src *simSource, jobs []Job, _ *Options, i int) {
		jobs[i].Priority = []int{-1, MaxPriority + 1, math.MinInt, math.MaxInt}[src.Intn(4)]
	}},
	{"no graph", "graph", func(src *simSource, jobs []Job, _ *Options, i int) {
		jobs[i].Graph = nil
		if src.Chance(1, 2) {
			jobs[i].Graph = &workload.Graph{Model: "empty", Kind: workload.Infer, Batch: 1}
		}
	}},
	{"units", "> 0", func(src *simSource, jobs []Job, _ *Options, i int) {
		n := -src.Intn(256)
		if jobs[i].Graph.Kind == workload.Infer {
			jobs[i].Requests, jobs[i].Arrivals = n, nil
		} else {
			jobs[i].Iterations = n
		}
	}},
	{"arrivals", "arrival", func(src *simSource, jobs []Job, _ *Options, i int) {
		j := &jobs[i]
		j.Graph = cloneGraph(j.Graph)
		j.Graph.Kind = workload.Infer
		j.Rate = 0
		j.Arrivals = []float64{0, 1e-3, 2e-3, 3e-3}
		j.Requests = 0
		switch src.Intn(3) {
		case 0:
			j.Arrivals[src.Intn(4)] = badFloat(src, true)
		case 1:
			j.Arrivals[1], j.Arrivals[2] = j.Arrivals[2], j.Arrivals[1] // out of order
		case 2:
			j.Requests = 5 + src.Intn(10) // more requests than arrival times
		}
	}},
	{"rate", "rate", func(src *simSource, jobs []Job, _ *Options, i int) {
		j := &jobs[i]
		j.Graph = cloneGraph(j.Graph)
		j.Graph.Kind = workload.Infer
		j.Requests, j.Arrivals, j.Rate = 3, nil, badFloat(src, true)
	}},
	{"host time", "host", func(src *simSource, jobs []Job, _ *Options, i int) {
		j := &jobs[i]
		j.Graph = cloneGraph(j.Graph)
		bad := badFloat(src, true)
		switch r := src.Intn(4); {
		case r == 0 && j.Graph.Kind == workload.Infer:
			j.HostPre = bad
		case r == 0:
			j.HostPerIteration = bad
		case r == 1 && j.Graph.Kind == workload.Infer:
			j.HostPost = bad
		case r == 1:
			j.HostPerIteration, j.Graph.HostSecondsPerIteration = 0, bad
		case r == 2:
			j.HostPerKernel = bad
		default:
			j.HostPerKernel, j.Graph.HostSecondsPerKernel = 0, bad
		}
	}},
	{"op cost", "op ", func(src *simSource, jobs []Job, _ *Options, i int) {
		j := &jobs[i]
		j.Graph = cloneGraph(j.Graph)
		op := &j.Graph.Ops[src.Intn(len(j.Graph.Ops))]
		switch src.Intn(3) {
		case 0:
			op.FLOPs = badFloat(src, true)
		case 1:
			op.MemBytes = badFloat(src, true)
		default:
			op.MeasuredSeconds = badFloat(src, true)
		}
	}},
}

// FuzzSimulateRejectsInvalidInput breaks one field of a valid random case
// with garbage (NaN, infinities, negative numbers, random bits, integers
// out of range, unknown names) and checks that Simulate refuses it with an
// error that names the field, under every mode, rather than panicking,
// running for ever or returning figures that are not numbers.
func FuzzSimulateRejectsInvalidInput(f *testing.F) {
	for k := range corruptions {
		f.Add(uint64(k+1), []byte{byte(k)})
		f.Add(uint64(k+100), []byte{byte(k), 1, 2, 3})
	}
	f.Fuzz(fuzzSimulateInvalid)
}

func fuzzSimulateInvalid(t *testing.T, seed uint64, data []byte) {
	src := newSimSource(seed, data)
	cor := corruptions[src.Intn(len(corruptions))]
	c := genSimCase(src)
	jobs := slices.Clone(c.jobs)
	i := src.Intn(len(jobs))
	o := c.options(FIKIT, new(int), nil)
	cor.apply(src, jobs, &o, i)
	for _, m := range Modes {
		om := o
		if cor.name != "mode" {
			om.Mode = m
		}
		r, err := Simulate(jobs, om)
		if err == nil {
			t.Fatalf("%s: broken %s (job %d) accepted (makespan %g)\n%v", m, cor.name, i, r.Makespan, c)
		}
		if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(cor.want)) {
			t.Fatalf("%s: broken %s (job %d): error %q does not mention %q", m, cor.name, i, err, cor.want)
		}
	}
}
