package fikit

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

const ms = 1e-3

// graphOf builds a graph whose ops take exactly the given seconds on any
// device (MeasuredSeconds), each with its own kind so ids differ.
func graphOf(kind workload.JobKind, name string, secs ...float64) *workload.Graph {
	g := &workload.Graph{Model: name, Kind: kind, Batch: 1}
	for i, s := range secs {
		g.Tensors = append(g.Tensors, workload.Tensor{ID: i, Bytes: int64(1024 * (i + 1)), Kind: workload.Activation})
		g.Ops = append(g.Ops, workload.Op{ID: i, Kind: name + "-op" + string(rune('a'+i)),
			Outputs: []int{i}, MeasuredSeconds: s})
	}
	return g
}

func exactOptions(m Mode) Options {
	return Options{Mode: m, Profile: gpu.MustProfile("h100-80gb"), Slice: 2 * ms, MeasureUnits: 1}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Scenario A: an inference service (two 1 ms kernels, 2 ms pre-, 1 ms
// post-processing, requests at 0 and 10 ms) with a training job (1.5 ms and
// 0.5 ms kernels, 4 iterations, no host time). Every figure below is worked
// out by hand in the comments.
func scenarioA() []Job {
	return []Job{
		{Name: "hp", Graph: graphOf(workload.Infer, "hp", 1*ms, 1*ms), Priority: 9,
			Arrivals: []float64{0, 10 * ms}, HostPre: 2 * ms, HostPost: 1 * ms},
		{Name: "lp", Graph: graphOf(workload.Train, "lp", 1.5*ms, 0.5*ms), Priority: 0, Iterations: 4},
	}
}

func TestModesHandChecked(t *testing.T) {
	type want struct {
		hpJCT, lpJCT float64
		lat          []float64
		gapFill      float64
		hpDelay      float64
	}
	cases := []struct {
		mode Mode
		want want
	}{
		// HP alone: r0 kernels [2,3] [3,4], done 5; r1 [12,13] [13,14],
		// done 15. LP only after 15: 4 × 2 ms → 23. Window [2,15], HP
		// busy 4 ms, idle 9 ms, nothing filled.
		{Exclusive, want{15 * ms, 23 * ms, []float64{5 * ms, 5 * ms}, 0, 0}},
		// FIFO: LP [0,1.5] [1.5,2]; at 2 HP and LP tie, HP (lower index)
		// [2,3]; LP (ready 2) [3,4.5]; HP k1 (ready 3) [4.5,5.5], done
		// 6.5; LP finishes at 10; r1 alone. HP waited 1.5 ms. LP inside
		// [2,15]: [3,4.5] and [5.5,10] = 6 ms of 9.
		{Streams, want{15 * ms, 10 * ms, []float64{6.5 * ms, 5 * ms}, 6.0 / 9, 1.5 * ms}},
		// Slices of 2 ms: LP [0,2]; HP owns [2,4] and runs both kernels;
		// HP idle, so LP gets [4,6], then renewed slices, done at 10.
		// LP inside [2,15]: [4,10] = 6 ms of 9.
		{Share, want{15 * ms, 10 * ms, []float64{5 * ms, 5 * ms}, 6.0 / 9, 0}},
		// Measurement phase = request 0 (LP held until 5). At 5 the
		// service waits for a request: remaining = pre 2 ms (wait not yet
		// measured), so LP runs 1.5/0.5 ms kernels from 5 to 10.5; r1
		// arrived at 10: remaining 2 − 0.5 = 1.5 ≥ 0.5 → [10.5,11]; at 11
		// remaining 1 < 1.5 → wait. HP r1 [12,14], post until 15 (1 ms
		// predicted < 1.5) → LP [15,17]. Fill [5,11] = 6 of 9.
		{FIKIT, want{15 * ms, 17 * ms, []float64{5 * ms, 5 * ms}, 6.0 / 9, 0}},
	}
	for _, c := range cases {
		t.Run(string(c.mode), func(t *testing.T) {
			r, err := Simulate(scenarioA(), exactOptions(c.mode))
			if err != nil {
				t.Fatal(err)
			}
			hp, lp := r.Jobs[0], r.Jobs[1]
			if !near(hp.JCT, c.want.hpJCT) || !near(lp.JCT, c.want.lpJCT) {
				t.Errorf("JCT hp %.4f lp %.4f, want %.4f %.4f", hp.JCT, lp.JCT, c.want.hpJCT, c.want.lpJCT)
			}
			if len(hp.Latencies) != len(c.want.lat) {
				t.Fatalf("latencies %v, want %v", hp.Latencies, c.want.lat)
			}
			for i := range c.want.lat {
				if !near(hp.Latencies[i], c.want.lat[i]) {
					t.Errorf("latency[%d] = %.4f, want %.4f", i, hp.Latencies[i], c.want.lat[i])
				}
			}
			if !near(r.HPIdle, 9*ms) {
				t.Errorf("HP idle %.4f, want 0.009", r.HPIdle)
			}
			if !near(r.GapFill, c.want.gapFill) {
				t.Errorf("gap fill %.4f, want %.4f", r.GapFill, c.want.gapFill)
			}
			if !near(hp.Delay, c.want.hpDelay) {
				t.Errorf("HP delay %.4f, want %.4f", hp.Delay, c.want.hpDelay)
			}
			if hp.Busy != 4*ms || lp.Busy != 8*ms {
				t.Errorf("busy hp %.4f lp %.4f, want 0.004 0.008", hp.Busy, lp.Busy)
			}
		})
	}
}

// Scenario B: a 5 ms LP kernel that a 1 ms HP kernel (ready at 1 ms)
// arrives behind.
func TestShareSlicesAndPreempts(t *testing.T) {
	jobs := []Job{
		{Name: "hp", Graph: graphOf(workload.Infer, "hp", 1*ms), Priority: 9, Requests: 1, HostPre: 1 * ms},
		{Name: "lp", Graph: graphOf(workload.Train, "lp", 5*ms), Priority: 0, Iterations: 1},
	}
	cases := []struct {
		mode         Mode
		hpLat, lpJCT float64
		spans        []Span
	}{
		// LP owns [0,2]; at 2 HP waits, so LP is cut and HP gets [2,3];
		// LP resumes at 3 with 3 ms left and nobody waiting: ends at 6.
		{Share, 3 * ms, 6 * ms, []Span{{1, 0, 0, 0, 2 * ms}, {0, 0, 0, 2 * ms, 3 * ms}, {1, 0, 0, 3 * ms, 6 * ms}}},
		// Arrival order, no preemption: HP waits for the whole LP kernel.
		{Streams, 6 * ms, 5 * ms, []Span{{1, 0, 0, 0, 5 * ms}, {0, 0, 0, 5 * ms, 6 * ms}}},
		{Exclusive, 2 * ms, 7 * ms, []Span{{0, 0, 0, 1 * ms, 2 * ms}, {1, 0, 0, 2 * ms, 7 * ms}}},
		// Nothing measured yet: the gap is unknown, so LP waits.
		{FIKIT, 2 * ms, 7 * ms, []Span{{0, 0, 0, 1 * ms, 2 * ms}, {1, 0, 0, 2 * ms, 7 * ms}}},
	}
	for _, c := range cases {
		t.Run(string(c.mode), func(t *testing.T) {
			o := exactOptions(c.mode)
			o.MeasureUnits = 0
			o.Timeline = true
			r, err := Simulate(jobs, o)
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.Jobs[0].P50, c.hpLat) || !near(r.Jobs[1].JCT, c.lpJCT) {
				t.Errorf("hp latency %.4f lp JCT %.4f, want %.4f %.4f", r.Jobs[0].P50, r.Jobs[1].JCT, c.hpLat, c.lpJCT)
			}
			if len(r.Timeline) != len(c.spans) {
				t.Fatalf("timeline %+v, want %+v", r.Timeline, c.spans)
			}
			for i, sp := range r.Timeline {
				w := c.spans[i]
				if sp.Job != w.Job || !near(sp.Start, w.Start) || !near(sp.End, w.End) {
					t.Errorf("span %d = %+v, want %+v", i, sp, w)
				}
			}
			if c.mode == Share && r.Jobs[1].Preemptions != 1 {
				t.Errorf("preemptions %d, want 1", r.Jobs[1].Preemptions)
			}
		})
	}
}

// periodic is a service with host launch gaps and a 10 ms request period
// beside a training job of mixed kernel sizes.
func periodic() []Job {
	arr := make([]float64, 12)
	for i := range arr {
		arr[i] = float64(i) * 10 * ms
	}
	return []Job{
		{Name: "hp", Graph: graphOf(workload.Infer, "hp", 0.2*ms, 0.01*ms, 0.5*ms, 0.3*ms), Priority: 9,
			Arrivals: arr, HostPre: 2 * ms, HostPost: 1 * ms, HostPerKernel: 0.4 * ms},
		{Name: "lp", Graph: graphOf(workload.Train, "lp", 0.3*ms, 1.2*ms, 2.5*ms, 0.05*ms, 0.7*ms), Priority: 0,
			Iterations: 40, HostPerIteration: 0.5 * ms, HostPerKernel: 0.01 * ms},
	}
}

// With exact predictions (no jitter, no cost-model error, regular
// arrivals) FIKIT must never delay the service: every request is as fast
// as under Exclusive, while low priority still fills most of the gaps.
func TestFIKITNeverDelaysHPWithExactPredictions(t *testing.T) {
	o := exactOptions(FIKIT)
	o.MeasureUnits = 2
	fk, err := Simulate(periodic(), o)
	if err != nil {
		t.Fatal(err)
	}
	o.Mode = Exclusive
	ex, err := Simulate(periodic(), o)
	if err != nil {
		t.Fatal(err)
	}
	if fk.Jobs[0].Delay > 1e-9 {
		t.Errorf("HP kernels waited %.9fs in total under fikit", fk.Jobs[0].Delay)
	}
	for i, l := range fk.Jobs[0].Latencies {
		if !near(l, ex.Jobs[0].Latencies[i]) {
			t.Errorf("request %d: latency %.6f, exclusive %.6f", i, l, ex.Jobs[0].Latencies[i])
		}
	}
	if fk.GapFill < 0.6 || ex.GapFill != 0 {
		t.Errorf("gap fill fikit %.3f (want >= 0.6), exclusive %.3f (want 0)", fk.GapFill, ex.GapFill)
	}
	if fk.Jobs[1].JCT >= ex.Jobs[1].JCT {
		t.Errorf("LP finished at %.4f under fikit, not before exclusive's %.4f", fk.Jobs[1].JCT, ex.Jobs[1].JCT)
	}
	if fk.DurErr.MAPE() != 0 || fk.GapErr.WAPE() > 1e-9 {
		t.Errorf("exact run mispredicted: duration MAPE %g gap WAPE %g", fk.DurErr.MAPE(), fk.GapErr.WAPE())
	}
}

func noisy(m Mode, seed uint64) Options {
	o := DefaultOptions(gpu.MustProfile("h100-80gb"))
	o.Mode, o.Seed = m, seed
	return o
}

func poissonPair() []Job {
	jobs := periodic()
	jobs[0].Arrivals, jobs[0].Requests, jobs[0].Rate = nil, 40, 80
	jobs[1].Iterations = 150 // outlasts the service
	return jobs
}

func TestDeterministicPerSeed(t *testing.T) {
	for _, m := range Modes {
		a, err := Simulate(poissonPair(), noisy(m, 7))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Simulate(poissonPair(), noisy(m, 7))
		c, _ := Simulate(poissonPair(), noisy(m, 8))
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs with seed 7 differ", m)
		}
		if reflect.DeepEqual(a.Jobs, c.Jobs) {
			t.Errorf("%s: seeds 7 and 8 gave identical results", m)
		}
	}
}

