package fikit

import (
	"math"
	"testing"
)

// profValue is a measurement for FuzzProfilerArithmetic: a finite number
// >= 0 of seconds, from zero and tenths of a femtosecond to 30 years; with
// extreme, also subnormals and numbers up to the largest float64; now and
// then one that is not a measurement (NaN, an infinity, a negative number),
// which must be ignored.
func profValue(src *simSource, extreme bool) (v float64, valid bool) {
	switch src.Intn(16) {
	case 0:
		return 0, true
	case 1:
		return src.pick(math.NaN(), math.Inf(1), math.Inf(-1), -1e-9, -1), false
	case 2, 3:
		if !extreme {
			break
		}
		if src.Chance(1, 2) {
			return src.pick(5e-324, 1e-310, 1e-300, 1e15, 1e300, math.MaxFloat64), true
		}
		if x := math.Abs(math.Float64frombits(src.u64())); finite(x) {
			return x, true
		}
		return 0, true
	}
	return src.pick(1e-15, 1e-12, 1e-6, 1e-3, 1, 1e3, 1e9) * src.Unit(), true
}

// FuzzProfilerArithmetic drives a Profiler, a Residual and an ErrorStats
// with random measurements and checks that
//
//   - an estimate stays within the range of what it averaged (up to the
//     rounding of the moving average's update, a few ulps of the largest
//     observation: with weight 1, 1e300 followed by 4e-13 averages to 0);
//   - a measurement that is not a finite number >= 0, or a prediction
//     that is not finite, changes nothing;
//   - every estimate, prediction (Remaining, Residual.After) and score
//     (sums, MAPE, WAPE) is a finite number >= 0, and a residual wait
//     never exceeds the longest recorded wait less the time already waited,
//     for measurements up to 1e9 s. Beyond that (the extreme inputs) the
//     sums may overflow: 1e300 s waits add up to +Inf, and so does a
//     percentage error over a subnormal outcome; no run can measure such
//     times (the simulator's clock cannot resolve a kernel there), so only
//     the first two properties are checked on them.
func FuzzProfilerArithmetic(f *testing.F) {
	f.Add(uint64(1), []byte(nil))
	f.Add(uint64(2), []byte{0, 0, 0, 0})
	f.Add(uint64(3), []byte{2, 2, 2, 2, 2, 2})
	f.Fuzz(fuzzProfiler)
}

func fuzzProfiler(t *testing.T, seed uint64, data []byte) {
	src := newSimSource(seed, data)
	extreme := src.Chance(1, 4)
	alpha := src.pick(0, 0.2, 1, 1e-300, src.Unit(), 5, -1)
	p := NewProfiler(alpha)
	var direct ErrorStats
	var res Residual
	type key struct{ kind, a, b int }
	lo, hi := map[key]float64{}, map[key]float64{}
	seen := func(k key, v float64) {
		if _, ok := lo[k]; !ok {
			lo[k], hi[k] = v, v
		}
		lo[k], hi[k] = math.Min(lo[k], v), math.Max(hi[k], v)
	}
	var waitMax [3]float64
	var resMax float64
	n := 1 + int(src.Byte())
	for step := range n {
		v, valid := profValue(src, extreme)
		switch op := src.Intn(7); op {
		case 0:
			id := uint64(src.Intn(4))
			e := *p.Kernel(id)
			p.ObserveKernel(id, v)
			if !valid && *p.Kernel(id) != e {
				t.Fatalf("step %d: kernel %d observed %v: estimate %+v became %+v", step, id, v, e, *p.Kernel(id))
			}
			if valid {
				seen(key{0, int(id), 0}, v)
			}
		case 1, 2:
			job, slot := src.Intn(3), src.Intn(7)-3
			if op == 2 {
				slot = SlotWait
			}
			e, w := *p.Gap(job, slot), *p.Wait(job)
			p.ObserveGap(job, slot, v)
			if !valid && (*p.Gap(job, slot) != e || *p.Wait(job) != w) {
				t.Fatalf("step %d: gap %d/%d observed %v changed the estimates", step, job, slot, v)
			}
			if valid {
				seen(key{1, job, slot}, v)
				if slot == SlotWait {
					waitMax[job] = math.Max(waitMax[job], v)
				}
			}
		case 3:
			before := res
			res.Observe(v)
			if !valid && res != before {
				t.Fatalf("step %d: residual observed %v", step, v)
			}
			if valid {
				resMax = math.Max(resMax, v)
			}
		case 4:
			pred, _ := profValue(src, extreme)
			if src.Chance(1, 8) {
				pred = -pred // a prediction may be anything finite
			}
			before := direct
			direct.Add(pred, v)
			if (!valid || !finite(pred)) && direct != before {
				t.Fatalf("step %d: scoring %v against %v changed the scores", step, pred, v)
			}
		case 5:
			e, _ := profValue(src, extreme)
			if !(e >= 0) || !finite(e) {
				e = 0
			}
			if a := res.After(e); !extreme && (!finite(a) || a < 0 || a > math.Max(0, resMax-e)*(1+1e-12)) { // a mean rounds
				t.Fatalf("step %d: residual wait after %g = %g (longest wait %g)", step, e, a, resMax)
			}
		case 6:
			e, _ := profValue(src, extreme)
			if !(e >= 0) || !finite(e) {
				e = 0
			}
			s := GapState{Job: src.Intn(3), Phase: Phase(src.Intn(4)), After: src.Intn(5) - 1, Elapsed: e,
				Queued: src.Chance(1, 2), Final: src.Chance(1, 2)}
			if r := p.Remaining(s); !extreme && (!finite(r) || r < 0) {
				t.Fatalf("step %d: remaining %g for %+v", step, r, s)
			}
		}
		for k, l := range lo {
			var e *Estimate
			if k.kind == 0 {
				e = p.Kernel(uint64(k.a))
			} else {
				e = p.Gap(k.a, k.b)
			}
			if ulps := 4 * (math.Nextafter(hi[k], math.Inf(1)) - hi[k]); !finite(e.Mean) || e.Mean < 0 || e.Mean < l-ulps || e.Mean > hi[k]+ulps {
				t.Fatalf("step %d: estimate %+v of %+v outside its observations [%g, %g]", step, *e, k, l, hi[k])
			}
		}
		if extreme {
			continue
		}
		for job, m := range waitMax {
			if a := p.Wait(job).After(0); !finite(a) || a < 0 || a > m*(1+1e-12) {
				t.Fatalf("step %d: job %d residual wait %g (longest %g)", step, job, a, m)
			}
		}
		for name, s := range map[string]ErrorStats{"duration": p.DurErr, "gap": p.GapErr, "direct": direct} {
			if s.N < 0 || s.Unscorable < 0 || !finite(s.SumAbs) || !finite(s.SumAbsPct) || !finite(s.SumActual) ||
				s.SumAbs < 0 || s.SumAbsPct < 0 || s.SumActual < 0 ||
				!finite(s.MAPE()) || !finite(s.WAPE()) || s.MAPE() < 0 || s.WAPE() < 0 {
				t.Fatalf("step %d: %s scores %+v: MAPE %g WAPE %g", step, name, s, s.MAPE(), s.WAPE())
			}
		}
	}
}
