package placement

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// auditState is a random cluster (nodes of unequal size) and random active
// jobs: GPU ranges, batch ranges, gradient statistics, reported iteration
// times, some of them with the restrictive bounds a live loop passes.
func auditState(rng *rand.Rand) (ClusterState, []JobState) {
	var c ClusterState
	for i, nn := 0, 1+rng.Intn(5); i < nn; i++ {
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprint("n", i), GPUs: 1 + rng.Intn(8)})
	}
	nj := 1 + rng.Intn(12)
	jobs := make([]JobState, 0, nj)
	for i := 0; i < nj; i++ {
		jobs = append(jobs, auditJob(rng, fmt.Sprintf("j%02d", i), float64(rng.Intn(3)*10)))
	}
	return c, jobs
}

func auditJob(rng *rand.Rand, id string, arrival float64) JobState {
	apps := []string{"a", "b", "c"}
	base := 1 << rng.Intn(5)
	maxB := base << rng.Intn(6)
	minLocal := 1 + rng.Intn(2)
	maxLocal := minLocal + rng.Intn(32)
	j := JobState{ID: id, App: apps[rng.Intn(len(apps))], Arrival: arrival, Replicas: 1 + rng.Intn(6),
		Batch: base + rng.Intn(maxB-base+1), MinBatch: base, MaxBatch: maxB, BaseBatch: base,
		MinLocal: minLocal, MaxLocal: maxLocal, Target: 100 + 1000*rng.Float64(),
		GradSqr: rng.Float64(), GradVar: 5 * rng.Float64()}
	if rng.Intn(3) == 0 {
		j.MinGPUs = 1 + rng.Intn(3)
	}
	if rng.Intn(3) == 0 {
		j.MaxGPUs = max(j.MinGPUs, 1) + rng.Intn(4)
	}
	for k, n := 0, rng.Intn(4); k < n; k++ {
		g := 1 + rng.Intn(4)
		nodes := min(g, 1+rng.Intn(2))
		st := 0.05 + rng.Float64()
		j.Observed = append(j.Observed, Observation{Nodes: nodes, GPUs: g, LocalBatch: minLocal + rng.Intn(maxLocal-minLocal+1),
			StepTime: st, SyncTime: 0.3 * st * rng.Float64()})
	}
	return j
}

// auditMemory is the memory oracle of the "ones-mem" runs: app c fits
// only one sample per GPU.
var auditMemory = StaticMemory{"a": 4, "b": 40, "c": 1}

// cloneJobs deep-copies jobs (Current.PerNode and Observed included).
func cloneJobs(jobs []JobState) []JobState {
	out := make([]JobState, len(jobs))
	for i, j := range jobs {
		j.Current.PerNode = append([]int(nil), j.Current.PerNode...)
		j.Observed = append([]Observation(nil), j.Observed...)
		out[i] = j
	}
	return out
}

