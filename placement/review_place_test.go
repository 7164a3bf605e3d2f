package placement

import (
	"math"
	"testing"
)

// reviewJob is a job of application "a" with a unit step reported on 1 to
// 4 GPUs of one node and noise-dominated gradients (goodput grows with the
// GPU count).
func reviewJob(id string, target float64, cur int) JobState {
	var obs []Observation
	for g := 1; g <= 4; g++ {
		obs = append(obs, Observation{Nodes: 1, GPUs: g, LocalBatch: 8, StepTime: 1})
	}
	s := JobState{ID: id, App: "a", Replicas: 1, Batch: 8, BaseBatch: 8, MinBatch: 8, MaxBatch: 1024, MinLocal: 8, MaxLocal: 8,
		Target: target, GradSqr: 1e-9, GradVar: 1, Restarts: 1, Observed: obs}
	if cur > 0 {
		s.Current = Allocation{PerNode: []int{cur}, LocalBatch: 8}
	}
	return s
}

// TestONESFitnessWithJobThatCannotRun: a job whose GPU range's minimum
// exceeds the cluster never runs, whatever the candidate; it must not make
// every candidate's predicted sum of completion times infinite (the search
// would then be blind: all candidates tie, and the hysteresis compares
// Inf−Inf). Candidates are ranked as they are without that job.
func TestONESFitnessWithJobThatCannotRun(t *testing.T) {
	cluster := UniformCluster(1, 4)
	diff := func(jobs []JobState) (float64, float64) {
		o := NewONES(ONESConfig{Seed: 1, Hold: -1})
		ctx := o.newCtx(0, cluster, jobs)
		small, big := ctx.newGenome(), ctx.newGenome()
		copy(small.slots, []int32{0, -1, -1, -1})
		copy(big.slots, []int32{0, 0, 0, 0})
		small.local[0], big.local[0] = 8, 8
		return ctx.fitness(small), ctx.fitness(big)
	}
	s0, b0 := diff([]JobState{reviewJob("a", 1e4, 1)})
	// One whose minimum exceeds the cluster, and one whose batch range
	// fits no GPU count (12 samples at exactly 8 per GPU).
	huge := reviewJob("huge", 1e4, 0)
	huge.MinGPUs = 8
	odd := reviewJob("odd", 1e4, 0)
	odd.MinBatch, odd.MaxBatch, odd.Batch = 12, 12, 12
	for _, never := range []JobState{huge, odd} {
		s1, b1 := diff([]JobState{reviewJob("a", 1e4, 1), never})
		for _, f := range []float64{s1, b1} {
			if math.IsInf(f, 0) || math.IsNaN(f) {
				t.Fatalf("%s: fitness %v with a job that can never run (without it: %v, %v)", never.ID, f, s0, b0)
			}
		}
		if (s0 < b0) != (s1 < b1) {
			t.Errorf("%s: ranking changes with a job that can never run: %v vs %v without it, %v vs %v with it", never.ID, s0, b0, s1, b1)
		}
	}
}

// TestONESGrowsBesideJobThatCannotRun: a running job on 1 of 4 idle-rich
// GPUs whose goodput grows with the GPU count is grown by ONES; a queued job
// that can never run (its minimum exceeds the cluster) must not change that.
func TestONESGrowsBesideJobThatCannotRun(t *testing.T) {
	cluster := UniformCluster(1, 4)
	huge := reviewJob("huge", 1e4, 0)
	huge.MinGPUs = 8
	for _, jobs := range [][]JobState{{reviewJob("a", 1e4, 1)}, {reviewJob("a", 1e4, 1), huge}} {
		o := NewONES(ONESConfig{Seed: 1, Hold: -1})
		allocs := o.Schedule(0, cluster, jobs)
		if n := allocs["a"].NumGPUs(); n != 4 {
			t.Errorf("%d jobs: a runs on %d GPUs, want 4", len(jobs), n)
		}
		if !allocs["huge"].Empty() {
			t.Errorf("the job that can never run got %v", allocs["huge"])
		}
	}
}

// TestONESFillIdleIgnoresJobThatCannotRun: repair's fillIdle keeps back
// the GPUs waiting jobs will start on; a job that can never run (its GPU
// range's minimum exceeds its maximum) starts on none, so the GPUs it
// would have been kept do not stay idle: the resized job gets them, as it
// does without that job (TestONESFillIdle's first case).
func TestONESFillIdleIgnoresJobThatCannotRun(t *testing.T) {
	job := fillIdleJob
	never := job("never", 0)
	never.MinGPUs, never.MaxGPUs = 2, 1
	// A batch range that fits no GPU count: 12 samples at exactly 8 per GPU.
	odd := job("odd", 0)
	odd.MinBatch, odd.MaxBatch = 12, 12
	for _, jobs := range [][]JobState{
		{job("resized", 2), job("unchanged", 2), job("waiting", 0)},
		{job("resized", 2), job("unchanged", 2), job("waiting", 0), never},
		{job("resized", 2), job("unchanged", 2), job("waiting", 0), odd},
	} {
		o := NewONES(ONESConfig{Seed: 1, Hold: -1, Reserve: -1})
		ctx := o.newCtx(0, UniformCluster(1, 8), jobs)
		g := ctx.newGenome()
		// The candidate grows "resized" to 3 GPUs and leaves 3 idle.
		copy(g.slots, []int32{0, 0, 0, 1, 1, -1, -1, -1})
		ctx.repair(g)
		counts, _ := ctx.shape(g)
		if counts[0] != 5 || counts[1] != 2 || counts[2] != 1 {
			t.Errorf("%d jobs: GPUs after repair %v, want resized 5, unchanged 2, waiting 1", len(jobs), counts)
		}
		if len(jobs) == 4 && counts[3] != 0 {
			t.Errorf("%s, which can never run, holds %d GPUs", jobs[3].ID, counts[3])
		}
	}
}

// TestONESStartsJobOnFewestFeasibleGPUs: a job whose batch is fixed at 27
// samples with 8 to 14 per GPU runs on 3 GPUs (9 each) but not on 2 (13.5):
// its fewest GPUs are 3. Beside a long job on a 4-GPU cluster, ONES must
// not leave GPUs idle by starting it on 2 (which allocations then drops);
// being the shorter, it gets 3.
func TestONESStartsJobOnFewestFeasibleGPUs(t *testing.T) {
	for seed := int64(1); seed <= 10; seed++ {
		j := reviewJob("gap", 1e4, 0)
		j.MinBatch, j.MaxBatch, j.Batch, j.BaseBatch = 27, 27, 27, 27
		j.MinLocal, j.MaxLocal = 8, 14
		o := NewONES(ONESConfig{Seed: seed})
		allocs := o.Schedule(0, UniformCluster(1, 4), []JobState{j, reviewJob("long", 1e6, 0)})
		if a := allocs["gap"]; a.NumGPUs() != 3 || a.LocalBatch != 9 {
			t.Errorf("seed %d: gap got %v, long %v; want gap on 3 GPUs × 9", seed, a, allocs["long"])
		}
	}
}
