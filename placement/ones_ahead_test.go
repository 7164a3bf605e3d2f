package placement

import (
	"math"
	"testing"
)

// The track's mean at a bin with reports, interpolated between bins with
// reports on either side, the nearest one's beyond the last, and nothing
// from an empty track.
func TestNoiseTrackAt(t *testing.T) {
	var tr noiseTrack
	if _, ok := tr.at(0.5); ok {
		t.Fatal("an empty track answered")
	}
	tr.add(0.101, 2) // bin 10
	tr.add(0.109, 8) // bin 10 again: mean log is log 4
	tr.add(0.305, math.Exp(3))
	for _, c := range []struct{ p, want float64 }{
		{0.1, math.Log(4)}, {0.0, math.Log(4)}, // below the first report: its value
		{0.2, (math.Log(4) + 3) / 2}, // halfway between bins 10 and 30
		{0.3, 3}, {0.99, 3}, {1, 3},
	} {
		if got, ok := tr.at(c.p); !ok || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("at(%v) = %v, %v; want %v", c.p, got, ok, c.want)
		}
	}
}

// aheadJob is a job whose gradient statistics make larger batches barely
// worth more progress per iteration (noise scale 0.1 of the base batch),
// on one GPU of eight with near-linear step times measured up to eight.
func aheadJob() JobState {
	j := JobState{ID: "j", App: "a", Replicas: 1, Batch: 256, MinBatch: 256, MaxBatch: 256 * 16, BaseBatch: 256,
		MinLocal: 1, MaxLocal: 512, Running: true, Target: 1000, Progress: 0, GradSqr: 1, GradVar: 0.1,
		Current: Allocation{PerNode: []int{1}, LocalBatch: 256}}
	for _, r := range []int{1, 2, 4, 8} {
		j.Observed = append(j.Observed, Observation{Nodes: 1, GPUs: r, LocalBatch: 256, StepTime: 0.2 + 0.01*float64(r-1), SyncTime: 0.01 * float64(r-1)})
	}
	return j
}