// Every mode sees the same kernel durations for a seed, so busy times
// agree across modes, and the gap-fill ratio stays within its bounds.
func TestSameWorkAndGapFillBounds(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		var busy []float64
		for _, m := range Modes {
			r, err := Simulate(poissonPair(), noisy(m, seed))
			if err != nil {
				t.Fatal(err)
			}
			if r.GapFill < 0 || r.GapFill > 1 || r.LPFill > r.HPIdle+1e-12 {
				t.Errorf("seed %d %s: gap fill %.4f, LP fill %.6f of idle %.6f", seed, m, r.GapFill, r.LPFill, r.HPIdle)
			}
			if m == Exclusive && r.GapFill != 0 {
				t.Errorf("seed %d: exclusive filled %.4f of the gaps", seed, r.GapFill)
			}
			if m == Streams && r.GapFill < 0.5 {
				t.Errorf("seed %d: streams should fill gaps freely, got %.3f", seed, r.GapFill)
			}
			if busy == nil {
				busy = []float64{r.Jobs[0].Busy, r.Jobs[1].Busy}
			} else if !near(busy[0], r.Jobs[0].Busy) || !near(busy[1], r.Jobs[1].Busy) {
				t.Errorf("seed %d %s: busy %v, other modes %v", seed, m, []float64{r.Jobs[0].Busy, r.Jobs[1].Busy}, busy)
			}
			if d := r.DurErr.MAPE(); d < 0.005 || d > 0.08 {
				t.Errorf("seed %d %s: duration MAPE %.4f with 3%% jitter", seed, m, d)
			}
		}
	}
}

