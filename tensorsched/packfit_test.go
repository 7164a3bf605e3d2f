package tensorsched

import (
	"math"
	"math/rand"
	"testing"
)

// packedFit agrees with running the engine's FIFO queue with the copy
// inserted: on random copy timelines it returns the earliest op whose end
// can issue the copy so that it and every copy it pushes back end by the
// deadline, pushing none that ended after it.
func TestPackedFitMatchesFIFO(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 2000; trial++ {
		// Copies issued at increasing times, run in FIFO order.
		var sp []copySpan
		at, free := 0.0, 0.0
		for i := 0; i < 1+rng.Intn(12); i++ {
			at += rng.Float64()
			st := math.Max(at, free)
			free = st + 0.2 + rng.Float64()
			sp = append(sp, copySpan{issue: at, start: st, end: free})
		}
		var ends []float64
		e := 0.0
		for i := 0; i < 20; i++ {
			e += 0.1 + rng.Float64()*0.8
			ends = append(ends, e)
		}
		lo := int32(rng.Intn(10))
		hi := lo + int32(rng.Intn(10))
		d := 0.1 + rng.Float64()
		deadline := 1 + rng.Float64()*float64(len(sp))*1.2
		// Brute force: insert after each op end in turn and run the queue.
		want := int32(-1)
		for b := lo; b <= hi && want < 0; b++ {
			c := ends[b]
			k := spanAfter(sp, c)
			cur := c
			if k > 0 {
				cur = math.Max(cur, sp[k-1].end)
			}
			cur += d
			ok := cur <= deadline
			for i := k; ok && i < len(sp); i++ {
				if cur <= sp[i].start {
					break
				}
				if sp[i].end > deadline {
					ok = false
					break
				}
				cur += sp[i].end - sp[i].start
				ok = cur <= deadline
			}
			if ok {
				want = b
			}
		}
		got, _, ok := packedFit(new([]float64), sp, ends, lo, hi, d, deadline, nil)
		if !ok {
			got = -1
		}

		if got != want {
			t.Fatalf("trial %d: packedFit %d, FIFO %d (spans %+v, lo %d hi %d d %.3f deadline %.3f)", trial, got, want, sp, lo, hi, d, deadline)
		}
		// Inserting it pushes the later copies as the queue does.
		if ok {
			c := ends[got]
			k := spanAfter(sp, c)
			st := c
			if k > 0 {
				st = math.Max(st, sp[k-1].end)
			}
			out := insertPushed(append([]copySpan(nil), sp...), copySpan{issue: c, start: st, end: st + d})
			for i := 1; i < len(out); i++ {
				if out[i].start < out[i-1].end-1e-12 {
					t.Fatalf("trial %d: copies overlap after the insertion: %+v", trial, out)
				}
			}
			for i := range sp {
				o := out[i]
				if i >= k {
					o = out[i+1]
				}
				if sp[i].end <= deadline && o.end > deadline+1e-12 || sp[i].end > deadline && o != sp[i] {
					t.Fatalf("trial %d: copy %d pushed past the deadline or moved after it: %+v -> %+v", trial, i, sp[i], o)
				}
			}
		}
	}
}

