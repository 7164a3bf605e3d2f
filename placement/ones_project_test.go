package placement

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// scanFitness is the projection with its scans written the plain way:
// the next completion and each grant's job are found by walking all jobs
// in index order. fitnessOf keeps lists of the waiting and running jobs
// instead; the two must agree to the bit. The rest (the starting state,
// the event loop, a grant itself) is the projection's own.
func scanFitness(ctx *onesCtx, g *genome) float64 {
	counts, nodes := ctx.shape(g)
	pj, free, live := ctx.projStart(g, counts, nodes, ctx.movedJobs(g, counts))
	pj = slices.Clone(pj) // fitness reuses ctx's slice
	next := func() (int, float64) {
		k, tn := -1, math.Inf(1)
		for i := range pj {
			if p := &pj[i]; !p.done && p.c > 0 && p.fin < tn {
				k, tn = i, p.fin
			}
		}
		return k, tn
	}
	stamp := 0
	realloc := func(free int, t float64) int {
		stamp++
		skips := 0
		for free > 0 {
			k, key := -1, math.Inf(1)
			for i := range pj {
				p, j := &pj[i], &ctx.jobs[i]
				if p.done || p.skip == stamp {
					continue
				}
				var x float64
				switch {
				case p.c == 0 && j.minGPUs <= free:
					x = j.t1
				case p.c > 0 && p.c < j.eff && skips < maxGrowTries:
					x = p.fin - t
				default:
					continue
				}
				if x < key {
					k, key = i, x
				}
			}
			top, spare := 0, false
			if k < 0 && skips < maxGrowTries && !slices.ContainsFunc(pj, func(p projJob) bool { return !p.done && p.c == 0 }) {
				for i := range pj {
					p := &pj[i]
					if p.done || p.skip == stamp || p.c == 0 || p.c < p.eff || p.c >= p.spare {
						continue
					}
					if x := p.fin - t; x < key {
						k, key = i, x
					}
				}
				if k >= 0 {
					top, spare = pj[k].spare, true
				}
			}
			if k < 0 {
				return free
			}
			if !spare {
				top = pj[k].eff
			}
			var ok bool
			if free, ok = ctx.grant(pj, k, free, top, t, stamp); !ok && !spare {
				skips++
			}
		}
		return free
	}
	return ctx.project(pj, free, live, next, realloc)
}

// sortByT1 redoes newCtx's order of the jobs by t1 after a test changed
// some: ties by index, as the plain scan breaks them.
func sortByT1(ctx *onesCtx) {
	for i := range ctx.byT1 {
		ctx.byT1[i] = i
	}
	slices.SortStableFunc(ctx.byT1, func(a, b int) int { return cmp.Compare(ctx.jobs[a].t1, ctx.jobs[b].t1) })
}

// TestProjectionListsMatchScan checks the projection's waiting and running
// lists against scanFitness on workload 1's 160 jobs, part done, with and
// without GPUs expected to go to arrivals, over SRPT-built and mutated
// candidates on 16 and 64 GPUs (one seed each).
func TestProjectionListsMatchScan(t *testing.T) {
	for _, gpus := range []int{16, 64} {
		for _, never := range []bool{false, true} {
			cluster, jobs := onesBenchState(t, gpus)
			for i := range jobs {
				if i%7 == 0 {
					jobs[i].Progress = jobs[i].Target // complete: left out
				}
			}
			o := NewONES(ONESConfig{Seed: int64(gpus)})
			ctx := o.newCtx(0, cluster, jobs)
			if never {
				// Jobs predicted never to complete on their fewest
				// GPUs: the plain scan never starts them (no key is
				// below +Inf).
				for i := 3; i < len(ctx.jobs); i += 11 {
					ctx.jobs[i].t1 = math.Inf(1)
				}
				sortByT1(ctx)
			}
			for _, arrivals := range []int{0, gpus / 4} {
				ctx.arrivalGPUs = arrivals
				gs := []*genome{ctx.seedSRPT(false), ctx.seedSRPT(true), ctx.current(), ctx.newGenome()}
				for k := 0; k < 200; k++ {
					g := ctx.clone(gs[k%len(gs)])
					ctx.mutate(g)
					ctx.repair(g)
					gs = append(gs, g)
				}
				for k, g := range gs {
					want := scanFitness(ctx, g)
					if got := ctx.fitness(g); got != want {
						t.Fatalf("%d GPUs, never-completing jobs %v, %d for arrivals, candidate %d: fitness %v, the plain scan %v", gpus, never, arrivals, k, got, want)
					}
				}
			}
		}
	}
}