// Three levels: while the service idles, priority 5 goes before
// priority 0 whenever both fit.
func TestPriorityLevels(t *testing.T) {
	jobs := []Job{
		{Name: "hp", Graph: graphOf(workload.Infer, "hp", 1*ms), Priority: 9, Arrivals: []float64{0, 10 * ms}, HostPre: 3 * ms},
		{Name: "low", Graph: graphOf(workload.Train, "low", 1*ms), Priority: 0, Iterations: 2},
		{Name: "mid", Graph: graphOf(workload.Train, "mid", 1*ms), Priority: 5, Iterations: 2},
	}
	o := exactOptions(FIKIT)
	o.Timeline = true
	r, err := Simulate(jobs, o)
	if err != nil {
		t.Fatal(err)
	}
	// HP [3,4] measures request 0; then the wait (3 ms of pre-processing
	// at least) takes mid [4,5] [5,6], low [6,7] [7,8]; HP [13,14].
	want := []Span{{0, 0, 0, 3 * ms, 4 * ms}, {2, 0, 0, 4 * ms, 5 * ms}, {2, 1, 0, 5 * ms, 6 * ms},
		{1, 0, 0, 6 * ms, 7 * ms}, {1, 1, 0, 7 * ms, 8 * ms}, {0, 1, 0, 13 * ms, 14 * ms}}
	if len(r.Timeline) != len(want) {
		t.Fatalf("timeline %+v", r.Timeline)
	}
	for i, sp := range r.Timeline {
		if sp.Job != want[i].Job || sp.Unit != want[i].Unit || !near(sp.Start, want[i].Start) || !near(sp.End, want[i].End) {
			t.Errorf("span %d = %+v, want %+v", i, sp, want[i])
		}
	}
}

