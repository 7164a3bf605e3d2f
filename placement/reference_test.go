package placement

import (
	"math"
	"reflect"
	"testing"
)

// In reference mode (SimConfig.Reference, tiresias placing most free
// first) our tiresias reproduces the reference simulator's Tiresias
// figures in the data README on every workload: within 0.2 % (its own
// simulator gives 2474/5145/3876/3280 s; we give 2473.6/5145.0/3876.3/
// 3284.7). In the default mode, where the gain is calibrated to the
// validation runs' iteration counts, it is 0.9–10.9 % faster; the
// calibration is most of that (session 37).
func TestReferenceModeReproducesTiresias(t *testing.T) {
	apps, d := loadData(t)
	ref, err := LoadReference(d)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 4; n++ {
		wl := loadWorkload(t, apps, d, n)
		name := "workload-" + string(rune('0'+n))
		want := ref.Get(name, "tiresias")
		if want <= 0 {
			t.Fatalf("%s: no reference Tiresias figure", name)
		}
		run := func(reference bool) float64 {
			p, err := NewPolicy("tiresias", PolicyOptions{MostFreeFirst: reference})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Simulate(apps, wl, p, SimConfig{Nodes: 16, GPUsPerNode: 4, Interval: 60, MoveCost: DefaultMoveCost, Reference: reference})
			if err != nil {
				t.Fatal(err)
			}
			return res.AvgJCT
		}
		got, own := run(true), run(false)
		if math.Abs(got/want-1) > 0.002 {
			t.Errorf("%s: reference mode gives %.1f s, reference Tiresias %.0f s (%+.2f %%)", name, got, want, 100*(got/want-1))
		}
		if own >= want {
			t.Errorf("%s: default mode %.1f s, not below the reference %.0f s: the calibration's effect changed", name, own, want)
		}
		t.Logf("%s: reference mode %.1f s, default %.1f s, reference Tiresias %.0f s", name, got, own, want)
	}
}

// Uncalibrated leaves the loaded applications as they were and drops only
// the calibration: the same profile, a different gain at a validated batch
// whose factor is not 1.
func TestAppsUncalibrated(t *testing.T) {
	apps, _ := loadData(t)
	un := apps.Uncalibrated()
	for name, a := range apps {
		u := un[name]
		if u == a || u.calib != nil || a.calib == nil {
			t.Fatalf("%s: uncalibrated copy %p of %p, calib %v (original %v)", name, u, a, u.calib, a.calib)
		}
		if !reflect.DeepEqual(u.valBatch, a.valBatch) || u.Target() != a.Target() {
			t.Fatalf("%s: profile changed", name)
		}
	}
	y := apps["yolov3"]
	b := float64(y.valBatch[len(y.valBatch)-1])
	if k := y.calib[len(y.calib)-1]; math.Abs(k-1) < 0.1 {
		t.Fatalf("yolov3's largest batch calibrated by %v; this test needs a factor far from 1", k)
	}
	if g, gu := y.Gain(b, 10), un["yolov3"].Gain(b, 10); math.Abs(g/gu-y.calib[len(y.calib)-1]) > 1e-9 {
		t.Fatalf("gain at %v: %v calibrated, %v not; want a ratio of %v", b, g, gu, y.calib[len(y.calib)-1])
	}
}

// Most-free-first placement takes GPUs node by node from the node with the
// most free (ties: the lowest index); best fit puts a job that fits one
// node on the fullest that fits it.
func TestTakeMostFree(t *testing.T) {
	p := &packer{free: []int{3, 4, 2, 4}}
	if got := p.takeMostFree(2); !reflect.DeepEqual(got, []int{0, 2, 0, 0}) {
		t.Fatalf("2 GPUs from 3/4/2/4 free: %v", got)
	}
	if got := p.takeMostFree(6); !reflect.DeepEqual(got, []int{2, 0, 0, 4}) {
		t.Fatalf("6 GPUs from 3/2/2/4 free: %v, want 4 from node 3 and 2 from node 0", got)
	}
	if got := p.takeMostFree(6); got != nil {
		t.Fatalf("6 GPUs from 1/2/2/0 free: %v, want none", got)
	}
	q := &packer{free: []int{3, 4, 2, 4}}
	if got := q.take(2); !reflect.DeepEqual(got, []int{0, 0, 2, 0}) {
		t.Fatalf("best fit of 2 GPUs: %v", got)
	}
}
