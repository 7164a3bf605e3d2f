package tensorsched

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// ReplanThreshold is the relative change of a job's total predicted
// iteration time, since the last plan, beyond which it is re-planned.
const ReplanThreshold = 0.30

// DefaultProfileAlpha is the weight of a new measurement in OpProfile's
// exponential moving average.
const DefaultProfileAlpha = 0.5

// OpProfile holds the time estimate of every op of one job's graph.
//
// Cold start: NewOpProfile predicts every op from the device cost model, so
// the first iteration can already be planned. Measurements of later
// iterations are folded in with an exponential moving average (the first
// valid measurement of an op replaces its prediction outright). NeedsReplan reports when the
// total predicted iteration time has moved by more than ReplanThreshold since
// MarkPlanned was last called. An OpProfile is not safe for concurrent use.
type OpProfile struct {
	// Alpha is the weight of a new measurement, in (0, 1].
	Alpha float64
	// Measured counts the iterations folded in so far (0: cold start).
	Measured int

	seconds []float64
	seen    []bool // op measured at least once (ObserveTotal counts for all)
	planned float64
}

// NewOpProfile predicts every op of g on device p (a positive
// Op.MeasuredSeconds wins over the cost model).
func NewOpProfile(g *workload.Graph, p gpu.Profile) *OpProfile {
	s := make([]float64, len(g.Ops))
	for i := range g.Ops {
		s[i] = p.OpSeconds(&g.Ops[i])
	}
	return &OpProfile{Alpha: DefaultProfileAlpha, seconds: s, seen: make([]bool, len(s))}
}

// Seconds returns the current per-op estimates (a copy).
func (o *OpProfile) Seconds() []float64 { return append([]float64(nil), o.seconds...) }

// Total is the sum of the per-op estimates: the predicted compute time of
// one iteration.
func (o *OpProfile) Total() float64 {
	var t float64
	for _, s := range o.seconds {
		t += s
	}
	return t
}

func (o *OpProfile) alpha() float64 {
	if o.Alpha <= 0 || o.Alpha > 1 {
		return DefaultProfileAlpha
	}
	return o.Alpha
}

// Observe folds one iteration's measured per-op seconds into the moving
// average. Non-positive or non-finite entries keep the old estimate of
// that op; an iteration with no valid entry measured nothing and is
// refused (not counted).
func (o *OpProfile) Observe(measured []float64) error {
	if len(measured) != len(o.seconds) {
		return fmt.Errorf("profile: %d measured op times for a graph of %d ops", len(measured), len(o.seconds))
	}
	valid := func(m float64) bool { return m > 0 && !math.IsNaN(m) && !math.IsInf(m, 0) }
	if len(measured) > 0 && !slices.ContainsFunc(measured, valid) {
		return fmt.Errorf("profile: none of the %d measured op times is a positive number of seconds", len(measured))
	}
	a := o.alpha()
	for i, m := range measured {
		if !valid(m) {
			continue
		}
		if !o.seen[i] {
			o.seconds[i], o.seen[i] = m, true
		} else {
			o.seconds[i] = (1-a)*o.seconds[i] + a*m
		}
	}
	o.Measured++
	return nil
}

// ObserveTotal folds one measured iteration time when per-op times are not
// available: every op is scaled by the same factor so that the estimates
// move towards the measured total.
func (o *OpProfile) ObserveTotal(seconds float64) error {
	if seconds <= 0 || math.IsNaN(seconds) || math.IsInf(seconds, 0) {
		return fmt.Errorf("profile: measured iteration time %v must be a positive number of seconds", seconds)
	}
	tot := o.Total()
	if tot <= 0 {
		return fmt.Errorf("profile: graph has no op time to scale")
	}
	target := seconds
	if o.Measured > 0 {
		a := o.alpha()
		target = (1-a)*tot + a*seconds
	}
	f := target / tot
	for i := range o.seconds {
		o.seconds[i] *= f
		o.seen[i] = true
	}
	o.Measured++
	return nil
}

// MarkPlanned records the current total as the one the job's plan was made with.
func (o *OpProfile) MarkPlanned() { o.planned = o.Total() }

// Drift is the relative change of the total since MarkPlanned
// (0 when no plan was made yet).
func (o *OpProfile) Drift() float64 {
	if o.planned <= 0 {
		return 0
	}
	return math.Abs(o.Total()-o.planned) / o.planned
}

// NeedsReplan reports whether the total predicted iteration time moved by
// more than ReplanThreshold since the last plan. A move of exactly the
// threshold is not more than it: the comparison ignores the rounding of
// summing many op times (relative 1e-9), which would otherwise decide the
// boundary either way depending on the graph.
func (o *OpProfile) NeedsReplan() bool { return o.Drift() > ReplanThreshold+replanSlack }

// replanSlack absorbs floating-point rounding in Drift.
const replanSlack = 1e-9