// ReadyAt holds a kernel until its tensors are resident (the device
// actor's memory plan); the kernel must not start earlier in any mode.
func TestReadyAtHook(t *testing.T) {
	for _, m := range Modes {
		o := exactOptions(m)
		o.Timeline = true
		calls := 0
		o.ReadyAt = func(job, unit, op int, t float64) float64 {
			calls++
			if job == 0 && unit == 1 && op == 2 {
				return 50 * ms // a swap-in that completes at 50 ms
			}
			return t - 1 // earlier values are ignored
		}
		r, err := Simulate(periodic(), o)
		if err != nil {
			t.Fatal(err)
		}
		kernels := r.Jobs[0].Kernels + r.Jobs[1].Kernels
		if calls != kernels {
			t.Errorf("%s: ReadyAt called %d times for %d kernels", m, calls, kernels)
		}
		found := false
		for _, sp := range r.Timeline {
			if sp.Job == 0 && sp.Unit == 1 && sp.Op == 2 {
				found = true
				if sp.Start < 50*ms {
					t.Errorf("%s: held kernel started at %.4f, before its tensors were resident", m, sp.Start)
				}
			}
		}
		if !found {
			t.Errorf("%s: held kernel never ran", m)
		}
	}
}

func TestShareSwitchCostAndDefaultSlice(t *testing.T) {
	jobs := []Job{
		{Name: "hp", Graph: graphOf(workload.Infer, "hp", 1*ms), Priority: 9, Requests: 1, HostPre: 1 * ms},
		{Name: "lp", Graph: graphOf(workload.Train, "lp", 5*ms), Priority: 0, Iterations: 1},
	}
	o := exactOptions(Share)
	o.Slice = 0 // DefaultSlice, 2 ms
	o.SwitchCost = 0.1 * ms
	r, err := Simulate(jobs, o)
	if err != nil {
		t.Fatal(err)
	}
	// LP [0,2]; switch to HP: [2.1,3.1]; switch back: LP [3.2,6.2].
	if !near(r.Jobs[0].P50, 3.1*ms) || !near(r.Jobs[1].JCT, 6.2*ms) {
		t.Errorf("hp latency %.4f lp JCT %.4f, want 0.0031 0.0062", r.Jobs[0].P50, r.Jobs[1].JCT)
	}
}

