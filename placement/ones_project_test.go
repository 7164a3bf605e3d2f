package placement

import (
	"cmp"
	"math"
	"slices"
	"testing"
)

// scanFitness is the projection written the plain way, from the same
// starting state: every scan walks all jobs in index order. fitnessOf keeps lists of the waiting and
// running jobs instead; the two must agree to the bit.
func scanFitness(ctx *onesCtx, g *genome) float64 {
	counts, nodes := ctx.shape(g)
	mc, iv := ctx.o.cfg.MoveCost, ctx.o.cfg.Interval
	pj, free, live := ctx.projStart(g, counts, nodes, ctx.movedJobs(g, counts))
	pj = slices.Clone(pj) // fitness reuses ctx's slice
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
			if k < 0 {
				return free
			}
			p, j := &pj[k], &ctx.jobs[k]
			n := min(free, max(j.eff, j.minGPUs))
			if p.c > 0 {
				n = min(p.c+free, j.eff)
			}
			b := ctx.bestFor(k, ctx.nodesFor(n), n)
			if !b.ok {
				p.skip = stamp
				skips++
				continue
			}
			rem := p.rem
			if p.c > 0 {
				rem = math.Max(rem-p.rate*math.Max(0, t-math.Max(p.from, p.resume)), 0)
			}
			fin := t + mc + rem/math.Max(b.rate, 1e-12)
			if p.c > 0 && fin >= p.fin {
				p.skip = stamp
				skips++
				continue
			}
			free -= n - p.c
			p.c, p.rem, p.from, p.resume, p.rate, p.fin = n, rem, t, t+mc, math.Max(b.rate, 1e-12), fin
		}
		return free
	}
	taken, taking, until := 0, ctx.arrivalGPUs > 0, ctx.o.cfg.ArrivalHorizon
	total, last := 0.0, 0.0
	for live > 0 {
		k, tn := -1, math.Inf(1)
		for i := range pj {
			if p := &pj[i]; !p.done && p.c > 0 && p.fin < tn {
				k, tn = i, p.fin
			}
		}
		if k < 0 {
			tn = last
			for i := range pj {
				if !pj[i].done {
					tn += ctx.jobs[i].t1
					total += ctx.weigh(tn)
				}
			}
			break
		}
		if taking && tn >= until {
			taking = false
			free += taken
			taken = 0
			free = realloc(free, math.Max(until, iv))
			continue
		}
		p := &pj[k]
		p.done = true
		live--
		total += ctx.weigh(tn)
		last = tn
		free += p.c
		p.c = 0
		if taking && taken < ctx.arrivalGPUs {
			x := min(free, ctx.arrivalGPUs-taken)
			taken += x
			free -= x
		}
		free = realloc(free, math.Max(tn, iv))
	}
	return total
}

// TestProjectionListsMatchScan checks the projection's waiting and running
// lists against scanFitness on workload 1's 160 jobs, part done, with and
// without GPUs expected to go to arrivals, over seeds, SRPT-built and
// mutated candidates on 16 and 64 GPUs.
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
				slices.SortStableFunc(ctx.byT1, func(a, b int) int { return cmp.Compare(ctx.jobs[a].t1, ctx.jobs[b].t1) })
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

// TestONESDiscountWhileArrivalsExpected: the projection counts a completion
// T seconds away as D·ln(1+T/D) only while arrivals are expected (the
// arrival model gives them GPUs), and as T once none are; Discount none
// leaves it plain either way. One long job alone, so the projection has a
// single completion, the same under both weightings.
func TestONESDiscountWhileArrivalsExpected(t *testing.T) {
	cluster := UniformCluster(1, 8)
	jobs := []JobState{longJob(testStepPrior(), Allocation{PerNode: []int{2}, LocalBatch: 256})}
	fit := func(discount float64, arrivals int) float64 {
		o := NewONES(ONESConfig{Seed: 1, Discount: discount})
		ctx := o.newCtx(0, cluster, jobs)
		ctx.arrivalGPUs = arrivals
		return ctx.fitness(ctx.current())
	}
	for _, arrivals := range []int{0, 2} {
		plain := fit(-1, arrivals)
		if plain <= 0 || math.IsInf(plain, 0) {
			t.Fatalf("%d GPUs for arrivals: the long job completes in %v s", arrivals, plain)
		}
		want := plain
		if arrivals > 0 {
			want = DefaultDiscount * math.Log1p(plain/DefaultDiscount)
		}
		if got := fit(0, arrivals); got != want {
			t.Errorf("%d GPUs for arrivals: a completion %.0f s away counts %.0f, want %.0f", arrivals, plain, got, want)
		}
	}
}