// randomProjCtx is a Schedule call's state on a small random cluster (2-5
// nodes of 4 GPUs) with 4-23 of base's jobs at random progress (a quarter
// of them needing 2-5 GPUs if minGPUs), after two real calls started and
// placed some.
func randomProjCtx(rng *rand.Rand, base []JobState, minGPUs bool, cfg ONESConfig) *onesCtx {
	cluster := UniformCluster(2+rng.Intn(4), 4)
	jobs := make([]JobState, 4+rng.Intn(20))
	for i := range jobs {
		jobs[i] = base[rng.Intn(len(base))]
		jobs[i].ID = fmt.Sprintf("%s-%d", jobs[i].ID, i)
		jobs[i].Progress = jobs[i].Target * rng.Float64()
		if minGPUs && rng.Intn(4) == 0 {
			jobs[i].MinGPUs = 2 + rng.Intn(4)
		} else if minGPUs && rng.Intn(3) == 0 {
			// A fixed batch: only GPU counts that divide it run it, so
			// a start on the GPUs free can fail and succeed later on more.
			b := 12 * max(jobs[i].MinLocal, 1) * (1 + rng.Intn(4))
			jobs[i].MinBatch, jobs[i].MaxBatch, jobs[i].Batch = b, b, b
		}
	}
	o := NewONES(cfg)
	for k := 0; k < 2; k++ {
		out := o.Schedule(float64(60*k), cluster, jobs)
		for i := range jobs {
			jobs[i].Current = out[jobs[i].ID]
		}
	}
	return o.newCtx(120, cluster, jobs)
}

// TestProjectionListsMatchScanRandom compares the lists with the plain scan
// on small random clusters and job sets: jobs whose fewest GPUs exceed the
// GPUs free, predicted times rounded so that waiting jobs tie, a short
// arrival horizon, jobs restarting after two real calls; and checks that
// the shortest-first seeds do not depend on what the lists held before.
func TestProjectionListsMatchScanRandom(t *testing.T) {
	_, base := onesBenchState(t, 64)
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 150; trial++ {
		ctx := randomProjCtx(rng, base, true, ONESConfig{Seed: int64(trial), ArrivalHorizon: 300 + 600*rng.Float64()})
		if trial%2 == 0 {
			for i := range ctx.jobs {
				ctx.jobs[i].t1 = math.Round(ctx.jobs[i].t1/2000) * 2000
			}
			sortByT1(ctx)
		}
		for _, arrivals := range []int{0, 1 + rng.Intn(4)} {
			ctx.arrivalGPUs = arrivals
			gs := []*genome{ctx.current(), ctx.seedSRPT(true), ctx.seedSRPT(false), ctx.newGenome()}
			for k := 0; k < 30; k++ {
				g := ctx.clone(gs[rng.Intn(len(gs))])
				ctx.mutate(g)
				if k%3 != 0 {
					ctx.repair(g)
				}
				gs = append(gs, g)
			}
			for k, g := range gs {
				if got, want := ctx.fitness(g), scanFitness(ctx, g); got != want {
					t.Fatalf("trial %d, %d for arrivals, candidate %d: fitness %v, the plain scan %v", trial, arrivals, k, got, want)
				}
			}
			for _, keep := range []bool{false, true} {
				// Each projection leaves the lists as it ended.
				ctx.fitness(gs[0])
				a := ctx.seedSRPT(keep)
				ctx.fitness(gs[len(gs)-1])
				if b := ctx.seedSRPT(keep); !slices.Equal(a.slots, b.slots) || !slices.Equal(a.local, b.local) {
					t.Fatalf("trial %d: seedSRPT(%v) depends on the lists a projection left", trial, keep)
				}
			}
			// From nothing, the job predicted shortest that can run
			// starts first.
			g := ctx.seedSRPT(false)
			for _, i := range ctx.byT1 {
				if j := &ctx.jobs[i]; j.remain > 0 && j.cap > 0 && j.minGPUs <= len(ctx.nodeOf) && !math.IsInf(j.t1, 1) {
					if !slices.Contains(g.slots, int32(i)) {
						t.Fatalf("trial %d: seedSRPT(false) left out job %d, the shortest that can run", trial, i)
					}
					break
				}
			}
		}
	}
}

