package placement

import "math"

// projJob is one job's state in the fitness projection.
type projJob struct {
	c      int     // GPUs held (0: waiting)
	rem    float64 // progress left as of from
	from   float64 // time rem refers to
	resume float64 // time progress (re)starts after a restart
	rate   float64 // progress per second while running
	fin    float64 // predicted completion
	skip   int     // stamp of the reallocation at which growing did not pay
	done   bool
}

// efficientGPUs is the most GPUs the projection gives job i: the largest
// count up to its cap that is predicted at least 5% faster than every
// smaller count while its goodput per GPU is still at least
// cfg.Efficiency of that on its fewest GPUs (a count slower than a smaller
// one, e.g. two half-used nodes, is skipped, not a stop).
func (ctx *onesCtx) efficientGPUs(i int) int {
	j := &ctx.jobs[i]
	m := max(j.minGPUs, 1)
	b := ctx.bestFor(i, ctx.nodesFor(m), m)
	if !b.ok {
		return m
	}
	per := b.rate / float64(m)
	best, prev := m, b.rate
	for r := m + 1; r <= j.cap; r++ {
		x := ctx.bestFor(i, ctx.nodesFor(r), r)
		if !x.ok || x.rate <= prev*1.05 {
			continue
		}
		if x.rate/float64(r) < ctx.o.cfg.Efficiency*per {
			break
		}
		best, prev = r, x.rate
	}
	return best
}

// fitness is the predicted sum of completion times (seconds from now) of
// every active job under candidate g, by a fast projection of the cluster:
// jobs run as g says (a job whose GPUs change first pays the move cost);
// when a job completes, its GPUs (and any g leaves idle, from the next
// interval on) go shortest-remaining-first to waiting jobs and to running
// jobs below their efficient scale, each paying the move cost, a running
// job only when growing finishes it sooner; before ArrivalHorizon, up to
// arrivalGPUs of the GPUs freed go to jobs yet to arrive instead (see
// ONESConfig.ArrivalLoad). So a candidate that speeds up
// a long job now by holding GPUs back from short ones pays for the short
// jobs' delay, and the GPUs a short job releases are counted as going to
// the long ones later.
func (ctx *onesCtx) fitness(g *genome) float64 {
	counts, nodes := ctx.shape(g)
	return ctx.fitnessOf(g, counts, nodes, ctx.movedJobs(g, counts))
}

// fitnessOf is fitness given g's shape and moved jobs (score has them).
func (ctx *onesCtx) fitnessOf(g *genome, counts, nodes []int, moved []bool) float64 {
	if ctx.o.cfg.Horizon > 0 {
		return ctx.fitnessShaped(g)
	}
	mc := ctx.o.cfg.MoveCost
	iv := ctx.o.cfg.Interval
	if cap(ctx.pj) < len(ctx.jobs) {
		ctx.pj = make([]projJob, len(ctx.jobs))
	}
	pj := ctx.pj[:len(ctx.jobs)]
	free := len(ctx.nodeOf)
	live := 0
	for i := range pj {
		j := &ctx.jobs[i]
		p := projJob{c: counts[i], rem: j.remain}
		free -= p.c
		if p.c > 0 {
			p.rate = math.Max(ctx.rate(j, nodes[i], p.c, g.local[i]), 1e-12)
			p.resume = j.restartLeft
			if moved[i] {
				p.resume = mc
			}
			p.fin = p.resume + p.rem/p.rate
		} else if p.rem <= 0 || j.cap == 0 {
			// Done, or never runs (its GPU range's minimum exceeds the
			// cluster or its maximum): no candidate changes when it
			// completes, so it is left out of the sum (counted, it
			// would make every candidate's sum infinite).
			p.done = true
		}
		if !p.done {
			live++
		}
		pj[i] = p
	}
	// GPUs freed before the arrival horizon go, up to arrivalGPUs, to jobs
	// not yet submitted (taken), and return at the horizon, when they and
	// any still idle are handed out as at a completion.
	taken, taking, until := 0, ctx.arrivalGPUs > 0, ctx.o.cfg.ArrivalHorizon
	total := 0.0
	last := 0.0 // time of the latest completion so far
	for live > 0 {
		k, tn := -1, math.Inf(1)
		for i := range pj {
			if p := &pj[i]; !p.done && p.c > 0 && p.fin < tn {
				k, tn = i, p.fin
			}
		}
		if k < 0 {
			// Nothing runs and nothing can start: charge the rest as
			// if they ran on their minimum, one after another, from
			// the latest completion (tn is still +Inf here).
			tn = last
			for i := range pj {
				if !pj[i].done {
					tn += ctx.jobs[i].t1
					total += tn
				}
			}
			break
		}
		if taking && tn >= until {
			taking = false
			free += taken
			taken = 0
			free = ctx.reallocate(pj, free, math.Max(until, iv))
			continue
		}
		p := &pj[k]
		p.done = true
		live--
		total += tn
		last = tn
		free += p.c
		p.c = 0
		if taking && taken < ctx.arrivalGPUs {
			x := min(free, ctx.arrivalGPUs-taken)
			taken += x
			free -= x
		}
		free = ctx.reallocate(pj, free, math.Max(tn, iv))
	}
	return total
}

