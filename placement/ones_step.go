package placement

import (
	"maps"
	"math"
	"slices"
	"sort"
)

// ONES predicts a configuration's step time from its own reports where it
// has some (seenStep) and from the application's fitted model elsewhere.
// Two things an application's reports say beyond that model are kept
// here, as its stepShape:
//
//   - Its compute curve: one micro-step's compute time (step time less
//     synchronisation) by per-GPU batch, the median over the shapes
//     reported there. Compute depends on the per-GPU batch, hardly on the
//     placement (cifar10 at 1024 per GPU: 0.68–0.84 s over its 103 measured
//     placements), and it is not proportional to the batch: cifar10's is
//     0.042 s at 32 and 0.73 s at 1024 per GPU. The line fitted to the
//     reports, most at large batches, had an intercept near 0, so a shape
//     reported at 257 per GPU was predicted at 32 per GPU at 0.023 s of
//     compute, some 45 % too fast.
//   - How synchronisation overlaps compute. The data's synchronisation
//     time is the part of a step spent waiting for the all-reduce after
//     the backward pass, which overlaps it: imagenet on 8 nodes, 8 GPUs
//     waits 0.20 s at 20 per GPU and 0.03 s at 200. Added to compute as a
//     constant, the wait reported at a large batch predicted a small one
//     far too fast (imagenet on 30 GPUs over 8 nodes, reported at 256 per
//     GPU: 0.30 s predicted at 33 per GPU, 0.54 s measured). With an
//     overlap exponent γ a step is (compute^γ + allreduce^γ)^(1/γ), the
//     form the goodput model of elastic schedulers uses: γ = 1 adds them
//     (no overlap); the larger γ, the more of the all-reduce the compute
//     hides. The all-reduce time follows from one report (its step and
//     compute), and γ is the one, of a few, that best predicts each of the
//     application's reports at a shape from the others there (fitGamma).
//     Fitted so to the profiles' own step times (every placement a shape:
//     TestFitGammaOnProfiles), γ is 1 for deepspeech2 and ncf, 1.5 for
//     cifar10 and yolov3, 2 for bert and 2.5 for imagenet.
//
// A shape not reported yet is predicted additively: the compute curve (the
// model's line where nothing is reported) plus the model's synchronisation,
// which errs optimistic on purpose (ThroughputModel), since a
// configuration predicted slow is never tried, so never corrected.
// Predicting those with the overlap too (γ = 2.5 for every application)
// cost workload 1 29 ± 7 s over seeds 1–27.
//
// Compute times are floored at minCompute, as FitThroughput does: a report
// whose synchronisation is its whole step (the live loop clamps the sync
// it measures to the step) has no compute to scale, and a zero on the
// curve made a one-GPU shape's iteration free.
type stepShape struct {
	comp  []compPt // ascending in l
	gamma float64  // overlap exponent, ≥ 1
}

// compPt is an application's compute time c of one micro-step at per-GPU
// batch l.
type compPt struct{ l, c float64 }

// overlapGammas are the overlap exponents fitGamma chooses from.
var overlapGammas = []float64{1, 1.5, 2, 2.5, 3, 4}

// newStepShape builds an application's stepShape from its reports, seen
// by (nodes, GPUs) and ascending in the local batch within each.
func newStepShape(seen map[[2]int][]Observation) stepShape {
	byL := map[int][]float64{}
	for _, obs := range seen {
		for _, ob := range obs {
			byL[ob.LocalBatch] = append(byL[ob.LocalBatch], reportCompute(ob))
		}
	}
	var sh stepShape
	for _, l := range slices.Sorted(maps.Keys(byL)) {
		cs := byL[l]
		slices.Sort(cs)
		sh.comp = append(sh.comp, compPt{float64(l), cs[(len(cs)-1)/2]})
	}
	sh.gamma = fitGamma(seen)
	return sh
}

// overlapStep is the step time of compute c with an all-reduce of a
// seconds overlapping it by exponent g.
func overlapStep(c, a, g float64) float64 {
	if g == 1 {
		return c + a
	}
	return math.Pow(math.Pow(c, g)+math.Pow(a, g), 1/g)
}