// TestProjectionListsTieGoesToLowerIndex: when a waiting job's predicted
// time equals a running job's remaining time at a reallocation, the lower
// index gets the GPUs, as in the plain scan. Such ties are built on small
// random clusters: at the projection's first completion a running job that
// may grow ties with a later-indexed waiting job, and every other waiting
// job is made much longer.
func TestProjectionListsTieGoesToLowerIndex(t *testing.T) {
	_, base := onesBenchState(t, 64)
	rng := rand.New(rand.NewSource(5))
	ties := 0
	for trial := 0; trial < 200; trial++ {
		ctx := randomProjCtx(rng, base, false, ONESConfig{Seed: int64(trial), Interval: 1})
		t1 := make([]float64, len(ctx.jobs))
		for i := range ctx.jobs {
			t1[i] = ctx.jobs[i].t1
		}
		gs := []*genome{ctx.current(), ctx.seedSRPT(true), ctx.seedSRPT(false)}
		for k := 0; k < 10; k++ {
			g := ctx.clone(gs[rng.Intn(len(gs))])
			ctx.mutate(g)
			ctx.repair(g)
			gs = append(gs, g)
		}
		for _, g := range gs {
			counts, nodes := ctx.shape(g)
			pj, _, _ := ctx.projStart(g, counts, nodes, ctx.movedJobs(g, counts))
			pj = slices.Clone(pj)
			first, tn := -1, math.Inf(1)
			for i := range pj {
				if !pj[i].done && pj[i].c > 0 && pj[i].fin < tn {
					first, tn = i, pj[i].fin
				}
			}
			if first < 0 {
				continue
			}
			at := math.Max(tn, ctx.o.cfg.Interval)
			for r := range pj {
				if r == first || pj[r].done || pj[r].c == 0 || pj[r].c >= ctx.jobs[r].eff {
					continue
				}
				w := r + 1
				for w < len(pj) && (pj[w].done || pj[w].c > 0) {
					w++
				}
				if w == len(pj) {
					continue
				}
				for i := range ctx.jobs {
					ctx.jobs[i].t1 = t1[i]
					if counts[i] == 0 && i != w {
						ctx.jobs[i].t1 += 1e6
					}
				}
				ctx.jobs[w].t1 = pj[r].fin - at
				sortByT1(ctx)
				ties++
				if got, want := ctx.fitness(g), scanFitness(ctx, g); got != want {
					t.Fatalf("trial %d: running job %d tied with waiting job %d: fitness %v, the plain scan %v", trial, r, w, got, want)
				}
				break
			}
			for i := range ctx.jobs {
				ctx.jobs[i].t1 = t1[i]
			}
			sortByT1(ctx)
		}
	}
	if ties == 0 {
		t.Fatal("no tie was built")
	}
}

