package placement

import (
	"fmt"
	"strings"
	"testing"
)

// TestSimulateBatchBelowBase: a workload may ask for a batch below its
// application's base batch (LoadWorkload takes any positive batch). fifo
// and tiresias run it as asked, and the simulator's check used to reject
// that as a global batch below the range [B0, max]: the job's own batch
// widens the range downwards as a larger one widens it upwards.
// Found by FuzzSimulateRandomWorkload.
func TestSimulateBatchBelowBase(t *testing.T) {
	apps := Apps{"hand": boundApp(t)} // B0 4, per-GPU batch ≤ 16
	w := []WorkloadJob{
		{Name: "small", Time: 0, App: "hand", Replicas: 2, Batch: 2},
		{Name: "one", Time: 0, App: "hand", Replicas: 1, Batch: 1},
	}
	for _, name := range PolicyNames {
		p, err := NewPolicy(name, PolicyOptions{Seed: 1, Interval: 60})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Simulate(apps, w, p, SimConfig{Nodes: 1, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if RunsAsRequested(p) {
			for _, j := range r.PerJob {
				if want := map[string]int{"small": 2, "one": 1}[j.Name]; j.LastBatch != want {
					t.Errorf("%s: job %s ran at batch %d, want its requested %d", name, j.Name, j.LastBatch, want)
				}
			}
		}
	}
}

// TestONESStartsUnseenJobOnFewestFeasibleGPUs: a job whose batch is fixed
// at 27 samples with 8 to 14 per GPU runs on 3 GPUs (9 each), not on 2.
// With no iteration time reported for its application yet, the
// exploration bound (Explore × the most GPUs reported, at least the fewest
// the job runs on) was taken at 2, the fewest on which its smallest batch
// fits in memory, before the fewest on which its range fits was found: 3
// exceeded it and the job was treated as one that can never run. In the
// simulator, such a job waited for ever on an idle cluster. Found by
// FuzzSimulateRandomWorkload. Without gradient accumulation (MaxAccum < 0):
// with it, one GPU holds the batch as three micro-steps of 9, which it
// then takes.
func TestONESStartsUnseenJobOnFewestFeasibleGPUs(t *testing.T) {
	j := reviewJob("gap", 1e4, 0)
	j.MinBatch, j.MaxBatch, j.Batch, j.BaseBatch = 27, 27, 27, 27
	j.MinLocal, j.MaxLocal = 8, 14
	j.Observed, j.Restarts = nil, 0
	for seed := int64(1); seed <= 5; seed++ {
		o := NewONES(ONESConfig{Seed: seed, MaxAccum: -1})
		if a := o.Schedule(0, UniformCluster(1, 4), []JobState{j})["gap"]; a.NumGPUs() != 3 || a.LocalBatch != 9 {
			t.Errorf("seed %d: gap got %v; want 3 GPUs × 9", seed, a)
		}
		o = NewONES(ONESConfig{Seed: seed})
		if a := o.Schedule(0, UniformCluster(1, 4), []JobState{j})["gap"]; a.NumGPUs() != 1 || a.LocalBatch != 9 || a.AccumSteps != 2 {
			t.Errorf("seed %d, accumulating: gap got %v; want 1 GPU × 9, 3 micro-steps", seed, a)
		}
	}
	// The same in the simulator: 64 samples at 5 to 12 per GPU fit only
	// on 8 GPUs (8 each); the job used to wait until the time limit.
	app, err := NewSyntheticApp(SyntheticApp{Name: "narrow", BaseBatch: 64, MaxBatch: 64, MinLocal: 5, MaxLocal: 12,
		NoiseScale: 100, DatasetSize: 6400, Epochs: 1,
		Step: func(_, _ int, l float64) (float64, float64) { return 0.1 + 0.01*l, 0 }})
	if err != nil {
		t.Fatal(err)
	}
	w := []WorkloadJob{{Name: "n", App: "narrow", Replicas: 1, Batch: 64}}
	r, err := Simulate(Apps{"narrow": app}, w, NewONES(ONESConfig{Seed: 1, MaxAccum: -1}), SimConfig{Nodes: 3, GPUsPerNode: 4, Interval: 60, MoveCost: 30, MaxTime: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if j := r.PerJob[0]; j.MaxGPUs != 8 || j.LastBatch != 64 {
		t.Errorf("ran on up to %d GPUs at batch %d, want 8 GPUs at 64", j.MaxGPUs, j.LastBatch)
	}
}

// TestSimulateReportsJobThatCannotRun: a job asking for 8 samples of an
// application of which 5 fit on a GPU runs on the one GPU of the cluster
// under fifo (two micro-steps of 4), but never under ONES told not to
// accumulate (MaxAccum < 0); with its default it runs it the way fifo
// does. The simulator used to call the policy until its time limit
// (30 days by default) and then blame it ("policy ones starves them?")
// without naming the job; it now stops once the idle cluster has been left
// idle for a few decisions with nothing more to arrive, and names the job
// that never started. Found by FuzzSimulateRandomWorkload.
func TestSimulateReportsJobThatCannotRun(t *testing.T) {
	app, err := NewSyntheticApp(SyntheticApp{Name: "big", BaseBatch: 8, MaxBatch: 64, MinLocal: 1, MaxLocal: 5,
		NoiseScale: 100, DatasetSize: 800, Epochs: 1,
		Step: func(_, _ int, l float64) (float64, float64) { return 0.1 + 0.01*l, 0 }})
	if err != nil {
		t.Fatal(err)
	}
	apps := Apps{"big": app}
	w := []WorkloadJob{{Name: "fits", App: "big", Replicas: 1, Batch: 4}, {Name: "wide", App: "big", Replicas: 1, Batch: 8, Time: 30}}
	cfg := SimConfig{Nodes: 1, GPUsPerNode: 1, Interval: 60, MoveCost: 30, MaxTime: 86400}
	if _, err := Simulate(apps, w, NewFIFO(), cfg); err != nil {
		t.Fatalf("fifo: %v", err)
	}
	if _, err := Simulate(apps, w, NewONES(ONESConfig{Seed: 1}), cfg); err != nil {
		t.Fatalf("ones, accumulating: %v", err)
	}
	p := &countedPolicy{Policy: NewONES(ONESConfig{Seed: 1, MaxAccum: -1})}
	_, err = Simulate(apps, w, p, cfg)
	if err == nil || !strings.Contains(err.Error(), "never started: wide") || strings.Contains(err.Error(), "fits") {
		t.Fatalf("ones: error %v; want one naming wide, which never started, and not fits, which completed", err)
	}
	// fits completes in its first interval; wide waits from the decision
	// at 60 s on: 10 decisions, not the 1440 of a day.
	if p.calls > 12 {
		t.Errorf("ones called %d times before the simulator gave up", p.calls)
	}
}

// countedPolicy counts a policy's decisions.
type countedPolicy struct {
	Policy
	calls int
}

func (p *countedPolicy) Schedule(now float64, c ClusterState, jobs []JobState) map[string]Allocation {
	p.calls++
	return p.Policy.Schedule(now, c, jobs)
}

// TestBoundStartCostsAtDecisionTimes: with start costs, the bound starts a
// job at the simulator's first decision at or after its arrival, the
// step-th decision falling at step × Interval. It took ⌈arrival/Interval⌉
// instead, which rounds up past that decision where the division does not
// come out exact: an arrival at 3 × 0.1 = 0.30000000000000004 s (the
// simulator's third decision, at which it starts) divides to
// 3.0000000000000004, and the bound started the job a decision later than
// the simulator did, above the JCT every policy achieved. Found by
// FuzzSimulateRandomWorkload.
func TestBoundStartCostsAtDecisionTimes(t *testing.T) {
	apps := Apps{"hand": boundApp(t)}
	tenth := 0.1 // 3 × tenth is computed in float64, as the simulator does
	for _, arrival := range []float64{3 * tenth, 0.3, 0.35, 7 * tenth, 0.7, 0} {
		w := []WorkloadJob{{Name: "a", Time: arrival, App: "hand", Replicas: 1, Batch: 4}}
		b, err := Bound(apps, w, BoundConfig{Nodes: 1, GPUsPerNode: 1, StartCosts: true, Interval: 0.1, MoveCost: 2})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Simulate(apps, w, NewFIFO(), SimConfig{Nodes: 1, GPUsPerNode: 1, Interval: 0.1, MoveCost: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := b.PerJob[0].Start, r.PerJob[0].Start+2; got != want {
			t.Errorf("arrival %v: the bound starts at %v, the simulator's first decision after it is at %v (+2 s move cost = %v)", arrival, got, r.PerJob[0].Start, want)
		}
	}
}

// TestONESHoldCoversMoveCost: a hold interval lasts at least the move
// cost. With decisions every 10 s and a 30 s restart, a hold of 2
// intervals was 20 s: a job could lose its GPUs before its restart was
// over, and with decisions every 0.1 s and a 46 s restart, eleven
// one-second jobs on 16 GPUs were restarted in turn for ever without one
// completing (FuzzSimulateRandomWorkload). The long job now keeps its GPUs
// for 2 × 30 s from the first call that sees them, as TestONESHold's does
// for 2 × 60 s when decisions are a minute apart.
func TestONESHoldCoversMoveCost(t *testing.T) {
	o := NewONES(ONESConfig{Seed: 1, Interval: 10, MoveCost: 30})
	jobs := holdJobs()
	start := -1.0
	for call := 0; call < 10; call++ {
		now := float64(10 * call)
		allocs := o.Schedule(now, UniformCluster(1, 4), jobs)
		if !allocs["short"].Empty() {
			start = now
			break
		}
		jobs[0].Current = allocs["long"]
	}
	if start != 60 {
		t.Errorf("the short job starts at t=%v, want 60 (the long job held for 2 × the 30 s move cost)", start)
	}
	// The fuzz case: eleven jobs of about a second each, a 46 s restart,
	// decisions every 0.1 s on 2 × 8 GPUs. They used to be restarted in
	// turn until the time limit; now they complete within 3 rounds of
	// restarts.
	app, err := NewSyntheticApp(SyntheticApp{Name: "tiny", BaseBatch: 32, MaxBatch: 512, MinLocal: 7, MaxLocal: 14,
		NoiseScale: 1647, DatasetSize: 1, Epochs: 4,
		Step: func(nodes, r int, l float64) (float64, float64) {
			y := 0.0
			if r > 1 {
				y = 0.5
				if nodes > 1 {
					y = 1.5
				}
			}
			return 0.8 + 0.2*l + y, y
		}})
	if err != nil {
		t.Fatal(err)
	}
	var w []WorkloadJob
	for i, b := range []int{114, 21, 32, 32, 329, 782, 465, 32, 32, 35, 254} {
		w = append(w, WorkloadJob{Name: fmt.Sprintf("j%02d", i), App: "tiny", Replicas: 1, Batch: b})
	}
	r, err := Simulate(Apps{"tiny": app}, w, NewONES(ONESConfig{Seed: 1, Interval: 0.1, MoveCost: 46}),
		SimConfig{Nodes: 2, GPUsPerNode: 8, Interval: 0.1, MoveCost: 46, MaxTime: 600})
	if err != nil {
		t.Fatal(err)
	}
	if r.Makespan > 3*46+10 {
		t.Errorf("makespan %v s", r.Makespan)
	}
}
