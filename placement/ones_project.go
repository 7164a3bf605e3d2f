package placement

import (
	"cmp"
	"math"
	"slices"
)

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
	// Copies of the job's t1, minGPUs, eff and spare, so that reallocate's scans
	// read one small contiguous slice rather than the job records.
	t1              float64
	min, eff, spare int
}

// projInit returns the projection's job slice, each entry holding only the
// job's fixed fields.
func (ctx *onesCtx) projInit() []projJob {
	if cap(ctx.pj) < len(ctx.jobs) {
		ctx.pj = make([]projJob, len(ctx.jobs))
	}
	pj := ctx.pj[:len(ctx.jobs)]
	for i := range pj {
		j := &ctx.jobs[i]
		pj[i] = projJob{rem: j.remain, t1: j.t1, min: j.minGPUs, eff: j.eff, spare: j.spare}
	}
	return pj
}

// projLists lists the projection's waiting jobs in ctx.wait (in byT1's
// order, the order reallocate starts them in) and its running jobs in
// ctx.run (by index), so that the projection's scans skip the rest. Both
// drop jobs lazily: a started job from wait, a completed one from run.
func (ctx *onesCtx) projLists(pj []projJob) {
	ctx.wait, ctx.run = ctx.wait[:0], ctx.run[:0]
	for _, i := range ctx.byT1 {
		if p := &pj[i]; !p.done && p.c == 0 {
			ctx.wait = append(ctx.wait, int32(i))
		}
	}
	for i := range pj {
		if p := &pj[i]; !p.done && p.c > 0 {
			ctx.run = append(ctx.run, int32(i))
		}
	}
}

// efficientGPUs returns the most GPUs the projection gives job i (eff):
// its efficientScale up to its cap, by cfg.Marginal (or, with it off,
// cfg.Efficiency) on its predicted goodput; and the most it gives the job
// from GPUs no other job takes (spare, at least eff): its scale by
// cfg.Spare's average rule (ONESConfig.Spare; eff with Spare off). A job
// alone — the only one listed, with no arrivals expected
// (expectsArrivals: also a stream's first calls, before the arrival rule
// keeps GPUs, and a stream an hour past its last arrival) — is scaled by
// cfg.Efficiency's average rule even with Marginal on: the marginal rule
// keeps GPUs that add little for other jobs, and none are known. The live
// loop lists only its running elastic jobs, so there the rule holds
// whenever one of them runs.
func (ctx *onesCtx) efficientGPUs(i int) (eff, spare int) {
	j := &ctx.jobs[i]
	m := max(j.minGPUs, 1)
	b := ctx.bestFor(i, ctx.nodesFor(m), m)
	if !b.ok {
		return m, m
	}
	rate := func(r int) (float64, bool) {
		x := ctx.bestFor(i, ctx.nodesFor(r), r)
		return x.rate, x.ok
	}
	marginal := ctx.o.cfg.Marginal
	if len(ctx.jobs) == 1 && !ctx.expectsArrivals() {
		marginal = 0
	}
	eff = efficientScale(m, j.cap, b.rate, rate, ctx.o.cfg.Efficiency, marginal)
	spare = eff
	if a := ctx.o.cfg.Spare; a > 0 && marginal > 0 {
		spare = max(eff, efficientScale(m, j.cap, b.rate, rate, a, 0))
	}
	return eff, spare
}

// expectsArrivals reports whether ONES expects a stream of jobs to go on
// arriving: jobs were submitted after its first call, and the arrival
// rule keeps GPUs for them (ONESConfig.ArrivalLoad).
func (ctx *onesCtx) expectsArrivals() bool {
	return ctx.arrivalGPUs > 0 && ctx.o.streaming
}

// efficientScale is the efficient scale of a job whose predicted goodput
// on its fewest GPUs, m, is rateM and on r GPUs rate(r) (false: it cannot
// run on r), up to most GPUs. Only counts more than 5 % faster than the
// scale so far are steps (a NaN rate is none). With marginal > 0 a step
// from s to r GPUs is taken when it adds at least marginal × the per-GPU
// goodput on m GPUs for each GPU added, and the scan goes on past a step
// that does not (a count that spans one more node may be slower than the
// one before, and a larger one fast again); otherwise the scale grows
// while the goodput per GPU is at least avg × that on m GPUs.
func efficientScale(m, most int, rateM float64, rate func(r int) (float64, bool), avg, marginal float64) int {
	per := rateM / float64(m)
	best, prev := m, rateM
	for r := m + 1; r <= most; r++ {
		x, ok := rate(r)
		if !ok || !(x > prev*1.05) {
			continue
		}
		if marginal > 0 {
			if !((x-prev)/float64(r-best) >= marginal*per) {
				continue
			}
		} else if !(x/float64(r) >= avg*per) {
			break
		}
		best, prev = r, x
	}
	return best
}