// TestONESDiscountWhileArrivalsExpected: the projection counts a completion
// T seconds away as D·ln(1+T/D) only while a stream of jobs is expected to
// go on arriving (jobs submitted after the first call, and the arrival rule
// giving arrivals GPUs), and as T otherwise: with no GPUs kept for
// arrivals, or for a batch submitted at once however many GPUs the rule
// keeps. Discount none leaves it plain either way. One long job alone, so
// the projection has a single completion, the same under both weightings.
func TestONESDiscountWhileArrivalsExpected(t *testing.T) {
	cluster := UniformCluster(1, 8)
	jobs := []JobState{longJob(testStepPrior(), Allocation{PerNode: []int{2}, LocalBatch: 256})}
	fit := func(discount float64, arrivals int, streaming bool) float64 {
		o := NewONES(ONESConfig{Seed: 1, Discount: discount})
		ctx := o.newCtx(0, cluster, jobs)
		ctx.arrivalGPUs, o.streaming = arrivals, streaming
		return ctx.fitness(ctx.current())
	}
	const d = 7200.0
	for _, c := range []struct {
		arrivals   int
		streaming  bool
		discounted bool
	}{{0, false, false}, {0, true, false}, {2, false, false}, {2, true, true}} {
		plain := fit(-1, c.arrivals, c.streaming)
		if plain <= 0 || math.IsInf(plain, 0) {
			t.Fatalf("%+v: the long job completes in %v s", c, plain)
		}
		want := plain
		if c.discounted {
			want = d * math.Log1p(plain/d)
		}
		if got := fit(d, c.arrivals, c.streaming); got != want {
			t.Errorf("%+v: a completion %.0f s away counts %.0f, want %.0f", c, plain, got, want)
		}
	}
	if got := NewONES(ONESConfig{Discount: 1e-310}).Config().Discount; got != 1 {
		t.Errorf("a discount of 1e-310 s is taken as %g s, want 1 (smaller overflows)", got)
	}
	if got := NewONES(ONESConfig{}).Config().Discount; got != DefaultDiscount {
		t.Errorf("default discount %g, want %g", got, float64(DefaultDiscount))
	}
}

