package placement

import (
	"fmt"
	"math/rand"
	"testing"
)

// rangeState is a random cluster and random jobs with GPU ranges: some
// without one (0), some fixed, some whose minimum exceeds the cluster, each
// with iteration times reported on up to 8 GPUs (so that ONES may scale it
// out) and a batch range that fits on 1 to 16 GPUs.
func rangeState(rng *rand.Rand) (ClusterState, []JobState) {
	c := ClusterState{}
	for n := 1 + rng.Intn(4); n > 0; n-- {
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprint("n", len(c.Nodes)), GPUs: 1 + rng.Intn(8)})
	}
	total := c.TotalGPUs()
	jobs := make([]JobState, 4+rng.Intn(10))
	for i := range jobs {
		j := JobState{ID: fmt.Sprintf("j%02d", i), App: fmt.Sprint("app", rng.Intn(3)), Arrival: float64(rng.Intn(4) * 60),
			BaseBatch: 32, MinBatch: 32, MaxBatch: 32 << rng.Intn(6), MinLocal: 8, MaxLocal: 32 << rng.Intn(3),
			Target: 1e4 * (1 + rng.Float64()), GradSqr: 1, GradVar: 10 + 100*rng.Float64(), Running: rng.Intn(2) == 0}
		j.Batch = j.MinBatch << rng.Intn(3)
		j.Batch = min(j.Batch, j.MaxBatch)
		j.Replicas = 1 + rng.Intn(8)
		switch rng.Intn(5) {
		case 0: // no range
		case 1: // a maximum only
			j.MaxGPUs = 1 + rng.Intn(3)
		case 2: // a range
			j.MinGPUs = 1 + rng.Intn(3)
			j.MaxGPUs = j.MinGPUs + rng.Intn(4)
		case 3: // fixed
			j.MinGPUs = 1 + rng.Intn(4)
			j.MaxGPUs = j.MinGPUs
		case 4: // a minimum beyond the cluster
			j.MinGPUs = total + 1 + rng.Intn(2)
		}
		for _, g := range []int{1, 2, 4, 8} {
			nodes := (g + 3) / 4
			local := j.MinLocal
			step := 0.01*float64(local) + 0.002*float64(g*nodes)
			j.Observed = append(j.Observed, Observation{Nodes: nodes, GPUs: g, LocalBatch: local, StepTime: step, SyncTime: 0.002 * float64(g*nodes)})
		}
		jobs[i] = j
	}
	return c, jobs
}

// TestPoliciesKeepGPURange: over random seeded states with GPU ranges,
// every decision of ones, tiresias and fifo passes the simulator's
// allocation check, which requires a job that runs to hold at least its
// range's minimum and at most its maximum; some jobs run at their maximum
// and some at a minimum above one, so the ranges bind.
func TestPoliciesKeepGPURange(t *testing.T) {
	for _, name := range PolicyNames {
		atMax, atMin := 0, 0
		for seed := int64(1); seed <= 25; seed++ {
			rng := rand.New(rand.NewSource(seed))
			c, jobs := rangeState(rng)
			p, err := NewPolicy(name, PolicyOptions{Seed: seed, Interval: 60})
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 12; k++ {
				now := float64(60 * k)
				var active []JobState
				for _, j := range jobs {
					if j.Arrival <= now && j.Progress < j.Target {
						active = append(active, j)
					}
				}
				if len(active) == 0 {
					continue
				}
				allocs := p.Schedule(now, c, active)
				if err := checkAllocations(c, active, allocs); err != nil {
					t.Fatalf("%s seed %d call %d: %v", name, seed, k, err)
				}
				for i := range jobs {
					j := &jobs[i]
					if j.Arrival > now {
						continue
					}
					a := allocs[j.ID]
					if n := a.NumGPUs(); n > 0 {
						if j.MaxGPUs > 1 && n == j.MaxGPUs {
							atMax++
						}
						if j.MinGPUs > 1 && n == j.MinGPUs {
							atMin++
						}
						j.Progress += 60 * 20 * float64(a.GlobalBatch()) / 32
					}
					j.Current = a
				}
			}
		}
		t.Logf("%s: %d decisions at a maximum > 1, %d at a minimum > 1", name, atMax, atMin)
		if atMax == 0 || atMin == 0 {
			t.Errorf("%s: %d decisions at a maximum > 1, %d at a minimum > 1: the ranges never bind", name, atMax, atMin)
		}
	}
}

// TestCheckAllocationsGPURange: the simulator rejects a count outside a
// job's GPU range and accepts the range's ends and a job without one.
func TestCheckAllocationsGPURange(t *testing.T) {
	c := UniformCluster(1, 8)
	jobs := []JobState{{ID: "r", MinGPUs: 2, MaxGPUs: 4, MaxBatch: 1024}, {ID: "free", MaxBatch: 1024}}
	for _, tc := range []struct {
		id   string
		n    int
		okay bool
	}{{"r", 1, false}, {"r", 2, true}, {"r", 4, true}, {"r", 5, false}, {"free", 8, true}} {
		err := checkAllocations(c, jobs, map[string]Allocation{tc.id: {PerNode: []int{tc.n}, LocalBatch: 1}})
		if (err == nil) != tc.okay {
			t.Errorf("job %s on %d GPUs: error %v, want ok=%v", tc.id, tc.n, err, tc.okay)
		}
	}
}