// allreduce is the all-reduce time that, overlapping compute c by exponent
// g, gives a step of step seconds (overlapStep's inverse in a); 0 where c
// is the whole step or more.
func allreduce(step, c, g float64) float64 {
	if step <= c {
		return 0
	}
	if g == 1 {
		return step - c
	}
	return math.Pow(math.Pow(step, g)-math.Pow(c, g), 1/g)
}

// fitGamma returns the overlap exponent, of overlapGammas, that best
// predicts each report at a shape from each other report there (the sum of
// absolute log errors; the smaller exponent on a tie), the compute times
// being the reports' own; 1 when no shape has two reports.
func fitGamma(seen map[[2]int][]Observation) float64 {
	best, bestErr := 1.0, math.Inf(1)
	keys := slices.SortedFunc(maps.Keys(seen), func(a, b [2]int) int { return slices.Compare(a[:], b[:]) })
	for _, g := range overlapGammas {
		e, n := 0.0, 0
		for _, k := range keys {
			obs := seen[k]
			for x := range obs {
				a := allreduce(obs[x].StepTime, reportCompute(obs[x]), g)
				for y := range obs {
					if x == y || obs[y].StepTime <= 0 {
						continue
					}
					p := overlapStep(reportCompute(obs[y]), a, g)
					e += math.Abs(math.Log(p / obs[y].StepTime))
					n++
				}
			}
		}
		if n == 0 {
			return 1
		}
		if e < bestErr*(1-1e-9) {
			best, bestErr = g, e
		}
	}
	return best
}

// computeAt is job j's predicted compute time of one micro-step at per-GPU
// batch l: its application's compute curve, linear between the batches
// reported; beyond them, the nearest end scaled by the model's compute
// ratio; the model's line where nothing is reported.
func (j *onesJob) computeAt(l float64) float64 {
	c := j.step.comp
	n := len(c)
	if n == 0 {
		return j.model.Compute(l)
	}
	if l >= c[0].l && l <= c[n-1].l {
		i := sort.Search(n, func(x int) bool { return c[x].l >= l })
		if c[i].l == l {
			return c[i].c
		}
		f := (l - c[i-1].l) / (c[i].l - c[i-1].l)
		return c[i-1].c + f*(c[i].c-c[i-1].c)
	}
	e := c[0]
	if l > c[n-1].l {
		e = c[n-1]
	}
	if m0 := j.model.Compute(e.l); m0 > 0 {
		return e.c * j.model.Compute(l) / m0
	}
	return e.c
}

// seenStep predicts job j's step time at local batch l on a configuration
// with reports obs (ascending in the local batch), and the part of it
// spent synchronising: linear between two reports; beyond them, from the
// nearest report, its compute scaled along the compute curve (computeAt)
// and its all-reduce, as the overlap exponent gives it, unchanged.
func (j *onesJob) seenStep(obs []Observation, l float64) (step, sync float64) {
	n := len(obs)
	for k := 1; k < n; k++ {
		a, b := obs[k-1], obs[k]
		if l >= float64(a.LocalBatch) && l <= float64(b.LocalBatch) {
			f := (l - float64(a.LocalBatch)) / float64(b.LocalBatch-a.LocalBatch)
			return a.StepTime + f*(b.StepTime-a.StepTime), a.SyncTime + f*(b.SyncTime-a.SyncTime)
		}
	}
	near := obs[0]
	if l > float64(obs[n-1].LocalBatch) {
		near = obs[n-1]
	}
	if l == float64(near.LocalBatch) || (!j.model.Known && len(j.step.comp) == 0) {
		return near.StepTime, near.SyncTime
	}
	c0 := j.computeAt(float64(near.LocalBatch))
	if c0 <= 0 {
		return near.StepTime, near.SyncTime
	}
	g := max(j.step.gamma, 1)
	c := reportCompute(near)
	cl := c * j.computeAt(l) / c0
	step = overlapStep(cl, allreduce(near.StepTime, c, g), g)
	return step, math.Max(step-cl, 0)
}