// With a look-ahead, a job whose application's earlier reports show its
// noise scale a hundred times larger a little further on is sized by that
// scale — a larger efficient scale than its own statistics give — while
// its batch on the GPUs it gets is still the one its own statistics rate
// best. Without reports ahead, or with the look-ahead off, nothing
// changes.
func TestONESLookaheadSizesByLaterNoise(t *testing.T) {
	cluster := UniformCluster(1, 8)
	run := func(lookahead float64, track bool) (*ONES, *onesCtx) {
		o := NewONES(ONESConfig{Seed: 1, Lookahead: lookahead, MaxAccum: -1})
		if track {
			tr := &noiseTrack{}
			tr.add(0, 0.1)
			tr.add(0.1, 10)
			o.tracks = map[string]*noiseTrack{"a": tr}
		}
		return o, o.newCtx(0, cluster, []JobState{aheadJob()})
	}
	_, off := run(-1, true)
	_, none := run(60, false)
	o, on := run(60, true)
	j := &on.jobs[0]
	if off.jobs[0].vrAhead != 0 || none.jobs[0].vrAhead != 0 {
		t.Fatalf("look-ahead off or without a track: vrAhead %v and %v, want 0", off.jobs[0].vrAhead, none.jobs[0].vrAhead)
	}
	// Its rate on its cap (8 GPUs) takes it past p = 0.1 within 60 s, so
	// the track says 100 × its own variance.
	if math.Abs(j.vrAhead-10) > 1e-9 {
		t.Fatalf("vrAhead %v, want 100 × 0.1", j.vrAhead)
	}
	if !(j.eff > off.jobs[0].eff) || off.jobs[0].eff != none.jobs[0].eff {
		t.Errorf("efficient scale with the look-ahead %d, without %d (no track %d): want it larger with", j.eff, off.jobs[0].eff, none.jobs[0].eff)
	}
	// The batch on 8 GPUs: the look-ahead rates a larger one best, the
	// job's own statistics a smaller one, and the allocation gets that.
	ahead := on.bestFor(0, 1, 8)
	on.own = true
	j.best, j.bestMulti = make([]bestCfg, j.cap+1), make([]bestCfg, j.cap+1)
	own := on.bestFor(0, 1, 8)
	on.own = false
	if !(ahead.local > own.local) {
		t.Fatalf("best per-GPU batch on 8 GPUs: %d with the look-ahead, %d with its own statistics; want the look-ahead's larger", ahead.local, own.local)
	}
	out := map[string]Allocation{"j": {PerNode: []int{8}, LocalBatch: ahead.local}}
	on.repickBatches(out)
	if got := out["j"].LocalBatch * (out["j"].AccumSteps + 1); got != own.local {
		t.Errorf("repicked per-GPU batch %d, want its own statistics' best %d", got, own.local)
	}
	// The second pass: where the track keeps growing past the first
	// pass's point, the distance comes from the rate at the first pass's
	// scale. Here the noise scale grows tenfold per tenth of progress
	// (log-linear between bins 0, 10, 20 and 30), and a 20 s look-ahead
	// ends within that stretch.
	tr := &noiseTrack{}
	for k, phi := range []float64{0.1, 1, 10, 100} {
		tr.add(float64(k)/10, phi)
	}
	o2 := NewONES(ONESConfig{Seed: 1, Lookahead: 20, MaxAccum: -1})
	o2.tracks = map[string]*noiseTrack{"a": tr}
	c2 := o2.newCtx(0, cluster, []JobState{aheadJob()})
	j2 := &c2.jobs[0]
	got := j2.vrAhead
	// Replay the two passes from the job's own statistics: its variance
	// (0.1) times the track's ratio between progress 0 and 20 s at its
	// rate on its cap.
	ratio := func(rate float64) float64 {
		now, _ := tr.at(0)
		ahead, _ := tr.at(20 * rate / 1000)
		return math.Exp(ahead - now)
	}
	j2.vrAhead = 0
	j2.best, j2.bestMulti = make([]bestCfg, j2.cap+1), make([]bestCfg, j2.cap+1)
	first := 0.1 * ratio(c2.bestFor(0, 1, j2.cap).rate)
	j2.vrAhead = first
	j2.best, j2.bestMulti = make([]bestCfg, j2.cap+1), make([]bestCfg, j2.cap+1)
	second := 0.1 * ratio(c2.bestFor(0, 1, j2.cap).rate)
	if !(second > first*1.01) || math.Abs(got-second) > 1e-9*second {
		t.Errorf("vrAhead %v; by hand, first pass %v, second %v: want the second, above the first", got, first, second)
	}

	// A report while running is recorded in its application's track, at
	// its progress bin, normalised to the base batch.
	s := aheadJob()
	s.Progress, s.GradVar, s.Current.LocalBatch = 500, 0.4, 512 // batch 512: twice the base
	o.newCtx(60, cluster, []JobState{s})
	want := math.Log(0.4 * math.Pow(0.5, DefaultNoiseExponent))
	if tr := o.tracks["a"]; tr.n[50] != 1 || math.Abs(tr.sum[50]-want) > 1e-12 {
		t.Errorf("bin 50 holds %d reports summing to %v, want one of %v", tr.n[50], tr.sum[50], want)
	}
}

