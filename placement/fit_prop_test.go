package placement

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// refFit is Fit's rules written out by brute force: among GPUs up, whose
// free budget holds the job's minimum and that the high-priority rule
// allows, the ones where every job fits at its vanilla peak come first
// (least vanilla room left), then the rest (least free budget left); ties
// go to fewer jobs, then the lower ID.
func refFit(gpus []FitGPU, r FitRequest) int {
	type cand struct {
		i, tier int
		left    int64
	}
	var cs []cand
	for i := range gpus {
		g := &gpus[i]
		d := r.demand(g.DeviceType)
		if g.Down || d.Min > g.Free() {
			continue
		}
		vl := g.Capacity - g.vanillaSum() - d.Vanilla
		if r.Priority >= HighPriority && vl < 0 {
			blocked := false
			for _, j := range g.Jobs {
				blocked = blocked || j.Priority >= HighPriority
			}
			if blocked {
				continue
			}
		}
		if vl >= 0 {
			cs = append(cs, cand{i, 0, vl})
		} else {
			cs = append(cs, cand{i, 1, g.Free() - d.Min})
		}
	}
	best := -1
	for k, c := range cs {
		if best < 0 {
			best = k
			continue
		}
		b := cs[best]
		gc, gb := &gpus[c.i], &gpus[b.i]
		if c.tier != b.tier {
			if c.tier < b.tier {
				best = k
			}
			continue
		}
		if c.left != b.left {
			if c.left < b.left {
				best = k
			}
			continue
		}
		if len(gc.Jobs) != len(gb.Jobs) {
			if len(gc.Jobs) < len(gb.Jobs) {
				best = k
			}
			continue
		}
		if gc.ID < gb.ID {
			best = k
		}
	}
	if best < 0 {
		return -1
	}
	return cs[best].i
}

// Property test of Fit on seeded random clusters: it picks what the rules
// pick, never a GPU that is down or lacks the free budget, never puts a
// high-priority job next to another unless all fit at their peaks, and
// gives a reason when it places nothing.
func TestFitProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const G = 1 << 30
	for it := 0; it < 20000; it++ {
		gpus := make([]FitGPU, 1+rng.Intn(6))
		for i := range gpus {
			g := FitGPU{ID: fmt.Sprintf("n%d/gpu%d", rng.Intn(3), i), DeviceType: []string{"a", "b"}[rng.Intn(2)], Down: rng.Intn(8) == 0}
			g.Capacity = []int64{16 * G, 24 * G}[rng.Intn(2)]
			for k := rng.Intn(4); k > 0; k-- {
				mn := int64(1+rng.Intn(8)) * G / 2
				j := FitJob{ID: fmt.Sprintf("j%d", k), Min: mn, Vanilla: mn + int64(rng.Intn(8))*G/2, Priority: rng.Intn(10)}
				if g.Reserved()+j.Min <= g.Capacity {
					g.Jobs = append(g.Jobs, j)
				}
			}
			gpus[i] = g
		}
		if rng.Intn(4) == 0 && len(gpus) > 1 { // identical GPUs: ties
			gpus[1].Capacity, gpus[1].Jobs, gpus[1].DeviceType = gpus[0].Capacity, append([]FitJob(nil), gpus[0].Jobs...), gpus[0].DeviceType
		}
		mn := int64(1+rng.Intn(10)) * G / 2
		r := FitRequest{ID: "new", Priority: rng.Intn(10), Tolerance: 0.1, Demand: Demand{Min: mn, Vanilla: mn + int64(rng.Intn(8))*G/2}}
		if rng.Intn(2) == 0 {
			r.PerType = map[string]Demand{"b": {Min: mn * 2, Vanilla: mn*2 + G}}
		}
		dec := Fit(gpus, r)
		want := refFit(gpus, r)
		if !dec.OK {
			if want >= 0 {
				t.Fatalf("case %d: Fit placed nothing (%s), want %s; gpus %+v, request %+v", it, dec.Reason, gpus[want].ID, gpus, r)
			}
			if dec.Reason == "" {
				t.Fatalf("case %d: no placement and no reason", it)
			}
			continue
		}
		if dec.Index != want {
			w := "nothing"
			if want >= 0 {
				w = gpus[want].ID
			}
			t.Fatalf("case %d: Fit chose %d (%s), want %s; gpus %+v, request %+v", it, dec.Index, dec.ID, w, gpus, r)
		}
		g := &gpus[dec.Index]
		if dec.ID != g.ID || dec.Leftover != g.Free()-r.demand(g.DeviceType).Min {
			t.Fatalf("case %d: decision %+v does not describe %s", it, dec, g.ID)
		}
	}
}

// A GPU whose reservations exceed its capacity (the coordinator's view can
// be over-reserved after a recovery or an elastic move) is still a GPU that
// is up: the reason named no GPU at all ("no node has joined, or every node
// is down") because the largest free budget, negative, read as none.
func TestFitReasonOverReservedGPU(t *testing.T) {
	gpus := []FitGPU{{ID: "n1/gpu0", DeviceType: "a", Capacity: 10 << 30, Jobs: []FitJob{{ID: "x", Min: 12 << 30, Vanilla: 12 << 30}}}}
	dec := Fit(gpus, FitRequest{ID: "new", Tolerance: 0.1, Demand: Demand{Min: 1 << 30, Vanilla: 2 << 30}})
	if dec.OK || !strings.Contains(dec.Reason, "largest free is") {
		t.Fatalf("decision %+v, want a wait naming the largest free budget", dec)
	}
}
