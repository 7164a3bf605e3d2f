package placement

import "math"

// aheadBins is how finely noiseTrack divides a job's training: by
// hundredths of its target progress.
const aheadBins = 100

// noiseTrack is what ONES has seen of one application's gradient noise
// scale as its jobs train: by progress bin (the fraction of the target
// reached), the mean of the log of the reported noise scale, normalised
// to the base batch by the noise exponent (ONESConfig.NoiseExponent), and
// how many reports it holds.
type noiseTrack struct {
	sum [aheadBins]float64
	n   [aheadBins]int
}

func aheadBin(p float64) int {
	return min(max(int(p*aheadBins), 0), aheadBins-1)
}

// add records a report of noise scale phi (normalised) at progress
// fraction p.
func (t *noiseTrack) add(p, phi float64) {
	k := aheadBin(p)
	t.sum[k] += math.Log(phi)
	t.n[k]++
}

// at returns the mean log noise scale at progress fraction p: its bin's,
// or interpolated linearly between the nearest bins with reports on
// either side, or the nearest one's where there is one side only; false
// when the track holds no report.
func (t *noiseTrack) at(p float64) (float64, bool) {
	k := aheadBin(p)
	if t.n[k] > 0 {
		return t.sum[k] / float64(t.n[k]), true
	}
	lo, hi := k-1, k+1
	for lo >= 0 && t.n[lo] == 0 {
		lo--
	}
	for hi < aheadBins && t.n[hi] == 0 {
		hi++
	}
	switch {
	case lo >= 0 && hi < aheadBins:
		a, b := t.sum[lo]/float64(t.n[lo]), t.sum[hi]/float64(t.n[hi])
		return a + (b-a)*float64(k-lo)/float64(hi-lo), true
	case lo >= 0:
		return t.sum[lo] / float64(t.n[lo]), true
	case hi < aheadBins:
		return t.sum[hi] / float64(t.n[hi]), true
	}
	return 0, false
}

// normNoise is the noise scale of gradient statistics sqr, vr measured at
// global batch b, carried to the base batch as rate carries it between
// batches ((base/b)^α); 0 if it is not finite and positive.
func (o *ONES) normNoise(sqr, vr, b, base float64) float64 {
	if !(sqr > 0 && vr > 0 && b > 0 && base > 0) {
		return 0
	}
	phi := vr / sqr
	if a := o.cfg.NoiseExponent; a > 0 {
		phi *= math.Pow(base/b, a)
	}
	if math.IsInf(phi, 0) || math.IsNaN(phi) || phi <= 0 {
		return 0
	}
	return phi
}

// trackNoise records a running job's latest report in its application's
// noise track, unless the job has made no progress since the report
// taken there at an earlier call (a job restarting a whole interval
// reports the statistics of its previous batch again). tracked collects,
// for this call, each job's progress at its latest report taken.
func (o *ONES) trackNoise(s *JobState, statsBatch float64, tracked map[string]float64) {
	if o.cfg.Lookahead <= 0 || s.SampleProgress || !(s.Target > 0) {
		return
	}
	last, seen := o.tracked[s.ID]
	if seen {
		tracked[s.ID] = last
		if !(s.Progress > last) {
			return
		}
	}
	phi := o.normNoise(s.GradSqr, s.GradVar, statsBatch, float64(max(s.BaseBatch, 1)))
	if phi <= 0 {
		return
	}
	if o.tracks == nil {
		o.tracks = map[string]*noiseTrack{}
	}
	t := o.tracks[s.App]
	if t == nil {
		t = &noiseTrack{}
		o.tracks[s.App] = t
	}
	t.add(s.Progress/s.Target, phi)
	tracked[s.ID] = s.Progress
}

// lookAhead sets job i's variance for sizing (vrAhead): its own times
// the growth of the noise scale its application's track shows between
// the job's progress and where it will be after Lookahead seconds at its
// predicted rate on its cap (ONESConfig.Lookahead). So a job whose noise
// scale grows fast (cifar10 gains ten epochs an interval on 16 GPUs, and
// its noise scale grows with them) is not sized by the statistics of the
// epochs it is about to leave. The search scores candidates, batches
// included, at that scale; the chosen allocation's batch is then picked
// with the job's own statistics (repickBatches).
//
// Statistics a new job borrows from its application (newCtx) stand for
// its own at its start, as they do everywhere else, though the job that
// reported them had trained an interval (cifar10: 1–2 % of its target):
// counting the growth from there instead cost +5.8 / +16.5 / −1.5 s on
// workloads 1, 2 and 4 (seeds 1–27), as it sizes new jobs smaller.
func (ctx *onesCtx) lookAhead(i int) {
	o := ctx.o
	j := &ctx.jobs[i]
	s := j.s
	if o.cfg.Lookahead <= 0 || j.cap <= 0 || s.SampleProgress || !(s.Target > 0) || !(j.sqr > 0 && j.vr > 0) {
		return
	}
	t := o.tracks[s.App]
	if t == nil {
		return
	}
	p := s.Progress / s.Target
	from, ok := t.at(p)
	if !ok {
		return
	}
	// Two passes: the first takes the distance from its rate at its own
	// statistics, which understates it where the noise scale grows (the
	// rate grows with it); the second from its rate at the first pass's
	// scale. (A third changed workloads 1, 2 and 4 within noise; the
	// second gained 21 s on workload 2, seeds 1–54.)
	for pass := 0; pass < 2; pass++ {
		b := ctx.bestFor(i, ctx.nodesFor(j.cap), j.cap)
		if !b.ok || !(b.rate > 0) {
			return
		}
		ahead, _ := t.at(math.Min(p+o.cfg.Lookahead*b.rate/s.Target, 1))
		// At most a millionfold either way: a garbled report must not
		// make the variance infinite (and the gain NaN).
		v := j.vr * math.Exp(min(max(ahead-from, -maxAheadLog), maxAheadLog))
		if v == j.vr {
			v = 0 // no growth: its own
		}
		if v == j.vrAhead {
			return
		}
		j.vrAhead = v
		// The tables were filled at the scale before.
		j.best = make([]bestCfg, j.cap+1)
		j.bestMulti = make([]bestCfg, j.cap+1)
	}
}

// maxAheadLog bounds the log of lookAhead's growth factor.
var maxAheadLog = math.Log(1e6)

// repickBatches re-chooses, for each job sized with a look-ahead noise
// scale, the per-GPU batch of its allocation in out by its own
// statistics: the look-ahead scale rates the large batches the job will
// use well later, not the one that trains it fastest now.
func (ctx *onesCtx) repickBatches(out map[string]Allocation) {
	ctx.own = true
	defer func() { ctx.own = false }()
	for i := range ctx.jobs {
		j := &ctx.jobs[i]
		a, ok := out[j.s.ID]
		if !ok || j.vrAhead <= 0 {
			continue
		}
		_, bl, _ := ctx.searchLocal(j, len(a.Counts()), a.NumGPUs(), j.curLocal, a.LocalBatch*(a.AccumSteps+1))
		if bl > 0 {
			a.LocalBatch, a.AccumSteps = j.split(bl)
			out[j.s.ID] = a
		}
	}
}