// efficientScale: the marginal rule stops where a job's speed-up flattens,
// passes a dip at a node boundary, and with marginal off the average rule
// applies as before.
func TestEfficientScale(t *testing.T) {
	curve := func(f func(r int) float64) func(int) (float64, bool) {
		return func(r int) (float64, bool) { return f(r), true }
	}
	// Linear to 8 GPUs (10 per GPU), then half a unit per extra GPU.
	flat := curve(func(r int) float64 {
		if r <= 8 {
			return 10 * float64(r)
		}
		return 80 + 0.5*float64(r-8)
	})
	// Fast on one node (4 GPUs), `middle` across two to fifteen, fast on 16.
	dipTo := func(middle float64) func(int) (float64, bool) {
		return curve(func(r int) float64 {
			switch {
			case r <= 4:
				return []float64{0, 10, 19, 27, 34}[r]
			case r < 16:
				return middle
			case r == 16:
				return 100
			}
			return 101
		})
	}
	dip := dipTo(20)
	linear := curve(func(r int) float64 { return 10 * float64(r) })
	// The dip's middle just above 34 × 1.05: 5 GPUs are a step by speed
	// but add 1.9 < 2, so the marginal rule must skip them and go on.
	shallow := dipTo(35.9)
	// The flat curve with no prediction (NaN) for 9 and 10 GPUs: those
	// counts are not steps (taken as steps, the next count would be
	// compared with NaN and taken too: 11 GPUs).
	gap := func(r int) (float64, bool) {
		if r == 9 || r == 10 {
			return math.NaN(), true
		}
		return flat(r)
	}
	for _, tc := range []struct {
		name          string
		rate          func(int) (float64, bool)
		avg, marginal float64
		want          int
	}{
		// Each GPU past 8 adds 0.5 < 0.2 × 10, however many are added.
		{"flat, marginal", flat, 0.2, 0.2, 8},
		// Steps (each > 5 % faster than the last): 17 GPUs (84.5, 4.97 per
		// GPU), 26 (89, 3.42), 35 (93.5, 2.67), 45 (98.5, 2.19), then 55
		// (103.5, 1.88 < 2): the average rule stops at 45.
		{"flat, average", flat, 0.2, 0, 45},
		// 4 → 16 adds 66 over 12 GPUs, 5.5 each ≥ 2: the dip is passed.
		{"dip, marginal", dip, 0.2, 0.2, 16},
		// At 0.6 (6 per GPU added) the step to 16 falls short.
		{"dip, marginal 0.6", dip, 0.2, 0.6, 4},
		// 62 to 64 GPUs are not 5 % faster than 61 (610 × 1.05 = 640.5).
		{"linear, marginal", linear, 0.2, 0.2, 61},
		{"linear, average", linear, 0.2, 0, 61},
		{"shallow dip, marginal", shallow, 0.2, 0.2, 16},
		// With marginal on, the average rule does not apply as well (at
		// 0.9 it stops at 3 GPUs: 34 on 4 is 8.5 per GPU, below 9).
		{"dip, marginal, strict average ignored", dip, 0.9, 0.2, 16},
		{"NaN for 9 and 10 GPUs", gap, 0.2, 0.2, 8},
		// A count the job cannot run on is skipped, not a stop.
		{"linear, 3 to 63 impossible", func(r int) (float64, bool) { return 10 * float64(r), r < 3 || r == 64 }, 0.2, 0.2, 64},
	} {
		r1, _ := tc.rate(1)
		if got := efficientScale(1, 64, r1, tc.rate, tc.avg, tc.marginal); got != tc.want {
			t.Errorf("%s: scale %d, want %d", tc.name, got, tc.want)
		}
	}
	// From a job's fewest GPUs m > 1: per-GPU goodput is rate(m)/m (10,
	// not 80: at 16 per GPU added no step of the linear curve would pass).
	if got := efficientScale(8, 64, 80, flat, 0.2, 0.2); got != 8 {
		t.Errorf("flat from 8 GPUs: scale %d, want 8", got)
	}
	if got := efficientScale(8, 64, 80, linear, 0.2, 0.2); got != 61 {
		t.Errorf("linear from 8 GPUs: scale %d, want 61", got)
	}
}

// TestONESAloneScalesByAverage: a job alone — the only one listed, with no
// arrivals expected — is projected onto the GPUs the average rule allows
// (cfg.Efficiency), not only up to the marginal scale, which keeps GPUs
// that add little for other jobs; with a second job listed, or with
// arrivals expected, the marginal rule applies. The job, at one batch of
// 256, has reported 1–8 GPUs on one node, and its sync makes its speed-up
// flatten, so the two rules differ, and both stop below its cap of 8.
func TestONESAloneScalesByAverage(t *testing.T) {
	lone := flatteningJob("j", 1)
	other := lone
	other.ID, other.Running, other.Current = "k", false, Allocation{}
	cluster := UniformCluster(1, 8)
	eff := func(cfg ONESConfig, jobs ...JobState) (*ONES, *onesCtx, int) {
		cfg.Seed = 1
		o := NewONES(cfg)
		ctx := o.newCtx(0, cluster, jobs)
		return o, ctx, ctx.jobs[0].eff
	}
	o, ctx, alone := eff(ONESConfig{}, lone)
	_, sctx, shared := eff(ONESConfig{}, lone, other)
	_, actx, average := eff(ONESConfig{Marginal: -1}, lone, other)
	if !(shared < alone) || alone != average || !(alone < ctx.jobs[0].cap) {
		t.Fatalf("efficient scale alone %d, beside another job %d (the average rule there: %d), cap %d; want the marginal scale below the average rule's, alone the average rule's, and that below the cap", alone, shared, average, ctx.jobs[0].cap)
	}
	// The spare scale is the average rule's at Spare (Efficiency's 0.2
	// by default) beside another job, and the efficient scale where that
	// is already the average rule's.
	if got := sctx.jobs[0].spare; got != average {
		t.Errorf("spare scale beside another job %d, want the average rule's %d", got, average)
	}
	if got := ctx.jobs[0].spare; got != alone {
		t.Errorf("spare scale alone %d, want its efficient scale %d", got, alone)
	}
	if got := actx.jobs[0].spare; got != average {
		t.Errorf("spare scale with the marginal rule off %d, want the efficient scale %d", got, average)
	}
	if _, nctx, _ := eff(ONESConfig{Spare: -1}, lone, other); nctx.jobs[0].spare != shared {
		t.Errorf("spare scale with Spare off %d, want the efficient scale %d", nctx.jobs[0].spare, shared)
	}
	// The same job alone while arrivals are expected keeps the marginal
	// scale; GPUs kept for arrivals with no stream (a batch) do not count.
	ctx.arrivalGPUs, o.streaming = 2, true
	if got, _ := ctx.efficientGPUs(0); got != shared {
		t.Errorf("alone with arrivals expected: %d GPUs, want the marginal scale %d", got, shared)
	}
	ctx.arrivalGPUs, o.streaming = 2, false
	if got, _ := ctx.efficientGPUs(0); got != alone {
		t.Errorf("alone in a batch: %d GPUs, want the average rule's %d", got, alone)
	}
}

