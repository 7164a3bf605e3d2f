package placement

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// onesBenchState returns the 160 jobs of workload-1, all active, each with
// iteration times reported for a few configurations and part of its
// progress made, and a cluster of gpus GPUs, 4 per node.
func onesBenchState(b testing.TB, gpus int) (ClusterState, []JobState) {
	apps, d := loadData(b)
	wl := loadWorkload(b, apps, d, 1)
	jobs := make([]JobState, len(wl))
	for i, w := range wl {
		a := apps[w.App]
		js := JobState{ID: w.Name, App: w.App, Arrival: w.Time, Replicas: w.Replicas, Batch: w.Batch,
			MinBatch: a.BaseBatch, MaxBatch: a.MaxBatch, BaseBatch: a.BaseBatch, MinLocal: a.MinLocal, MaxLocal: a.MaxLocal,
			Target: a.Target(), Progress: a.Target() * float64(i%10) / 20}
		js.GradSqr, js.GradVar = a.GradStats(float64(w.Batch), 1)
		for _, c := range [][]int{{1}, {2}, {4}, {4, 4}} {
			l := a.MaxLocal
			s, y := a.StepTime(c, float64(l))
			js.Observed = append(js.Observed, Observation{Nodes: len(c), GPUs: sum(c), LocalBatch: l, StepTime: s, SyncTime: y})
		}
		jobs[i] = js
	}
	return UniformCluster(gpus/4, 4), jobs
}

func benchONES(b *testing.B, gpus int) {
	cluster, jobs := onesBenchState(b, gpus)
	p := NewONES(ONESConfig{Seed: 1})
	step := func(now float64) {
		allocs := p.Schedule(now, cluster, jobs)
		for i := range jobs {
			jobs[i].Current = allocs[jobs[i].ID]
		}
	}
	// Reach a steady state first: the population carries over between
	// intervals, as it does when the policy runs every interval.
	for k := 0; k < 5; k++ {
		step(float64(60 * k))
	}
	b.ReportAllocs()
	b.ResetTimer()
	now := 300.0
	for b.Loop() {
		step(now)
		now += 60
	}
}

// BenchmarkONESGeneration64 is one ONES generation for 160 jobs on 64 GPUs.
func BenchmarkONESGeneration64(b *testing.B) { benchONES(b, 64) }

// BenchmarkONESGeneration1024 is one ONES generation for 160 jobs on 1024 GPUs.
func BenchmarkONESGeneration1024(b *testing.B) { benchONES(b, 1024) }

// TestONESInvariants drives ONES directly for many intervals and checks
// every decision: no node over-committed, every batch within the job's range
// and memory, a job's GPU count within its exploration bound.
func TestONESInvariants(t *testing.T) {
	for _, gpus := range []int{8, 64} {
		cluster, jobs := onesBenchState(t, gpus)
		p := NewONES(ONESConfig{Seed: 5})
		for k := 0; k < 30; k++ {
			allocs := p.Schedule(float64(60*k), cluster, jobs)
			used := make([]int, len(cluster.Nodes))
			for i := range jobs {
				j := &jobs[i]
				a, ok := allocs[j.ID]
				if !ok {
					j.Current = Allocation{}
					continue
				}
				if len(a.PerNode) > len(cluster.Nodes) {
					t.Fatalf("job %s: %d nodes named, cluster has %d", j.ID, len(a.PerNode), len(cluster.Nodes))
				}
				for n, g := range a.PerNode {
					used[n] += g
				}
				if a.LocalBatch < 1 || a.LocalBatch > j.MaxLocal {
					t.Fatalf("job %s: local batch %d outside [1, %d]", j.ID, a.LocalBatch, j.MaxLocal)
				}
				if b := a.GlobalBatch(); b < j.MinBatch || b > j.MaxBatch {
					t.Fatalf("job %s: global batch %d outside [%d, %d]", j.ID, b, j.MinBatch, j.MaxBatch)
				}
				if a.NumGPUs() > 8 { // reported up to 8 GPUs; explore factor 2
					t.Fatalf("job %s: %d GPUs, beyond twice the most it reported on", j.ID, a.NumGPUs())
				}
				j.Current = a
			}
			for n, u := range used {
				if u > cluster.Nodes[n].GPUs {
					t.Fatalf("%d GPUs: node %d over-committed (%d)", gpus, n, u)
				}
			}
			total := 0
			for _, u := range used {
				total += u
			}
			if k > 0 && total < min(gpus, len(jobs)) {
				t.Errorf("%d GPUs: only %d in use with %d jobs waiting", gpus, total, len(jobs))
			}
		}
	}
}

func TestGainFromStats(t *testing.T) {
	// No gradient noise: a larger batch is worth no more than the base one.
	if g := GainFromStats(1, 0, 64, 16); g != 1 {
		t.Errorf("noise-free gain %v, want 1", g)
	}
	// Pure noise: progress per iteration grows linearly with the batch.
	if g := GainFromStats(1e-12, 1, 64, 16); g < 3.99 || g > 4 {
		t.Errorf("noise-dominated gain %v, want 4", g)
	}
	// Noise scale B0·var/sqr = 16·3 = 48: efficiency at 64 is (48+16)/(48+64).
	g := GainFromStats(1, 3, 64, 16)
	want := 64.0 / 16 * (48.0 + 16) / (48 + 64)
	if d := g - want; d > 1e-12 || d < -1e-12 {
		t.Errorf("gain %v, want %v", g, want)
	}
	if e := Efficiency(NoiseScale(1, 3, 16), 64, 16); e >= 1 {
		t.Errorf("efficiency of a larger batch %v, want < 1", e)
	}
	// A negative statistic (garbled) counts as 0: var −0.25 with sqr 1 at
	// 64 over 16 divided by zero (+Inf); the gain stays in [1, batch/base].
	for _, c := range [][2]float64{{1, -0.25}, {-1, 3}, {-1, -1}} {
		if g := GainFromStats(c[0], c[1], 64, 16); !(g >= 1 && g <= 4) {
			t.Errorf("GainFromStats(%v, %v, 64, 16) = %v, want within [1, 4]", c[0], c[1], g)
		}
	}
}

func TestThroughputModelFit(t *testing.T) {
	// compute = 0.1 + 0.01·l; sync 0.05 on one node, 0.2 + 0.01·(r−2) across.
	var obs []Observation
	add := func(nodes, r, l int) {
		c := 0.1 + 0.01*float64(l)
		s := 0.0
		if r > 1 && nodes == 1 {
			s = 0.05
		} else if r > 1 {
			s = 0.2 + 0.01*float64(r-2)
		}
		obs = append(obs, Observation{Nodes: nodes, GPUs: r, LocalBatch: l, StepTime: c + s, SyncTime: s})
	}
	add(1, 1, 16)
	add(1, 1, 32)
	add(1, 4, 32)
	add(2, 8, 32)
	add(4, 16, 32)
	m := FitThroughput(obs, nil)
	for _, c := range []struct {
		nodes, r, l int
		want        float64
	}{{1, 1, 64, 0.74}, {1, 2, 8, 0.23}, {3, 12, 16, 0.26 + 0.3}} {
		if got := m.IterTime(c.nodes, c.r, float64(c.l), 0); got-c.want > 1e-9 || c.want-got > 1e-9 {
			t.Errorf("IterTime(%d nodes, %d GPUs, %d) = %v, want %v", c.nodes, c.r, c.l, got, c.want)
		}
	}
}

// With reports on one node only, the model must not predict a second node
// slower than it would be with a cross-node link 3× slower than the
// intra-node one: a configuration predicted slow is never tried, so the
// prior is what decides whether a job ever leaves its first node.
func TestThroughputPriorAcrossNodesIsOptimistic(t *testing.T) {
	// compute = 0.05 + 0.002·l; intra-node sync 1 ms + 0.5 ms per extra GPU.
	var obs []Observation
	for _, r := range []int{1, 2, 4} {
		l := 64
		s := 0.0
		if r > 1 {
			s = 0.001 + 0.0005*float64(r-2)
		}
		obs = append(obs, Observation{Nodes: 1, GPUs: r, LocalBatch: l, StepTime: 0.05 + 0.002*float64(l) + s, SyncTime: s})
		obs = append(obs, Observation{Nodes: 1, GPUs: r, LocalBatch: 2 * l, StepTime: 0.05 + 0.004*float64(l) + s, SyncTime: s})
	}
	m := FitThroughput(obs, nil)
	if got, want := m.Sync(2, 8), 3*0.001+0.0005*6; math.Abs(got-want) > 1e-9 {
		t.Errorf("Sync(2 nodes, 8 GPUs) = %v, want %v (3× the intra-node base, same growth)", got, want)
	}
	// Same global batch 512: 8 GPUs × 64 over two nodes must beat 4 × 128.
	if a, b := m.IterTime(1, 4, 128, 0), m.IterTime(2, 8, 64, 0); b >= a {
		t.Errorf("8 GPUs on 2 nodes predicted %v s per iteration, not faster than 4 GPUs' %v s", b, a)
	}
}

// TestEffCorrection: ONES learns an application's efficiency correction
// from intervals a job ran unchanged (progress made over what the
// noise-scale model predicts for the iterations run), uses it only after
// effMinIntervals of them at a batch, interpolates it in log batch and
// continues the slope beyond the largest learned batch; an interval with a
// restart or a change teaches nothing.
func TestEffCorrection(t *testing.T) {
	var none *effCorr
	if k := none.at(100); k != 1 {
		t.Errorf("no correction: %v, want 1", k)
	}
	o := NewONES(ONESConfig{Seed: 1})
	const sqr, vr, base, step = 1.0, 4.0, 8, 0.5
	job := func(id string, local int, progress float64, restarts int) JobState {
		return JobState{ID: id, App: "a", BaseBatch: base, GradSqr: sqr, GradVar: vr, Progress: progress, Restarts: restarts,
			Current:  Allocation{PerNode: []int{2}, LocalBatch: local},
			Observed: []Observation{{Nodes: 1, GPUs: 2, LocalBatch: local, StepTime: step}}}
	}
	// Job x runs at global batch 16 making 1.2× the predicted progress,
	// job y at 64 making 1.5×; one interval of 60 s each call.
	px, py := 0.0, 0.0
	for call := 0; call <= effMinIntervals; call++ {
		o.learnEff(float64(60*call), []JobState{job("x", 8, px, 1), job("y", 32, py, 1)})
		px += 1.2 * 60 / step * GainFromStats(sqr, vr, 16, base)
		py += 1.5 * 60 / step * GainFromStats(sqr, vr, 64, base)
		if call == effMinIntervals-1 {
			if k := o.eff["a"].at(16); k != 1 {
				t.Errorf("after %d intervals the correction is %v, want still 1", call, k)
			}
		}
	}
	e := o.eff["a"]
	// Beyond 64 the slope continues: 0.15 per doubling.
	for _, c := range []struct{ b, want float64 }{{16, 1.2}, {64, 1.5}, {8, 1.2}, {32, 1.35}, {256, 1.8}, {1024, 2.1}} {
		if k := e.at(c.b); math.Abs(k-c.want) > 1e-9 {
			t.Errorf("correction at batch %v: %v, want %v", c.b, k, c.want)
		}
	}
	// The corrected progress per iteration never exceeds perfect scaling.
	ctx := &onesCtx{o: o}
	j := &onesJob{s: &JobState{BaseBatch: base}, sqr: sqr, vr: vr, effK: e}
	if r := ctx.rate(j, 1, 4, 256); r > 1024.0/base {
		t.Errorf("rate at global batch 1024 with a unit step: %v, above perfect scaling %v", r, 1024.0/base)
	}
	// A restart in the interval, or a changed batch, teaches nothing.
	before := e.pending[16]
	o.learnEff(float64(60*(effMinIntervals+1)), []JobState{job("x", 8, px+1000, 2)})
	o.learnEff(float64(60*(effMinIntervals+2)), []JobState{job("x", 4, px+2000, 2)})
	if e.pending[16] != before || e.pending[8].n != 0 {
		t.Errorf("learned from a restarted or changed interval: %+v %+v", e.pending[16], e.pending[8])
	}
	// A falling trend is floored at 0.5.
	f := &effCorr{batch: []int{10, 20}, k: []float64{1, 0.6}}
	if k := f.at(1e6); k != 0.5 {
		t.Errorf("falling extrapolation %v, want the floor 0.5", k)
	}
}