// maxGrowTries bounds how many running jobs one reallocation considers
// growing without success before it leaves the rest to waiting jobs (keeps
// one projection near-linear in the number of jobs).
const maxGrowTries = 4

// reallocate hands free GPUs at time t shortest-remaining-first and returns
// how many are left.
func (ctx *onesCtx) reallocate(pj []projJob, free int, t float64) int {
	mc := ctx.o.cfg.MoveCost
	ctx.stamp++
	stamp := ctx.stamp
	skips := 0
	for free > 0 {
		k, key := -1, math.Inf(1)
		for i := range pj {
			p := &pj[i]
			if p.done || p.skip == stamp {
				continue
			}
			j := &ctx.jobs[i]
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
			rem -= p.rate * math.Max(0, t-math.Max(p.from, p.resume))
			rem = math.Max(rem, 0)
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

// seedSRPT builds a candidate the way the projection reallocates: from the
// current allocation (keep) or from nothing, free GPUs go to the jobs with
// the shortest predicted remaining time, each up to its efficient scale.
func (ctx *onesCtx) seedSRPT(keep bool) *genome {
	if cap(ctx.pj) < len(ctx.jobs) {
		ctx.pj = make([]projJob, len(ctx.jobs))
	}
	pj := ctx.pj[:len(ctx.jobs)]
	free := len(ctx.nodeOf)
	for i := range pj {
		j := &ctx.jobs[i]
		p := projJob{rem: j.remain, done: j.remain <= 0}
		if keep && j.cur > 0 && j.cur <= j.cap {
			b := ctx.bestFor(i, j.s.Current.NumNodes(), j.cur)
			if b.ok && free >= j.cur {
				p.c, p.rate, p.done = j.cur, math.Max(ctx.rate(j, j.s.Current.NumNodes(), j.cur, max(j.curLocal, 1)), 1e-12), false
				p.fin = p.rem / p.rate
				free -= p.c
			}
		}
		pj[i] = p
	}
	ctx.reallocate(pj, free, 0)
	g := ctx.newGenome()
	k := 0
	for i := range pj {
		for c := pj[i].c; c > 0 && k < len(g.slots); c-- {
			g.slots[k] = int32(i)
			k++
		}
		if pj[i].c > 0 {
			g.local[i] = ctx.bestFor(i, ctx.nodesFor(pj[i].c), pj[i].c).local
			if keep && pj[i].c == ctx.jobs[i].cur {
				g.local[i] = ctx.jobs[i].curLocal
			}
		}
	}
	return g
}