// flatteningJob is the job of TestONESAloneScalesByAverage and
// TestONESProjectionSpare: one batch of 256, reported on 1–8 GPUs of one
// node, its sync making its speed-up flatten, so that its marginal scale
// lies below its average-rule scale, and both below its cap of 8; running
// on cur GPUs of node 0.
func flatteningJob(id string, cur int) JobState {
	j := longJob(nil, Allocation{PerNode: []int{cur}, LocalBatch: 256 / cur})
	j.ID, j.Observed, j.MaxBatch = id, nil, 256
	for _, r := range []int{1, 2, 4, 8} {
		sync := 0.0
		if r > 1 {
			sync = 0.12
		}
		j.Observed = append(j.Observed, Observation{Nodes: 1, GPUs: r, LocalBatch: 256 / r, StepTime: 0.002 + 0.0008*float64(256/r) + sync, SyncTime: sync})
	}
	return j
}

// TestONESProjectionSpare: two such jobs run on one node, each at its
// marginal (efficient) scale, and the rest of the node is idle: enough for
// one of them to reach its spare scale (the average rule's at Spare), not
// both. With none waiting, the projection's first reallocation hands the
// idle GPUs to the one that completes sooner up to its spare scale (the
// one GPU left would not speed the other up: its step on two GPUs is
// slower than on one); with Spare off they stay idle; with a job waiting
// that needs more GPUs than are idle (on a node of 8), they are kept for
// it.
func TestONESProjectionSpare(t *testing.T) {
	probe := NewONES(ONESConfig{Seed: 1}).newCtx(0, UniformCluster(1, 16), []JobState{flatteningJob("a", 1), flatteningJob("b", 1)})
	eff, spare := probe.jobs[0].eff, probe.jobs[0].spare
	gpus := eff + spare + 1 // room for one at its spare scale, and one GPU more
	if !(eff+1 < spare) || gpus > 16 {
		t.Fatalf("efficient scale %d, spare scale %d: want the first at least two below the second, and both on a node of 16", eff, spare)
	}
	// The projection's state after its first reallocation, at ReallocAfter.
	realloc := func(cfg ONESConfig, gpus int, jobs ...JobState) []projJob {
		cfg.Seed = 1
		ctx := NewONES(cfg).newCtx(0, UniformCluster(1, gpus), jobs)
		cur := ctx.current()
		counts, nodes := ctx.shape(cur)
		pj, free, _ := ctx.projStart(cur, counts, nodes, ctx.movedJobs(cur, counts))
		ctx.projLists(pj)
		ctx.reallocate(pj, free, ctx.o.cfg.ReallocAfter)
		return slices.Clone(pj)
	}
	a, b := flatteningJob("a", eff), flatteningJob("b", eff)
	for _, sooner := range []int{0, 1} {
		x, y := a, b
		if sooner == 0 {
			y.Target = x.Target * 2
		} else {
			x.Target = y.Target * 2
		}
		pj := realloc(ONESConfig{}, gpus, x, y)
		want := []int{eff, eff}
		want[sooner] = spare
		if got := []int{pj[0].c, pj[1].c}; !slices.Equal(got, want) {
			t.Errorf("with none waiting, job %d sooner done: the jobs hold %v GPUs after the first reallocation, want %v (the sooner done at its spare scale)", sooner, got, want)
		}
	}
	pj := realloc(ONESConfig{Spare: -1}, gpus, a, b)
	if got := []int{pj[0].c, pj[1].c}; got[0] != eff || got[1] != eff {
		t.Errorf("with Spare off the jobs hold %v GPUs, want both still at their efficient scale %d", got, eff)
	}
	w := flatteningJob("w", 1)
	w.Running, w.Current, w.MinGPUs = false, Allocation{}, 8
	if 8-2*eff >= 8 || 8-2*eff <= spare-eff {
		t.Fatalf("efficient scale %d, spare scale %d: want the 8-GPU node's idle GPUs too few for the waiting job and enough to grow a job", eff, spare)
	}
	pj = realloc(ONESConfig{}, 8, a, b, w)
	if got := []int{pj[0].c, pj[1].c, pj[2].c}; got[0] != eff || got[1] != eff || got[2] != 0 {
		t.Errorf("with a job waiting for %d GPUs the jobs hold %v, want the two at their efficient scale %d and the waiting job none", w.MinGPUs, got, eff)
	}
}

