package placement

import "math"

// ThroughputModel predicts a job's iteration time in configurations it has
// not run yet, fitted to the iteration times it reported (Observation):
//
//	compute(l)         = A + B·l                      (per-GPU batch l)
//	sync(nodes, r)     = 0                             for r = 1
//	                   = Intra0 + Intra1·(r−2)         on one node
//	                   = Inter0 + Inter1·(r−2)         across nodes
//	iter(l, r, accum)  = compute(l) + sync + accum·compute(l)
//
// Coefficients are least-squares fits, clamped non-negative. Where the
// observations cannot determine a term it falls back to a prior derived from
// what was seen: compute is 30% fixed cost and 70% proportional to the
// batch; with no multi-GPU report at all, synchronisation costs 10% of the
// compute time on one node and 30% across nodes; with reports on one node
// only, synchronisation across nodes is taken as 3× that on one node (same
// growth in replicas). The priors are optimistic on purpose: a job is only
// scaled out (at most doubling, see ONES) when the model says it pays, and
// the next report corrects the model. A pessimistic prior is a trap: a
// configuration predicted slow is never tried, so never corrected (a floor
// of 30% of compute for cross-node sync kept ImageNet-size zoo models on
// one node of 4 GPUs for their whole run while most of the cluster idled).
// A caller that can predict the job's step times (JobState.Prior) replaces
// these generic shares: see FitThroughput.
type ThroughputModel struct {
	A, B           float64
	Intra0, Intra1 float64
	Inter0, Inter1 float64
	// Known is false when there were no observations at all.
	Known bool
}

// FitThroughput fits a ThroughputModel to observations. prior (nil: none)
// is the caller's prediction of the job's step times; where the
// observations cannot fix a term, the fit takes it from the prior instead
// of the generic shares: with reports at one per-GPU batch only, the
// prior's split of compute into fixed and per-sample parts at that batch
// (its level stays the measured one, since the prior's absolute compute
// time may be off by a constant factor on the real device); with no report
// on several GPUs of one node, or of several nodes, the prior's
// synchronisation there, in seconds (a bandwidth model's all-reduce time,
// optimistic as a prior should be). With no observations at all the
// prior is the model.
func FitThroughput(obs []Observation, prior *ThroughputModel) ThroughputModel {
	var m ThroughputModel
	if len(obs) == 0 {
		if prior != nil && prior.Known {
			return *prior
		}
		return m
	}
	if prior != nil && !prior.Known {
		prior = nil
	}
	m.Known = true
	xs := make([]float64, 0, len(obs))
	ys := make([]float64, 0, len(obs))
	for _, o := range obs {
		xs = append(xs, float64(o.LocalBatch))
		ys = append(ys, reportCompute(o))
	}
	if a, b, ok := fitLine(xs, ys); ok {
		m.A, m.B = a, b
	} else {
		c, l := mean(ys), math.Max(mean(xs), 1)
		fixed := 0.3
		if prior != nil && prior.Compute(l) > 0 {
			fixed = prior.A / prior.Compute(l)
		}
		m.A, m.B = fixed*c, (1-fixed)*c/l
	}
	ref := m.A + m.B*mean(xs)
	fitSync := func(multi bool) (float64, float64, bool) {
		var rs, ss []float64
		for _, o := range obs {
			if o.GPUs >= 2 && (o.Nodes >= 2) == multi {
				rs = append(rs, float64(o.GPUs-2))
				ss = append(ss, o.SyncTime)
			}
		}
		if len(rs) == 0 {
			return 0, 0, false
		}
		if a, b, ok := fitLine(rs, ss); ok {
			return a, b, true
		}
		return mean(ss), 0, true
	}
	var okIntra, okInter bool
	m.Intra0, m.Intra1, okIntra = fitSync(false)
	m.Inter0, m.Inter1, okInter = fitSync(true)
	if prior != nil {
		if !okIntra {
			m.Intra0, m.Intra1 = prior.Intra0, prior.Intra1
		}
		if !okInter {
			m.Inter0, m.Inter1 = prior.Inter0, prior.Inter1
		}
		return m
	}
	switch {
	case !okIntra && !okInter:
		m.Intra0, m.Inter0 = 0.1*ref, 0.3*ref
	case !okIntra:
		m.Intra0 = m.Inter0 / 3
	case !okInter:
		m.Inter0, m.Inter1 = 3*m.Intra0, m.Intra1
	}
	return m
}

