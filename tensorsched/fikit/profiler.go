package fikit

import (
	"math"

	"github.com/gpusched/gpusched/workload"
)

// Estimate is a moving average of one measured quantity (a kernel's
// duration, or one of a job's idle gaps). The first observations are
// averaged equally; later ones with weight Alpha (exponential moving
// average), so the estimate follows drift.
type Estimate struct {
	Mean float64 // current estimate, seconds
	N    int     // observations so far
}

// Known reports whether the estimate rests on at least one observation.
func (e *Estimate) Known() bool { return e.N > 0 }

// Or returns the estimate, or fallback when nothing was observed yet.
func (e *Estimate) Or(fallback float64) float64 {
	if e.N == 0 {
		return fallback
	}
	return e.Mean
}

// observe folds in one measurement; one that is not a finite number >= 0
// carries no information and is ignored rather than poisoning the mean.
func (e *Estimate) observe(x, alpha float64) {
	if !workload.FiniteNonNeg(x) {
		return
	}
	w := 1 / float64(e.N+1)
	if w < alpha {
		w = alpha
	}
	e.Mean += w * (x - e.Mean)
	e.N++
}

// ErrorStats accumulates how far predictions were from what happened.
type ErrorStats struct {
	N          int     // predictions scored (actual > 0)
	SumAbsPct  float64 // Σ |pred − actual| / actual
	SumAbs     float64 // Σ |pred − actual|
	SumActual  float64 // Σ actual
	Unscorable int     // predictions whose actual was 0 (left out of MAPE)
}

// Add scores one prediction against its outcome. Outcomes of zero cannot be
// scored as a percentage; they are counted in Unscorable and in the
// absolute sums. A pair that is not made of finite numbers, or whose
// outcome is negative, is not a measurement and is left out.
func (s *ErrorStats) Add(pred, actual float64) {
	if !workload.FiniteNonNeg(actual) || math.IsNaN(pred) || math.IsInf(pred, 0) {
		return
	}
	d := math.Abs(pred - actual)
	s.SumAbs += d
	s.SumActual += actual
	if actual <= 0 {
		s.Unscorable++
		return
	}
	s.N++
	s.SumAbsPct += d / actual
}

// MAPE is the mean absolute percentage error as a fraction (0.05 = 5%),
// over scored predictions; 0 when there were none.
func (s ErrorStats) MAPE() float64 {
	if s.N == 0 {
		return 0
	}
	return s.SumAbsPct / float64(s.N)
}

// WAPE is Σ|pred − actual| / Σ actual: the error weighted by size, which
// small outcomes cannot dominate; 0 when nothing was observed.
func (s ErrorStats) WAPE() float64 {
	if s.SumActual <= 0 {
		return 0
	}
	return s.SumAbs / s.SumActual
}

// Gap slots that are not "after kernel k": the host phases around a request
// or iteration. A job's gap slot k >= 0 is the idle time between the end of
// its kernel k and the moment its kernel k+1 is ready.
const (
	// SlotPre is from the start of a request/iteration to its first kernel
	// being ready (pre-processing, data loading).
	SlotPre = -1
	// SlotPost is from a request's last kernel to the request being done
	// (post-processing).
	SlotPost = -2
	// SlotWait is the time a service waits for its next request when none
	// is queued. It is estimated (mean, and the residual in Profiler.Wait)
	// but, being arrival noise, not scored.
	SlotWait = -3
)

type gapKey struct{ job, slot int }

// residualSamples is how many recent waits a Residual keeps.
const residualSamples = 64

// Residual estimates how much longer a wait will last once it has lasted
// a while, from recent complete waits: the mean residual life
// E[W − e | W > e]. For periodic requests it shrinks as the wait goes on;
// for Poisson arrivals (memoryless) it stays near the mean wait.
type Residual struct {
	buf  [residualSamples]float64
	n    int
	next int
}

// Observe records one complete wait; one that is not a finite number >= 0
// is ignored.
func (r *Residual) Observe(w float64) {
	if !workload.FiniteNonNeg(w) {
		return
	}
	r.buf[r.next] = w
	r.next = (r.next + 1) % residualSamples
	if r.n < residualSamples {
		r.n++
	}
}

// After is the expected remaining wait once elapsed has passed: 0 when no
// recorded wait lasted that long.
func (r *Residual) After(elapsed float64) float64 {
	var sum float64
	var k int
	for _, w := range r.buf[:r.n] {
		if w > elapsed {
			sum += w - elapsed
			k++
		}
	}
	if k == 0 {
		return 0
	}
	return sum / float64(k)
}

// Profiler keeps the measured estimates: durations by kernel id (shared by
// every job that launches the same kernel) and idle gaps by (job, slot).
// It scores every prediction made from a measurement against the outcome.
// The zero value is not ready; use NewProfiler.
type Profiler struct {
	// Alpha is the moving-average weight of a new observation.
	Alpha float64
	dur   map[uint64]*Estimate
	gap   map[gapKey]*Estimate
	wait  map[int]*Residual
	// DurErr and GapErr score duration and gap predictions that rested on
	// at least one earlier measurement.
	DurErr, GapErr ErrorStats
}

