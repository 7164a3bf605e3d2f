package fikit

import (
	"math"
	"testing"
)

func TestErrorStats(t *testing.T) {
	var s ErrorStats
	s.Add(11, 10) // 10%
	s.Add(8, 10)  // 20%
	s.Add(3, 0)   // unscorable
	if s.N != 2 || s.Unscorable != 1 {
		t.Fatalf("N %d unscorable %d, want 2 1", s.N, s.Unscorable)
	}
	if !near(s.MAPE(), 0.15) {
		t.Errorf("MAPE %.6f, want 0.15", s.MAPE())
	}
	if !near(s.WAPE(), 6.0/20) { // (1 + 2 + 3) / (10 + 10 + 0)
		t.Errorf("WAPE %.6f, want 0.3", s.WAPE())
	}
	var z ErrorStats
	if z.MAPE() != 0 || z.WAPE() != 0 {
		t.Error("empty stats should report 0")
	}
}

func TestProfilerEstimatesAndScores(t *testing.T) {
	p := NewProfiler(0.5)
	const id = 42
	if got := p.PredictKernel(id, 7); got != 7 {
		t.Errorf("unmeasured kernel predicted %g, want the prior 7", got)
	}
	p.ObserveKernel(id, 10) // first: mean 10, not scored
	if p.DurErr.N != 0 {
		t.Error("the first observation has no measured prediction to score")
	}
	p.ObserveKernel(id, 12) // predicted 10: 2/12; weight max(0.5, 1/2) → 11
	p.ObserveKernel(id, 11) // predicted 11: 0;    weight max(0.5, 1/3) → 11
	p.ObserveKernel(id, 15) // predicted 11: 4/15; weight 0.5 → 13
	if got := p.PredictKernel(id, 7); !near(got, 13) {
		t.Errorf("estimate %g, want 13", got)
	}
	if want := (2.0/12 + 0 + 4.0/15) / 3; p.DurErr.N != 3 || !near(p.DurErr.MAPE(), want) {
		t.Errorf("duration MAPE %.6f over %d, want %.6f over 3", p.DurErr.MAPE(), p.DurErr.N, want)
	}
	// Gaps: by job and slot; waits are estimated, never scored.
	p.ObserveGap(1, 0, 2)
	p.ObserveGap(1, 0, 4) // predicted 2: 50%
	p.ObserveGap(2, 0, 9)
	p.ObserveGap(1, SlotWait, 5)
	p.ObserveGap(1, SlotWait, 1)
	if p.Gap(1, 0).Mean != 3 || p.Gap(2, 0).Mean != 9 {
		t.Errorf("gap estimates %g %g, want 3 9", p.Gap(1, 0).Mean, p.Gap(2, 0).Mean)
	}
	if p.GapErr.N != 1 || !near(p.GapErr.MAPE(), 0.5) {
		t.Errorf("gap MAPE %.3f over %d, want 0.5 over 1", p.GapErr.MAPE(), p.GapErr.N)
	}
	if got := p.Wait(1).After(0); !near(got, 3) {
		t.Errorf("residual wait at 0 = %g, want the mean 3", got)
	}
}

func TestResidual(t *testing.T) {
	var r Residual
	if r.After(0) != 0 {
		t.Error("no waits recorded: expect 0")
	}
	for _, w := range []float64{1, 2, 3, 6} {
		r.Observe(w)
	}
	cases := []struct{ elapsed, want float64 }{
		{0, 3},                       // the mean
		{1.5, (0.5 + 1.5 + 4.5) / 3}, // waits longer than 1.5: 2, 3, 6
		{2.5, (0.5 + 3.5) / 2},
		{6, 0}, // no wait lasted longer
	}
	for _, c := range cases {
		if got := r.After(c.elapsed); !near(got, c.want) {
			t.Errorf("After(%g) = %g, want %g", c.elapsed, got, c.want)
		}
	}
	// The ring keeps the latest residualSamples waits.
	for i := 0; i < residualSamples; i++ {
		r.Observe(10)
	}
	if got := r.After(0); !near(got, 10) {
		t.Errorf("after refilling with 10s, mean %g", got)
	}
	if math.IsNaN(r.After(100)) {
		t.Error("NaN residual")
	}
}

