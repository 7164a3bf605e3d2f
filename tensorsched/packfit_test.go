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
		got, _, ok := packedFit(new([]float64), sp, ends, lo, hi, d, deadline, false)
		if !ok {
			got = -1
		}
		// Walking the sorted spans finds the same.
		if walk, _, wok := packedFit(new([]float64), sp, ends, lo, hi, d, deadline, true); walk != got && (wok || ok) {
			t.Fatalf("trial %d: packedFit walking the spans %d (%v), searching them %d (%v)", trial, walk, wok, got, ok)
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