// The searches for idle time answer the same with the spans' summary
// (spanIndex) and latestFit's ordered starts as without: on random copy
// timelines, some on a coarse grid where sums are exact and ties common,
// some with issue times out of order.
func TestSpanIndexSameAnswers(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	var ix spanIndex
	for trial := 0; trial < 20000; trial++ {
		grid := trial%2 == 0
		val := func(x float64) float64 {
			if grid {
				return math.Round(x*4) / 4
			}
			return x
		}
		var sp []copySpan
		at, free := 0.0, 0.0
		n := rng.Intn(80)
		for i := 0; i < n; i++ {
			at += val(rng.Float64() * 0.6)
			issue := at
			if trial%5 == 1 && rng.Intn(3) == 0 {
				issue += val(rng.Float64() * 2) // waits on something in flight
			}
			st := math.Max(issue, free)
			if rng.Intn(3) == 0 {
				st += val(rng.Float64()) // an idle gap
			}
			free = st + val(0.05+rng.Float64()*0.5)
			if trial%5 == 3 && rng.Intn(4) == 0 {
				// Not a FIFO engine's: starts and ends out of order.
				st = val(rng.Float64() * free)
				sp = append(sp, copySpan{issue: issue, start: st, end: st + val(rng.Float64())})
				continue
			}
			sp = append(sp, copySpan{issue: issue, start: st, end: free})
		}
		var ends []float64
		e := 0.0
		for i := 0; i < 60; i++ {
			e += val(0.05 + rng.Float64()*0.6)
			ends = append(ends, e)
		}
		lo := int32(rng.Intn(40))
		hi := lo + int32(rng.Intn(20))
		d := val(0.05 + rng.Float64()*1.5)
		deadline := val(rng.Float64() * (free + 2))
		if k0 := spanAfter(sp, ends[lo]); trial%10 == 7 && k0 > 0 && k0 < len(sp) {
			// A tie: the deadline is where the copy issued after op lo
			// and every copy after it, pushed back, end (as packedFit
			// sums them), when that is after every copy.
			sum := 0.0
			for i := k0; i < len(sp); i++ {
				sum = sum + sp[i].end - sp[i].start
			}
			deadline = math.Max(ends[lo], sp[k0-1].end) + d + sum
		}
		ix.reset(sp)

		// same checks both searches with and without the summary and
		// returns packedFit's answer (where the next copy is placed).
		same := func(when string) (int32, float64, bool) {
			a1, s1, ok1 := earliestFit(sp, ends, lo, hi, d, deadline, nil)
			a2, s2, ok2 := earliestFit(sp, ends, lo, hi, d, deadline, &ix)
			if a1 != a2 || s1 != s2 || ok1 != ok2 {
				t.Fatalf("trial %d%s: earliestFit %d %v %v without the summary, %d %v %v with it", trial, when, a1, s1, ok1, a2, s2, ok2)
			}
			p1, q1, r1 := packedFit(new([]float64), sp, ends, lo, hi, d, deadline, nil)
			p2, q2, r2 := packedFit(new([]float64), sp, ends, lo, hi, d, deadline, &ix)
			if p1 != p2 || q1 != q2 || r1 != r2 {
				t.Fatalf("trial %d%s: packedFit %d %v %v without the summary, %d %v %v with it", trial, when, p1, q1, r1, p2, q2, r2)
			}
			return p1, q1, r1
		}
		a1, s1, ok1 := same("")
		// Placing copies keeps the summary of the spans before them.
		for ok1 && len(sp) < 200 {
			in := copySpan{issue: ends[a1], start: s1, end: s1 + d}
			k := spanAfter(sp, in.issue)
			sp = insertPushed(sp, in)
			ix.moved(sp, k)
			lo = int32(rng.Intn(40))
			d = val(0.05 + rng.Float64()*1.5)
			a1, s1, ok1 = same(", after a placement")
		}

		mono := true
		for i := 1; i < len(sp); i++ {
			mono = mono && sp[i-1].start <= sp[i].start
		}
		v := &iterTimes{end: ends, base: 0}
		ready, notBefore := val(rng.Float64()*free), val(rng.Float64()*free/2)
		b1, t1, ok1 := latestFit(sp, v, lo, hi, ready, d, deadline+2, notBefore, false)
		b2, t2, ok2 := latestFit(sp, v, lo, hi, ready, d, deadline+2, notBefore, mono)
		if b1 != b2 || t1 != t2 || ok1 != ok2 {
			t.Fatalf("trial %d: latestFit %d %v %v scanning every gap, %d %v %v stopping early", trial, b1, t1, ok1, b2, t2, ok2)
		}
	}
}