// TestAuditPoliciesPureDeterministicFeasible drives every policy (ONES with
// one and with three generations per call) on random clusters of unequal
// nodes and random jobs, feeding its decisions back as the jobs' current
// allocations, with arrivals and completions between calls. Each call must
// leave its input unchanged, two instances with the same seed must answer
// identically, and every answer must pass the simulator's checks (no node
// over-committed, GPU count within the job's range, batch within its range
// and memory).
func TestAuditPoliciesPureDeterministicFeasible(t *testing.T) {
	mk := map[string]func() Policy{
		"fifo":     func() Policy { return NewFIFO() },
		"tiresias": func() Policy { return NewTiresias(TiresiasConfig{Thresholds: []float64{50, 200}}) },
		"ones":     func() Policy { return NewONES(ONESConfig{Seed: 7}) },
		"ones-g3":  func() Policy { return NewONES(ONESConfig{Seed: 7, Generations: 3}) },
		"ones-mem": func() Policy { return NewONES(ONESConfig{Seed: 7, Memory: auditMemory}) },
	}
	for _, name := range []string{"fifo", "tiresias", "ones", "ones-g3", "ones-mem"} {
		for seed := int64(1); seed <= 60; seed++ {
			rng := rand.New(rand.NewSource(seed))
			cluster, jobs := auditState(rng)
			if name == "ones-mem" {
				for i := range jobs {
					jobs[i].MaxLocal = auditMemory[jobs[i].App]
				}
			}
			if name != "fifo" && seed%2 == 0 {
				// Start from another policy's decisions (accumulation
				// included), as after a policy switch.
				a := NewFIFO().Schedule(0, cluster, jobs)
				for i := range jobs {
					jobs[i].Current = a[jobs[i].ID]
				}
			}
			p1, p2 := mk[name](), mk[name]()
			next := len(jobs)
			for k := 0; k < 12; k++ {
				now := float64(60 * k)
				before := cloneJobs(jobs)
				cbefore := ClusterState{Nodes: append([]Node(nil), cluster.Nodes...)}
				a1 := p1.Schedule(now, cluster, jobs)
				if !reflect.DeepEqual(jobs, before) || !reflect.DeepEqual(cluster, cbefore) {
					t.Fatalf("%s seed %d call %d: Schedule changed its input", name, seed, k)
				}
				a2 := p2.Schedule(now, ClusterState{Nodes: append([]Node(nil), cluster.Nodes...)}, cloneJobs(jobs))
				if !reflect.DeepEqual(a1, a2) {
					t.Fatalf("%s seed %d call %d: two instances of one seed differ:\n%v\n%v", name, seed, k, a1, a2)
				}
				if err := checkAllocations(cluster, jobs, a1); err != nil {
					t.Fatalf("%s seed %d call %d: %v", name, seed, k, err)
				}
				// Feed back: a copy of the decision, progress, service;
				// one job in three completes, a new one arrives.
				var kept []JobState
				for _, j := range jobs {
					a := a1[j.ID]
					if !a.Empty() {
						if !j.Current.SameGPUs(a) {
							j.Restarts++
						}
						j.Attained += 60 * float64(a.NumGPUs())
						j.Progress += 0.1 * j.Target
					}
					j.Current = Allocation{PerNode: append([]int(nil), a.PerNode...), LocalBatch: a.LocalBatch, AccumSteps: a.AccumSteps}
					if j.Progress >= j.Target || rng.Intn(8) == 0 {
						continue
					}
					kept = append(kept, j)
				}
				jobs = kept
				if rng.Intn(2) == 0 || len(jobs) == 0 {
					nj := auditJob(rng, fmt.Sprintf("j%02d", next), now+30)
					if name == "ones-mem" {
						nj.MaxLocal = auditMemory[nj.App]
					}
					jobs = append(jobs, nj)
					next++
				}
			}
		}
	}
}

// TestAuditFIFOTiesByID: jobs arriving at the same time are served in id
// order whatever their order in the list, so a permuted list gives the same
// decision.
func TestAuditFIFOTiesByID(t *testing.T) {
	cluster := UniformCluster(1, 4)
	mkJobs := func(ids ...string) []JobState {
		var js []JobState
		for _, id := range ids {
			js = append(js, JobState{ID: id, App: "a", Arrival: 5, Replicas: 4, Batch: 4, MinBatch: 1, MaxBatch: 64, BaseBatch: 1})
		}
		return js
	}
	for _, p := range []Policy{NewFIFO(), NewTiresias(TiresiasConfig{})} {
		x := p.Schedule(60, cluster, mkJobs("b", "a", "c"))
		if _, ok := x["a"]; !ok || len(x) != 1 {
			t.Errorf("%s: tie at arrival 5 between b, a, c: got %v, want a (lowest id) alone", p.Name(), x)
		}
	}
}

// TestAuditPercentilesSmall: JCT percentiles by linear interpolation between
// ranks (rank p/100·(n−1)) on 3 and 100 jobs, worked out by hand.
func TestAuditPercentilesSmall(t *testing.T) {
	r := &SimResult{}
	r.summarise([]float64{30, 10, 20})
	// ranks: median 1 → 20; p95 1.9 → 20+0.9·10 = 29; p99 1.98 → 29.8.
	for _, c := range [][2]float64{{r.AvgJCT, 20}, {r.MedianJCT, 20}, {r.P95JCT, 29}, {r.P99JCT, 29.8}} {
		if math.Abs(c[0]-c[1]) > 1e-9 {
			t.Errorf("3 jobs: got %v, want %v (avg, median, p95, p99 = %v %v %v %v)", c[0], c[1], r.AvgJCT, r.MedianJCT, r.P95JCT, r.P99JCT)
		}
	}
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100 … 1
	}
	r = &SimResult{}
	r.summarise(xs)
	// ranks over 1…100: median 49.5 → 50.5; p95 94.05 → 95.05; p99 98.01 → 99.01.
	for _, c := range [][2]float64{{r.AvgJCT, 50.5}, {r.MedianJCT, 50.5}, {r.P95JCT, 95.05}, {r.P99JCT, 99.01}} {
		if math.Abs(c[0]-c[1]) > 1e-9 {
			t.Errorf("100 jobs: got %v, want %v", c[0], c[1])
		}
	}
}

