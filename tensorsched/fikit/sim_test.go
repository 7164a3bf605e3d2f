package fikit

import (
	"math"
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