// A new job with statistics borrowed from its application looks ahead
// from its own progress. A garbled track (noise scales 1e-300 and 1e300) leaves
// the variance finite; a report repeated without progress is taken once.
func TestONESLookaheadEdges(t *testing.T) {
	cluster := UniformCluster(1, 8)
	track := func(pts ...[2]float64) map[string]*noiseTrack {
		tr := &noiseTrack{}
		for _, x := range pts {
			tr.add(x[0], x[1])
		}
		return map[string]*noiseTrack{"a": tr}
	}
	fresh := aheadJob()
	fresh.Running, fresh.Current, fresh.GradSqr, fresh.GradVar = false, Allocation{}, 0, 0

	// Statistics borrowed from its application stand for the new job's
	// own at its start: the growth counts from its progress (0), so a
	// track at 0.1 ahead of 0.1 at 0 gives 100× (from where they were
	// measured, 0.1, it would give none).
	o := NewONES(ONESConfig{Seed: 1, MaxAccum: -1})
	o.tracks = track([2]float64{0, 0.1}, [2]float64{0.1, 10})
	o.startStats["a"] = gradStats{1, 0.1, 256}
	ctx := o.newCtx(0, cluster, []JobState{fresh})
	if j := &ctx.jobs[0]; j.vr != 0.1 || math.Abs(j.vrAhead-10) > 1e-9 {
		t.Errorf("borrowed statistics: vr %v, vrAhead %v; want 0.1 and 10", j.vr, j.vrAhead)
	}

	o = NewONES(ONESConfig{Seed: 1, MaxAccum: -1})
	o.tracks = track([2]float64{0, 1e-300}, [2]float64{0.1, 1e300})
	ctx = o.newCtx(0, cluster, []JobState{aheadJob()})
	j := &ctx.jobs[0]
	if want := 0.1 * 1e6; math.Abs(j.vrAhead-want) > 1e-6*want || math.IsNaN(ctx.bestFor(0, 1, 8).rate) {
		t.Errorf("garbled track: vrAhead %v (want the millionfold bound, %v), rate on 8 GPUs %v", j.vrAhead, want, ctx.bestFor(0, 1, 8).rate)
	}

	o = NewONES(ONESConfig{Seed: 1, MaxAccum: -1})
	s := aheadJob()
	s.Progress = 300
	o.newCtx(0, cluster, []JobState{s})
	o.newCtx(60, cluster, []JobState{s}) // no progress since: not taken again
	s.Progress = 301
	o.newCtx(120, cluster, []JobState{s})
	if n := o.tracks["a"].n[30]; n != 2 {
		t.Errorf("bin 30 holds %d reports, want 2 (the repeat without progress skipped)", n)
	}
}

// With gradient accumulation, the re-picked batch is one the job may run:
// a per-GPU micro-batch within memory, at most MaxAccum extra micro-steps,
// and a global batch in its range (checkAllocations).
func TestONESLookaheadRepickKeepsLimits(t *testing.T) {
	cluster := UniformCluster(1, 8)
	checked := 0
	for _, maxLocal := range []int{7, 40, 100} {
		s := aheadJob()
		s.MaxLocal, s.MinLocal, s.MinBatch = maxLocal, 1, 64
		o := NewONES(ONESConfig{Seed: 1})
		tr := &noiseTrack{}
		tr.add(0, 0.1)
		tr.add(0.1, 1000)
		o.tracks = map[string]*noiseTrack{"a": tr}
		ctx := o.newCtx(0, cluster, []JobState{s})
		j := &ctx.jobs[0]
		if j.vrAhead <= 0 {
			t.Fatalf("max local %d: no look-ahead", maxLocal)
		}
		for _, r := range []int{1, 3, 8} {
			b := ctx.bestFor(0, 1, r)
			if !b.ok {
				continue // too few GPUs for its smallest batch (7 × 6 < 64 on one)
			}
			checked++
			m, acc := j.split(b.local)
			out := map[string]Allocation{"j": {PerNode: []int{r}, LocalBatch: m, AccumSteps: acc}}
			ctx.repickBatches(out)
			a := out["j"]
			if a.LocalBatch < 1 || a.LocalBatch > maxLocal || a.AccumSteps > DefaultMaxAccum || a.NumGPUs() != r {
				t.Errorf("max local %d, %d GPUs: re-picked %+v", maxLocal, r, a)
			}
			if err := checkAllocations(cluster, []JobState{s}, out); err != nil {
				t.Errorf("max local %d, %d GPUs: %v", maxLocal, r, err)
			}
		}
	}
	if checked < 7 {
		t.Errorf("%d allocations checked, want 8", checked)
	}
}