// TestONESReallocAfter: no GPU goes out in the projection before
// ReallocAfter. A short job on a 4-GPU node completes first; a job waiting
// for the node starts on its GPUs at the completion when that is after the
// hand-out delay, at the delay when before it, so that the sum of
// completions differs by exactly the difference in start; a delay below
// the interval is the interval, and the default is
// DefaultReallocIntervals intervals.
func TestONESReallocAfter(t *testing.T) {
	for _, c := range []struct{ set, want float64 }{{0, DefaultReallocIntervals * 60}, {-1, 60}, {30, 60}, {1000, 1000}} {
		if got := NewONES(ONESConfig{ReallocAfter: c.set}).cfg.ReallocAfter; got != c.want {
			t.Errorf("ReallocAfter %v: %v s, want %v s", c.set, got, c.want)
		}
	}
	short := fillIdleJob("short", 4)
	waiting := fillIdleJob("waiting", 0)
	waiting.MinGPUs = 4
	sum := func(after float64) (fit, done float64) {
		ctx := NewONES(ONESConfig{Seed: 1, ReallocAfter: after}).newCtx(0, UniformCluster(1, 4), []JobState{short, waiting})
		cur := ctx.current()
		counts, nodes := ctx.shape(cur)
		pj, _, _ := ctx.projStart(cur, counts, nodes, ctx.movedJobs(cur, counts))
		done = pj[0].fin
		return ctx.fitness(cur), done
	}
	base, done := sum(1e9) // nothing goes out before the last completion but this one: the start is at 1e9
	for _, after := range []float64{60, done / 2, 2 * done} {
		fit, _ := sum(after)
		start := math.Max(after, done)
		if want := base - (1e9 - start); math.Abs(fit-want) > 1e-3 {
			t.Errorf("hand-out delay %.0f s, short job done at %.0f s: sum %.3f s, want %.3f s (the waiting job starting at %.0f s)", after, done, fit, want, start)
		}
	}
}