// PriorModel is a step-time prior (JobState.Prior) through predicted
// times, as a caller with a cost model builds one. Compute is the line
// through one GPU's compute times t1 at per-GPU batch l1 (> 0) and t2 at
// l2, clamped non-negative; with no second point (l2 ≤ 0 or l2 = l1) it is
// the generic split of t1 (30% fixed). Synchronisation comes from
// sync(nodes, gpus), the seconds of a ring of gpus GPUs over nodes nodes:
// within a node, a line from 2 GPUs to a whole node of perNode; across
// nodes, a line from one GPU on each of 2 nodes with the least slope to
// one GPU on each of the cluster's nodes and to all its total GPUs. A
// ring's time is concave in the GPU count, so each line errs optimistic
// between its ends, as a prior should; the least slope keeps the line
// under the one-per-node rings too when a node's link is slower than the
// network (wider rings then cross it as well).
func PriorModel(l1, t1, l2, t2 float64, sync func(nodes, gpus int) float64, nodes, perNode, total int) *ThroughputModel {
	m := &ThroughputModel{Known: true, A: 0.3 * t1, B: 0.7 * t1 / l1}
	if l2 > 0 && l2 != l1 {
		m.B = max(0, (t2-t1)/(l2-l1))
		m.A = max(0, t1-m.B*l1)
	}
	line := func(n0, r0 int, ends ...[2]int) (float64, float64) {
		y0, slope := sync(n0, r0), math.Inf(1)
		for _, e := range ends {
			if e[1] > r0 {
				slope = min(slope, max(0, (sync(e[0], e[1])-y0)/float64(e[1]-r0)))
			}
		}
		if math.IsInf(slope, 1) {
			slope = 0
		}
		return y0, slope
	}
	m.Intra0, m.Intra1 = line(1, 2, [2]int{1, perNode})
	m.Inter0, m.Inter1 = line(2, 2, [2]int{nodes, nodes}, [2]int{nodes, total})
	return m
}

// fitLine fits y = a + b·x by least squares with a, b ≥ 0; ok is false when
// the xs do not span two distinct values.
func fitLine(xs, ys []float64) (a, b float64, ok bool) {
	mx, my := mean(xs), mean(ys)
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx < 1e-12 {
		return 0, 0, false
	}
	b = sxy / sxx
	a = my - b*mx
	switch {
	case b < 0:
		return my, 0, true
	case a < 0:
		var sx2, sxy0 float64
		for i := range xs {
			sx2 += xs[i] * xs[i]
			sxy0 += xs[i] * ys[i]
		}
		return 0, sxy0 / sx2, true
	}
	return a, b, true
}

// Compute is the predicted compute time of one micro-step at per-GPU batch l.
func (m ThroughputModel) Compute(l float64) float64 { return m.A + m.B*l }

// Sync is the predicted synchronisation time of r GPUs on nodes nodes.
func (m ThroughputModel) Sync(nodes, r int) float64 {
	switch {
	case r <= 1:
		return 0
	case nodes <= 1:
		return m.Intra0 + m.Intra1*float64(r-2)
	}
	return m.Inter0 + m.Inter1*float64(r-2)
}

// AccumIterTime is the seconds of an iteration of accum+1 micro-steps
// whose step time step includes sync seconds of gradient synchronisation,
// which only the last micro-step does.
func AccumIterTime(step, sync float64, accum int) float64 {
	return step + float64(accum)*(step-sync)
}

// MicroStepTime is AccumIterTime's inverse: the step time of one
// micro-step, sync seconds of synchronisation included, of an iteration of
// accum+1 micro-steps that took iter seconds.
func MicroStepTime(iter, sync float64, accum int) float64 {
	return (iter + float64(accum)*sync) / float64(accum+1)
}

// IterTime is the predicted seconds per iteration.
func (m ThroughputModel) IterTime(nodes, r int, l float64, accum int) float64 {
	c := m.Compute(l)
	return c + m.Sync(nodes, r) + float64(accum)*c
}

// minCompute is the least compute time of a micro-step that FitThroughput
// fits and ONES predicts (stepShape).
const minCompute = 1e-9

// reportCompute is report ob's compute time: its step less its
// synchronisation, at least minCompute.
func reportCompute(ob Observation) float64 { return math.Max(ob.StepTime-ob.SyncTime, minCompute) }