// TestONESNoiseExponent: progress at a batch other than the one a job's
// gradient statistics were measured at is predicted with the noise scale
// grown by (b/b_m)^α; at the measured batch, with α off, or with the
// measured batch unknown (a queued job) nothing changes.
func TestONESNoiseExponent(t *testing.T) {
	const sqr, vr, base = 1.0, 4.0, 8
	on, off := NewONES(ONESConfig{Seed: 1}), NewONES(ONESConfig{Seed: 1, NoiseExponent: -1})
	if on.cfg.NoiseExponent != DefaultNoiseExponent || off.cfg.NoiseExponent != 0 {
		t.Fatalf("exponents %v, %v; want %v, 0", on.cfg.NoiseExponent, off.cfg.NoiseExponent, DefaultNoiseExponent)
	}
	// No throughput model: a unit step, so rate = progress per iteration.
	rate := func(o *ONES, statsBatch float64, r, l int) float64 {
		j := &onesJob{s: &JobState{BaseBatch: base}, sqr: sqr, vr: vr, statsBatch: statsBatch}
		return (&onesCtx{o: o}).rate(j, 1, r, l)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12*math.Max(1, math.Abs(b)) }
	if a, b := rate(on, 16, 2, 8), rate(off, 16, 2, 8); !near(a, b) || !near(a, GainFromStats(sqr, vr, 16, base)) {
		t.Errorf("at the measured batch: %v with α, %v without, want both %v", a, b, GainFromStats(sqr, vr, 16, base))
	}
	want := GainFromStats(sqr, vr*math.Pow(4, DefaultNoiseExponent), 64, base)
	if a, b := rate(on, 16, 4, 16), rate(off, 16, 4, 16); !near(a, want) || !(a > 1.05*b) {
		t.Errorf("at 4× the measured batch: %v with α (want %v), %v without", a, want, b)
	}
	if a, b := rate(on, 0, 4, 16), rate(off, 0, 4, 16); !near(a, b) {
		t.Errorf("measured batch unknown: %v with α, %v without", a, b)
	}
	// newCtx takes the measured batch from the allocation the job ran.
	jobs := []JobState{
		{ID: "run", App: "a", BaseBatch: base, MaxBatch: 256, MinLocal: 1, MaxLocal: 32, Target: 100, GradSqr: sqr, GradVar: vr,
			Current: Allocation{PerNode: []int{2}, LocalBatch: 8, AccumSteps: 1}},
		{ID: "queued", App: "a", BaseBatch: base, MaxBatch: 256, MinLocal: 1, MaxLocal: 32, Target: 100, GradSqr: sqr, GradVar: vr},
	}
	ctx := on.newCtx(0, UniformCluster(1, 4), jobs)
	if ctx.jobs[0].statsBatch != 32 || ctx.jobs[1].statsBatch != 0 {
		t.Errorf("measured batches %v, %v; want 32, 0", ctx.jobs[0].statsBatch, ctx.jobs[1].statsBatch)
	}
}