// NewProfiler returns an empty profiler; alpha <= 0 selects 0.2.
func NewProfiler(alpha float64) *Profiler {
	if alpha <= 0 || alpha > 1 {
		alpha = 0.2
	}
	return &Profiler{Alpha: alpha, dur: map[uint64]*Estimate{}, gap: map[gapKey]*Estimate{}, wait: map[int]*Residual{}}
}

// Kernel returns the duration estimate of kernel id (created empty on first
// use). The pointer stays valid, so callers may keep it.
func (p *Profiler) Kernel(id uint64) *Estimate { return entry(p.dur, id) }

// entry returns m[k], adding a zero value first if k is missing.
func entry[K comparable, V any](m map[K]*V, k K) *V {
	v := m[k]
	if v == nil {
		v = new(V)
		m[k] = v
	}
	return v
}

// Gap returns the estimate of job's gap slot (created empty on first use).
func (p *Profiler) Gap(job, slot int) *Estimate { return entry(p.gap, gapKey{job, slot}) }

// PredictKernel is the predicted duration of kernel id: the measured
// average, or prior (the cost model's figure) before any measurement.
func (p *Profiler) PredictKernel(id uint64, prior float64) float64 {
	return p.Kernel(id).Or(prior)
}

// ObserveKernel records a measured duration of kernel id, scoring the
// prediction the estimate would have made.
func (p *Profiler) ObserveKernel(id uint64, actual float64) {
	p.ObserveDuration(p.Kernel(id), actual)
}

// ObserveDuration is ObserveKernel on an estimate the caller holds.
func (p *Profiler) ObserveDuration(e *Estimate, actual float64) {
	if e.Known() {
		p.DurErr.Add(e.Mean, actual)
	}
	e.observe(actual, p.Alpha)
}

// Wait returns the residual-wait estimator of a service job (created empty
// on first use); ObserveGap with SlotWait feeds it.
func (p *Profiler) Wait(job int) *Residual { return entry(p.wait, job) }

// ObserveGap records the measured length of job's gap slot, scoring the
// prediction unless the slot is SlotWait.
func (p *Profiler) ObserveGap(job, slot int, actual float64) {
	if slot == SlotWait {
		p.Wait(job).Observe(actual)
	}
	p.observeGap(p.Gap(job, slot), slot, actual)
}

func (p *Profiler) observeGap(e *Estimate, slot int, actual float64) {
	if e.Known() && slot != SlotWait {
		p.GapErr.Add(e.Mean, actual)
	}
	e.observe(actual, p.Alpha)
}

// Phase is where a job is while none of its kernels is ready: what its
// host is doing.
type Phase uint8

// Phases of a job's idle time.
const (
	// BetweenKernels: kernel After has finished and the next one of the
	// same request/iteration is not ready yet (launch time, a sync, a
	// tensor not yet resident).
	BetweenKernels Phase = iota
	// PreProcessing: a request or iteration has started and its first
	// kernel is not ready yet (decoding, tokenising, data loading).
	PreProcessing
	// PostProcessing: the last kernel of a request has finished and the
	// response is being prepared.
	PostProcessing
	// WaitingForRequest: a service has answered every request it has
	// received.
	WaitingForRequest
)

// GapState describes a job's idle time as far as it has gone.
type GapState struct {
	Job   int
	Phase Phase
	// After is the kernel that ended the last run of kernels
	// (BetweenKernels).
	After int
	// Elapsed is the time spent in the current phase so far.
	Elapsed float64
	// Queued: during PostProcessing, the next request has already arrived.
	Queued bool
	// Final: during PostProcessing, this is the job's last request.
	Final bool
}

// Remaining predicts how much idle time job has left before its next
// kernel is ready, from the measured gaps: the rest of the current phase
// plus the phases that must follow it (post-processing is followed by a
// wait, unless a request is queued, and by pre-processing). Unmeasured
// phases count as 0, so the prediction errs towards leaving the GPU idle.
func (p *Profiler) Remaining(s GapState) float64 {
	var r float64
	pre := p.Gap(s.Job, SlotPre).Or(0)
	switch s.Phase {
	case BetweenKernels:
		r = p.Gap(s.Job, s.After).Or(0) - s.Elapsed
	case PreProcessing:
		r = pre - s.Elapsed
	case PostProcessing:
		r = math.Max(0, p.Gap(s.Job, SlotPost).Or(0)-s.Elapsed)
		if !s.Final {
			r += pre
			if !s.Queued {
				r += p.Wait(s.Job).After(0)
			}
		}
	case WaitingForRequest:
		r = p.Wait(s.Job).After(s.Elapsed) + pre
	}
	return math.Max(r, 0)
}