// TestAuditUtilisationAccounting: on random workloads of a constant
// application, the utilisation is at most 1, the GPU-seconds it stands for
// are the jobs' GPU-seconds, and the timeline (GPUs held from each decision
// to the next) integrates to those GPU-seconds plus what completed jobs
// would have held to the end of their last interval. A job arriving at a
// decision starts at it.
func TestAuditUtilisationAccounting(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		apps := Apps{"const": constApp("const", 0.5+rng.Float64(), float64(50+rng.Intn(500)))}
		var w []WorkloadJob
		for i, n := 0, 1+rng.Intn(15); i < n; i++ {
			w = append(w, WorkloadJob{Name: fmt.Sprint("w", i), Time: float64(60 * rng.Intn(10)), App: "const", Replicas: 1 + rng.Intn(4), Batch: 1 + rng.Intn(8)})
		}
		for _, pol := range []Policy{NewFIFO(), NewTiresias(TiresiasConfig{Thresholds: []float64{100}}), NewONES(ONESConfig{Seed: seed})} {
			r, err := Simulate(apps, w, pol, SimConfig{Nodes: 2, GPUsPerNode: 3, Interval: 60, MoveCost: 10})
			if err != nil {
				t.Fatal(err)
			}
			if r.Utilisation > 1+1e-12 || r.Utilisation <= 0 {
				t.Fatalf("seed %d %s: utilisation %v", seed, pol.Name(), r.Utilisation)
			}
			gs, tail := 0.0, 0.0
			for _, j := range r.PerJob {
				gs += j.GPUSeconds
				if math.Mod(j.Arrival, 60) == 0 && j.Start < j.Arrival {
					t.Fatalf("seed %d %s: %s started at %v before arriving at %v", seed, pol.Name(), j.Name, j.Start, j.Arrival)
				}
			}
			if got := r.Utilisation * r.Makespan * float64(r.GPUs); math.Abs(got-gs) > 1e-6*gs {
				t.Fatalf("seed %d %s: utilisation stands for %v GPU-seconds, jobs ran %v", seed, pol.Name(), got, gs)
			}
			integral := 0.0
			for _, tp := range r.Timeline {
				if tp.Used > r.GPUs {
					t.Fatalf("seed %d %s: %d GPUs used at %v of %d", seed, pol.Name(), tp.Used, tp.T, r.GPUs)
				}
				integral += 60 * float64(tp.Used)
			}
			// Each completed job held its GPUs (max_gpus is what it ran on
			// at the end for these single-shape runs only if it never
			// resized; so bound instead of equate).
			for _, j := range r.PerJob {
				tail += float64(j.MaxGPUs) * (60*math.Ceil(j.Completion/60) - j.Completion)
			}
			if integral < gs-1e-6 || integral > gs+tail+1e-6 {
				t.Fatalf("seed %d %s: timeline integral %v outside [%v, %v]", seed, pol.Name(), integral, gs, gs+tail)
			}
		}
	}
}