// TestFIFOSkipsWhatCannotRunNow: on 4 GPUs, x takes 2. a, next, asks for
// 4: queued, it blocks b behind it (no back-filling); running already
// (the live loop, where fifo grows jobs placement started on fewer GPUs)
// it does not, and b grows to its 2. A job whose GPU range's minimum
// exceeds the cluster never blocks the queue.
func TestFIFOSkipsWhatCannotRunNow(t *testing.T) {
	c := UniformCluster(1, 4)
	jobs := func(running bool) []JobState {
		return []JobState{
			{ID: "x", Arrival: 0, Replicas: 2, Batch: 64, MaxBatch: 64, Running: running},
			{ID: "a", Arrival: 1, Replicas: 4, Batch: 64, MaxBatch: 64, Running: running},
			{ID: "b", Arrival: 2, Replicas: 2, Batch: 64, MaxBatch: 64, Running: running},
		}
	}
	got := func(allocs map[string]Allocation) string {
		return fmt.Sprintf("x %d, a %d, b %d", allocs["x"].NumGPUs(), allocs["a"].NumGPUs(), allocs["b"].NumGPUs())
	}
	if g := got(NewFIFO().Schedule(0, c, jobs(false))); g != "x 2, a 0, b 0" {
		t.Errorf("queued: %s; want a to block b", g)
	}
	if g := got(NewFIFO().Schedule(0, c, jobs(true))); g != "x 2, a 0, b 2" {
		t.Errorf("running: %s; want b grown past a, which cannot grow", g)
	}
	js := jobs(false)
	js[1].MinGPUs = 5
	if g := got(NewFIFO().Schedule(0, c, js)); g != "x 2, a 0, b 2" {
		t.Errorf("a needs 5 of 4 GPUs: %s; want a skipped", g)
	}
	js[1].MinGPUs, js[1].MaxGPUs, js[2].MaxGPUs = 0, 2, 1
	if g := got(NewFIFO().Schedule(0, c, js)); g != "x 2, a 2, b 0" {
		t.Errorf("a at most 2: %s; want a on 2 and b blocked behind it", g)
	}
}

// TestRunsAsRequested: fifo and tiresias state that they run jobs as
// requested; ones, which chooses counts and batches, does not.
func TestRunsAsRequested(t *testing.T) {
	want := map[string]bool{"fifo": true, "tiresias": true, "ones": false}
	for _, name := range PolicyNames {
		p, err := NewPolicy(name, PolicyOptions{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := RunsAsRequested(p); got != want[name] {
			t.Errorf("%s: RunsAsRequested %v, want %v", name, got, want[name])
		}
	}
}

// A job asking for more replicas than its largest batch has samples runs as
// fifo and tiresias run it on at most MaxBatch GPUs (one sample each), never
// with a global batch above MaxBatch; one whose GPU minimum exceeds MaxBatch
// can never run and does not hold up the queue. Both used to be given their
// requested GPUs with one sample each: a global batch of 8 for a maximum of 4.
func TestAsRequestedKeepsBatchRange(t *testing.T) {
	c := ClusterState{Nodes: []Node{{Name: "n0", GPUs: 8}, {Name: "n1", GPUs: 8}}}
	jobs := []JobState{
		{ID: "wide", App: "a", Replicas: 8, Batch: 4, MinBatch: 1, MaxBatch: 4, BaseBatch: 4, Target: 100},
		{ID: "accum", App: "a", Replicas: 4, Batch: 10, MinBatch: 1, MaxBatch: 10, BaseBatch: 10, MaxLocal: 1, Target: 100, Arrival: 1},
		{ID: "never", App: "a", Replicas: 8, MinGPUs: 8, Batch: 4, MinBatch: 1, MaxBatch: 4, BaseBatch: 4, Target: 100, Arrival: 2},
		{ID: "later", App: "a", Replicas: 2, Batch: 8, MinBatch: 1, MaxBatch: 8, BaseBatch: 8, Target: 100, Arrival: 3},
	}
	for _, name := range []string{"fifo", "tiresias"} {
		p, err := NewPolicy(name, PolicyOptions{Seed: 1, Interval: 60})
		if err != nil {
			t.Fatal(err)
		}
		allocs := p.Schedule(60, c, jobs)
		if err := checkAllocations(c, jobs, allocs); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if a := allocs["wide"]; a.NumGPUs() != 4 || a.GlobalBatch() != 4 {
			t.Errorf("%s: wide runs on %d GPUs at batch %d, want 4 GPUs at batch 4", name, a.NumGPUs(), a.GlobalBatch())
		}
		if a := allocs["accum"]; a.NumGPUs() != 4 || a.GlobalBatch() > 10 {
			t.Errorf("%s: accum runs on %d GPUs at batch %d, want 4 GPUs at batch ≤ 10", name, a.NumGPUs(), a.GlobalBatch())
		}
		if _, ok := allocs["never"]; ok {
			t.Errorf("%s: never runs", name)
		}
		if a := allocs["later"]; a.NumGPUs() != 2 {
			t.Errorf("%s: later runs on %d GPUs, want 2 (never must not block it)", name, a.NumGPUs())
		}
	}
}