// fitness is the predicted sum of completion times (seconds from now) of
// every active job under candidate g, by a fast projection of the cluster:
// jobs run as g says (a job whose GPUs change first pays the move cost);
// when a job completes, its GPUs (and any g leaves idle; none before
// ReallocAfter) go shortest-remaining-first to waiting jobs and to running
// jobs below their efficient scale, then, with none left waiting, to
// running jobs below their spare scale (ONESConfig.Spare), each paying
// the move cost, a running job only when growing finishes it sooner;
// before ArrivalHorizon, up to
// arrivalGPUs of the GPUs freed go to jobs yet to arrive instead (see
// ONESConfig.ArrivalLoad). So a candidate that speeds up
// a long job now by holding GPUs back from short ones pays for the short
// jobs' delay, and the GPUs a short job releases are counted as going to
// the long ones later. While arrivals are expected each completion time
// is discounted (weigh).
func (ctx *onesCtx) fitness(g *genome) float64 {
	counts, nodes := ctx.shape(g)
	return ctx.fitnessOf(g, counts, nodes, ctx.movedJobs(g, counts))
}

// fitnessOf is fitness given g's shape and moved jobs (score has them).
func (ctx *onesCtx) fitnessOf(g *genome, counts, nodes []int, moved []bool) float64 {
	if ctx.o.cfg.Horizon > 0 {
		return ctx.fitnessShaped(g)
	}
	pj, free, live := ctx.projStart(g, counts, nodes, moved)
	ctx.projLists(pj)
	return ctx.project(pj, free, live, func() (int, float64) { return ctx.nextCompletion(pj) },
		func(free int, t float64) int { return ctx.reallocate(pj, free, t) })
}

// nextCompletion is the running job that completes first in the
// projection, and when (-1, +Inf: none runs), from the running list, which
// it rids of the jobs completed since.
func (ctx *onesCtx) nextCompletion(pj []projJob) (int, float64) {
	k, tn := -1, math.Inf(1)
	n := 0
	for _, i := range ctx.run {
		p := &pj[i]
		if p.done {
			continue
		}
		ctx.run[n] = i
		n++
		if p.fin < tn {
			k, tn = int(i), p.fin
		}
	}
	ctx.run = ctx.run[:n]
	return k, tn
}