// TestAuditLoadAppRefusesTooFewEpochs: an application whose completion
// epoch is fixed (DefaultEpochs: bert completes at epoch 2) but whose
// validation file stops earlier is refused, naming the file, rather than
// silently completing its jobs at the file's last epoch (a cifar10 profile
// with one validation file cut to 50 rows finished every cifar10 job at
// epoch 50, half the training, with no word).
func TestAuditLoadAppRefusesTooFewEpochs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bert")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const head = "progress,iteration,metric,grad_sqr,grad_var\n"
	files := map[string]string{
		"placements.csv":   "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.0\n",
		"validation-4.csv": head + "100,100,0.5,1,1\n200,200,0.6,1,1\n",
		"validation-8.csv": head + "100,60,0.5,1,1\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := LoadApp(dir)
	if err == nil || !strings.Contains(err.Error(), "validation-8.csv") || !strings.Contains(err.Error(), "epoch 2") {
		got := ""
		if a != nil {
			got = fmt.Sprintf(" (loaded: completes at epoch %d)", a.Epochs)
		}
		t.Fatalf("error %v%s; want it to name validation-8.csv and epoch 2", err, got)
	}
	// With both files complete it loads and completes at epoch 2.
	files["validation-8.csv"] = head + "100,60,0.5,1,1\n200,120,0.6,1,1\n"
	if err := os.WriteFile(filepath.Join(dir, "validation-8.csv"), []byte(files["validation-8.csv"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, err := LoadApp(dir); err != nil || a.Epochs != 2 {
		t.Fatalf("complete profile: %v, epochs %v; want it loaded, completing at epoch 2", err, a)
	}
}

// An application outside the built-in list completes at its validation
// files' last epoch, so files of different lengths are refused, naming both
// (before, the shortest file's length was taken without a word).
func TestLoadAppUnknownAppFilesDisagree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "myapp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const head = "progress,iteration,metric,grad_sqr,grad_var\n"
	files := map[string]string{
		"placements.csv":   "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.0\n",
		"validation-4.csv": head + "100,100,0.5,1,1\n200,200,0.6,1,1\n300,300,0.7,1,1\n",
		"validation-8.csv": head + "100,60,0.5,1,1\n200,120,0.6,1,1\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadApp(dir)
	for _, w := range []string{"validation-4.csv: 3 epochs", "validation-8.csv: 2", "same number of rows"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("files of 3 and 2 epochs: error %v, want it to contain %q", err, w)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "validation-8.csv"), []byte(head+"100,60,0.5,1,1\n200,120,0.6,1,1\n300,180,0.7,1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, err := LoadApp(dir); err != nil || a.Epochs != 3 {
		t.Fatalf("files of 3 epochs each: %v, %v; want it loaded, completing at epoch 3", err, a)
	}
}

// TestAuditGainMonotone: the noise-scale model the policies use. For any
// gradient statistics (sqr, vr ≥ 0, not both 0) one iteration at the base
// batch is worth 1 base-batch iteration, a larger batch is worth more per
// iteration and less per sample; ONES's prediction (noise scale growing as
// the batch to NoiseExponent, from statistics measured at another batch)
// keeps both directions.
func TestAuditGainMonotone(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	o := NewONES(ONESConfig{})
	ctx := &onesCtx{o: o}
	for k := 0; k < 2000; k++ {
		sqr, vr := rng.ExpFloat64()*math.Pow(10, float64(rng.Intn(7)-3)), rng.ExpFloat64()*math.Pow(10, float64(rng.Intn(7)-3))
		if rng.Intn(10) == 0 {
			sqr = 0
		} else if rng.Intn(10) == 0 {
			vr = 0
		}
		base := float64(1 + rng.Intn(256))
		if g := GainFromStats(sqr, vr, base, base); math.Abs(g-1) > 1e-12 {
			t.Fatalf("GainFromStats(%g, %g, B0=%g, B0) = %v, want 1", sqr, vr, base, g)
		}
		j := &onesJob{s: &JobState{BaseBatch: int(base)}, sqr: sqr, vr: vr, statsBatch: base * float64(1+rng.Intn(8))}
		prev, prevPer, prevR, prevRPer := 0.0, math.Inf(1), 0.0, math.Inf(1)
		for b := 1.0; b <= 64*base; b *= 1.3 {
			g := GainFromStats(sqr, vr, b, base)
			r := ctx.rate(j, 1, 1, int(math.Round(b)))
			rb := math.Round(b)
			if g < prev*(1-1e-12) || g/b > prevPer*(1+1e-12) {
				t.Fatalf("GainFromStats(%g, %g, %g, %g) = %v: not increasing per iteration and decreasing per sample (previous %v, %v per sample)", sqr, vr, b, base, g, prev, prevPer)
			}
			if r < prevR*(1-1e-12) || r/rb > prevRPer*(1+1e-12) {
				t.Fatalf("ONES rate at batch %v (sqr %g, vr %g, B0 %g, stats at %g) = %v: previous %v, %v per sample", rb, sqr, vr, base, j.statsBatch, r, prevR, prevRPer)
			}
			prev, prevPer, prevR, prevRPer = g, g/b, r, r/rb
		}
	}
}

// TestAuditArrivalAtDecisionProduct: a job arriving at a decision time
// written in decimal starts at that decision. The third decision of a
// 1.2 s interval is computed as 3 × 1.2 = 3.5999999999999996, one ulp
// below 3.6: a job arriving at 3.6 s waited for the decision at 4.8 s (the
// bound, which mirrors the decision times, agreed). A job arriving
// measurably after a decision still waits for the next one.
func TestAuditArrivalAtDecisionProduct(t *testing.T) {
	apps := Apps{"const": constApp("const", 0.01, 5)}
	iv := 1.2 // 3 × iv is computed in float64, as the simulator does
	for _, c := range []struct{ interval, arrival, start float64 }{
		{1.2, 3.6, 3.6}, {1.2, 7.2, 7.2}, {1.2, 3 * iv, 3.6}, {1.2, 3.6001, 4.8}, {60, 120, 120}, {60, 120.5, 180}, {1.2, 0, 0},
	} {
		w := []WorkloadJob{{Name: "a", Time: c.arrival, App: "const", Replicas: 1, Batch: 1}}
		r, err := Simulate(apps, w, NewFIFO(), SimConfig{Nodes: 1, GPUsPerNode: 1, Interval: c.interval, MoveCost: 2})
		if err != nil {
			t.Fatal(err)
		}
		j := r.PerJob[0]
		if j.Start < j.Arrival {
			t.Errorf("interval %v, arrival %v: started at %v, before arriving", c.interval, c.arrival, j.Start)
		}
		if math.Abs(j.Start-c.start) > 1e-9 || math.Abs(j.JCT-(c.start-c.arrival+2.05)) > 1e-9 {
			t.Errorf("interval %v, arrival %v: started at %v, JCT %v; want the decision at %v and JCT %v", c.interval, c.arrival, j.Start, j.JCT, c.start, c.start-c.arrival+2.05)
		}
		b, err := Bound(apps, w, BoundConfig{Nodes: 1, GPUsPerNode: 1, StartCosts: true, Interval: c.interval, MoveCost: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.PerJob[0].Start; got != j.Start+2 {
			t.Errorf("interval %v, arrival %v: the bound starts at %v, the simulator at %v + 2 s move cost", c.interval, c.arrival, got, j.Start)
		}
	}
}

// TestAuditProgressLines: the progress report says how many jobs are
// complete, one line per 10% step reached; several steps reached by one
// completion make one line, with the true share (one job of one printed
// "10% of jobs complete (1/1)" … "100% … (1/1)", ten lines).
func TestAuditProgressLines(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 10)}
	for _, c := range []struct {
		jobs int
		want []string
	}{
		{1, []string{"100% of jobs complete (1/1)"}},
		{3, []string{"33% of jobs complete (1/3)", "66% of jobs complete (2/3)", "100% of jobs complete (3/3)"}},
		{20, []string{"10% of jobs complete (2/20)", "20% of jobs complete (4/20)", "30% of jobs complete (6/20)", "40% of jobs complete (8/20)", "50% of jobs complete (10/20)",
			"60% of jobs complete (12/20)", "70% of jobs complete (14/20)", "80% of jobs complete (16/20)", "90% of jobs complete (18/20)", "100% of jobs complete (20/20)"}},
	} {
		var w []WorkloadJob
		for i := 0; i < c.jobs; i++ {
			w = append(w, WorkloadJob{Name: fmt.Sprint("w", i), Time: float64(60 * i), App: "const", Replicas: 1, Batch: 1})
		}
		var buf strings.Builder
		if _, err := Simulate(apps, w, NewFIFO(), SimConfig{Nodes: 1, GPUsPerNode: 1, Interval: 60, Progress: &buf}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		ok := len(lines) == len(c.want)
		for i := 0; ok && i < len(lines); i++ {
			ok = strings.Contains(lines[i], c.want[i])
		}
		if !ok {
			t.Errorf("%d jobs: progress\n%s\nwant lines containing %q", c.jobs, buf.String(), c.want)
		}
	}
}

// TestAuditKeptAllocationFitsCluster: a policy never hands out more GPUs on
// a node than it has, even when a job's current allocation no longer fits
// the cluster it is given (a node that came back with fewer GPUs, or a
// shorter node list). FIFO and Tiresias kept such an allocation as it was;
// ONES repacked it.
func TestAuditKeptAllocationFitsCluster(t *testing.T) {
	mk := func(cur []int) []JobState {
		return []JobState{
			{ID: "a", App: "x", Replicas: 4, Batch: 16, MinBatch: 4, MaxBatch: 64, BaseBatch: 4, MinLocal: 1, MaxLocal: 16, Target: 100,
				Current: Allocation{PerNode: cur, LocalBatch: 4}, Observed: []Observation{{Nodes: 1, GPUs: 4, LocalBatch: 4, StepTime: 1}}},
			{ID: "b", App: "x", Arrival: 1, Replicas: 1, Batch: 4, MinBatch: 4, MaxBatch: 64, BaseBatch: 4, MinLocal: 1, MaxLocal: 16, Target: 100},
		}
	}
	for _, cur := range [][]int{{4}, {0, 4}} {
		for _, p := range []Policy{NewFIFO(), NewTiresias(TiresiasConfig{}), NewONES(ONESConfig{Seed: 1})} {
			jobs := mk(cur)
			small := ClusterState{Nodes: []Node{{Name: "n0", GPUs: 2}}} // node 0 has 2 GPUs left; node 1 gone
			a := p.Schedule(60, small, jobs)
			if err := checkAllocations(small, jobs, a); err != nil {
				t.Errorf("%s, job a holding %v: %v (allocations %v)", p.Name(), cur, err, a)
			}
		}
	}
}
