package fikit

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestDecideTable(t *testing.T) {
	hp := func(job int, ready float64) Candidate {
		return Candidate{Job: job, Priority: 9, Pred: 1e-3, Ready: ready}
	}
	lp := func(job, prio int, pred, ready float64) Candidate {
		return Candidate{Job: job, Priority: prio, Pred: pred, Ready: ready}
	}
	cases := []struct {
		name   string
		c      []Candidate
		top    Top
		margin float64
		want   int // job, or -1
	}{
		{"empty", nil, Top{9, 1}, 0, -1},
		{"HP launches at once, even with no gap", []Candidate{lp(1, 0, 1e-6, 0), hp(0, 5)}, Top{9, 0}, 0, 0},
		{"earliest HP among equals", []Candidate{hp(3, 2), hp(4, 1)}, Top{9, 0}, 0, 4},
		{"highest level among HP-or-above", []Candidate{hp(3, 0), {Job: 5, Priority: 9, Ready: 1}, {Job: 6, Priority: 8, Ready: 0}}, Top{8, 0}, 0, 3},
		{"nothing fits", []Candidate{lp(1, 0, 2e-3, 0)}, Top{9, 1e-3}, 0, -1},
		{"no gap known", []Candidate{lp(1, 0, 1e-9, 0)}, Top{9, 0}, 0.5, -1},
		{"exact fit launches", []Candidate{lp(1, 0, 1e-3, 0)}, Top{9, 1e-3}, 0, 1},
		{"margin admits a small overrun", []Candidate{lp(1, 0, 1.09e-3, 0)}, Top{9, 1e-3}, 0.1, 1},
		{"margin bounds the overrun", []Candidate{lp(1, 0, 1.11e-3, 0)}, Top{9, 1e-3}, 0.1, -1},
		{"higher level wins over a better fit", []Candidate{lp(1, 2, 0.9e-3, 0), lp(2, 5, 0.1e-3, 1)}, Top{9, 1e-3}, 0, 2},
		{"higher level that does not fit is skipped", []Candidate{lp(1, 2, 0.9e-3, 0), lp(2, 5, 2e-3, 0)}, Top{9, 1e-3}, 0, 1},
		{"best fit within a level", []Candidate{lp(1, 3, 0.2e-3, 0), lp(2, 3, 0.8e-3, 1), lp(3, 3, 1.2e-3, 0)}, Top{9, 1e-3}, 0, 2},
		{"equal fit: earliest ready", []Candidate{lp(1, 3, 0.5e-3, 2), lp(2, 3, 0.5e-3, 1)}, Top{9, 1e-3}, 0, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			i := Dispatcher{Margin: c.margin}.Decide(c.c, c.top)
			got := -1
			if i >= 0 {
				got = c.c[i].Job
			}
			if got != c.want {
				t.Errorf("Decide picked job %d, want %d", got, c.want)
			}
		})
	}
}

// TestDecideInvariants checks the dispatcher's promises on random inputs:
// a kernel at the top level always launches and is the most important and
// earliest; otherwise a launched kernel is predicted to fit within the
// margin, no fitting kernel has a higher level, none of its level fits
// better; and nothing is left idle when something fits.
func TestDecideInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for iter := 0; iter < 20000; iter++ {
		n := rng.IntN(8)
		c := make([]Candidate, n)
		for i := range c {
			c[i] = Candidate{Job: i, Priority: rng.IntN(MaxPriority + 1), Pred: rng.Float64() * 4e-3, Ready: float64(rng.IntN(5))}
		}
		top := Top{Priority: rng.IntN(MaxPriority + 1), Remaining: rng.Float64() * 3e-3}
		if rng.IntN(5) == 0 {
			top.Remaining = 0
		}
		d := Dispatcher{Margin: []float64{0, 0.05, 0.5}[rng.IntN(3)]}
		got := d.Decide(c, top)
		limit := top.Remaining * (1 + d.Margin)
		anyTop, anyFit := false, false
		for i := range c {
			anyTop = anyTop || c[i].Priority >= top.Priority
			anyFit = anyFit || (c[i].Pred <= limit && limit > 0)
		}
		switch {
		case anyTop:
			if got < 0 || c[got].Priority < top.Priority {
				t.Fatalf("iter %d: a top-level kernel is waiting but Decide returned %d", iter, got)
			}
			for i := range c {
				if c[i].Priority > c[got].Priority || (c[i].Priority == c[got].Priority && c[i].Ready < c[got].Ready) {
					t.Fatalf("iter %d: picked %+v over %+v", iter, c[got], c[i])
				}
			}
		case !anyFit:
			if got != -1 {
				t.Fatalf("iter %d: nothing fits %.6f but Decide launched %+v", iter, limit, c[got])
			}
		default:
			if got < 0 {
				t.Fatalf("iter %d: a kernel fits but the engine was left idle", iter)
			}
			if c[got].Pred > limit {
				t.Fatalf("iter %d: launched %+v, predicted to overrun %.6f beyond the margin", iter, c[got], limit)
			}
			for i := range c {
				if c[i].Pred > limit {
					continue
				}
				if c[i].Priority > c[got].Priority || (c[i].Priority == c[got].Priority && c[i].Pred > c[got].Pred) {
					t.Fatalf("iter %d: picked %+v though %+v fits and ranks higher", iter, c[got], c[i])
				}
			}
		}
	}
}

func TestDecideAllocationFree(t *testing.T) {
	c := benchCandidates()
	d := Dispatcher{Margin: 0.05}
	if a := testing.AllocsPerRun(100, func() { d.Decide(c, Top{Priority: 9, Remaining: 1e-3}) }); a != 0 {
		t.Errorf("Decide allocates %.1f times per call", a)
	}
}

// benchCandidates is a busy GPU: eight waiting jobs over several levels.
func benchCandidates() []Candidate {
	c := make([]Candidate, 8)
	for i := range c {
		c[i] = Candidate{Job: i, Priority: i % 5, Pred: float64(i+1) * 0.17e-3, Ready: float64(i % 3)}
	}
	return c
}

// BenchmarkDispatchDecision is the cost of one launch decision while the
// high-priority job is idle (the expensive case: a best-fit scan over eight
// waiting jobs).
func BenchmarkDispatchDecision(b *testing.B) {
	c := benchCandidates()
	d := Dispatcher{Margin: 0.05}
	b.ReportAllocs()
	sink := 0
	for i := 0; b.Loop(); i++ {
		sink += d.Decide(c, Top{Priority: 9, Remaining: float64(i%8) * 0.2e-3})
	}
	_ = sink
}

// A kernel whose prediction is not a number (a poisoned estimate, a broken
// cost model) is not known to fit any gap, so it must never be dispatched
// into one: NaN compares false with everything, so a "Pred > limit" test
// lets it through.
func TestDecideUnknownPredictionNeverFills(t *testing.T) {
	c := []Candidate{{Job: 1, Priority: 0, Pred: math.NaN(), Ready: 0}}
	if got := (Dispatcher{Margin: 0.05}).Decide(c, Top{Priority: 9, Remaining: 1e-3}); got != -1 {
		t.Errorf("a kernel with a NaN prediction was dispatched into a 1 ms gap (index %d)", got)
	}
	// Beside a kernel that fits, the fitting one is chosen.
	c = append(c, Candidate{Job: 2, Priority: 0, Pred: 0.5e-3, Ready: 1})
	if got := (Dispatcher{}).Decide(c, Top{Priority: 9, Remaining: 1e-3}); got != 1 {
		t.Errorf("Decide picked index %d, want 1 (the kernel that fits)", got)
	}
}