// TestONESNoiseExponentHelps: on workload-4 (seeds 1 and 2) the average
// JCT is lower with the noise-scale exponent than without (2185 s against
// 2248 s with session 48's marginal efficient scale; the test used
// workload-2, 3338 s against 3519 s when written, where the two now tie
// on these seeds: over seeds 1–27 (marginal scale alone) it saved 83/76/26/86 s on
// workloads 1–4).
func TestONESNoiseExponentHelps(t *testing.T) {
	if testing.Short() {
		t.Skip("four workload simulations")
	}
	apps, d := loadData(t)
	wl := loadWorkload(t, apps, d, 4)
	avg := func(alpha float64) float64 {
		s := 0.0
		for seed := int64(1); seed <= 2; seed++ {
			r, err := Simulate(apps, wl, NewONES(ONESConfig{Seed: seed, NoiseExponent: alpha}), SimConfig{Nodes: 16, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
			if err != nil {
				t.Fatal(err)
			}
			s += r.AvgJCT / 2
		}
		return s
	}
	with, without := avg(0), avg(-1)
	if !(with < without) {
		t.Errorf("average JCT %.0f s with the noise-scale exponent, %.0f s without", with, without)
	}
	t.Logf("workload-4, seeds 1–2: %.0f s with the noise-scale exponent, %.0f s without", with, without)
}

// holdJobs are the hold tests' jobs: a long one just started on all 4 GPUs
// of one node and a short one queued, both with noise-dominated gradients
// (progress scales with the batch).
func holdJobs() []JobState {
	var obs []Observation
	for g := 1; g <= 4; g++ {
		obs = append(obs, Observation{Nodes: 1, GPUs: g, LocalBatch: 8, StepTime: 1})
	}
	job := func(id string, target float64, cur Allocation) JobState {
		return JobState{ID: id, App: "a", BaseBatch: 8, MinBatch: 8, MaxBatch: 1024, MinLocal: 8, MaxLocal: 8,
			Target: target, GradSqr: 1e-9, GradVar: 1, Current: cur, Restarts: 1, Observed: obs}
	}
	return []JobState{job("long", 1e6, Allocation{PerNode: []int{4}, LocalBatch: 8}), job("short", 50, Allocation{})}
}

// TestONESHold: a job keeps the GPUs it was given for Hold intervals from
// the first call that sees them, even when a short arrival would take some
// of them; after that, or with the hold off, the arrival starts at once.
func TestONESHold(t *testing.T) {
	cluster := UniformCluster(1, 4)
	// firstStart runs calls at 0, 60, 120, … with the long job just
	// started on all 4 GPUs and a short job queued; it returns when the
	// short job first gets GPUs (-1: never in 5 calls).
	firstStart := func(hold int) float64 {
		o := NewONES(ONESConfig{Seed: 1, Hold: hold})
		jobs := holdJobs()
		for call := 0; call < 5; call++ {
			now := float64(60 * call)
			allocs := o.Schedule(now, cluster, jobs)
			if a := allocs["short"]; !a.Empty() {
				return now
			}
			if a := allocs["long"]; a.NumGPUs() != 4 {
				t.Fatalf("hold %d, t=%v: the long job went to %d GPUs with the short one still queued", hold, now, a.NumGPUs())
			}
			jobs[0].Current = allocs["long"]
		}
		return -1
	}
	if o := NewONES(ONESConfig{}); o.cfg.Hold != DefaultHold {
		t.Fatalf("default hold %d, want %d", o.cfg.Hold, DefaultHold)
	}
	if got := firstStart(-1); got != 0 {
		t.Errorf("without the hold the short job starts at t=%v, want 0", got)
	}
	if got, want := firstStart(0), float64(DefaultHold*60); got != want {
		t.Errorf("with the default hold the short job starts at t=%v, want %v", got, want)
	}
}

// TestONESHoldsItsFirstStartOneInterval: the GPUs ONES gives a job that
// held none at the call before (its start, or its resumption after a
// preemption) are held one interval from the first call that sees them
// (held at the call 30 s after it, not at the one 60 s after); GPUs it
// gave a job that held others, and GPUs someone else gave it, are held
// the full Hold (still 60 s after).
func TestONESHoldsItsFirstStartOneInterval(t *testing.T) {
	cluster := UniformCluster(1, 4)
	held := func(o *ONES, now float64, jobs []JobState) bool { return o.newCtx(now, cluster, jobs).jobs[0].held }
	// start has ONES start the only job at 0 and sees it running at 60.
	start := func() (*ONES, []JobState) {
		o := NewONES(ONESConfig{Seed: 1, Interval: 60, MoveCost: 30})
		jobs := holdJobs()[1:] // "short", waiting
		jobs[0].Target = 1e6
		a := o.Schedule(0, cluster, jobs)["short"]
		if a.Empty() {
			t.Fatal("ONES did not start the only job")
		}
		jobs[0].Current = a
		if !held(o, 60, jobs) {
			t.Fatal("a job ONES just started is not held at the first call that sees it")
		}
		return o, jobs
	}
	o, jobs := start()
	if !held(o, 90, jobs) {
		t.Error("a job ONES started is not held 30 s after the first call that saw it")
	}
	o, jobs = start()
	if held(o, 120, jobs) {
		t.Error("a job ONES started is still held one interval after the first call that saw it")
	}
	// Resumed after a preemption (waiting at the call before): the same.
	o, jobs = start()
	jobs[0].Current = Allocation{}
	a := o.Schedule(120, cluster, jobs)["short"]
	if a.Empty() {
		t.Fatal("ONES did not resume the only job")
	}
	jobs[0].Current = a
	if !held(o, 180, jobs) || held(o, 240, jobs) {
		t.Error("a job ONES resumed is not held for exactly one interval after the first call that sees it")
	}
	// The same GPUs, given by ONES after the job held others: full hold.
	o, jobs = start()
	h := o.since["short"]
	h.before = Allocation{PerNode: []int{1}, LocalBatch: 8}
	o.since["short"] = h
	if !held(o, 120, jobs) {
		t.Error("a job ONES resized is not held one interval later (Hold is 2)")
	}
	// GPUs someone else chose before the first call: full hold.
	o = NewONES(ONESConfig{Seed: 1, Interval: 60, MoveCost: 30})
	placed := holdJobs()[:1] // "long", on 4 GPUs before any call
	o.newCtx(0, cluster, placed)
	if !held(o, 60, placed) {
		t.Error("a job placed by someone else is not held one interval later")
	}
}

// fillIdleJob is a job of TestONESFillIdle's cluster, on cur GPUs of one
// node (0: waiting). Noise-dominated gradients and a unit step on 1–8 GPUs:
// goodput grows with the GPU count.
func fillIdleJob(id string, cur int) JobState {
	var obs []Observation
	for g := 1; g <= 8; g++ {
		obs = append(obs, Observation{Nodes: 1, GPUs: g, LocalBatch: 8, StepTime: 1})
	}
	s := JobState{ID: id, App: "a", BaseBatch: 8, MinBatch: 8, MaxBatch: 1024, MinLocal: 8, MaxLocal: 8,
		Target: 1e5, GradSqr: 1e-9, GradVar: 1, Restarts: 1, Observed: obs}
	if cur > 0 {
		s.Current = Allocation{PerNode: []int{cur}, LocalBatch: 8}
	}
	return s
}

// TestONESFillIdle: repair hands GPUs a candidate leaves idle first to a
// waiting job (on its fewest GPUs), then, but for Reserve once a job has
// been submitted after the first call (a stream of arrivals, not a batch
// submitted together, even if one of the batch is listed only later), to a
// job the candidate resizes anyway, not to one it leaves as it runs
// (growing that one would cost a restart), and not to a held job.
func TestONESFillIdle(t *testing.T) {
	job := fillIdleJob
	if o := NewONES(ONESConfig{}); o.cfg.Reserve != DefaultReserve {
		t.Fatalf("default reserve %d, want %d", o.cfg.Reserve, DefaultReserve)
	}
	for _, c := range []struct {
		hold, reserve int
		late          float64 // submission time of a job first listed at the second call (< 0: none)
		wantResized   int
		wantUnchanged int
		wantWaiting   int
	}{
		{hold: -1, reserve: -1, late: 30, wantResized: 5, wantUnchanged: 2, wantWaiting: 1},
		{hold: -1, reserve: 1, late: 30, wantResized: 4, wantUnchanged: 2, wantWaiting: 1},
		{hold: -1, reserve: 1, late: 0, wantResized: 5, wantUnchanged: 2, wantWaiting: 1},
		{hold: -1, reserve: 1, late: -1, wantResized: 5, wantUnchanged: 2, wantWaiting: 1},
		{hold: -1, reserve: 0, late: -1, wantResized: 5, wantUnchanged: 2, wantWaiting: 1},
		{hold: 0, reserve: -1, late: -1, wantResized: 2, wantUnchanged: 2, wantWaiting: 1}, // both just started: held
	} {
		o := NewONES(ONESConfig{Seed: 1, Hold: c.hold, Reserve: c.reserve})
		jobs := []JobState{job("resized", 2), job("unchanged", 2), job("waiting", 0)}
		now := 0.0
		if c.late >= 0 {
			// A job is listed at the second call only, and leaves again.
			o.newCtx(0, UniformCluster(1, 8), jobs)
			late := job("late", 0)
			late.Arrival = c.late
			o.newCtx(60, UniformCluster(1, 8), append(slices.Clone(jobs), late))
			now = 120
		}
		ctx := o.newCtx(now, UniformCluster(1, 8), jobs)
		g := ctx.newGenome()
		// The candidate grows "resized" to 3 GPUs and leaves 3 idle.
		copy(g.slots, []int32{0, 0, 0, 1, 1, -1, -1, -1})
		g.local = []int{8, 8, 0}
		ctx.repair(g)
		counts, _ := ctx.shape(g)
		if counts[0] != c.wantResized || counts[1] != c.wantUnchanged || counts[2] != c.wantWaiting {
			t.Errorf("hold %d, reserve %d, late job submitted at %v: GPUs after repair %v, want [%d %d %d]", c.hold, c.reserve, c.late, counts, c.wantResized, c.wantUnchanged, c.wantWaiting)
		}
	}
}

// TestONESFillIdleStopsAtEfficientScale: the GPUs a candidate leaves idle
// go to a job it resizes only up to the job's efficient scale, the most
// GPUs the projection would give it (TestONESFillIdle: 5 without a bound).
func TestONESFillIdleStopsAtEfficientScale(t *testing.T) {
	job := fillIdleJob
	for _, eff := range []int{3, 4, 8} {
		o := NewONES(ONESConfig{Seed: 1, Hold: -1, Reserve: -1})
		ctx := o.newCtx(0, UniformCluster(1, 8), []JobState{job("resized", 2), job("unchanged", 2), job("waiting", 0)})
		ctx.jobs[0].eff = eff
		g := ctx.newGenome()
		// The candidate grows "resized" to 3 GPUs and leaves 3 idle.
		copy(g.slots, []int32{0, 0, 0, 1, 1, -1, -1, -1})
		g.local = []int{8, 8, 0}
		ctx.repair(g)
		counts, _ := ctx.shape(g)
		if want := min(eff, 5); counts[0] != want || counts[1] != 2 || counts[2] != 1 {
			t.Errorf("efficient scale %d: GPUs after repair %v, want [%d 2 1]", eff, counts, want)
		}
	}
}

// A negative move cost means none (as for Hold and Reserve): simulate
// --move-cost 0 charged jobs nothing while ONES, given 0, weighed the 30 s
// default against every change. Zero is still the default.
func TestONESMoveCostNone(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{-1, 0}, {0, DefaultMoveCost}, {45, 45}} {
		p, err := NewPolicy("ones", PolicyOptions{Seed: 1, MoveCost: c.in})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(*ONES).Config().MoveCost; got != c.want {
			t.Errorf("move cost %v: ONES weighs %v, want %v", c.in, got, c.want)
		}
	}
}

// TestONESArrivalGPUs: the GPUs the projection keeps for jobs yet to
// arrive are ArrivalLoad × (arrivals per second over the last hour) × the
// median GPU-seconds of completed jobs, at most half the cluster, from what
// the calls have seen only; none before three completions, none once no
// job has arrived for an hour, none with ArrivalLoad off.
func TestONESArrivalGPUs(t *testing.T) {
	if c := NewONES(ONESConfig{}).Config(); c.ArrivalLoad != DefaultArrivalLoad || c.ArrivalHorizon != DefaultArrivalHorizon {
		t.Fatalf("defaults: arrival load %v, horizon %v", c.ArrivalLoad, c.ArrivalHorizon)
	}
	job := func(id string, arrival, attained float64) JobState {
		return JobState{ID: id, Arrival: arrival, Attained: attained}
	}
	run := func(o *ONES, total int) []int {
		var got []int
		// Five jobs arrive at 0–400 s; a, b and c complete after
		// 6000, 18000 and 12000 GPU-seconds (median 12000).
		for _, c := range []struct {
			now  float64
			jobs []JobState
		}{
			{0, []JobState{job("a", 0, 0)}},
			{200, []JobState{job("a", 0, 6000), job("b", 100, 1000), job("c", 200, 0)}},
			{400, []JobState{job("b", 100, 18000), job("c", 200, 5000), job("d", 300, 0), job("e", 400, 0)}},
			{600, []JobState{job("c", 200, 12000), job("d", 300, 10), job("e", 400, 10)}},
			{660, []JobState{job("d", 300, 20), job("e", 400, 20)}},
			{4100, []JobState{job("d", 300, 30), job("e", 400, 30)}},
		} {
			got = append(got, o.arrivalGPUs(c.now, total, c.jobs))
		}
		return got
	}
	// At 660 s: 5 arrivals over 660 s, 0.5 × 5/660 × 12000 = 45.5.
	for _, c := range []struct {
		load  float64
		total int
		want  []int
	}{
		{0, 256, []int{0, 0, 0, 0, 45, 0}},
		{0, 64, []int{0, 0, 0, 0, 32, 0}}, // at most half the cluster
		{-1, 256, []int{0, 0, 0, 0, 0, 0}},
	} {
		if got := run(NewONES(ONESConfig{ArrivalLoad: c.load}), c.total); !slices.Equal(got, c.want) {
			t.Errorf("load %v, %d GPUs: arrival GPUs by call %v, want %v", c.load, c.total, got, c.want)
		}
	}
}

// TestONESArrivalLoadGrowsNow: a long job runs on 2 of 8 GPUs, a short one
// (done in 100 s) on 2, and 4 are idle. With GPUs handed out from the
// next interval on (ReallocAfter at the interval), the projection hands
// the long job all 8 GPUs when the short one completes, so growing it now
// saves less than its charge (one move cost for a growth into idle GPUs:
// score) and the GPUs stay idle, call after call; with the default
// hand-out delay, growing it now pays. With arrivals taking 4 of the GPUs
// freed before the horizon, growing it now into the idle GPUs is worth the
// restart either way, and still in a stream, where the growth leaves fewer
// idle GPUs than the reserve and is charged the full hysteresis.
func TestONESArrivalLoadGrowsNow(t *testing.T) {
	long, short := fillIdleJob("long", 2), fillIdleJob("short", 2)
	long.Target, short.Target = 1e6, 200
	var o *ONES
	// saving is what growing the long job onto the idle GPUs saves in the
	// projection, and what it is charged.
	saving := func(arrivalGPUs int) (float64, float64) {
		ctx := o.newCtx(0, UniformCluster(1, 8), []JobState{long, short})
		ctx.arrivalGPUs = arrivalGPUs
		cur := ctx.current() // long on GPUs 0–1, short on 2–3
		grown := ctx.clone(cur)
		for k := 4; k < 8; k++ {
			grown.slots[k] = 0 // long on 6
		}
		return ctx.fitness(cur) - ctx.fitness(grown), ctx.score(grown) - ctx.fitness(grown)
	}
	o = NewONES(ONESConfig{Seed: 1, ReallocAfter: -1})
	if s, c := saving(0); s >= c || c != o.cfg.MoveCost {
		t.Errorf("GPUs handed out from the next interval, without arrivals growing the long job now saves %.1f s, charged %.0f s; want below the charge of one move cost, %.0f s", s, c, o.cfg.MoveCost)
	}
	if plain, c := saving(4); plain <= c {
		t.Errorf("GPUs handed out from the next interval, with 4 GPUs kept for arrivals growing the long job now saves %.0f s, want above its charge %.0f s", plain, c)
	}
	o = NewONES(ONESConfig{Seed: 1})
	if s, c := saving(0); s <= c || c != o.cfg.MoveCost {
		t.Errorf("without arrivals growing the long job now saves %.1f s, charged %.0f s; want above the charge of one move cost, %.0f s", s, c, o.cfg.MoveCost)
	}
	plain, c := saving(4)
	if plain <= c {
		t.Errorf("with 4 GPUs kept for arrivals growing the long job now saves %.0f s, want above its charge %.0f s", plain, c)
	}
	// In a stream the far completion it speeds up is discounted
	// (ONESConfig.Discount): the saving shrinks but still pays the full
	// hysteresis.
	o.streaming = true
	s, c := saving(4)
	if s >= plain || s <= c || c != o.cfg.Hysteresis*o.cfg.MoveCost {
		t.Errorf("in a stream growing the long job now saves %.1f s, charged %.0f s; want between the hysteresis %.0f s and the undiscounted %.1f s", s, c, o.cfg.Hysteresis*o.cfg.MoveCost, plain)
	}
	t.Logf("saving %.1f s undiscounted, %.1f s in a stream", plain, s)
}

// A job that leaves without completing (Left) is not counted as completed
// work for the arrival estimate, and a re-queued one that comes back is not
// a new arrival; a job that leaves without Left is a completion.
func TestONESLeftNotCompleted(t *testing.T) {
	job := func(id string, arrival, attained float64) JobState {
		return JobState{ID: id, Arrival: arrival, Attained: attained}
	}
	o := NewONES(ONESConfig{})
	o.arrivalGPUs(0, 64, []JobState{job("a", 0, 0), job("q", 0, 0), job("x", 0, 0)})
	if o.nArrived != 3 {
		t.Fatalf("%d arrivals, want 3", o.nArrived)
	}
	o.Left("q", Requeued)
	o.Left("x", Ended) // cancelled
	o.arrivalGPUs(100, 64, []JobState{job("a", 0, 500)})
	if len(o.doneWork) != 0 {
		t.Fatalf("completed work %v after a re-queue and a cancellation, want none", o.doneWork)
	}
	o.arrivalGPUs(200, 64, []JobState{job("a", 0, 900), job("q", 0, 40)})
	if o.nArrived != 3 || len(o.arrivals) != 3 {
		t.Fatalf("the re-queued job's return counted as an arrival: %d arrivals (%v)", o.nArrived, o.arrivals)
	}
	o.arrivalGPUs(300, 64, []JobState{job("q", 0, 80)})
	if !slices.Equal(o.doneWork, []float64{900}) {
		t.Fatalf("completed work %v, want a's 900 GPU-seconds", o.doneWork)
	}
	o.Left("q", Requeued)
	o.Left("q", Ended) // re-queued, then cancelled while queued
	o.arrivalGPUs(400, 64, nil)
	if !slices.Equal(o.doneWork, []float64{900}) || len(o.away) != 0 {
		t.Fatalf("completed work %v, re-queued %v, want a's alone and none", o.doneWork, o.away)
	}
	// A job re-queued (told again each round while away, as the live loop
	// does) that then completes without being listed again is a finished
	// job, with the work it had when last listed; before, it was never
	// counted and stayed "away" for good.
	o.arrivalGPUs(500, 64, []JobState{job("r", 450, 70)})
	o.Left("r", Requeued)
	o.arrivalGPUs(600, 64, nil)
	o.Left("r", Requeued)
	o.Left("r", CompletedAway)
	o.arrivalGPUs(700, 64, nil)
	if !slices.Equal(o.doneWork, []float64{900, 70}) || len(o.away) != 0 {
		t.Fatalf("completed work %v, re-queued %v, want a's and r's 70 and none away", o.doneWork, o.away)
	}
	// Completed away right after its last listing (no round between): its
	// work then, counted once, not again when the next call misses it.
	o.arrivalGPUs(800, 64, []JobState{job("s", 750, 30)})
	o.Left("s", CompletedAway)
	o.arrivalGPUs(900, 64, nil)
	if !slices.Equal(o.doneWork, []float64{900, 70, 30}) {
		t.Fatalf("completed work %v, want s's 30 added once", o.doneWork)
	}
}

// TestONESRestartInProgress: with calls every 10 s and a 30 s move cost, a
// job restarted by one call still makes no progress for 20 s at the next
// and 10 s at the one after; the projection starts it then (a candidate
// that moves it again pays the whole cost anew), so keeping it is not
// mistaken for a free run. A job running before the first call, or whose
// restart is older than the move cost, owes nothing.
func TestONESRestartInProgress(t *testing.T) {
	o := NewONES(ONESConfig{Seed: 1, Interval: 10, MoveCost: 30, ArrivalLoad: -1})
	cl := UniformCluster(1, 8)
	s := fillIdleJob("a", 2)
	step := func(now float64, restarts int) (float64, float64) {
		s.Restarts = restarts
		ctx := o.newCtx(now, cl, []JobState{s})
		return ctx.jobs[0].restartLeft, ctx.fitness(ctx.current())
	}
	left0, f0 := step(0, 1)
	for _, c := range []struct {
		now      float64
		restarts int
		left     float64
	}{{10, 2, 20}, {20, 2, 10}, {30, 2, 0}, {40, 3, 20}, {70, 3, 0}} {
		left, f := step(c.now, c.restarts)
		if left != c.left || math.Abs(f-f0-c.left) > 1e-6 {
			t.Fatalf("at %v s (restarts %d): restart left %v s, projection +%v s, want %v", c.now, c.restarts, left, f-f0, c.left)
		}
	}
	if left0 != 0 {
		t.Fatalf("running before the first call: restart left %v s", left0)
	}
	// The live loop does not count a resize or move in Restarts: new GPUs
	// alone say the job restarted.
	s.Current = Allocation{PerNode: []int{3}, LocalBatch: 8}
	if left, _ := step(80, 3); left != 20 {
		t.Fatalf("on new GPUs, same restart count: restart left %v s, want 20", left)
	}
}

// TestONESGreedyRateSeed: the greedy seed by completion rate (gainRate)
// hands spare GPUs to the job each brings nearest to completing relative
// to what it has left. Two waiting jobs that scale linearly (one step per
// second at any GPU count), one with 200 units of progress left and one
// with 10⁶: both start on one GPU, and the six spare GPUs all go to the
// short one, as shortest-remaining-first would, where the shaped seed
// (gainShaped) grows the long job too, whose completion falls most.
func TestONESGreedyRateSeed(t *testing.T) {
	long, short := fillIdleJob("long", 0), fillIdleJob("short", 0)
	long.Target, short.Target = 1e6, 200
	o := NewONES(ONESConfig{Seed: 1})
	ctx := o.newCtx(0, UniformCluster(1, 8), []JobState{long, short})
	if counts, _ := ctx.shape(ctx.greedy(false, gainRate)); counts[0] != 1 || counts[1] != 7 {
		t.Errorf("by completion rate: long job %d GPUs, short %d; want 1 and 7", counts[0], counts[1])
	}
	if counts, _ := ctx.shape(ctx.greedy(false, gainShaped)); counts[0] < 2 {
		t.Errorf("shaped: long job %d GPUs, short %d; want the long job grown too (the seeds differ)", counts[0], counts[1])
	}
	// A job with nothing left gains nothing (no division by zero).
	done := fillIdleJob("done", 2)
	done.Progress, done.Target = 1, 1
	ctx = o.newCtx(0, UniformCluster(1, 8), []JobState{done, short})
	if counts, _ := ctx.shape(ctx.greedy(true, gainRate)); counts[0] > 2 {
		t.Errorf("a job with no progress left grew to %d GPUs", counts[0])
	}
}

// TestONESAccumulates: on one GPU that holds 4 samples, an application
// whose steps are mostly synchronisation and whose batch can grow
// (noise scale 10 000) runs faster with gradient accumulation: ONES gives
// it extra micro-steps (never a micro-batch beyond memory, never more
// than MaxAccum of them), and the job completes sooner than with
// accumulation off.
func TestONESAccumulates(t *testing.T) {
	app, err := NewSyntheticApp(SyntheticApp{Name: "syncy", BaseBatch: 4, MaxBatch: 256, MinLocal: 1, MaxLocal: 4,
		NoiseScale: 1e4, DatasetSize: 40000, Epochs: 2,
		Step: func(_, _ int, l float64) (float64, float64) { return 0.1 + 0.01*l, 0.08 }})
	if err != nil {
		t.Fatal(err)
	}
	w := []WorkloadJob{{Name: "s", App: "syncy", Replicas: 1, Batch: 4}}
	cfg := SimConfig{Nodes: 1, GPUsPerNode: 1, Interval: 60, MoveCost: 30}
	jct := map[int]float64{}
	for _, acc := range []int{-1, 0, 2} {
		o := NewONES(ONESConfig{Seed: 1, MaxAccum: acc})
		r, err := Simulate(Apps{"syncy": app}, w, o, cfg)
		if err != nil {
			t.Fatal(err)
		}
		j := r.PerJob[0]
		steps := map[int]int{-1: 1, 0: 1 + DefaultMaxAccum, 2: 3}[acc]
		if j.LastBatch > 4*steps {
			t.Errorf("accum %d: last batch %d, above %d micro-steps of 4", acc, j.LastBatch, steps)
		}
		jct[acc] = j.JCT
	}
	if acc := NewONES(ONESConfig{}).Config().MaxAccum; acc != DefaultMaxAccum {
		t.Errorf("default MaxAccum %d, want %d", acc, DefaultMaxAccum)
	}
	if !(jct[2] < 0.7*jct[-1] && jct[0] < jct[2]) {
		t.Errorf("completion times %v: want accumulation (2, then the default) well below none (-1)", jct)
	}
}

// A job whose progress counts samples (JobState.SampleProgress, the live
// runtime's jobs) is run for samples per second: ONES keeps it at the batch
// with the most samples per second and grows it onto idle GPUs. Without the
// flag and without gradient statistics, ONES's noise-scale prior (noise =
// the job's batch) rates a smaller batch as more progress per sample: it
// cuts the same job's batch (to 81 on one GPU, then 160 on four), at which
// a job counted in samples only trains slower.
func TestONESSampleProgress(t *testing.T) {
	// A step of 20 ms + 0.8 ms per sample: the largest batch has the most
	// samples per second (256 / 0.2248 s = 1139, 25 / 0.04 s = 625).
	step := func(l int) float64 { return 0.02 + 0.0008*float64(l) }
	obs := []Observation{{Nodes: 1, GPUs: 1, LocalBatch: 256, StepTime: step(256)}, {Nodes: 1, GPUs: 1, LocalBatch: 25, StepTime: step(25)}}
	run := func(samples bool) (gpus, batch []int) {
		o := NewONES(ONESConfig{Seed: 1, Interval: 60})
		cl := UniformCluster(1, 4)
		cur := Allocation{PerNode: []int{1}, LocalBatch: 256}
		progress := 0.0
		for k := 0; k < 5; k++ {
			now := 121 * float64(k)
			st := JobState{ID: "j", App: "j", Replicas: 1, Batch: cur.GlobalBatch(), MinBatch: 16, MaxBatch: 256, BaseBatch: 256, MinLocal: 1,
				MinGPUs: 1, MaxGPUs: 4, Running: true, Progress: progress, Target: 1e6, Current: cur, Observed: obs, SampleProgress: samples}
			if a, ok := o.Schedule(now, cl, []JobState{st})["j"]; ok {
				cur = a
			}
			gpus, batch = append(gpus, cur.NumGPUs()), append(batch, cur.GlobalBatch())
			// The job reports its step time on the GPUs it holds now.
			obs = append(obs, Observation{Nodes: 1, GPUs: cur.NumGPUs(), LocalBatch: cur.LocalBatch, StepTime: step(cur.LocalBatch)})
			progress += 121 / step(cur.LocalBatch) * float64(cur.GlobalBatch()) / 256
		}
		return gpus, batch
	}
	gpus, batch := run(true)
	t.Logf("samples: GPUs %v, batch %v", gpus, batch)
	if gpus[0] != 1 || gpus[len(gpus)-1] < 2 || slices.Max(gpus) > 4 {
		t.Errorf("GPUs by round %v: want the job grown from 1 onto the idle GPUs", gpus)
	}
	for k, b := range batch {
		if b != 256 {
			t.Errorf("round %d: batch %d, want 256 (most samples per second)", k, b)
		}
	}
	gpus, batch = run(false)
	t.Logf("noise prior: GPUs %v, batch %v", gpus, batch)
	if batch[0] >= 256 || slices.Max(batch) >= 256 {
		t.Errorf("without sample progress the prior kept batch 256 in some round (%v): the test no longer shows the difference", batch)
	}
}

// A caller's step-time prior (JobState.Prior) fills the terms the reports
// cannot fix: with reports at one per-GPU batch, the prior's split of
// compute into fixed and per-sample parts at the measured level; with no
// report on several GPUs, the prior's synchronisation in seconds; with no
// report at all, the prior itself. A prior not Known is no prior.
func TestFitThroughputPrior(t *testing.T) {
	prior := &ThroughputModel{Known: true, A: 0.002, B: 0.0008, Intra0: 0.002, Intra1: 0.0005, Inter0: 0.01, Inter1: 0.001}
	if m := FitThroughput(nil, prior); m != *prior {
		t.Errorf("no reports: model %+v, want the prior %+v", m, *prior)
	}
	if m := FitThroughput(nil, &ThroughputModel{A: 1}); m.Known {
		t.Errorf("no reports and an unknown prior: model %+v, want unknown", m)
	}
	// One GPU at batch 256, twice as slow as the prior says.
	one := []Observation{{Nodes: 1, GPUs: 1, LocalBatch: 256, StepTime: 2 * prior.Compute(256)}}
	m := FitThroughput(one, prior)
	if got, want := m.Compute(256), one[0].StepTime; math.Abs(got-want) > 1e-12 {
		t.Errorf("compute at the measured batch %v, want the measured %v", got, want)
	}
	if got, want := m.A/m.B, prior.A/prior.B; math.Abs(got-want) > 1e-9 {
		t.Errorf("compute split A/B = %v, want the prior's %v", got, want)
	}
	if m.Intra0 != prior.Intra0 || m.Intra1 != prior.Intra1 || m.Inter0 != prior.Inter0 || m.Inter1 != prior.Inter1 {
		t.Errorf("sync terms %+v, want the prior's %+v", m, *prior)
	}
	// Two GPUs on one node reported: intra-node sync is fitted (1 ms),
	// cross-node sync stays the prior's; compute is fitted from two batches.
	two := append(one, Observation{Nodes: 1, GPUs: 2, LocalBatch: 128, StepTime: 2*prior.Compute(128) + 0.001, SyncTime: 0.001})
	m = FitThroughput(two, prior)
	if math.Abs(m.Intra0-0.001) > 1e-12 || m.Intra1 != 0 || m.Inter0 != prior.Inter0 || m.Inter1 != prior.Inter1 {
		t.Errorf("sync terms %+v: want intra-node 1 ms as reported and the prior's cross-node terms", m)
	}
	if math.Abs(m.A-2*prior.A) > 1e-9 || math.Abs(m.B-2*prior.B) > 1e-12 {
		t.Errorf("compute %v + %v·l, want the reports' %v + %v·l", m.A, m.B, 2*prior.A, 2*prior.B)
	}
	if n := FitThroughput(two, &ThroughputModel{Intra0: 9}); n != FitThroughput(two, nil) {
		t.Errorf("an unknown prior changed the fit: %+v against %+v", n, FitThroughput(two, nil))
	}
}

// With one measured shape, ONES predicts other GPU counts from its
// generic shares (30% of compute fixed, synchronisation 10% of it): a
// second GPU at the same batch 1.33× faster, where a job whose compute is
// all but proportional to its batch and whose all-reduce takes 2 ms runs
// 1.94× faster. A job with 180 s left on one GPU then stays there (the
// saving, 15 s after the restart, is under the 30 s charge for growing
// into an idle GPU), though it would save 57 s. With the caller's
// step-time prior ONES sees the true speed-up and grows it (on the GPU the
// caller placed it on, as here, a job with a prior is not charged at all:
// TestONESChargesOnlyChangesToItsOwnPlacements).
func TestONESStepPriorScalesOut(t *testing.T) {
	compute := func(l int) float64 { return 0.002 + 0.0008*float64(l) }
	prior := &ThroughputModel{Known: true, A: 0.002, B: 0.0008, Intra0: 0.002, Inter0: 0.01}
	run := func(prior *ThroughputModel) []int {
		o := NewONES(ONESConfig{Seed: 1, Interval: 60})
		cl := UniformCluster(1, 2)
		cur := Allocation{PerNode: []int{1}, LocalBatch: 256}
		var gpus []int
		for k := 0; k < 5; k++ {
			obs := []Observation{{Nodes: 1, GPUs: 1, LocalBatch: 256, StepTime: compute(256)}}
			if cur.NumGPUs() == 2 {
				obs = append(obs, Observation{Nodes: 1, GPUs: 2, LocalBatch: cur.LocalBatch, StepTime: compute(cur.LocalBatch) + 0.002, SyncTime: 0.002})
			}
			// 180 s left at one GPU's 256 samples per 0.2068 s.
			left := 180 / compute(256)
			st := JobState{ID: "j", App: "j", Replicas: 1, Batch: 256, MinBatch: 256, MaxBatch: 256, BaseBatch: 256, MinLocal: 1,
				MinGPUs: 1, MaxGPUs: 2, Running: true, Progress: 1e6 - left, Target: 1e6, Current: cur, Observed: obs, SampleProgress: true, Prior: prior}
			if a, ok := o.Schedule(121*float64(k), cl, []JobState{st})["j"]; ok {
				cur = a
			}
			gpus = append(gpus, cur.NumGPUs())
		}
		return gpus
	}
	if g := run(nil); slices.Max(g) != 1 {
		t.Errorf("without a prior: GPUs by call %v, want 1 throughout (the test no longer shows the generic shares' underestimate)", g)
	}
	if g := run(prior); g[len(g)-1] != 2 {
		t.Errorf("with the prior: GPUs by call %v, want the job grown onto the second GPU", g)
	}
}

// ForgetApp drops what ONES learned for an application; the others keep
// theirs.
func TestONESForgetApp(t *testing.T) {
	o := NewONES(ONESConfig{Seed: 1, Interval: 60})
	prior := &ThroughputModel{Known: true, A: 0.01, B: 0.001}
	var jobs []JobState
	for _, id := range []string{"a", "b"} {
		jobs = append(jobs, JobState{ID: id, App: id, Replicas: 1, Batch: 64, MinBatch: 64, MaxBatch: 64, BaseBatch: 64, MinLocal: 1,
			Running: true, Target: 1e5, Current: Allocation{PerNode: []int{1}, LocalBatch: 64}, Prior: prior,
			Observed: []Observation{{Nodes: 1, GPUs: 1, LocalBatch: 64, StepTime: 0.1}}})
	}
	o.Schedule(0, UniformCluster(1, 2), jobs)
	for _, id := range []string{"a", "b"} {
		if o.obs[id] == nil || !o.models[id].m.Known {
			t.Fatalf("app %s: nothing learned", id)
		}
		if _, ok := o.priors[id]; !ok {
			t.Fatalf("app %s: no prior kept", id)
		}
	}
	o.ForgetApp("a")
	if _, ok := o.obs["a"]; ok {
		t.Error("a's step times kept")
	}
	if _, ok := o.models["a"]; ok {
		t.Error("a's model kept")
	}
	if _, ok := o.priors["a"]; ok {
		t.Error("a's prior kept")
	}
	if o.obs["b"] == nil || !o.models["b"].m.Known {
		t.Error("b's state was dropped too")
	}
	// b schedules as before.
	if a := o.Schedule(60, UniformCluster(1, 2), jobs[1:]); a["b"].NumGPUs() == 0 {
		t.Errorf("b not scheduled after forgetting a: %v", a)
	}
}

// A job with a step-time prior grows past the exploration bound (twice
// the GPUs it has reported on) to the GPUs it asks for while the cluster
// has them idle, and not while other jobs hold them.
func TestONESPriorGrowsIntoIdleGPUs(t *testing.T) {
	prior := testStepPrior()
	run := func(withPrior, busy bool) int {
		o := NewONES(ONESConfig{Seed: 1, Interval: 60})
		cl := UniformCluster(2, 8)
		cur := Allocation{PerNode: []int{1, 0}, LocalBatch: 256}
		most := 0
		for k := 0; k < 4; k++ {
			obs := []Observation{{Nodes: 1, GPUs: 1, LocalBatch: 256, StepTime: 0.002 + 0.0008*256}}
			st := JobState{ID: "j", App: "j", Replicas: 8, Batch: 256, MinBatch: 256, MaxBatch: 256 * 8, BaseBatch: 256, MinLocal: 1,
				MinGPUs: 1, MaxGPUs: 8, Running: true, Progress: 0, Target: 1e9, Current: cur, Observed: obs, SampleProgress: true}
			if withPrior {
				st.Prior = prior
			}
			jobs := []JobState{st}
			if busy {
				// Another job holds 14 of the 16 GPUs.
				jobs = append(jobs, JobState{ID: "o", App: "o", Replicas: 14, Batch: 14 * 64, MinBatch: 14 * 64, MaxBatch: 14 * 64, BaseBatch: 14 * 64,
					MinLocal: 1, MinGPUs: 14, MaxGPUs: 14, Running: true, Target: 1e9, Current: Allocation{PerNode: []int{6, 8}, LocalBatch: 64},
					Observed: []Observation{{Nodes: 2, GPUs: 14, LocalBatch: 64, StepTime: 0.1, SyncTime: 0.01}}, SampleProgress: true})
				jobs[0].Current = Allocation{PerNode: []int{1, 0}, LocalBatch: cur.LocalBatch, AccumSteps: cur.AccumSteps}
			}
			if a, ok := o.Schedule(121*float64(k), cl, jobs)["j"]; ok && !a.Empty() {
				cur = a
			}
			most = max(most, cur.NumGPUs())
		}
		return most
	}
	if g := run(true, false); g <= 2 {
		t.Errorf("with a prior on an idle cluster: at most %d GPUs, want past the exploration bound of 2 toward the 8 it asks for", g)
	}
	if g := run(false, false); g > 2 {
		t.Errorf("without a prior: %d GPUs, want at most twice the 1 reported on", g)
	}
	if g := run(true, true); g > 2 {
		t.Errorf("with a prior, 14 of 16 GPUs held by another job: %d GPUs, want at most 2", g)
	}
}

// A job whose application was given a step-time prior keeps it in a call
// that gives none (the live loop gives one only when the cost model's time
// at the job's batch is known by the round's deadline, often not right
// after a move): grown past the exploration bound into idle GPUs, it stays
// there rather than fall back to twice the GPUs it has reported on. Before,
// ONES shrank a lone job from four GPUs to two one round after growing it.
func TestONESKeepsPriorAcrossCalls(t *testing.T) {
	prior := testStepPrior()
	o := NewONES(ONESConfig{Seed: 1, Interval: 60})
	cl := UniformCluster(2, 8)
	st := longAndShortJobs(prior)[0] // alone: the long job on one GPU that asks for eight
	grown := o.Schedule(0, cl, []JobState{st})["j"]
	if grown.NumGPUs() <= 2 {
		t.Fatalf("with a prior on an idle cluster: %s, want past the exploration bound of 2", grown)
	}
	st.Current, st.Batch, st.Prior = grown, grown.GlobalBatch(), nil
	for k := 1; k <= 3; k++ {
		if a := o.Schedule(float64(k)*121, cl, []JobState{st})["j"]; a.NumGPUs() < grown.NumGPUs() {
			t.Fatalf("call %d without the prior: %s, want it kept on its %d GPUs", k, a, grown.NumGPUs())
		}
	}
}

// testStepPrior is the step-time prior the idle-share, hold and charge
// tests give their jobs: 2 ms + 0.8 ms per sample of compute, 1 ms within
// a node and 5 ms across nodes to synchronise.
func testStepPrior() *ThroughputModel {
	return &ThroughputModel{Known: true, A: 0.002, B: 0.0008, Intra0: 0.001, Inter0: 0.005}
}

// longJob is job "j": long (10⁹ samples), asking for eight GPUs at
// batches 256–2048, running on cur, with one report at cur's shape whose
// step time follows the prior's compute line; prior may be nil.
func longJob(prior *ThroughputModel, cur Allocation) JobState {
	return JobState{ID: "j", App: "j", Replicas: 8, Batch: 256, MinBatch: 256, MaxBatch: 256 * 8, BaseBatch: 256, MinLocal: 1,
		MinGPUs: 1, MaxGPUs: 8, Running: true, Target: 1e9, Current: cur, SampleProgress: true, Prior: prior,
		Observed: []Observation{{Nodes: 1, GPUs: cur.NumGPUs(), LocalBatch: cur.LocalBatch, StepTime: 0.002 + 0.0008*float64(cur.LocalBatch)}}}
}

// longAndShortJobs is a 2 × 8 cluster's jobs, all with the step-time
// prior: a long one ("j") on one GPU that asks for eight, and three short ones
// that hold the two GPUs they ask for (two on node 0, one on node 1).
func longAndShortJobs(prior *ThroughputModel) []JobState {
	jobs := []JobState{longJob(prior, Allocation{PerNode: []int{1, 0}, LocalBatch: 256})}
	for k, cur := range [][]int{{2, 0}, {2, 0}, {0, 2}} {
		id := fmt.Sprintf("s%d", k)
		jobs = append(jobs, JobState{ID: id, App: id, Replicas: 2, Batch: 128, MinBatch: 128, MaxBatch: 128, BaseBatch: 128, MinLocal: 1,
			MinGPUs: 2, MaxGPUs: 2, Running: true, Target: 1e5, Current: Allocation{PerNode: cur, LocalBatch: 64},
			Observed: []Observation{{Nodes: 1, GPUs: 2, LocalBatch: 64, StepTime: 0.05, SyncTime: 0.005}}, SampleProgress: true, Prior: prior})
	}
	return jobs
}

// When every job runs (none waits for GPUs), a job with a step-time prior
// may grow into all the idle GPUs, not just an even share of them: on 16
// GPUs with 9 idle, a job on one GPU that asks for eight reaches eight
// within four calls. With a job waiting (one that needs more GPUs than are
// idle), the even share (9 ÷ 5 jobs with a prior: one) stands: the long
// job's cap is its one GPU plus one. (Live, on 4 × 4, the share held the
// mix's longest job at two GPUs while five stood idle.) The waiting case
// checks the cap itself: whether the search then grows the job depends on
// what it makes of the waiting job, which it may also start by preempting.
func TestONESGrowsIntoAllIdleGPUsWhenNoneWaits(t *testing.T) {
	prior := testStepPrior()
	cl := UniformCluster(2, 8)
	o := NewONES(ONESConfig{Seed: 1, Interval: 60})
	jobs := longAndShortJobs(prior)
	most := 0
	for k := 0; k < 4; k++ {
		out := o.Schedule(121*float64(k), cl, jobs)
		for i := range jobs {
			jobs[i].Current = out[jobs[i].ID]
		}
		most = max(most, jobs[0].Current.NumGPUs())
	}
	if most != 8 {
		t.Errorf("every job running, 9 GPUs idle: the long job reaches %d GPUs in four calls, want the 8 it asks for", most)
	}
	// A job waits that needs ten GPUs, more than the nine idle.
	waiting := JobState{ID: "w", App: "w", Replicas: 10, Batch: 1280, MinBatch: 1280, MaxBatch: 1280, BaseBatch: 1280, MinLocal: 1,
		MinGPUs: 10, MaxGPUs: 10, Target: 1e9, SampleProgress: true, Prior: prior}
	for _, c := range []struct {
		jobs []JobState
		want int
	}{
		{longAndShortJobs(prior), 8},
		{append(longAndShortJobs(prior), waiting), 2},
	} {
		ctx := NewONES(ONESConfig{Seed: 1, Interval: 60}).newCtx(0, cl, c.jobs)
		if got := ctx.jobs[0].cap; got != c.want {
			t.Errorf("%d jobs listed: the long job's cap is %d, want %d", len(c.jobs), got, c.want)
		}
	}
}

// A job the live coordinator placed (by memory, before any round) on fewer
// GPUs than it asks for is not held by ONES's hold when idle GPUs cover the
// rest and it has a step-time prior: the hold protects ONES's own changes,
// and holding this one only delayed a growth it would make anyway (on 16 ×
// 8 the mix's jobs sat two rounds on one GPU). A job ONES placed itself, one
// without a prior, and one the idle GPUs cannot grow to its request, are
// held as before.
func TestONESHoldsOnlyItsOwnPlacement(t *testing.T) {
	prior := testStepPrior()
	job := func(withPrior bool, cur Allocation) JobState {
		st := JobState{ID: "j", App: "j", Replicas: 8, Batch: 256, MinBatch: 256, MaxBatch: 256 * 8, BaseBatch: 256, MinLocal: 1,
			MinGPUs: 1, MaxGPUs: 8, Running: !cur.Empty(), Target: 1e9, Current: cur, SampleProgress: true}
		if !cur.Empty() {
			st.Observed = []Observation{{Nodes: 1, GPUs: 1, LocalBatch: 256, StepTime: 0.002 + 0.0008*256}}
		}
		if withPrior {
			st.Prior = prior
		}
		return st
	}
	other := JobState{ID: "o", App: "o", Replicas: 14, Batch: 14 * 64, MinBatch: 14 * 64, MaxBatch: 14 * 64, BaseBatch: 14 * 64,
		MinLocal: 1, MinGPUs: 14, MaxGPUs: 14, Running: true, Target: 1e9, Current: Allocation{PerNode: []int{6, 8}, LocalBatch: 64},
		Observed: []Observation{{Nodes: 2, GPUs: 14, LocalBatch: 64, StepTime: 0.1, SyncTime: 0.01}}, SampleProgress: true}
	one := Allocation{PerNode: []int{1, 0}, LocalBatch: 256}
	gpus := func(o *ONES, now float64, cl ClusterState, jobs ...JobState) int {
		return o.Schedule(now, cl, jobs)["j"].NumGPUs()
	}
	cl := UniformCluster(2, 8)

	if g := gpus(NewONES(ONESConfig{Seed: 1, Interval: 60}), 0, cl, job(true, one)); g <= 1 {
		t.Errorf("placed by the coordinator on 1 GPU, prior, 15 idle: %d GPUs at the first call, want it grown (not held)", g)
	}
	if g := gpus(NewONES(ONESConfig{Seed: 1, Interval: 60}), 0, cl, job(false, one)); g != 1 {
		t.Errorf("placed by the coordinator, no prior: %d GPUs at the first call, want the 1 it holds (held)", g)
	}
	if g := gpus(NewONES(ONESConfig{Seed: 1, Interval: 60}), 0, cl, job(true, one), other); g != 1 {
		t.Errorf("placed by the coordinator, prior, 1 GPU idle of the 7 more it asks for: %d GPUs, want the 1 it holds (held)", g)
	}
	// ONES places it on the one GPU a cluster of one has; a call later the
	// cluster has 16 and the job is still in its hold.
	o := NewONES(ONESConfig{Seed: 1, Interval: 60})
	if g := gpus(o, 0, UniformCluster(1, 1), job(true, Allocation{})); g != 1 {
		t.Fatalf("one GPU in the cluster: ONES gave %d, want 1", g)
	}
	if g := gpus(o, 60, cl, job(true, one)); g != 1 {
		t.Errorf("placed by ONES a call ago, prior, 15 idle: %d GPUs, want the 1 it holds (held)", g)
	}

	// A job that holds all it asks for has nothing to grow into: held,
	// though the coordinator placed it (found by review: unheld, on a full
	// cluster it was left out for a waiting job, which the live loop,
	// which does not preempt, cannot apply).
	full := job(true, one)
	full.Replicas, full.MaxGPUs = 1, 1
	waiting := job(true, Allocation{})
	waiting.ID, waiting.App, waiting.Target = "w", "w", 1e3
	if a := NewONES(ONESConfig{Seed: 1, Interval: 60}).Schedule(0, UniformCluster(1, 1), []JobState{full, waiting}); a["j"].NumGPUs() != 1 {
		t.Errorf("placed by the coordinator on the 1 GPU it asks for, a short job waiting: %v, want it kept (held)", a)
	}

	// A move ONES ordered that lands a call late, after ONES decided
	// another count in between, is still ONES's own: held (found by
	// review: only the latest call's count was remembered).
	o = NewONES(ONESConfig{Seed: 1, Interval: 60})
	if g := gpus(o, 0, UniformCluster(1, 1), job(true, Allocation{})); g != 1 {
		t.Fatalf("one GPU in the cluster: ONES gave %d, want 1", g)
	}
	// The order has not landed: the job still waits, and ONES, told of
	// one more GPU, gives it two.
	if g := gpus(o, 60, UniformCluster(1, 2), job(true, Allocation{})); g != 2 {
		t.Fatalf("two GPUs in the cluster: ONES gave %d, want 2", g)
	}
	// The first order (one GPU) lands: held, though the latest call gave two.
	if g := gpus(o, 120, cl, job(true, one)); g != 1 {
		t.Errorf("ONES's order of two calls ago landed: %d GPUs, want the 1 it holds (held)", g)
	}
}

// A step time measured while another job the policy places shared the
// job's GPUs (Observation.Shared) is not fitted: the live loop's placement
// by memory co-locates jobs until the policy starts them elsewhere, and a
// shape measured so and then left was never corrected (a job kept on two
// GPUs with six idle, its four-GPU time taken beside three jobs about to
// move). The same time measured alone keeps the job on two.
func TestONESSharedObservationNotFitted(t *testing.T) {
	prior := testStepPrior()
	step := func(l int) float64 { return 0.002 + 0.0008*float64(l) }
	run := func(shared bool) int {
		o := NewONES(ONESConfig{Seed: 1, Interval: 60})
		cur := Allocation{PerNode: []int{2}, LocalBatch: 128}
		most := 0
		for k := 0; k < 4; k++ {
			obs := []Observation{
				{Nodes: 1, GPUs: 1, LocalBatch: 256, StepTime: step(256)},
				{Nodes: 1, GPUs: 2, LocalBatch: 128, StepTime: step(128) + 0.001},
				// Four GPUs measured four times slower than alone.
				{Nodes: 1, GPUs: 4, LocalBatch: 64, StepTime: 4 * (step(64) + 0.001), SyncTime: 0.001, Shared: shared},
			}
			st := JobState{ID: "j", App: "j", Replicas: 4, Batch: 256, MinBatch: 256, MaxBatch: 256, BaseBatch: 256, MinLocal: 1,
				MinGPUs: 1, MaxGPUs: 4, Running: true, Target: 1e9, Current: cur, Observed: obs, SampleProgress: true, Prior: prior}
			if a, ok := o.Schedule(121*float64(k), UniformCluster(1, 8), []JobState{st})["j"]; ok && !a.Empty() {
				cur = a
			}
			most = max(most, cur.NumGPUs())
		}
		return most
	}
	if g := run(true); g != 4 {
		t.Errorf("four GPUs measured slow beside other jobs: at most %d GPUs, want 4 (the shared time not fitted)", g)
	}
	if g := run(false); g != 2 {
		t.Errorf("four GPUs measured slow alone: at most %d GPUs, want the 2 it runs on", g)
	}
}

// A shared observation counts for the exploration bound though it is not
// fitted: the job ran on those GPUs. A job without a prior that reported
// alone on one GPU and beside another job on two may take four (twice the
// two); counting only what was fitted, its bound was two.
func TestONESSharedObservationCountsForBound(t *testing.T) {
	run := func(shared bool) int {
		o := NewONES(ONESConfig{Seed: 1, Interval: 60})
		st := JobState{ID: "j", App: "j", Replicas: 8, Batch: 512, MinBatch: 512, MaxBatch: 512, BaseBatch: 512, MinLocal: 1,
			MinGPUs: 1, MaxGPUs: 8, Target: 1e9, SampleProgress: true,
			Observed: []Observation{{Nodes: 1, GPUs: 1, LocalBatch: 512, StepTime: 0.2},
				{Nodes: 1, GPUs: 2, LocalBatch: 256, StepTime: 0.3, SyncTime: 0.01, Shared: shared}}}
		return o.Schedule(0, UniformCluster(1, 8), []JobState{st})["j"].NumGPUs()
	}
	if g := run(true); g <= 2 || g > 4 {
		t.Errorf("reported alone on 1 GPU, beside another job on 2: %d GPUs, want 3 or 4 (up to twice the 2 it ran on)", g)
	}
}

// Current allocations that over-commit a node (a caller's bookkeeping
// error: the simulator and the live loop never pass one) do not crash ONES:
// the first job keeps its GPUs and the second is placed anew, or waits when
// the cluster is short. Before, repair filled the second job's slots past
// the node's end (index out of range), and with the cluster itself
// over-committed the keep-current seed did.
func TestONESOverCommittedCurrent(t *testing.T) {
	o := NewONES(ONESConfig{Seed: 1, Interval: 60})
	cl := UniformCluster(2, 4)
	job := func(id string, cur []int) JobState {
		return JobState{ID: id, App: id, Replicas: 3, Batch: 192, MinBatch: 192, MaxBatch: 192, BaseBatch: 192, MinLocal: 1,
			MinGPUs: 3, MaxGPUs: 3, Running: true, Target: 1e6, Current: Allocation{PerNode: cur, LocalBatch: 64},
			Observed: []Observation{{Nodes: 1, GPUs: 3, LocalBatch: 64, StepTime: 0.05, SyncTime: 0.005}}, SampleProgress: true}
	}
	// Both say they hold three of node 1's four GPUs: a keeps them, b
	// goes to node 0.
	out := o.Schedule(0, cl, []JobState{job("a", []int{0, 3}), job("b", []int{0, 3})})
	if !slices.Equal(out["a"].PerNode, []int{0, 3}) || !slices.Equal(out["b"].PerNode, []int{3, 0}) {
		t.Errorf("two jobs on the same three GPUs of node 1: %v, want a kept there and b on node 0", out)
	}
	// On one node of four GPUs, more GPUs than the cluster has: a keeps
	// its three, b waits.
	o = NewONES(ONESConfig{Seed: 1, Interval: 60})
	out = o.Schedule(0, UniformCluster(1, 4), []JobState{job("a", []int{3}), job("b", []int{3})})
	if !slices.Equal(out["a"].PerNode, []int{3}) || !out["b"].Empty() {
		t.Errorf("two jobs on the same three GPUs of a four-GPU cluster: %v, want a kept, b waiting", out)
	}
}

// A listed job that can never run (its GPU range's minimum exceeds the
// cluster) or has no work left is not a job waiting for the idle GPUs: with
// every other job running, a job with a prior may still grow into all of
// them (before, either kept the others at the even share of a waiting
// cluster), and the job with no work left is not started.
func TestONESIdleShareIgnoresJobsThatCannotRun(t *testing.T) {
	prior := testStepPrior()
	base := longAndShortJobs(prior)
	extra := map[string]JobState{
		"asks 17 GPUs of 16": {ID: "w", App: "w", Replicas: 17, Batch: 17 * 128, MinBatch: 17 * 128, MaxBatch: 17 * 128, BaseBatch: 17 * 128,
			MinLocal: 1, MinGPUs: 17, MaxGPUs: 17, Target: 1e9, SampleProgress: true, Prior: prior},
		"no work left": {ID: "w", App: "w", Replicas: 2, Batch: 128, MinBatch: 128, MaxBatch: 128, BaseBatch: 128, MinLocal: 1,
			MinGPUs: 1, MaxGPUs: 2, Target: 1e5, Progress: 1e5, SampleProgress: true, Prior: prior},
		"waits, can run": {ID: "w", App: "w", Replicas: 2, Batch: 128, MinBatch: 128, MaxBatch: 128, BaseBatch: 128, MinLocal: 1,
			MinGPUs: 1, MaxGPUs: 2, Target: 1e5, SampleProgress: true, Prior: prior},
	}
	for name, w := range extra {
		jobs := append(slices.Clone(base), w)
		ctx := NewONES(ONESConfig{Seed: 1, Interval: 60}).newCtx(0, UniformCluster(2, 8), jobs)
		want := 8 // 9 GPUs idle, none waits: j may take what it asks for
		if name == "waits, can run" {
			want = 2 // 9 idle GPUs shared by five jobs with a prior: 1 more
		}
		if ctx.jobs[0].cap != want {
			t.Errorf("%s: the long job's cap is %d, want %d", name, ctx.jobs[0].cap, want)
		}
		if name == "no work left" {
			o := NewONES(ONESConfig{Seed: 1, Interval: 60})
			for k := 0; k < 3; k++ {
				out := o.Schedule(121*float64(k), UniformCluster(2, 8), jobs)
				if !out["w"].Empty() {
					t.Fatalf("call %d: the job with no work left was started on %s", k, out["w"])
				}
				for i := range jobs {
					jobs[i].Current = out[jobs[i].ID]
				}
			}
		}
	}
}

// polish undoes the part of a candidate that does not pay for its restart:
// here a job with seconds of work left is shrunk so that a long job grows
// now instead of at its completion, bundled with a waiting job's start on
// the idle GPUs. The shrink is undone, the start stays, the score falls,
// and no single undo lowers the polished candidate's score further.
func TestONESPolishUndoesChangesThatDoNotPay(t *testing.T) {
	near, long, queued := fillIdleJob("near", 4), fillIdleJob("long", 2), fillIdleJob("new", 0)
	near.Progress = near.Target - 10 // 2.5 s left on its 4 GPUs
	long.Target = 1e6
	o := NewONES(ONESConfig{Seed: 1, Hold: -1}) // no hold: repair would undo the bundle itself
	ctx := o.newCtx(0, UniformCluster(1, 8), []JobState{near, long, queued})
	cur := ctx.current() // near on GPUs 0–3, long on 4–5, 6–7 idle
	cur.fit = ctx.score(cur)
	bundle := ctx.clone(cur)
	copy(bundle.slots, []int32{0, 0, 1, 1, 1, 1, 2, 2})
	bundle.local[2] = 8
	ctx.repair(bundle)
	bundle.fit = ctx.score(bundle)
	counts, _ := ctx.shape(bundle)
	if counts[0] != 2 || counts[1] != 4 || counts[2] != 2 {
		t.Fatalf("repair changed the bundle to %v GPUs (near, long, new); the test needs 2, 4 and 2", counts)
	}
	charge := o.cfg.Hysteresis * o.cfg.MoveCost
	if got := bundle.fit - ctx.fitness(bundle); got != 2*charge {
		t.Fatalf("bundle charged %.0f s, want %.0f (two running jobs changed)", got, 2*charge)
	}
	p := ctx.polish(bundle, cur)
	pc, _ := ctx.shape(p)
	if moved := ctx.movedJobs(p, pc); pc[0] != 4 || moved[0] || pc[2] == 0 {
		t.Errorf("polished: %v GPUs (near, long, new), near moved %v; want near kept on its 4 GPUs and new started", pc, moved[0])
	}
	if !(p.fit < bundle.fit) || !(p.fit < cur.fit) {
		t.Errorf("scores: polished %.1f, bundle %.1f, current %.1f; want the polished one lowest", p.fit, bundle.fit, cur.fit)
	}
	if p.fit != ctx.score(p) {
		t.Errorf("polished candidate's fit %.1f is not its score %.1f", p.fit, ctx.score(p))
	}
	// No single undo is left that lowers the score, and polishing again
	// changes nothing.
	for i := range ctx.jobs {
		c := ctx.undo(p, cur, i)
		ctx.repair(c)
		if s := ctx.score(c); s < p.fit {
			t.Errorf("undoing job %s's change lowers the polished score from %.1f to %.1f", ctx.jobs[i].s.ID, p.fit, s)
		}
	}
	if q := ctx.polish(p, cur); q != p {
		t.Errorf("polishing the polished candidate changed it")
	}
}

// The hysteresis charge (score) guards ONES's own decisions against
// prediction noise. A job with a step-time prior on GPUs the live
// coordinator chose (placed by memory before any round) is not charged
// for a change: there is no decision of ONES's to reverse, and charged,
// the six-job mix's longest job stayed on its one GPU while three stood
// idle. Without a prior, or on GPUs ONES gave it, the charge stands (for
// growing the lone job into idle GPUs, the idle-growth charge:
// TestONESChargesGrowthIntoIdleGPUsLess).
func TestONESChargesOnlyChangesToItsOwnPlacements(t *testing.T) {
	prior := testStepPrior()
	job := func(withPrior bool, cur Allocation) JobState {
		if withPrior {
			return longJob(prior, cur)
		}
		return longJob(nil, cur)
	}
	cl := UniformCluster(1, 8)
	// charge is the score's charge for a candidate that turns the first
	// GPU holding from into to (-1: idle; 0: the job).
	charge := func(o *ONES, now float64, st JobState, from, to int32) float64 {
		ctx := o.newCtx(now, cl, []JobState{st})
		g := ctx.current()
		for k := range g.slots {
			if g.slots[k] == from {
				g.slots[k] = to
				break
			}
		}
		return ctx.score(g) - ctx.fitness(g)
	}
	first := Allocation{PerNode: []int{1}, LocalBatch: 256}
	for _, withPrior := range []bool{true, false} {
		o := NewONES(ONESConfig{Seed: 1})
		want := min(o.cfg.Hysteresis, 1) * o.cfg.MoveCost
		if withPrior {
			want = 0
		}
		if got := charge(o, 0, job(withPrior, first), -1, 0); got != want {
			t.Errorf("prior %v, on the coordinator's placement: growing the job is charged %.0f s, want %.0f", withPrior, got, want)
		}
	}
	// Once ONES has changed the job's GPUs, changing them again is charged.
	o := NewONES(ONESConfig{Seed: 1})
	st := job(true, first)
	out := o.Schedule(0, cl, []JobState{st})
	if out["j"].NumGPUs() <= 1 {
		t.Fatalf("ONES left the job on %s; the test needs it grown", out["j"])
	}
	st = job(true, Allocation{PerNode: out["j"].PerNode, LocalBatch: out["j"].LocalBatch, AccumSteps: out["j"].AccumSteps})
	if got, want := charge(o, 121, st, 0, -1), o.cfg.Hysteresis*o.cfg.MoveCost; got != want {
		t.Errorf("on GPUs ONES gave it (%s): shrinking the job is charged %.0f s, want %.0f", st.Current, got, want)
	}
}

// A move the live loop showed in flight and that was then refused brings
// the job back on GPUs ONES chose: they stay ONES's (charged, and held as
// its own), though the counts ONES gave since were for the refused move.
// Before, the job came back "not mine", uncharged, so the hysteresis no
// longer guarded a placement ONES had made.
func TestONESRefusedMoveKeepsItsPlacementOwn(t *testing.T) {
	prior := testStepPrior()
	job := func(cur Allocation) JobState { return longJob(prior, cur) }
	cl := UniformCluster(1, 8)
	o := NewONES(ONESConfig{Seed: 1})
	own := o.Schedule(0, cl, []JobState{job(Allocation{PerNode: []int{1}, LocalBatch: 256})})["j"] // the coordinator's placement
	if own.NumGPUs() <= 1 {
		t.Fatalf("ONES left the job on %s; the test needs it moved", own)
	}
	o.Schedule(121, cl, []JobState{job(own)})
	if !o.since["j"].mine {
		t.Fatalf("on the %s ONES gave it, the job is not ONES's", own)
	}
	// Stand-in for an order to one GPU fewer: the loop shows the move in
	// flight, then the device refuses it and the job is back.
	inFlight := Allocation{PerNode: []int{own.NumGPUs() - 1}, LocalBatch: own.LocalBatch}
	o.gave["j"] = append(o.gave["j"], inFlight.NumGPUs())
	o.Schedule(242, cl, []JobState{job(inFlight)})
	ctx := o.newCtx(363, cl, []JobState{job(own)})
	if !o.since["j"].mine || ctx.jobs[0].uncharged {
		t.Errorf("back on its own %s after a refused move: mine %v, uncharged %v; want ONES's, charged", own, o.since["j"].mine, ctx.jobs[0].uncharged)
	}
	// A placement that was never ONES's does not become its own by a
	// move away and back.
	o = NewONES(ONESConfig{Seed: 1, Hold: -1})
	first := Allocation{PerNode: []int{2}, LocalBatch: 128}
	o.newCtx(0, cl, []JobState{job(first)})
	o.newCtx(121, cl, []JobState{job(Allocation{PerNode: []int{1}, LocalBatch: 256})})
	if ctx := o.newCtx(242, cl, []JobState{job(first)}); o.since["j"].mine || !ctx.jobs[0].uncharged {
		t.Errorf("back on the coordinator's placement: mine %v, uncharged %v; want neither ONES's nor charged", o.since["j"].mine, ctx.jobs[0].uncharged)
	}
}

// A job that only grows, into GPUs nobody waits for, is charged
// min(Hysteresis, 1) × MoveCost, not Hysteresis × MoveCost: the projection
// hands it GPUs at the next completion anyway, so at the full charge it
// stayed put while GPUs stood idle. With a job waiting, with the reserve
// for arrivals taken once jobs stream in, or for a shrink, the full charge
// stands; with the hysteresis off, nothing is charged.
func TestONESChargesGrowthIntoIdleGPUsLess(t *testing.T) {
	cl := UniformCluster(1, 8)
	// charge is the score's charge for the current allocation with job x
	// on to[x] GPUs (the long job "j" is job 0), the others as they are.
	charge := func(o *ONES, now float64, jobs []JobState, to map[int]int) float64 {
		ctx := o.newCtx(now, cl, jobs)
		g := ctx.current()
		for x, want := range to {
			n := ctx.jobs[x].cur
			for k := range g.slots {
				if n > want && g.slots[k] == int32(x) {
					g.slots[k] = -1
					n--
				}
			}
			for k := range g.slots {
				if n < want && g.slots[k] < 0 {
					g.slots[k] = int32(x)
					n++
				}
			}
			if n != want {
				t.Fatalf("cannot put job %d on %d GPUs", x, want)
			}
		}
		return ctx.score(g) - ctx.fitness(g)
	}
	o := NewONES(ONESConfig{Seed: 1})
	h, mc := o.cfg.Hysteresis, o.cfg.MoveCost
	long := fillIdleJob("j", 2)
	long.Target = 1e6
	running := []JobState{long, fillIdleJob("s", 2)}
	for _, c := range []struct {
		name string
		jobs []JobState
		to   map[int]int
		want float64
	}{
		{"growing into 2 of 4 idle GPUs, none waiting", running, map[int]int{0: 4}, mc},
		{"shrinking", running, map[int]int{0: 1}, h * mc},
		// The growth takes a GPU the other job gives up: both full.
		{"growing while the other job shrinks", running, map[int]int{0: 4, 1: 1}, 2 * h * mc},
	} {
		if got := charge(o, 0, c.jobs, c.to); got != c.want {
			t.Errorf("%s: charged %.0f s, want %.0f", c.name, got, c.want)
		}
	}
	// A job waiting that needs more GPUs than stay idle.
	waiting := fillIdleJob("w", 0)
	waiting.MinGPUs = 4
	if got := charge(o, 0, append(running, waiting), map[int]int{0: 4}); got != h*mc {
		t.Errorf("growing with a job waiting: charged %.0f s, want %.0f", got, h*mc)
	}
	// A job listed that can never run (it needs more GPUs than there are)
	// waits for nothing.
	never := fillIdleJob("n", 0)
	never.MinGPUs = 16
	if got := charge(o, 0, append(running, never), map[int]int{0: 4}); got != mc {
		t.Errorf("growing beside a job that can never run: charged %.0f s, want %.0f", got, mc)
	}
	// A job above its cap (one GPU) on two: repair shrinks it in every
	// candidate, which is not a shrink that keeps others' growth charged
	// in full (its own change is).
	above := append([]JobState(nil), running...)
	above[1].MaxGPUs = 1
	if got := charge(o, 0, above, map[int]int{0: 4, 1: 1}); got != h*mc+mc {
		t.Errorf("growing beside a job put back under its cap: charged %.0f s, want %.0f", got, h*mc+mc)
	}
	off := NewONES(ONESConfig{Seed: 1, Hysteresis: -1})
	if got := charge(off, 0, running, map[int]int{0: 4}); got != 0 {
		t.Errorf("hysteresis off: growing charged %.0f s, want 0", got)
	}
	// Jobs streaming in: a job submitted after the first call runs on one
	// GPU; growing the long job to 4 leaves one idle, fewer than Reserve.
	o.Schedule(0, cl, running)
	streamed := append(running, fillIdleJob("a", 1))
	streamed[2].Arrival = 30
	if got := charge(o, 60, streamed, map[int]int{0: 3}); got != mc {
		t.Errorf("streaming, growing to 3 (2 idle left, reserve %d): charged %.0f s, want %.0f", o.cfg.Reserve, got, mc)
	}
	if got := charge(o, 60, streamed, map[int]int{0: 4}); got != h*mc {
		t.Errorf("streaming, growing to 4 (1 idle left, reserve %d): charged %.0f s, want %.0f", o.cfg.Reserve, got, h*mc)
	}
}

// A job that has reported no gradient statistics yet is predicted from
// the first ones reported (while running) by the job of its application
// whose first report came last, at the batch they were measured at, not
// from the prior noise scale (a guess equal to its batch). Here that
// report has a noise scale of 10 samples at batch 64; a later report of
// the same job does not replace it, nor do a waiting job's statistics
// (no batch known), which that job keeps; its first report once running
// does; jobs with statistics keep their own; a new job of another
// application keeps the prior; ForgetApp drops it. With a noise scale of 10 samples at batch 64 (23
// carried to batch 1024 by the exponent 0.3), batch 1024 makes about 1.3
// times the progress per iteration of batch 64; with the prior's scale
// of 1024 (the job's batch), 8.5 times.
func TestONESNewJobUsesItsApplicationsFirstStatistics(t *testing.T) {
	o := NewONES(ONESConfig{Seed: 1, Interval: 60})
	cluster := UniformCluster(1, 4)
	job := func(id, app string, running bool, sqr, vr float64) JobState {
		s := JobState{ID: id, App: app, Replicas: 1, Batch: 1024, MinBatch: 64, MaxBatch: 4096, BaseBatch: 64, MinLocal: 1, MaxLocal: 4096,
			Target: 1e6, GradSqr: sqr, GradVar: vr,
			Observed: []Observation{{Nodes: 1, GPUs: 1, LocalBatch: 64, StepTime: 0.1}}}
		if running {
			s.Current = Allocation{PerNode: []int{1}, LocalBatch: 64}
		}
		return s
	}
	// A waiting job's statistics (no batch known) are not a start; then
	// the first report of a: noise scale B0·vr/sqr = 64·(10/64) = 10.
	o.newCtx(0, cluster, []JobState{job("w", "x", false, 3, 0.5), job("a", "x", true, 1, 10.0/64)})
	// A later report of a, ten times the noise: not a first report. w,
	// still waiting, keeps its own.
	later := job("a", "x", true, 1, 100.0/64)
	ctx := o.newCtx(60, cluster, []JobState{later, job("n", "x", false, 0, 0), job("m", "y", false, 0, 0), job("w", "x", false, 3, 0.5)})
	if a, w := ctx.jobs[0], ctx.jobs[3]; a.sqr != 1 || a.vr != 100.0/64 || a.statsBatch != 64 || w.sqr != 3 || w.vr != 0.5 || w.statsBatch != 0 {
		t.Errorf("jobs with statistics of their own: a %v, %v at %v (want 1, %v at 64); w %v, %v at %v (want 3, 0.5 at 0)",
			a.sqr, a.vr, a.statsBatch, 100.0/64, w.sqr, w.vr, w.statsBatch)
	}
	n, m := &ctx.jobs[1], &ctx.jobs[2]
	if n.sqr != 1 || n.vr != 10.0/64 || n.statsBatch != 64 {
		t.Fatalf("new job of x: statistics %v, %v at batch %v; want a's first report (1, %v at 64)", n.sqr, n.vr, n.statsBatch, 10.0/64)
	}
	if m.sqr != 0 || m.vr != 0 || m.statsBatch != 0 {
		t.Errorf("new job of y, an application none has reported for: statistics %v, %v at %v; want none (the prior)", m.sqr, m.vr, m.statsBatch)
	}
	// The prediction follows: a small noise scale makes a large batch
	// worth far less per sample than the prior's guess says.
	ratio := func(j *onesJob) float64 { return ctx.rate(j, 1, 1, 1024) / ctx.rate(j, 1, 1, 64) }
	if rn, rm := ratio(n), ratio(m); !(rn < rm/2) {
		t.Errorf("batch 1024 over 64 (same step time): %.2f for the job predicted from x's statistics, %.2f from the prior; want under half", rn, rm)
	}
	// w's first report while running is its first start: it replaces
	// a's, which was taken before it.
	o.newCtx(120, cluster, []JobState{later, job("w", "x", true, 2, 0.25)})
	if st := o.startStats["x"]; st != (gradStats{2, 0.25, 64}) {
		t.Errorf("after w's first running report: %+v, want {2 0.25 64}", st)
	}
	o.ForgetApp("x")
	ctx = o.newCtx(120, cluster, []JobState{job("p", "x", false, 0, 0)})
	if p := ctx.jobs[0]; p.sqr != 0 || p.vr != 0 {
		t.Errorf("after ForgetApp a new job of x still gets statistics %v, %v", p.sqr, p.vr)
	}
}