func TestValidation(t *testing.T) {
	g := graphOf(workload.Infer, "g", 1*ms)
	tg := graphOf(workload.Train, "t", 1*ms)
	cases := []struct {
		name string
		job  Job
	}{
		{"no graph", Job{Requests: 1}},
		{"priority too high", Job{Graph: g, Requests: 1, Priority: 10}},
		{"priority negative", Job{Graph: g, Requests: 1, Priority: -1}},
		{"no requests", Job{Graph: g}},
		{"too few arrivals", Job{Graph: g, Requests: 3, Arrivals: []float64{0, 1}}},
		{"arrivals out of order", Job{Graph: g, Arrivals: []float64{1, 0}}},
		{"negative rate", Job{Graph: g, Requests: 2, Rate: -1}},
		{"negative host time", Job{Graph: g, Requests: 1, HostPre: -1}},
		{"NaN host time", Job{Graph: g, Requests: 1, HostPost: math.NaN()}},
		{"infinite launch time", Job{Graph: tg, Iterations: 1, HostPerKernel: math.Inf(1)}},
		{"NaN rate", Job{Graph: g, Requests: 2, Rate: math.NaN()}},
		{"NaN arrival", Job{Graph: g, Arrivals: []float64{0, math.NaN()}}},
		{"no iterations", Job{Graph: tg}},
	}
	for _, c := range cases {
		if _, err := Simulate([]Job{c.job}, exactOptions(FIKIT)); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	// A graph of an unknown kind used to run as training (anything not
	// "infer" did), so a misspelt "inference" silently ignored Requests.
	serve := graphOf("serve", "s", 1*ms)
	if _, err := Simulate([]Job{{Name: "s", Graph: serve, Requests: 1, Iterations: 1}}, exactOptions(FIKIT)); err == nil ||
		!strings.Contains(err.Error(), "kind") || !strings.Contains(err.Error(), `"serve"`) {
		t.Errorf("graph kind serve: error %v, want one naming the kind and the allowed ones", err)
	}
	if _, err := Simulate(nil, exactOptions(FIKIT)); err == nil {
		t.Error("no jobs: no error")
	}
	o := exactOptions("time-travel")
	if _, err := Simulate(periodic(), o); err == nil {
		t.Error("unknown mode: no error")
	}
	// Options that cannot be simulated: a slice below the clock's
	// resolution used to spin Share mode forever.
	for name, set := range map[string]func(*Options){
		"tiny slice":      func(o *Options) { o.Slice = 1e-20 },
		"NaN slice":       func(o *Options) { o.Slice = math.NaN() },
		"NaN jitter":      func(o *Options) { o.Jitter = math.NaN() },
		"NaN margin":      func(o *Options) { o.Margin = math.NaN() },
		"infinite switch": func(o *Options) { o.SwitchCost = math.Inf(1) },
	} {
		o := exactOptions(Share)
		set(&o)
		if _, err := Simulate(periodic(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if m, err := ParseMode("fikit"); err != nil || m != FIKIT {
		t.Errorf("ParseMode(fikit) = %q, %v", m, err)
	}
}

// The profiler's weight is checked like the other numeric options: a NaN
// Alpha used to be accepted and silently turned the moving averages into
// plain means (no weight compares greater than NaN).
func TestNonFiniteAlphaIsRefused(t *testing.T) {
	for _, a := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		o := exactOptions(FIKIT)
		o.Alpha = a
		if _, err := Simulate(periodic(), o); err == nil || !strings.Contains(err.Error(), "Options.Alpha") {
			t.Errorf("Alpha %v: error %v, want one naming Options.Alpha", a, err)
		}
	}
}

// A kernel's cost fields must be numbers the cost model can use: a NaN
// made Share mode spin for ever and the other modes stall with an error
// that named no field, an infinite time ran to +Inf, and a negative or
// NaN measured time silently fell back to the cost model.
func TestSimulateRejectsBadKernelCosts(t *testing.T) {
	cases := []struct {
		field string
		set   func(op *workload.Op)
	}{
		{"flops", func(op *workload.Op) { op.MeasuredSeconds, op.FLOPs = 0, math.NaN() }},
		{"flops", func(op *workload.Op) { op.FLOPs = -1 }},
		{"bytes_moved", func(op *workload.Op) { op.MeasuredSeconds, op.MemBytes = 0, math.Inf(1) }},
		{"bytes_moved", func(op *workload.Op) { op.MemBytes = -1e30 }},
		{"measured_seconds", func(op *workload.Op) { op.MeasuredSeconds = math.Inf(1) }},
		{"measured_seconds", func(op *workload.Op) { op.MeasuredSeconds = math.NaN() }},
		{"measured_seconds", func(op *workload.Op) { op.MeasuredSeconds = -1 * ms }},
	}
	for _, c := range cases {
		// The queued modes first: before the fix Share mode never returned.
		for _, m := range []Mode{Streams, Exclusive, FIKIT, Share} {
			jobs := scenarioA()
			c.set(&jobs[1].Graph.Ops[1])
			_, err := Simulate(jobs, exactOptions(m))
			if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "lp") {
				t.Fatalf("%s: bad %s in lp's op 1: error %v, want one naming the job and the field", m, c.field, err)
			}
		}
	}
}

// BenchmarkSimulatePerKernel is the simulator's whole cost per kernel
// under FIKIT: state upkeep, the remaining-gap prediction and the decision.
func BenchmarkSimulatePerKernel(b *testing.B) {
	o := noisy(FIKIT, 1)
	var kernels int
	for b.Loop() {
		r, err := Simulate(poissonPair(), o)
		if err != nil {
			b.Fatal(err)
		}
		kernels += r.Jobs[0].Kernels + r.Jobs[1].Kernels
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(kernels), "ns/kernel")
}

// A regular wait shrinks as it goes on: with one 7 ms wait measured, a
// 6.5 ms kernel fits at the start of the next wait (7 + 2 ms of
// pre-processing ahead) but a 4 ms kernel no longer fits 6.5 ms into it
// (0.5 + 2 ms ahead), so the request at 20 ms is served on time.
func TestWaitResidualShrinks(t *testing.T) {
	jobs := []Job{
		{Name: "hp", Graph: graphOf(workload.Infer, "hp", 1*ms), Priority: 9,
			Arrivals: []float64{0, 10 * ms, 20 * ms}, HostPre: 2 * ms},
		{Name: "lp", Graph: graphOf(workload.Train, "lp", 6.5*ms, 4*ms), Priority: 0, Iterations: 1},
	}
	o := exactOptions(FIKIT)
	o.MeasureUnits = 2
	o.Timeline = true
	r, err := Simulate(jobs, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []Span{{0, 0, 0, 2 * ms, 3 * ms}, {0, 1, 0, 12 * ms, 13 * ms}, {1, 0, 0, 13 * ms, 19.5 * ms},
		{0, 2, 0, 22 * ms, 23 * ms}, {1, 0, 1, 23 * ms, 27 * ms}}
	if len(r.Timeline) != len(want) {
		t.Fatalf("timeline %+v", r.Timeline)
	}
	for i, sp := range r.Timeline {
		if sp.Job != want[i].Job || sp.Op != want[i].Op || !near(sp.Start, want[i].Start) || !near(sp.End, want[i].End) {
			t.Errorf("span %d = %+v, want %+v", i, sp, want[i])
		}
	}
}

// Back-to-back requests (no Arrivals, no Rate) are a closed loop: the
// client sends the next request when the last is answered, so each
// request's latency is its own service time, not the time since 0
// (bench kernels' closed-loop pairs reported p50 ≈ half the run).
func TestBackToBackLatencyPerRequest(t *testing.T) {
	jobs := []Job{{Name: "hp", Graph: graphOf(workload.Infer, "hp", 1*ms), Priority: 9, Requests: 3, HostPre: 1 * ms, HostPost: 1 * ms}}
	for _, m := range Modes {
		r, err := Simulate(jobs, exactOptions(m))
		if err != nil {
			t.Fatal(err)
		}
		hp := r.Jobs[0]
		if !near(hp.JCT, 9*ms) || len(hp.Latencies) != 3 {
			t.Fatalf("%s: JCT %.4f, latencies %v; want 0.009 and 3 requests", m, hp.JCT, hp.Latencies)
		}
		for i, l := range hp.Latencies {
			if !near(l, 3*ms) {
				t.Errorf("%s: request %d latency %.4f, want 0.0030 (pre 1 + kernel 1 + post 1 ms)", m, i, l)
			}
		}
		if !near(hp.P50, 3*ms) || !near(hp.P99, 3*ms) || !near(hp.Mean, 3*ms) {
			t.Errorf("%s: p50 %.4f p99 %.4f mean %.4f, want 0.0030", m, hp.P50, hp.P99, hp.Mean)
		}
	}
}

// The expected rest of a wait can grow as the wait goes on: with waits of
// 1 and 9 ms measured, 5 ms are expected at its start, and 8 ms once it
// has lasted 1 ms. The dispatcher must decide again then: a 7 ms kernel
// that did not fit at 13 ms fits at 14 ms, and runs before the request at
// 23 ms instead of leaving the GPU idle until the service is done.
func TestWaitResidualGrowthIsDecided(t *testing.T) {
	jobs := []Job{
		{Name: "hp", Graph: graphOf(workload.Infer, "hp", 1*ms), Priority: 9, Arrivals: []float64{0, 2 * ms, 12 * ms, 23 * ms}},
		{Name: "lp", Graph: graphOf(workload.Train, "lp", 7*ms), Priority: 0, Iterations: 1},
	}
	o := exactOptions(FIKIT)
	o.MeasureUnits = 3
	o.Timeline = true
	r, err := Simulate(jobs, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []Span{{0, 0, 0, 0, 1 * ms}, {0, 1, 0, 2 * ms, 3 * ms}, {0, 2, 0, 12 * ms, 13 * ms},
		{1, 0, 0, 14 * ms, 21 * ms}, {0, 3, 0, 23 * ms, 24 * ms}}
	if len(r.Timeline) != len(want) {
		t.Fatalf("timeline %+v, want %+v", r.Timeline, want)
	}
	for i, sp := range r.Timeline {
		if sp.Job != want[i].Job || sp.Unit != want[i].Unit || !near(sp.Start, want[i].Start) || !near(sp.End, want[i].End) {
			t.Errorf("span %d = %+v, want %+v", i, sp, want[i])
		}
	}
}

// Far from time 0 a slice can be shorter than the clock's resolution: at
// 1e14 s consecutive float64 times are 15.6 ms apart, so t + 2 ms == t.
// Share mode used to spin there for ever (a slice that never ends, or a
// preemption that never moves time); a slice must always advance the
// clock.
func TestShareAdvancesPastClockResolution(t *testing.T) {
	const far = 1e14
	jobs := []Job{
		{Name: "hp", Graph: graphOf(workload.Infer, "hp", 1*ms), Priority: 9, Arrivals: []float64{far + 0.05}, HostPre: 1 * ms},
		{Name: "lp", Graph: graphOf(workload.Train, "lp", 500*ms), Priority: 0, Iterations: 1, HostPerIteration: far},
	}
	o := exactOptions(Share)
	o.Timeline = true
	r, err := Simulate(jobs, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, jr := range r.Jobs {
		if jr.JCT < far || jr.JCT > far+1 || jr.Kernels != 1 {
			t.Errorf("%s: completed at %g after %d kernels, want one kernel done within a second of %g", jr.Name, jr.JCT, jr.Kernels, far)
		}
	}
	if r.Jobs[1].Preemptions == 0 {
		t.Error("the LP kernel was never preempted for the HP request that arrived during it")
	}
}
