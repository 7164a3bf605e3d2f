package placement

import (
	"math"
	"testing"
)

// boundApp is a synthetic application for the bound's hand check: base
// batch 4, global batch ≤ 64, per-GPU batch ≤ 16, a noise scale so large
// that a batch of B makes B/4 base-batch iterations of progress, one epoch
// of 3200 samples (800 base-batch iterations). A micro-step takes
// 0.1 + 0.01·local seconds, plus a synchronisation of 0.1 s on one node
// with several GPUs, 0.3 s across nodes.
func boundApp(t *testing.T) *App {
	t.Helper()
	a, err := NewSyntheticApp(SyntheticApp{
		Name: "hand", BaseBatch: 4, MaxBatch: 64, MinLocal: 1, MaxLocal: 16,
		NoiseScale: 1e12, DatasetSize: 3200, Epochs: 1,
		Step: func(nodes, r int, l float64) (float64, float64) {
			sync := 0.0
			switch {
			case nodes > 1:
				sync = 0.3
			case r > 1:
				sync = 0.1
			}
			return 0.1 + 0.01*l + sync, sync
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestBoundHandChecked: on 2 nodes × 4 GPUs the fastest configuration of
// boundApp is 4 GPUs of one node at per-GPU batch 16 (global 64): 0.36 s
// per iteration for 16 base-batch iterations, 177.8 samples/s. Others are
// slower: 1 GPU ≤ 16/0.26 = 61.5; 2 GPUs, batch 16 with one accumulation
// step 64/0.62 = 103; 3 GPUs 48/0.36 = 133; 8 GPUs on two nodes 64/0.48 =
// 133. So 800 base-batch iterations take 800/16 × 0.36 = 18 s. With start
// costs (interval 10 s, move cost 3 s) a job arriving at 0 starts at 3 and
// one arriving at 7 at 13: JCTs 21 and 24.
func TestBoundHandChecked(t *testing.T) {
	apps := Apps{"hand": boundApp(t)}
	wl := []WorkloadJob{
		{Name: "a", Time: 0, App: "hand", Replicas: 1, Batch: 4},
		{Name: "b", Time: 7, App: "hand", Replicas: 2, Batch: 8},
	}
	r, err := Bound(apps, wl, BoundConfig{Nodes: 2, GPUsPerNode: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range r.PerJob {
		if math.Abs(j.JCT-18) > 1e-6 || j.MaxGPUs != 4 || j.LastBatch != 64 {
			t.Errorf("job %s: JCT %v on %d GPUs at batch %d, want 18 s on 4 GPUs at 64", j.Name, j.JCT, j.MaxGPUs, j.LastBatch)
		}
	}
	if math.Abs(r.AvgJCT-18) > 1e-6 || math.Abs(r.Makespan-25) > 1e-6 {
		t.Errorf("average JCT %v, makespan %v; want 18, 25", r.AvgJCT, r.Makespan)
	}
	r, err = Bound(apps, wl, BoundConfig{Nodes: 2, GPUsPerNode: 4, StartCosts: true, Interval: 10, MoveCost: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"a": 21, "b": 24}
	for k, v := range jctByName(r) {
		if math.Abs(v-want[k]) > 1e-6 {
			t.Errorf("with start costs, job %s: JCT %v, want %v", k, v, want[k])
		}
	}
	// One node of 2 GPUs: 2 GPUs at batch 16 with one accumulation step,
	// 0.62 s per 16 base-batch iterations: 31 s.
	r, err = Bound(apps, wl[:1], BoundConfig{Nodes: 1, GPUsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.AvgJCT-31) > 1e-6 {
		t.Errorf("on 1×2 GPUs: JCT %v, want 31", r.AvgJCT)
	}
	if _, err := Bound(apps, wl, BoundConfig{Nodes: 0, GPUsPerNode: 4}); err == nil {
		t.Error("no nodes: no error")
	}
	if _, err := Bound(Apps{}, wl, BoundConfig{Nodes: 1, GPUsPerNode: 4}); err == nil {
		t.Error("unknown application: no error")
	}
}

// checkAboveBound simulates wl under every policy and checks that no job
// completes sooner than the bound allows (with the simulator's start
// costs, itself no lower than the bound without them).
func checkAboveBound(t *testing.T, apps Apps, wl []WorkloadJob, nodes, gpn int) {
	t.Helper()
	pure, err := Bound(apps, wl, BoundConfig{Nodes: nodes, GPUsPerNode: gpn})
	if err != nil {
		t.Fatal(err)
	}
	withStart, err := Bound(apps, wl, BoundConfig{Nodes: nodes, GPUsPerNode: gpn, StartCosts: true, Interval: 60, MoveCost: 30})
	if err != nil {
		t.Fatal(err)
	}
	lo, loStart := jctByName(pure), jctByName(withStart)
	for k, v := range lo {
		if !(v > 0) || loStart[k] < v+30-1e-9 {
			t.Errorf("job %s: bound %v, with start costs %v (want ≥ bound + 30 s)", k, v, loStart[k])
		}
	}
	for _, name := range PolicyNames {
		for seed := int64(1); seed <= 2; seed++ {
			p, err := NewPolicy(name, PolicyOptions{Seed: seed, MoveCost: 30, Interval: 60})
			if err != nil {
				t.Fatal(err)
			}
			r, err := Simulate(apps, wl, p, SimConfig{Nodes: nodes, GPUsPerNode: gpn, Interval: 60, MoveCost: 30})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range jctByName(r) {
				if v < loStart[k]-1e-6 {
					t.Errorf("%s seed %d: job %s JCT %.3f below its bound %.3f", name, seed, k, v, loStart[k])
				}
			}
			if r.AvgJCT < withStart.AvgJCT-1e-6 {
				t.Errorf("%s seed %d: average JCT %.1f below the bound %.1f", name, seed, r.AvgJCT, withStart.AvgJCT)
			}
			t.Logf("%-8s seed %d: avg JCT %7.1f s, bound %7.1f s (%.1f with start costs)", name, seed, r.AvgJCT, pure.AvgJCT, withStart.AvgJCT)
		}
	}
}

// TestPoliciesAboveBoundSynthetic: the hand-checked application, five jobs
// on 2 × 4 GPUs.
func TestPoliciesAboveBoundSynthetic(t *testing.T) {
	apps := Apps{"hand": boundApp(t)}
	var wl []WorkloadJob
	for i, at := range []float64{0, 0, 5, 100, 130} {
		wl = append(wl, WorkloadJob{Name: string(rune('a' + i)), Time: at, App: "hand", Replicas: 1 + i%3, Batch: 4 << (i % 3)})
	}
	checkAboveBound(t, apps, wl, 2, 4)
}

// TestPoliciesAboveBoundMeasured: the first 24 jobs of workload-3 on the
// measured profiles, 16 × 4 GPUs.
func TestPoliciesAboveBoundMeasured(t *testing.T) {
	apps, d := loadData(t)
	wl := loadWorkload(t, apps, d, 3)[:24]
	checkAboveBound(t, apps, wl, 16, 4)
}
