package placement

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// simJSON runs workload under a fresh policy name (seed 1) and returns the
// result as JSON, the wall-clock fields (which measure this machine, not
// the schedule) zeroed.
func simJSON(t *testing.T, apps Apps, w []WorkloadJob, name string, cfg SimConfig) []byte {
	t.Helper()
	p, err := NewPolicy(name, PolicyOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Simulate(apps, w, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.WallSeconds, r.PolicyWall = 0, 0
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSimulateDeterministicJSON: the same workload, policy and seed give
// byte-identical JSON (per-job results and timeline) twice in one process.
func TestSimulateDeterministicJSON(t *testing.T) {
	apps, d := loadData(t)
	w := loadWorkload(t, apps, d, 1)[:40]
	cfg := SimConfig{Nodes: 4, GPUsPerNode: 4, Interval: 60, MoveCost: 30}
	for _, name := range PolicyNames {
		a := simJSON(t, apps, w, name, cfg)
		b := simJSON(t, apps, w, name, cfg)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two runs with seed 1 gave different JSON", name)
		}
	}
}

// handProfileApp is a two-epoch application with measured-style tables:
// base batch 4, validated batches 4 and 16; step time on one GPU 0.2 s at
// per-GPU batch 2 and 0.5 s at 8 (no sync), on two GPUs of one node 0.3 s
// and 0.6 s (0.1 s sync); gradient statistics (sqr, var) = (1, 3) in epoch
// 1 and (1, 1) in epoch 2 at both batches; 100 units of progress per epoch;
// the batch-16 run needed 85 iterations, so its gain is calibrated.
func handProfileApp() *App {
	c1 := &curve{local: []float64{2, 8}, step: []float64{0.2, 0.5}, sync: []float64{0, 0}}
	c2 := &curve{local: []float64{2, 8}, step: []float64{0.3, 0.6}, sync: []float64{0.1, 0.1}}
	rows := func(its2 float64) []valRow {
		return []valRow{{progress: 100, iteration: its2 / 2, gradSqr: 1, gradVar: 3}, {progress: 200, iteration: its2, gradSqr: 1, gradVar: 1}}
	}
	a := &App{
		Name: "hp", BaseBatch: 4, MaxBatch: 16, MinLocal: 2, MaxLocal: 8, Epochs: 2,
		placements: map[string]*curve{placementKey([]int{1}): c1, placementKey([]int{2}): c2},
		levels:     []nodeLevel{{nodes: 1, replicas: []int{1, 2}, curves: []*curve{c1, c2}}},
		valBatch:   []int{4, 16},
		val:        [][]valRow{rows(200), rows(85)},
		progress:   []float64{100, 200},
	}
	a.calibrate()
	return a
}

// TestFIFOHandCheckedProfile: three jobs of handProfileApp under FIFO on
// one node of two GPUs (interval 60 s, move cost 30 s), computed by hand:
//
//   - Calibration: at batch 4 the gain is 1 (200 iterations, as run). At
//     batch 16 the noise-scale gain is (3+1)/(3·4/16+1) = 16/7 in epoch 1
//     and (1+1)/(1·4/16+1) = 1.6 in epoch 2: 43.75 + 62.5 = 106.25
//     iterations against the 85 run, factor 1.25.
//   - j1 (2 GPUs, batch 16 → 8 per GPU, 0.6 s per iteration) starts at 0:
//     30 s restart, epoch 1 at 16/7·1.25 = 20/7 per iteration takes
//     100·0.6·7/20 = 21 s, epoch 2 at 2 per iteration 30 s: done at 81.
//   - j2 (1 GPU, batch 4, arrives at 0) waits behind j1 until the decision
//     at 120: 0.2 + (4−2)/6·0.3 = 0.3 s per iteration, gain 1, 200
//     iterations = 60 s: done at 120+30+60 = 210.
//   - j3 (1 GPU, batch 6, arrives at 70): one GPU asked for more than the
//     base batch accumulates two micro-steps of 3; 0.25 s each, 0.5 s per
//     iteration. Batch 6 lies between the validated 4 and 16, so a run at
//     it needs the linear interpolation of their iterations, 200 +
//     (6−4)/12·(85−200) = 180.83̅ (the gain, 4/(3·4/6+1) = 4/3 in epoch 1
//     and 2/(4/6+1) = 1.2 in epoch 2, would give 75 + 83.3̅ = 158.3̅: it is
//     scaled by 158.3̅/180.83̅ in both). 180.83̅ × 0.5 s = 90.416̅ s: done at
//     120+30+90.416̅ = 240.416̅, JCT 170.416̅. (Before session 37 the factor
//     was interpolated between the validated batches' instead, 1.0416̅, and
//     j3 finished at 226.)
func TestFIFOHandCheckedProfile(t *testing.T) {
	apps := Apps{"hp": handProfileApp()}
	w := []WorkloadJob{
		{Name: "j1", Time: 0, App: "hp", Replicas: 2, Batch: 16},
		{Name: "j2", Time: 0, App: "hp", Replicas: 1, Batch: 4},
		{Name: "j3", Time: 70, App: "hp", Replicas: 1, Batch: 6},
	}
	r, err := Simulate(apps, w, NewFIFO(), SimConfig{Nodes: 1, GPUsPerNode: 2, Interval: 60, MoveCost: 30})
	if err != nil {
		t.Fatal(err)
	}
	j3 := 30 + (200-115.0/6)*0.5 // restart, then 180.83̅ iterations of 0.5 s
	want := map[string]float64{"j1": 81, "j2": 210, "j3": 120 + j3 - 70}
	for k, v := range jctByName(r) {
		if math.Abs(v-want[k]) > 1e-9 {
			t.Errorf("%s: JCT %.12g, want %v", k, v, want[k])
		}
	}
	// GPU-seconds: j1 2×81, j2 90, j3 120.416̅ over 240.416̅ s × 2 GPUs.
	end := 120 + j3
	if u := (2*81.0 + 90 + j3) / (end * 2); math.Abs(r.Utilisation-u) > 1e-12 || math.Abs(r.Makespan-end) > 1e-9 {
		t.Errorf("utilisation %v, makespan %v; want %v, %v", r.Utilisation, r.Makespan, u, end)
	}
}

// TestJCTPercentiles: the median, p95 and p99 interpolate linearly
// between ranks (rank p/100·(n−1) of the sorted JCTs).
func TestJCTPercentiles(t *testing.T) {
	for _, c := range []struct {
		jcts               []float64
		avg, med, p95, p99 float64
	}{
		{[]float64{7}, 7, 7, 7, 7},
		{[]float64{30, 10}, 20, 20, 29, 29.8},
		{[]float64{5, 1, 4, 2, 3}, 3, 3, 4.8, 4.96},
	} {
		r := &SimResult{}
		r.summarise(append([]float64(nil), c.jcts...))
		got := []float64{r.AvgJCT, r.MedianJCT, r.P95JCT, r.P99JCT}
		for i, want := range []float64{c.avg, c.med, c.p95, c.p99} {
			if math.Abs(got[i]-want) > 1e-9 {
				t.Errorf("%v: [avg median p95 p99] = %v, want %v", c.jcts, got, []float64{c.avg, c.med, c.p95, c.p99})
				break
			}
		}
	}
}

// TestSimulateDecisionTimesExact: decisions fall at exact multiples of the
// interval. Adding a fractional interval (0.1 s) up drifted the clock (ten
// additions make 0.9999999999999999), so a job arriving at 1 s missed the
// decision at 1 s and waited for the next one.
func TestSimulateDecisionTimesExact(t *testing.T) {
	apps := Apps{"const": constApp("const", 0.01, 5)}
	w := []WorkloadJob{{Name: "a", Time: 1, App: "const", Replicas: 1, Batch: 1}}
	r, err := Simulate(apps, w, NewFIFO(), SimConfig{Nodes: 1, GPUsPerNode: 1, Interval: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if j := r.PerJob[0]; j.Start != 1 || math.Abs(j.JCT-0.05) > 1e-9 {
		t.Errorf("job arriving at 1 s: started at %v, JCT %v; want the decision at 1 s and 5 iterations of 0.01 s", j.Start, j.JCT)
	}
}

// TestBoundEnumeratesMeasuredNodesOnly: bestRun enumerates per-node GPU
// counts only over as many nodes as the application has measured
// placements for (4 here); beyond, the step time depends only on the node
// and GPU counts. It took the length of a placement key ("1.1.1.1.", 8
// characters) for the node count, so it enumerated up to 8 nodes:
// 4^5+…+4^8 more placements on 4-GPU nodes (a few hundred thousand
// allocations), 8^8 on 8-GPU nodes (29 s for two applications).
func TestBoundEnumeratesMeasuredNodesOnly(t *testing.T) {
	apps, _ := loadData(t)
	a := apps["cifar10"]
	var b *jobBound
	allocs := testing.AllocsPerRun(1, func() { b = a.bestRun(8, 4, a.MaxLocal, a.MaxBatch, 0) })
	if allocs > 20000 {
		t.Errorf("bestRun on 8 × 4 GPUs: %.0f allocations, want under 20000 (placements over at most 4 nodes enumerated)", allocs)
	}
	if !(b.seconds > 0) {
		t.Errorf("bestRun: %v s", b.seconds)
	}
}

// TestPoliciesOnClusterWithoutGPUs: a cluster without GPUs (no nodes, or
// nodes that have none) gets no allocation from any policy. ONES meant to
// answer so (Schedule returns early when there is no GPU slot) but built
// its call state first, dividing by the most GPUs on a node: "integer
// divide by zero".
func TestPoliciesOnClusterWithoutGPUs(t *testing.T) {
	jobs := []JobState{{ID: "a", App: "x", Replicas: 1, Batch: 8, MinBatch: 8, MaxBatch: 64, BaseBatch: 8, MinLocal: 1, MaxLocal: 64, Target: 100}}
	for _, c := range []ClusterState{{}, {Nodes: []Node{{Name: "n0"}}}} {
		for _, name := range PolicyNames {
			p, err := NewPolicy(name, PolicyOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s on %d nodes without GPUs: panic: %v", name, len(c.Nodes), r)
					}
				}()
				if got := p.Schedule(0, c, jobs); len(got) != 0 {
					t.Errorf("%s on %d nodes without GPUs: %v, want no allocation", name, len(c.Nodes), got)
				}
			}()
		}
	}
}

// TestSimulateRejectsDuplicateNames: policies answer by job name, so two
// jobs of one name were both given the GPUs the policy meant for one: the
// same GPU ran two jobs and utilisation came out at 2. LoadWorkload
// rejects such a trace; Simulate, which takes jobs from any caller, now
// does too.
func TestSimulateRejectsDuplicateNames(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 100)}
	w := []WorkloadJob{
		{Name: "a", Time: 0, App: "const", Replicas: 1, Batch: 1},
		{Name: "a", Time: 0, App: "const", Replicas: 1, Batch: 1},
	}
	r, err := Simulate(apps, w, NewFIFO(), SimConfig{Nodes: 1, GPUsPerNode: 1, Interval: 60, MoveCost: 30})
	if err == nil || !strings.Contains(err.Error(), `job name "a" used twice`) {
		u := 0.0
		if r != nil {
			u = r.Utilisation
		}
		t.Errorf("two jobs named a on one GPU: error %v (utilisation %v), want the duplicate name reported", err, u)
	}
}