func TestRemaining(t *testing.T) {
	p := NewProfiler(0.2)
	if got := p.Remaining(GapState{Job: 1, Phase: PreProcessing}); got != 0 {
		t.Errorf("nothing measured: remaining %g, want 0 (hold low priority)", got)
	}
	p.ObserveGap(1, 4, 0.5)
	p.ObserveGap(1, SlotPre, 2)
	p.ObserveGap(1, SlotPost, 1)
	p.ObserveGap(1, SlotWait, 3)
	p.ObserveGap(1, SlotWait, 5)
	cases := []struct {
		name string
		s    GapState
		want float64
	}{
		{"between kernels", GapState{Job: 1, Phase: BetweenKernels, After: 4, Elapsed: 0.2}, 0.3},
		{"gap overdue", GapState{Job: 1, Phase: BetweenKernels, After: 4, Elapsed: 0.7}, 0},
		{"pre-processing", GapState{Job: 1, Phase: PreProcessing, Elapsed: 0.5}, 1.5},
		{"post, next request queued", GapState{Job: 1, Phase: PostProcessing, Elapsed: 0.25, Queued: true}, 0.75 + 2},
		{"post, none queued", GapState{Job: 1, Phase: PostProcessing, Elapsed: 0.25}, 0.75 + 4 + 2},
		{"post of the last request", GapState{Job: 1, Phase: PostProcessing, Elapsed: 0.25, Final: true}, 0.75},
		{"waiting", GapState{Job: 1, Phase: WaitingForRequest, Elapsed: 4}, 1 + 2},
		{"another job knows nothing", GapState{Job: 2, Phase: WaitingForRequest}, 0},
	}
	for _, c := range cases {
		if got := p.Remaining(c.s); !near(got, c.want) {
			t.Errorf("%s: remaining %g, want %g", c.name, got, c.want)
		}
	}
}

// A measurement that is not a finite duration >= 0 (a broken timer, a
// clock that stepped back) carries no information: it must not poison an
// estimate for good, nor turn the error scores into NaN, nor make the
// remaining wait infinite (which would let any kernel fill the gap).
func TestProfilerIgnoresBadMeasurements(t *testing.T) {
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1e-3}
	p := NewProfiler(0.2)
	p.ObserveKernel(7, 2e-3)
	p.ObserveGap(1, 0, 1e-3)
	p.ObserveGap(1, SlotWait, 4e-3)
	for _, x := range bad {
		p.ObserveKernel(7, x)
		p.ObserveGap(1, 0, x)
		p.ObserveGap(1, SlotWait, x)
	}
	if got := p.PredictKernel(7, 0); got != 2e-3 || p.Kernel(7).N != 1 {
		t.Errorf("kernel estimate %g over %d observations, want 0.002 over 1", got, p.Kernel(7).N)
	}
	if got := p.Gap(1, 0).Mean; got != 1e-3 || p.Gap(1, 0).N != 1 {
		t.Errorf("gap estimate %g over %d observations, want 0.001 over 1", got, p.Gap(1, 0).N)
	}
	if got := p.Wait(1).After(0); got != 4e-3 {
		t.Errorf("residual wait %g, want 0.004", got)
	}
	if got := p.Remaining(GapState{Job: 1, Phase: WaitingForRequest}); math.IsInf(got, 0) || math.IsNaN(got) {
		t.Errorf("remaining %g", got)
	}
	for _, s := range []ErrorStats{p.DurErr, p.GapErr} {
		if m, w := s.MAPE(), s.WAPE(); math.IsNaN(m) || math.IsInf(m, 0) || math.IsNaN(w) || math.IsInf(w, 0) {
			t.Errorf("error scores MAPE %g WAPE %g", m, w)
		}
	}
	var s ErrorStats
	s.Add(1, 1)
	s.Add(math.NaN(), 1)
	s.Add(1, math.Inf(1))
	if s.N != 1 || s.MAPE() != 0 || s.WAPE() != 0 {
		t.Errorf("after one exact and two unusable scores: N %d MAPE %g WAPE %g, want 1 0 0", s.N, s.MAPE(), s.WAPE())
	}
}