// project runs the projection from its starting state (projStart) to the
// last completion and returns the weighed sum of completion times: next
// gives the running job that completes first, and when; realloc hands free
// GPUs out at a time and returns how many are left.
func (ctx *onesCtx) project(pj []projJob, free, live int, next func() (int, float64), realloc func(free int, t float64) int) float64 {
	// No GPU goes out before ReallocAfter (at least the next interval).
	after := ctx.o.cfg.ReallocAfter
	// GPUs freed before the arrival horizon go, up to arrivalGPUs, to jobs
	// not yet submitted (taken), and return at the horizon, when they and
	// any still idle are handed out as at a completion.
	taken, taking, until := 0, ctx.arrivalGPUs > 0, ctx.o.cfg.ArrivalHorizon
	total := 0.0
	last := 0.0 // time of the latest completion so far
	for live > 0 {
		k, tn := next()
		if k < 0 {
			// Nothing runs and nothing can start: charge the rest as
			// if they ran on their minimum, one after another, from
			// the latest completion (tn is still +Inf here).
			tn = last
			for i := range pj {
				if !pj[i].done {
					tn += pj[i].t1
					total += ctx.weigh(tn)
				}
			}
			break
		}
		if taking && tn >= until {
			taking = false
			free += taken
			taken = 0
			free = realloc(free, math.Max(until, after))
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
		free = realloc(free, math.Max(tn, after))
	}
	return total
}

// projStart is the projection's state at now under candidate g: each job's
// GPUs, rate and predicted completion (a moved job first pays the move
// cost), the GPUs g leaves free and how many jobs are still to complete.
func (ctx *onesCtx) projStart(g *genome, counts, nodes []int, moved []bool) (pj []projJob, free, live int) {
	mc := ctx.o.cfg.MoveCost
	pj = ctx.projInit()
	free = len(ctx.nodeOf)
	for i := range pj {
		j := &ctx.jobs[i]
		p := pj[i]
		p.c = counts[i]
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
	return pj, free, live
}

// weigh is what a completion t seconds from now adds to the projection's
// sum: t, or D·ln(1+t/D) while a stream of jobs is expected to go on
// arriving (ONESConfig.Discount): jobs have been submitted after the first
// call (ONES.streaming) and the arrival rule keeps GPUs for more
// (arrivalGPUs). A batch submitted at once is a closed system however many
// of its jobs have completed, and is never discounted.
func (ctx *onesCtx) weigh(t float64) float64 {
	if d := ctx.o.cfg.Discount; d > 0 && ctx.expectsArrivals() {
		return d * math.Log1p(t/d)
	}
	return t
}

// maxGrowTries bounds how many running jobs one reallocation considers
// growing without success before it leaves the rest to waiting jobs (keeps
// one projection near-linear in the number of jobs).
const maxGrowTries = 4

// reallocate hands free GPUs at time t shortest-remaining-first and returns
// how many are left: to waiting jobs and running ones below their
// efficient scale, then, when no job waits, to running ones below their
// spare scale.
func (ctx *onesCtx) reallocate(pj []projJob, free int, t float64) int {
	ctx.stamp++
	stamp := ctx.stamp
	skips := 0
	for free > 0 {
		// The waiting job with the least t1 (the first in wait) that fits
		// in free, then any running job below its efficient scale that
		// would complete sooner; on equal keys the lower index, as one
		// scan of every job in index order would pick.
		k, key := -1, math.Inf(1)
		w := 0
		for x, i := range ctx.wait {
			p := &pj[i]
			if p.c > 0 || p.done {
				continue
			}
			ctx.wait[w] = i
			w++
			if p.skip != stamp && p.min <= free && p.t1 < key {
				k, key = int(i), p.t1
				w += copy(ctx.wait[w:], ctx.wait[x+1:])
				break
			}
		}
		ctx.wait = ctx.wait[:w]
		if skips < maxGrowTries {
			for _, i := range ctx.run {
				p := &pj[i]
				if p.done || p.skip == stamp || p.c >= p.eff {
					continue
				}
				if x := p.fin - t; x < key || (x == key && int(i) < k) {
					k, key = int(i), x
				}
			}
		}
		if k < 0 && len(ctx.wait) == 0 && skips < maxGrowTries {
			// None waits and every running job below its efficient
			// scale was tried (not cut short by maxGrowTries).
			return ctx.grantSpare(pj, free, t, stamp)
		}
		if k < 0 {
			return free
		}
		started := pj[k].c == 0
		var ok bool
		if free, ok = ctx.grant(pj, k, free, pj[k].eff, t, stamp); !ok {
			skips++
			continue
		}
		if started {
			x, _ := slices.BinarySearch(ctx.run, int32(k))
			ctx.run = slices.Insert(ctx.run, x, int32(k))
		}
	}
	return free
}

// grantSpare hands free GPUs at time t, with none waiting and every
// running job at its efficient scale or skipped (none left untried), to the
// running jobs below their spare scale, the soonest done first (by time
// left, fin − t, as reallocate's scan keys them; on equal times the lower
// index), and returns how many are left. A grant changes only its own
// job, so one pass in that order picks what a scan for the soonest after
// each grant would.
func (ctx *onesCtx) grantSpare(pj []projJob, free int, t float64, stamp int) int {
	c := ctx.spare[:0]
	for _, i := range ctx.run {
		if p := &pj[i]; !p.done && p.skip != stamp && p.c >= p.eff && p.c < p.spare {
			c = append(c, i)
		}
	}
	slices.SortFunc(c, func(a, b int32) int {
		if x := cmp.Compare(pj[a].fin-t, pj[b].fin-t); x != 0 {
			return x
		}
		return cmp.Compare(a, b)
	})
	ctx.spare = c
	for _, i := range c {
		if free <= 0 {
			break
		}
		free, _ = ctx.grant(pj, int(i), free, pj[i].spare, t, stamp)
	}
	return free
}

// grant gives job k, waiting or running, top GPUs (its efficient or
// spare scale) at time t (a waiting job at least its fewest GPUs), as far
// as free allows, and returns the GPUs left. It gives nothing, and marks
// the job skipped for this reallocation (stamp), when no batch fits those
// GPUs or when a running job would not complete sooner for the restart.
func (ctx *onesCtx) grant(pj []projJob, k, free, top int, t float64, stamp int) (int, bool) {
	mc := ctx.o.cfg.MoveCost
	p := &pj[k]
	n := min(free, max(top, p.min))
	if p.c > 0 {
		n = min(p.c+free, top)
	}
	b := ctx.bestFor(k, ctx.nodesFor(n), n)
	if !b.ok {
		p.skip = stamp
		return free, false
	}
	rem := p.rem
	if p.c > 0 {
		rem -= p.rate * math.Max(0, t-math.Max(p.from, p.resume))
		rem = math.Max(rem, 0)
	}
	fin := t + mc + rem/math.Max(b.rate, 1e-12)
	if p.c > 0 && fin >= p.fin {
		p.skip = stamp
		return free, false
	}
	free -= n - p.c
	p.c, p.rem, p.from, p.resume, p.rate, p.fin = n, rem, t, t+mc, math.Max(b.rate, 1e-12), fin
	return free, true
}

// seedSRPT builds a candidate the way the projection reallocates: from the
// current allocation (keep) or from nothing, free GPUs go to the jobs with
// the shortest predicted remaining time, each up to its efficient scale,
// then, with none waiting, to running ones up to their spare scale.
func (ctx *onesCtx) seedSRPT(keep bool) *genome {
	pj := ctx.projInit()
	free := len(ctx.nodeOf)
	for i := range pj {
		j := &ctx.jobs[i]
		p := pj[i]
		p.done = j.remain <= 0
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
	ctx.projLists(pj)
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
