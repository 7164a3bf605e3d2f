package placement

import (
	"maps"
	"math"
	"math/rand"
	"slices"
	"sort"
)

// ONESConfig configures the ONES policy. Zero values take the defaults.
type ONESConfig struct {
	// Seed drives the evolutionary search.
	Seed int64
	// Memory bounds the per-GPU batch of each application; nil uses each
	// job's MaxLocal.
	Memory MemoryOracle
	// MoveCost is the seconds a started, resized or moved job makes no
	// progress (0: DefaultMoveCost; negative: none, changes are free).
	MoveCost float64
	// Interval is the scheduling interval in seconds (default 60): a GPU left
	// idle now can be used by a queued job one interval later at the earliest.
	Interval float64
	// Population (16), Crossover probability (0.5) and Mutation rate (0.3);
	// a negative Crossover or Mutation is none.
	Population int
	// Generations is how many generations one Schedule call runs (default
	// 1, one per scheduling interval as in the method).
	Generations int
	Crossover   float64
	Mutation    float64
	// Explore bounds how fast a job may scale out: at most Explore × the
	// most GPUs it has reported an iteration time on (default 2; a new job
	// starts on one GPU), so that decisions rest on measured throughput.
	Explore int
	// Horizon, if set (seconds), selects the earlier shaped fitness: a
	// static snapshot in which a job predicted to complete in T seconds
	// counts H·ln(1+T/H). Default 0: the projected sum of completion times.
	Horizon float64
	// Efficiency (default 0.2) bounds the scale the fitness projection and
	// the shortest-first seeds give a job: the most GPUs at which its
	// predicted goodput per GPU is still this fraction of that on its
	// fewest GPUs. Only with Marginal off, or for a job alone (the only
	// one listed, with no arrivals expected: efficientGPUs).
	Efficiency float64
	// Marginal (default DefaultMarginal; negative: none, Efficiency's rule
	// instead) bounds that scale by the marginal goodput: the most GPUs
	// reached by steps, each more than 5 % faster than the scale before
	// it, that add at least this fraction of the per-GPU goodput on the
	// fewest GPUs for each GPU they add; a count that does not is skipped,
	// not a stop. For Marginal ≤ 1 every scale it reaches keeps the average
	// goodput per GPU at least this fraction of that on the fewest GPUs,
	// but it may pass a count where Efficiency's rule would stop, and it
	// stops adding GPUs where a job's speed-up flattens, however high its
	// average still is. A job alone gets Efficiency's rule instead
	// (efficientGPUs).
	//
	// The default was 0.2 until the projection gained the spare scale
	// (Spare) and the hand-out delay (ReallocAfter); with them, 0.3 took
	// 4 ± 4 / 2 ± 11 / 0 ± 7 / 24 ± 6 s off workloads 1–4 (seeds 1–27,
	// hand-out delay 3 intervals), and 0.15, 0.4 and 0.5 added 9–35 s to
	// workload 1.
	Marginal float64
	// Spare (default DefaultSpare; negative: none) is the average rule's
	// fraction (as Efficiency's) for the spare scale: once no job waits in
	// the projection and every running job holds its efficient scale, the
	// GPUs left go shortest-remaining-first to running jobs up to the most
	// GPUs at which their goodput per GPU is still this fraction of that
	// on their fewest, each only if it completes sooner for the restart.
	// The marginal rule keeps GPUs for other jobs; with none to keep them
	// for it left them idle in the projection, so that a candidate growing
	// a job into GPUs nobody else would use looked no better than one
	// leaving them idle (seeds 1–27, the marginal rule at 0.2: 5 ± 5 /
	// 22 ± 12 / 3 ± 6 / 26 ± 9 s off workloads 1–4). With Marginal off,
	// or for a job alone (efficientGPUs), the efficient scale is already
	// the average rule's, and the spare scale is the efficient scale.
	Spare float64
	// ReallocAfter (seconds; default DefaultReallocIntervals × Interval;
	// negative or below Interval: Interval) is the earliest time from now
	// at which the projection hands GPUs out: those a completion frees
	// before it, and those the candidate leaves idle, go out then. The
	// projection's reallocation is instant and ideal, and the search it
	// stands for is neither (a GPU freed waits for the next call, a
	// change must pay its charge, a job just changed is held): with GPUs
	// handed out at the first completion, no earlier than the next
	// interval, a candidate that put idle GPUs to use now was rated
	// barely better than one leaving them to the next completion a minute
	// away, call after call (workload 1, seed 1: cifar10-14 sat on one GPU
	// for 14 minutes beside 5–22 idle ones). Seeds 1–27, with Spare and
	// Marginal 0.3, against 3 intervals: 6 intervals −9 / −2 / −2 / −2 s
	// on workloads 1–4, 8 intervals −1 / −18 / −14 / −8, 10 intervals
	// −9 / −26 / −14 / +6, 20 intervals +28 / +41 / −9 / +31, 60
	// intervals +57 to +311. Eight, the middle of the plateau, was chosen
	// before its run on seeds 28–54: −4.5 / −13.5 / −16.3 / −12.4 s there
	// against 3.
	ReallocAfter float64
	// Hold (default DefaultHold; negative: none) is how many scheduling
	// intervals a job keeps the GPUs it was last started, resized or moved
	// on before the search may change them (counted from the first call
	// that sees them). Every change stops the job for MoveCost on all its
	// GPUs, and the projection, which cannot foresee arrivals, would
	// otherwise grow a job into GPUs that an arrival takes back a minute
	// later, or grow a job the call after it started. An interval shorter
	// than MoveCost counts as MoveCost, so that a job is not moved again
	// before its restart is over (with decisions much closer together
	// than a restart takes, jobs were restarted in turn for ever). GPUs
	// ONES did not give the job (the live coordinator's first placement)
	// are held too, unless the job has a step-time prior, holds fewer
	// GPUs than it asks for, and the idle GPUs' share covers the rest.
	//
	// GPUs ONES gives a job that held none at the call before (its start,
	// or its resumption after a preemption) are held one interval
	// (MoveCost when that is longer) from the first call that sees them,
	// not Hold: the start was decided on the least the job's reports say
	// of it, and the call after may correct it.
	// Holding them Hold intervals cost workloads 1 and 2 11 ± 3 and 16 ± 7
	// s (64 GPUs, seeds 1–54) and 32 GPUs 28–49 s on three of four
	// workloads (seeds 1–12), against 8 ± 7 s gained on workload 4. A job
	// grown, shrunk or moved keeps the full hold: without it after a
	// growth, 32 GPUs lost 80–190 s.
	Hold int
	// Reserve (default DefaultReserve; negative: none) is how many GPUs
	// repair keeps back for the next arrivals when it hands a candidate's
	// idle GPUs to the jobs it restarts anyway (fillIdle): a job that took
	// them would restart again to give them back. Candidates may still
	// use them (the search grows jobs one GPU at a time). It applies
	// once a job has been submitted after the first call: jobs submitted
	// together, with none since, have no arrivals to keep GPUs for (the
	// six-job mix on 4 × 4 left 3 GPUs idle while its longest job sat on
	// one).
	Reserve int
	// Hysteresis (default 4; negative: none): every candidate is charged
	// Hysteresis × MoveCost per running job it moves or resizes, on top of
	// its projected sum of completion times (score), so a change is made
	// only if its predicted saving exceeds the charge and prediction noise
	// does not restart jobs back and forth. A job the candidate preempts
	// is not charged (its wait is in the projection), nor one with a
	// step-time prior on GPUs ONES did not choose (onesJob.uncharged).
	// A job that only grows into GPUs nobody waits for is charged
	// min(Hysteresis, 1) × MoveCost (score).
	// The search ranks candidates by the charged sum, and polish undoes,
	// one job at a time, the changes of the best candidate that do not
	// pay for their charge.
	Hysteresis float64
	// NoEffLearning turns off learning each application's correction of
	// the noise-scale efficiency from its jobs' reported progress.
	NoEffLearning bool
	// MaxAccum (default DefaultMaxAccum; negative: none) is the most
	// extra gradient-accumulation micro-steps per iteration ONES may give
	// a job: its batch search then reaches per-GPU batches up to
	// (MaxAccum+1) × what fits in memory in one step, which synchronise
	// gradients once per iteration, so a job on few GPUs can train at
	// the large batch its late epochs use well.
	MaxAccum int
	// NoiseExponent α (default DefaultNoiseExponent; negative: 0, the
	// noise scale a job reports holds at every batch): predicting progress
	// at global batch b from gradient statistics measured at batch b_m,
	// the noise scale is taken to be Bnoise(b_m)·(b/b_m)^α. The measured
	// applications' noise scale is not batch-independent, as the model of
	// GainFromStats assumes: it grows with the batch it is measured at,
	// roughly as b^0.2 to b^0.6 late in training (imagenet, cifar10), and
	// their calibrated progress at large batches is up to 1.6–1.8× what
	// statistics at the base batch predict. With α = 0 a larger batch
	// than the job runs is underrated, so never tried, and the learned
	// correction (effCorr) only fixes batches that ran.
	NoiseExponent float64
	// ArrivalLoad (default DefaultArrivalLoad; negative: none) is the share
	// of the arrival stream's expected GPU demand that the fitness
	// projection keeps away from the active jobs: as running jobs complete
	// within ArrivalHorizon seconds from now, up to ArrivalLoad × λ × W of
	// the GPUs they free go to jobs not yet submitted instead of to the
	// active ones (λ: arrivals per second over the last hour; W: the median
	// GPU-seconds of recently completed jobs; at most half the cluster).
	// The projection cannot otherwise see arrivals: it handed a long job
	// every GPU the short ones free, so growing it into GPUs idle now looked
	// barely better than waiting for the next completion (while arrivals
	// took those GPUs in turn), and the projection overrated the long job's
	// later share of the cluster.
	ArrivalLoad float64
	// ArrivalHorizon (seconds, default DefaultArrivalHorizon) is how long
	// the projection expects arrivals to keep coming at the rate seen.
	ArrivalHorizon float64
	// Discount (seconds, default DefaultDiscount; negative: none): while
	// ONES expects a stream of jobs to go on arriving (jobs were submitted
	// after its first call, and ArrivalLoad gives arrivals GPUs: none once
	// an hour passes without one), the projection counts a job completing
	// T seconds from now as D·ln(1+T/D) rather than T. Arrivals it does
	// not see will delay a far completion, and later decisions will revise
	// the plan it assumes, so the farther a completion, the less the
	// candidate chosen now decides it. Otherwise (the stream has stopped,
	// or the jobs came as one batch) the active jobs are all there is and
	// the sum is plain. The earlier shaped fitness (Horizon) ignores it.
	// A value below one second is taken as one second.
	Discount float64
	// Lookahead (seconds; default Interval, the time to the next
	// decision; negative: none): each job is sized by its own noise scale
	// times the growth its application's reports by progress show over
	// this many seconds of training at its predicted rate on its cap
	// (lookAhead); the search rates candidates so, and the chosen
	// allocation's batch is then picked with the job's own statistics
	// (repickBatches).
	Lookahead float64
}

// DefaultHold is ONESConfig.Hold's default.
const DefaultHold = 2

// DefaultReserve is ONESConfig.Reserve's default.
const DefaultReserve = 2

// DefaultMarginal is ONESConfig.Marginal's default.
const DefaultMarginal = 0.3

// DefaultSpare is ONESConfig.Spare's default.
const DefaultSpare = 0.2

// DefaultReallocIntervals is ONESConfig.ReallocAfter's default, in
// scheduling intervals.
const DefaultReallocIntervals = 8

// DefaultNoiseExponent is ONESConfig.NoiseExponent's default.
const DefaultNoiseExponent = 0.3

// DefaultMaxAccum is ONESConfig.MaxAccum's default.
const DefaultMaxAccum = 5

// DefaultArrivalLoad is ONESConfig.ArrivalLoad's default.
const DefaultArrivalLoad = 0.5

// DefaultArrivalHorizon is ONESConfig.ArrivalHorizon's default (seconds).
const DefaultArrivalHorizon = 3600

// DefaultDiscount is ONESConfig.Discount's default (seconds).
const DefaultDiscount = 30000

// arrivalWindow is how far back (seconds) ONES counts arrivals to estimate
// their rate; before it has seen that long, it counts over the time since
// the first arrival, and at least over arrivalMinSpan.
const (
	arrivalWindow  = 3600
	arrivalMinSpan = 600
	// maxDoneWork is how many recently completed jobs' GPU-seconds ONES
	// keeps to estimate the work of an arrival.
	maxDoneWork = 1024
)

// ONES is the online evolutionary search over GPU assignment and batch size
// of every elastic job (SC'21, arXiv 2108.03645), as described in DESIGN.md.
//
// Genome: one slot per GPU holding a job or nothing, plus each job's per-GPU
// batch size; a job's GPU count is the number of slots it holds. Each call to
// Schedule runs one generation: the population (16) carried over from the
// previous interval, adapted to arrivals and completions and joined by the
// current allocation and six seeds (greedy by two gains and
// shortest-remaining-first, each from the current allocation and from
// nothing), produces 16 children by tournament selection, two-point
// crossover of the slot arrays (probability 0.5) and mutation (each operator
// fires with probability 0.3: grow a job by a GPU, shrink one, hand a running
// job's GPUs to a queued one, halve or double a batch, re-optimise a batch);
// the best 16 of parents and children survive. Every candidate is repaired
// and reordered to minimise moves: a job given its GPUs less than Hold
// intervals ago keeps them, a job whose GPU count is unchanged keeps
// exactly the GPUs it holds, and only resized or new jobs are packed into
// the remaining GPUs (fewest nodes first).
//
// Fitness is the predicted sum of completion times of all active jobs,
// queued ones included (lower is better), which is what average JCT
// measures, by a projection (see fitness): jobs run as the candidate says,
// and each GPU a completing job frees goes shortest-remaining-first to
// waiting jobs and to running jobs below their efficient scale. Repair sets
// each job's batch to the goodput-optimal one for its GPUs and hands idle
// GPUs to waiting jobs, then, but for Reserve of them once jobs arrive
// after the first call, to the jobs the candidate restarts anyway
// (fillIdle). Candidates are ranked by this sum plus Hysteresis × MoveCost
// per running job they move (score); the best is polished (its changes
// that do not pay undone one job at a time) and replaces the current
// allocation only if its charged sum is lower.
//
// Goodput = progress per iteration / iteration time. Iteration time comes
// from a ThroughputModel fitted to the job's reported iteration times,
// followed as they change (learn);
// progress per iteration from the gradient noise scale (GainFromStats), so a
// larger batch is not free progress, times a per-application correction by
// batch learned from the progress jobs report (effCorr). Batch sizes never exceed what fits in
// memory (Memory) or the job's range.
type ONES struct {
	cfg    ONESConfig
	rng    *rand.Rand
	pop    []savedGenome
	obs    map[string]map[[3]int]*stepEst // by application, by (nodes, GPUs, local batch)
	models map[string]modelEntry          // by application
	// sharedGPUs is, by application, the most GPUs any of its jobs
	// reported a shared observation on (Observation.Shared): counted for
	// the exploration bound, not fitted.
	sharedGPUs map[string]int
	// priors holds, by application, the latest JobState.Prior given.
	priors map[string]ThroughputModel
	// reports is, by job, what learn remembers of its reports by shape;
	// call counts learn's calls (a job not in the latest is forgotten).
	reports map[string]*jobReports
	call    int
	// last is each job's state at the previous call; eff the learned
	// statistical-efficiency correction by application (see learnEff).
	last map[string]lastSeen
	eff  map[string]*effCorr
	// since is, by running job, its allocation, when a call first saw its
	// GPU set (see ONESConfig.Hold) and its latest (re)start (see
	// onesJob.restartLeft).
	since map[string]heldSince
	// startStats is, by application, the first gradient statistics of
	// the job whose first report (made while it ran) came most recently,
	// and the global batch they were measured at; stated is the listed
	// jobs whose first report was taken. A job that has reported none
	// yet is predicted from its application's (newCtx).
	startStats map[string]gradStats
	stated     map[string]bool
	// gave is, by job, the GPU counts Schedule gave it since the call that
	// first saw its current GPUs (a live move may land rounds after the
	// call that ordered it, with other decisions between). GPUs of a count
	// ONES did not give (the live coordinator places a new job by memory
	// before any round) are someone else's choice: see ONESConfig.Hold.
	gave map[string][]int
	// The arrival stream (ONESConfig.ArrivalLoad): prevWork is each job's
	// attained GPU-seconds at the previous call, by id (a job gone since
	// has completed, unless Left said otherwise); away the jobs Left said
	// were re-queued (not new arrivals when they return), with their work
	// when last listed (counted if Left says they completed away); arrivals the
	// arrival times within arrivalWindow, ascending; firstArrival the
	// earliest seen and nArrived how many; doneWork the GPU-seconds of the
	// latest completed jobs.
	prevWork map[string]float64
	away     map[string]float64
	// prevCall is the previous call's time (called: there was one).
	prevCall     float64
	called       bool
	arrivals     []float64
	firstArrival float64
	nArrived     int
	doneWork     []float64
	// streaming: a job was submitted after the first call, at firstCall
	// (Reserve holds GPUs back only then).
	streaming bool
	firstCall float64
	// tracks is, by application, its jobs' noise scale by progress
	// (ONESConfig.Lookahead); tracked, by listed job, its progress at its
	// latest report taken there.
	tracks  map[string]*noiseTrack
	tracked map[string]float64
}

// gradStats is a report of gradient statistics (squared norm and
// variance) and the global batch it was measured at.
type gradStats struct{ sqr, vr, batch float64 }

// heldSince is what ONES saw of a running job's allocation: cur since
// the call at t; restarts, the job's Restarts count then, and restartAt,
// when its latest (re)start began (the earliest it can have: the call
// before the one that saw it, or its arrival; -Inf: it ran before the
// first call).
type heldSince struct {
	cur  Allocation
	t    float64
	mine bool // its count is one ONES gave it before it got these GPUs (ONES.gave)
	// before is the allocation it held before cur, and beforeMine that
	// allocation's mine.
	before     Allocation
	beforeMine bool
	restarts   int
	restartAt  float64
}

// lastSeen is what the previous call saw of a job.
type lastSeen struct {
	now, progress float64
	restarts      int
	cur           Allocation
}

// effCorr is an application's learned correction of the noise-scale
// prediction of progress per iteration, by global batch: the ratio of the
// progress its jobs made in steady intervals to what GainFromStats
// predicted for the iterations they ran (a real job can report both its
// progress and its iteration time). The simulator's measured applications
// make progress at their validation runs' pace, up to 58% faster per
// iteration than the gradient statistics predict (yolov3's largest
// batches). A batch counts once effMinIntervals such intervals were seen
// at it (single intervals are noisy); batch, k hold those, ascending, with
// the mean ratio at each; pending counts every batch's intervals.
type effCorr struct {
	batch   []int
	k       []float64
	pending map[int]effSum
}

type effSum struct {
	sum float64
	n   int
}

// effMinIntervals is how many steady intervals at a batch its correction
// needs before the policy uses it.
const effMinIntervals = 5

// at is the correction at global batch b: interpolated linearly in log b
// between learned batches; below the smallest, that one's; above the
// largest, the slope in log b of the two largest continued (at least 0.5);
// 1 when none is learned.
func (e *effCorr) at(b float64) float64 {
	if e == nil || len(e.batch) == 0 {
		return 1
	}

	k := func(i int) float64 { return e.k[i] }
	i := sort.Search(len(e.batch), func(x int) bool { return float64(e.batch[x]) >= b })
	if i == 0 {
		return k(0)
	}
	if i == len(e.batch) {
		i--
		if i > 0 {
			// Beyond the largest learned batch: continue the slope in log b.
			b0, b1 := float64(e.batch[i-1]), float64(e.batch[i])
			sl := (k(i) - k(i-1)) / math.Log(b1/b0)
			return math.Max(k(i)+sl*math.Log(b/b1), 0.5)
		}
		return k(i)
	}
	b0, b1 := float64(e.batch[i-1]), float64(e.batch[i])
	f := math.Log(b/b0) / math.Log(b1/b0)
	return k(i-1) + f*(k(i)-k(i-1))
}

// add records one steady interval's ratio k at global batch b.
func (e *effCorr) add(b int, k float64) {
	p := e.pending[b]
	p.sum += k
	p.n++
	e.pending[b] = p
	if p.n < effMinIntervals {
		return
	}
	i := sort.SearchInts(e.batch, b)
	if i == len(e.batch) || e.batch[i] != b {
		e.batch = append(e.batch[:i], append([]int{b}, e.batch[i:]...)...)
		e.k = append(e.k[:i], append([]float64{0}, e.k[i:]...)...)
	}
	e.k[i] = p.sum / float64(p.n)
}

// learnEff learns each application's efficiency correction from the jobs
// that ran unchanged since the previous call (same GPUs and batch, no
// restart): progress made / (iterations run at the observed iteration time
// × GainFromStats at the job's latest gradient statistics).
func (o *ONES) learnEff(now float64, jobs []JobState) {
	next := make(map[string]lastSeen, len(jobs))
	for i := range jobs {
		s := &jobs[i]
		next[s.ID] = lastSeen{now: now, progress: s.Progress, restarts: s.Restarts, cur: s.Current}
		p, ok := o.last[s.ID]
		if !ok || s.Current.Empty() || p.restarts != s.Restarts || !p.cur.SameGPUs(s.Current) ||
			p.cur.LocalBatch != s.Current.LocalBatch || p.cur.AccumSteps != s.Current.AccumSteps || now <= p.now {
			continue
		}
		c := s.Current.Counts()
		it := 0.0
		for _, ob := range s.Observed {
			if ob.Nodes == len(c) && ob.GPUs == s.Current.NumGPUs() && ob.LocalBatch == s.Current.LocalBatch {
				it = AccumIterTime(ob.StepTime, ob.SyncTime, s.Current.AccumSteps)
			}
		}
		b := s.Current.GlobalBatch()
		if it <= 0 || b <= 0 || s.SampleProgress || (s.GradSqr <= 0 && s.GradVar <= 0) {
			continue
		}
		pred := (now - p.now) / it * GainFromStats(s.GradSqr, s.GradVar, float64(b), float64(max(s.BaseBatch, 1)))
		if d := s.Progress - p.progress; pred > 0 && d > 0 {
			e := o.eff[s.App]
			if e == nil {
				e = &effCorr{pending: map[int]effSum{}}
				o.eff[s.App] = e
			}
			e.add(b, d/pred)
		}
	}
	o.last = next
}

type savedGenome struct {
	slots []string       // job id per GPU, "" empty
	local map[string]int // per-GPU batch per job id
}

type modelEntry struct {
	m       ThroughputModel
	maxGPUs int
	// seen holds the reported step times by (nodes, GPUs), ascending in
	// the local batch: a configuration seen before is predicted from its
	// own reports, not from the fitted model.
	seen map[[2]int][]Observation
	// step is what the reports say of compute and overlap (stepShape).
	step stepShape
}

// orDefault sets *v to def when it is zero or negative (unset).
func orDefault[T int | float64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// orDefaultOrNone sets *v to def when it is zero (unset) and to zero when
// it is negative (off).
func orDefaultOrNone[T int | float64](v *T, def T) {
	switch {
	case *v == 0:
		*v = def
	case *v < 0:
		*v = 0
	}
}

// Config is the policy's configuration, defaults filled in.
func (o *ONES) Config() ONESConfig { return o.cfg }

// NewONES returns an ONES policy.
func NewONES(cfg ONESConfig) *ONES {
	orDefaultOrNone(&cfg.Hold, DefaultHold)
	orDefaultOrNone(&cfg.Reserve, DefaultReserve)
	orDefaultOrNone(&cfg.MoveCost, DefaultMoveCost)
	orDefault(&cfg.Interval, 60)
	orDefault(&cfg.Population, 16)
	orDefault(&cfg.Generations, 1)
	orDefaultOrNone(&cfg.Crossover, 0.5)
	orDefaultOrNone(&cfg.Mutation, 0.3)
	orDefault(&cfg.Explore, 2)
	orDefault(&cfg.Efficiency, 0.2)
	orDefaultOrNone(&cfg.Marginal, DefaultMarginal)
	orDefaultOrNone(&cfg.Spare, DefaultSpare)
	switch {
	case cfg.ReallocAfter == 0:
		cfg.ReallocAfter = DefaultReallocIntervals * cfg.Interval
	case cfg.ReallocAfter < cfg.Interval:
		cfg.ReallocAfter = cfg.Interval
	}
	orDefaultOrNone(&cfg.Hysteresis, 4)
	orDefaultOrNone(&cfg.ArrivalLoad, DefaultArrivalLoad)
	orDefault(&cfg.ArrivalHorizon, DefaultArrivalHorizon)
	orDefaultOrNone(&cfg.Discount, DefaultDiscount)
	if cfg.Discount > 0 {
		cfg.Discount = max(cfg.Discount, 1) // D·ln(1+T/D) overflows for tiny D
	}
	orDefaultOrNone(&cfg.MaxAccum, DefaultMaxAccum)
	orDefaultOrNone(&cfg.Lookahead, cfg.Interval)
	switch {
	case cfg.NoiseExponent == 0:
		cfg.NoiseExponent = DefaultNoiseExponent
	case cfg.NoiseExponent < 0:
		cfg.NoiseExponent = 0
	}
	return &ONES{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)),
		obs: map[string]map[[3]int]*stepEst{}, reports: map[string]*jobReports{}, models: map[string]modelEntry{}, sharedGPUs: map[string]int{}, priors: map[string]ThroughputModel{}, eff: map[string]*effCorr{}, since: map[string]heldSince{}, away: map[string]float64{},
		startStats: map[string]gradStats{}, stated: map[string]bool{}}
}

// Name implements Policy.
func (*ONES) Name() string { return "ones" }

// onesJob is what one Schedule call knows about one job.
type onesJob struct {
	// vrAhead, if positive, is the gradient variance rate sizes the job
	// by (lookAhead); vr is its own.
	vrAhead             float64
	s                   *JobState
	remain              float64 // progress left
	model               ThroughputModel
	seen                map[[2]int][]Observation
	step                stepShape
	sqr, vr, priorNoise float64
	statsBatch          float64  // global batch sqr and vr were measured at (0: unknown)
	effK                *effCorr // learned efficiency correction (nil: none)
	minLocal, maxLocal  int
	cap                 int // most GPUs allowed now, at most MaxGPUs (0: it cannot run)
	minGPUs             int // fewest GPUs on which the smallest batch fits, at least MinGPUs
	cur                 int // GPUs held now
	// restartLeft is how long the job, if it keeps its GPUs, still makes
	// no progress from a (re)start the simulator or the live loop applied
	// after an earlier call (non-zero only when the interval is shorter
	// than MoveCost).
	restartLeft float64
	held        bool      // keeps its GPUs this call (ONESConfig.Hold)
	uncharged   bool      // changing its GPUs is not charged the hysteresis (score)
	curLocal    int       // samples per GPU per iteration (micro-batch × micro-steps)
	micro       int       // most samples per GPU in one micro-step (memory)
	steps       int       // most micro-steps per iteration (MaxAccum+1)
	t1          float64   // predicted time on one GPU at its best batch
	eff         int       // most GPUs the projection hands the job (efficient scale)
	spare       int       // most it hands the job from GPUs nobody else takes (Spare)
	best        []bestCfg // by GPU count (single-node shape), lazily
	bestMulti   []bestCfg
}

type bestCfg struct {
	local int
	rate  float64
	ok    bool
}

// onesCtx is one Schedule call's state.
type onesCtx struct {
	// own: rate uses each job's own statistics, not vrAhead.
	own      bool
	o        *ONES
	now      float64
	jobs     []onesJob
	nodeGPUs []int
	nodeOf   []int // slot → node
	first    []int // node → first slot
	gpn      int   // most GPUs on a node
	heap     []float64
	pj       []projJob
	wait     []int32 // the projection's waiting jobs (projLists)
	run      []int32 // the projection's running jobs (projLists)
	spare    []int32 // grantSpare's candidates
	stamp    int
	// arrivalGPUs is how many GPUs the projection expects jobs not yet
	// submitted to take (ONESConfig.ArrivalLoad).
	arrivalGPUs int
	byT1        []int // job indices by predicted time on their fewest GPUs
}

// genome is a candidate during one call; slots index ctx.jobs.
type genome struct {
	slots []int32
	local []int
	fit   float64
}

// Schedule implements Policy.
func (o *ONES) Schedule(now float64, cluster ClusterState, jobs []JobState) map[string]Allocation {
	ctx := o.newCtx(now, cluster, jobs)
	if len(ctx.jobs) == 0 || len(ctx.nodeOf) == 0 {
		o.pop, o.gave = nil, nil
		return map[string]Allocation{}
	}
	// Parents: the carried-over population plus seeds.
	var pop []*genome
	cur := ctx.current()
	pop = append(pop, cur, ctx.greedy(true, gainShaped), ctx.greedy(false, gainShaped),
		ctx.greedy(true, gainRate), ctx.greedy(false, gainRate), ctx.seedSRPT(true), ctx.seedSRPT(false))
	for _, sg := range o.pop {
		pop = append(pop, ctx.restore(sg))
	}
	for _, g := range pop {
		ctx.repair(g)
		g.fit = ctx.score(g)
	}
	pop = ctx.survivors(pop, o.cfg.Population)
	for gen := 0; gen < o.cfg.Generations; gen++ {
		children := make([]*genome, 0, o.cfg.Population)
		for len(children) < o.cfg.Population {
			a, b := ctx.tournament(pop), ctx.tournament(pop)
			c := ctx.clone(a)
			if o.rng.Float64() < o.cfg.Crossover {
				ctx.crossover(c, b)
			}
			ctx.mutate(c)
			ctx.repair(c)
			c.fit = ctx.score(c)
			children = append(children, c)
		}
		pop = ctx.survivors(append(pop, children...), o.cfg.Population)
	}
	// The best candidate often bundles a change that pays with changes
	// that do not (a job near its end shrunk to start a new one); polish
	// undoes those, and carries the result over.
	if pop[0] != cur {
		pop[0] = ctx.polish(pop[0], cur)
	}
	o.pop = o.pop[:0]
	for _, g := range pop {
		o.pop = append(o.pop, ctx.save(g))
	}
	best := pop[0]
	if !(best.fit < cur.fit) {
		// Its saving does not exceed the restarts' charge (score).
		best = cur
	}
	out := ctx.allocations(best)
	ctx.repickBatches(out)
	gave := make(map[string][]int, len(ctx.jobs))
	for i := range ctx.jobs {
		id := ctx.jobs[i].s.ID
		g := o.gave[id]
		if n := out[id].NumGPUs(); n > 0 && !slices.Contains(g, n) {
			g = append(g, n)
		}
		if g != nil {
			gave[id] = g
		}
	}
	o.gave = gave
	return out
}

func (o *ONES) newCtx(now float64, cluster ClusterState, jobs []JobState) *onesCtx {
	jobs = fittingCurrent(cluster, jobs)
	ctx := &onesCtx{o: o, now: now}
	for i, nd := range cluster.Nodes {
		ctx.first = append(ctx.first, len(ctx.nodeOf))
		ctx.nodeGPUs = append(ctx.nodeGPUs, nd.GPUs)
		ctx.gpn = max(ctx.gpn, nd.GPUs)
		for k := 0; k < nd.GPUs; k++ {
			ctx.nodeOf = append(ctx.nodeOf, i)
		}
	}
	total := len(ctx.nodeOf)
	// Before the jobs' efficient scales below: efficientGPUs reads it
	// (expectsArrivals).
	ctx.arrivalGPUs = o.arrivalGPUs(now, total, jobs)
	o.learn(jobs)
	if !o.cfg.NoEffLearning {
		o.learnEff(now, jobs)
	}
	ctx.jobs = make([]onesJob, len(jobs))
	ages := make([]float64, len(jobs))
	stated := make(map[string]bool, len(jobs))
	tracked := make(map[string]float64, len(jobs))
	since := make(map[string]heldSince, len(jobs))
	for i := range jobs {
		s := &jobs[i]
		j := onesJob{s: s, remain: math.Max(s.Target-s.Progress, 0), sqr: s.GradSqr, vr: s.GradVar}
		var age float64
		if !s.Current.Empty() {
			h, ok := o.since[s.ID]
			moved := !ok || !h.cur.SameGPUs(s.Current)
			if moved {
				nh := heldSince{cur: s.Current, t: now, restartAt: math.Inf(-1), mine: slices.Contains(o.gave[s.ID], s.Current.NumGPUs())}
				if ok {
					nh.before, nh.beforeMine = h.cur, h.mine
					// Back on the GPUs it held before (the live loop
					// showed a move in flight that was then refused):
					// they are ONES's choice if they were then. The
					// counts given since are for the refused move.
					nh.mine = nh.mine || (h.beforeMine && h.before.SameGPUs(s.Current))
				}
				h = nh
				delete(o.gave, s.ID) // counts given from now on are for its next change
			}
			if o.called && (moved || s.Restarts > h.restarts) {
				// (Re)started since the previous call (new GPUs, or a
				// restart in place): at that call at the earliest (it
				// applies its allocations then).
				h.restartAt = math.Max(o.prevCall, math.Min(s.Arrival, now))
			}
			h.restarts = s.Restarts
			since[s.ID] = h
			age = now - h.t
			j.restartLeft = math.Max(0, o.cfg.MoveCost-(now-h.restartAt))
		}
		// A running job's statistics were measured over the interval it
		// just ran, at its current batch.
		j.statsBatch = float64(s.Current.GlobalBatch())
		if s.GradSqr > 0 || s.GradVar > 0 {
			// Its first report made while it runs (so the batch is
			// known) is its application's latest start. A job missing
			// from a call and listed again counts as new here: the
			// simulator lists every job at every call, and the live
			// loop reports no statistics.
			if !o.stated[s.ID] && j.statsBatch > 0 {
				o.startStats[s.App] = gradStats{s.GradSqr, s.GradVar, j.statsBatch}
			}
			if j.statsBatch > 0 {
				o.trackNoise(s, j.statsBatch, tracked)
			}
			if o.stated[s.ID] || j.statsBatch > 0 {
				stated[s.ID] = true
			}
		} else if st, ok := o.startStats[s.App]; ok {
			// No statistics of its own yet (a new job): its
			// application's earlier jobs' first ones, at the batch
			// they were measured at, rather than the prior noise
			// scale below, a guess equal to its batch. Early in
			// training the noise scale is small, so that guess rated
			// a new job's large batches far above what they make
			// (cifar10 at epoch 0: 26 progress/s predicted at batch
			// 726 on three GPUs, 7.5 made; 17.5 at batch 129).
			j.sqr, j.vr, j.statsBatch = st.sqr, st.vr, st.batch
		}
		j.model = o.models[s.App].m
		j.effK = o.eff[s.App]
		j.seen = o.models[s.App].seen
		j.step = o.models[s.App].step
		j.priorNoise = float64(max(s.Batch, s.BaseBatch, 1))
		j.minLocal = max(s.MinLocal, 1)
		j.maxLocal = s.MaxLocal
		if o.cfg.Memory != nil {
			if m := o.cfg.Memory.MaxLocalBatch(s.App, ""); m > 0 {
				j.maxLocal = m
			}
		}
		if j.maxLocal <= 0 {
			j.maxLocal = max(s.MaxBatch, s.Batch, j.minLocal)
		}
		j.minLocal = min(j.minLocal, j.maxLocal)
		// One micro-step holds at most micro samples per GPU; gradient
		// accumulation over up to MaxAccum more makes an iteration of up
		// to micro × (MaxAccum+1).
		j.micro = j.maxLocal
		j.steps = 1 + o.cfg.MaxAccum
		j.maxLocal *= j.steps
		maxObs := max(o.models[s.App].maxGPUs, o.sharedGPUs[s.App])
		j.minGPUs = 1
		if s.MinBatch > j.maxLocal {
			j.minGPUs = (s.MinBatch + j.maxLocal - 1) / j.maxLocal
		}
		j.minGPUs = max(j.minGPUs, s.MinGPUs)
		j.cap = j.clampCap(max(j.minGPUs, o.cfg.Explore*maxObs), total)
		if s.MinGPUs > j.cap {
			// Its GPU range's minimum exceeds the cluster (or its
			// maximum): it never runs (repair drops every count above
			// cap).
			j.cap = 0
		} else {
			j.minGPUs = min(j.minGPUs, j.cap)
		}
		// Its fewest GPUs are the fewest on which some per-GPU batch
		// fits its batch range (27 samples at 8 to 14 per GPU fit on 3
		// GPUs, not on 2); a job on which none fits at any count it may
		// hold (12 samples at exactly 8 per GPU) cannot run either.
		// Otherwise repair would start it on GPUs that allocations then
		// leaves idle, and fillIdle would keep GPUs back for it. The
		// exploration bound never holds a job below its fewest GPUs (a
		// job of an application not yet seen has cap = minGPUs): only
		// the cluster and the job's GPU range do.
		limit := total
		if s.MaxGPUs > 0 {
			limit = min(limit, s.MaxGPUs)
		}
		for j.cap > 0 {
			if lo, hi := j.localRange(j.minGPUs); lo <= hi && j.fit(lo, lo, hi) > 0 {
				break
			}
			if j.minGPUs++; j.minGPUs > limit {
				j.cap = 0
			} else {
				j.cap = max(j.cap, j.minGPUs)
			}
		}
		if j.remain <= 0 && s.Current.Empty() {
			// No work left: nothing to start it for (the simulator
			// never lists such a job; the live loop may, between the
			// last report and the completion). Started, it counted as
			// done at once in the projection, whose reallocation at
			// that completion then stood in for growing the others.
			j.cap = 0
		}
		j.cur = s.Current.NumGPUs()
		ages[i] = age
		ctx.jobs[i] = j
	}
	// A job with a step-time prior (JobState.Prior) may grow past the
	// exploration bound, up to the GPUs it asks for, by the cluster's idle
	// GPUs shared among such jobs: on an oversized cluster (six jobs of at
	// most four GPUs on 16 × 8) the doubling a step, each a restart and a
	// hold, took most of the jobs' lives; where GPUs are scarce the share
	// is 0 and nothing changes. The prior stands in for the reports the
	// bound waits for. Only jobs that can run count (as sharing, as
	// waiting): one whose GPU range exceeds the cluster, or that has no
	// work left, would keep the others at the even share for as long as
	// it is listed.
	idle, withPrior, waiting := total, 0, false
	for i := range ctx.jobs {
		j := &ctx.jobs[i]
		idle -= j.cur
		if j.cap > 0 && o.hasPrior(j.s) {
			withPrior++
		}
		waiting = waiting || (j.cur == 0 && j.cap > 0)
	}
	idleShare := 0
	if withPrior > 0 {
		idleShare = max(idle, 0) / withPrior
	}
	if !waiting {
		// Every job runs: no one waits for the idle GPUs, so any job
		// with a prior may grow into all of them and the search picks
		// which. Split evenly, a share of one held the mix's longest
		// job on 4 × 4 at its exploration bound of two GPUs while five
		// stood idle, until the others had completed. (The live loop
		// lists only jobs that hold GPUs; one it shows as not started,
		// sharing another's GPU, waits.) The hold below uses the same
		// share, so it lifts for every job the idle GPUs could grow,
		// though the search may grow only one: keeping the even share
		// there gave back most of the gain on 4 × 4 (441 s against
		// about 400). GPUs kept for arrivals are not taken off.
		idleShare = max(idle, 0)
	}
	for i := range ctx.jobs {
		j := &ctx.jobs[i]
		s := j.s
		if j.cap > 0 && o.hasPrior(s) {
			j.cap = max(j.cap, j.clampCap(min(s.Replicas, j.cur+idleShare), total))
		}
		// The hold keeps ONES's own recent changes. GPUs someone else
		// chose (the live coordinator places a new job by memory before
		// any round) are held too, unless the job has a prior, holds
		// fewer GPUs than it asks for, and the idle GPUs' share would
		// give it all it asks for: then the hold only delays a growth
		// the search makes two rounds later (the mix on 16 × 8: 339 →
		// 271 s). Where GPUs are scarcer the hold stays (on 2 × 4
		// dropping it cost 6 %).
		own := since[s.ID].mine || !o.hasPrior(s) || j.cur >= s.Replicas || j.cur+idleShare < s.Replicas
		// Nor is the charge (score) made for changing such GPUs, if the
		// job has a prior: the charge keeps prediction noise from
		// reversing ONES's own decisions, and there is none to reverse.
		// Charged, the six-job mix's longest job stayed on the GPU the
		// coordinator gave it while three stood idle (4 × 4: 358 → 397 s).
		j.uncharged = !since[s.ID].mine && o.hasPrior(s)
		hold := float64(o.cfg.Hold)
		if h := since[s.ID]; h.mine && h.before.Empty() {
			// GPUs ONES gave the job when it held none (a start or a
			// resumption): held one interval, not Hold (ONESConfig.Hold).
			hold = math.Min(hold, 1)
		}
		j.held = j.cur > 0 && own && j.cur <= j.cap && j.cur >= s.MinGPUs && ages[i] < hold*math.Max(o.cfg.Interval, o.cfg.MoveCost)
		j.curLocal = s.Current.LocalBatch * (s.Current.AccumSteps + 1)
		j.best = make([]bestCfg, j.cap+1)
		j.bestMulti = make([]bestCfg, j.cap+1)
	}
	for i := range ctx.jobs {
		ctx.lookAhead(i)
	}
	for i := range ctx.jobs {
		j := &ctx.jobs[i]
		b := ctx.bestFor(i, ctx.nodesFor(j.minGPUs), j.minGPUs)
		j.t1 = j.remain / math.Max(b.rate, 1e-12)
		j.eff, j.spare = ctx.efficientGPUs(i)
	}
	o.since = since
	o.stated = stated
	o.tracked = tracked
	if !o.called {
		o.firstCall = now
	}
	o.prevCall, o.called = now, true
	ctx.byT1 = make([]int, len(ctx.jobs))
	for i := range ctx.byT1 {
		ctx.byT1[i] = i
	}
	sort.SliceStable(ctx.byT1, func(a, b int) bool { return ctx.jobs[ctx.byT1[a]].t1 < ctx.jobs[ctx.byT1[b]].t1 })
	return ctx
}

// stepWindow is how many calls' reports at a shape an application's
// estimate is the median of; stepMove how far (relative) the estimate
// moves from the time the model holds before the model is refitted.
const (
	stepWindow = 5
	stepMove   = 0.05
)

// stepEst is what ONES knows of an application's step time at one shape
// (nodes, GPUs, local batch): pub, the report the model is fitted to and
// seenStep reads, and win, one report per call that had any (the median of
// that call's), oldest first, at most stepWindow of them, the first
// report of all to begin with.
type stepEst struct {
	pub Observation
	win []Observation
}

// jobReports is what learn remembers of one job's reports: by shape, its
// first step time, the one at the previous call, and whether any differed
// from the first; call is the latest learn call that saw the job.
type jobReports struct {
	call  int
	shape map[[3]int]jobStep
}

type jobStep struct {
	first, prev float64
	moved       bool
}

// learn pools the jobs' reported iteration times by application (iteration
// time depends on the application and configuration, not on the job) and
// refits the models of applications whose times changed.
//
// An application's first report at a shape sets its time there. A job's
// measured time changes over its life (new neighbours on its GPU, a memory
// plan that swaps more, fewer kernel gaps under FIKIT, a neighbour
// leaving); from the first time a job's report at a shape differs from its
// first one there, its reports feed the application's estimate: at every
// call while it runs in that shape, and whenever its report changes. Each
// call's reports at a shape give one sample (their median), and the
// estimate is the median of the last stepWindow samples (of an even count,
// the middle one nearer the time held), so one garbled report moves
// nothing and a lasting change is followed within three calls. The time
// held, and the model, change only when the estimate is more than stepMove
// away from it. A job whose reports never change (every simulated job: it
// reports each shape once, at the measured time of its placement) leaves
// the application's first report in place, even where its own time there
// differs (another job's placement over the nodes): the simulator's
// decisions are as before. (The live elastic loop gives each job its own
// application and its latest time per shape.)
func (o *ONES) learn(jobs []JobState) {
	o.call++
	changed := map[string]bool{}
	var samples map[string]map[[3]int][]Observation
	for i := range jobs {
		s := &jobs[i]
		m := o.obs[s.App]
		if m == nil {
			m = map[[3]int]*stepEst{}
			o.obs[s.App] = m
		}
		r := o.reports[s.ID]
		if r == nil {
			r = &jobReports{shape: map[[3]int]jobStep{}}
			o.reports[s.ID] = r
		}
		r.call = o.call
		if p := s.Prior; p != nil && p.Known {
			if q, ok := o.priors[s.App]; !ok || q != *p {
				o.priors[s.App] = *p
				changed[s.App] = true
			}
		}
		var cur [3]int
		if !s.Current.Empty() {
			cur = [3]int{s.Current.NumNodes(), s.Current.NumGPUs(), s.Current.LocalBatch}
		}
		for _, ob := range s.Observed {
			if ob.Shared {
				// Measured beside another job the policy places: the
				// shape's time alone is not known from it. Fitted, a
				// shape measured so and then left was never corrected
				// (a job kept on two GPUs with fourteen idle, its four-GPU
				// time taken beside three jobs about to move).
				o.sharedGPUs[s.App] = max(o.sharedGPUs[s.App], ob.GPUs)
				continue
			}
			k := [3]int{ob.Nodes, ob.GPUs, ob.LocalBatch}
			if m[k] == nil {
				m[k] = &stepEst{pub: ob, win: []Observation{ob}}
				changed[s.App] = true
			}
			p, ok := r.shape[k]
			if !ok {
				r.shape[k] = jobStep{first: ob.StepTime, prev: ob.StepTime}
				continue
			}
			p.moved = p.moved || ob.StepTime != p.first
			if p.moved && (k == cur || ob.StepTime != p.prev) {
				if samples == nil {
					samples = map[string]map[[3]int][]Observation{}
				}
				if samples[s.App] == nil {
					samples[s.App] = map[[3]int][]Observation{}
				}
				samples[s.App][k] = append(samples[s.App][k], ob)
			}
			p.prev = ob.StepTime
			r.shape[k] = p
		}
	}
	for id, r := range o.reports {
		if r.call != o.call {
			delete(o.reports, id)
		}
	}
	for _, a := range slices.Sorted(maps.Keys(samples)) {
		byShape := samples[a]
		for _, k := range slices.SortedFunc(maps.Keys(byShape), cmpShape) {
			e := o.obs[a][k]
			e.win = append(e.win, medianObs(byShape[k], e.pub.StepTime))
			if len(e.win) > stepWindow {
				e.win = append(e.win[:0], e.win[len(e.win)-stepWindow:]...)
			}
			if est := medianObs(e.win, e.pub.StepTime); math.Abs(est.StepTime-e.pub.StepTime) > stepMove*e.pub.StepTime {
				e.pub = est
				changed[a] = true
			}
		}
	}
	for _, a := range slices.Sorted(maps.Keys(changed)) {
		keys := slices.SortedFunc(maps.Keys(o.obs[a]), cmpShape)
		obs := make([]Observation, len(keys))
		me := modelEntry{seen: map[[2]int][]Observation{}}
		for x, k := range keys {
			obs[x] = o.obs[a][k].pub
			me.maxGPUs = max(me.maxGPUs, k[1])
			sk := [2]int{k[0], k[1]}
			me.seen[sk] = append(me.seen[sk], obs[x])
		}
		var prior *ThroughputModel
		if p, ok := o.priors[a]; ok {
			prior = &p
		}
		me.m = FitThroughput(obs, prior)
		me.step = newStepShape(me.seen)
		o.models[a] = me
	}
}

// cmpShape orders (nodes, GPUs, local batch) shapes ascending, nodes first.
func cmpShape(a, b [3]int) int { return slices.Compare(a[:], b[:]) }

// medianObs returns the report of median step time among obs (not empty);
// of an even count, the middle one nearer to held (the lower on a tie).
func medianObs(obs []Observation, held float64) Observation {
	s := append([]Observation(nil), obs...)
	sort.Slice(s, func(x, y int) bool {
		if s[x].StepTime != s[y].StepTime {
			return s[x].StepTime < s[y].StepTime
		}
		return s[x].SyncTime < s[y].SyncTime
	})
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	lo, hi := s[n/2-1], s[n/2]
	if math.Abs(hi.StepTime-held) < math.Abs(lo.StepTime-held) {
		return hi
	}
	return lo
}

// rate is the predicted progress per second of job j on r GPUs over nodes
// nodes at per-GPU batch l.
func (ctx *onesCtx) rate(j *onesJob, nodes, r, l int) float64 {
	b := float64(r * l)
	base := float64(max(j.s.BaseBatch, 1))
	var gain float64
	switch {
	case j.s.SampleProgress:
		gain = b / base
	case j.sqr > 0 || j.vr > 0:
		vr := j.vr
		if j.vrAhead > 0 && !ctx.own {
			vr = j.vrAhead
		}
		if a := ctx.o.cfg.NoiseExponent; a > 0 && j.statsBatch > 0 {
			// The noise scale at b, from the one measured at statsBatch.
			vr *= math.Pow(b/j.statsBatch, a)
		}
		gain = GainFromStats(j.sqr, vr, b, base)
	default:
		gain = b / base * Efficiency(j.priorNoise, b, base)
	}
	// The learned correction, up to perfect scaling (B/B0 base-batch
	// iterations per iteration).
	gain = math.Min(gain*j.effK.at(b), math.Max(gain, b/base))
	var it float64
	m, acc := j.split(l)
	if obs := j.seen[[2]int{nodes, r}]; len(obs) > 0 {
		step, sync := j.seenStep(obs, float64(m))
		it = AccumIterTime(step, sync, acc)
	} else if j.model.Known && len(j.step.comp) == 0 {
		it = j.model.IterTime(nodes, r, float64(m), acc)
	} else if j.model.Known {
		// The compute curve (computeAt), synchronisation added as the
		// model has it (stepShape says why not overlapped).
		it = j.computeAt(float64(m))*float64(acc+1) + j.model.Sync(nodes, r)
	} else {
		// Nothing measured yet: assume perfect scaling of a unit step.
		it = float64(acc + 1)
	}
	return gain / it
}

// clampCap bounds a GPU count for job j by its batch and GPU ranges and the
// cluster's total.
func (j *onesJob) clampCap(c, total int) int {
	if s := j.s; s.MaxBatch > 0 {
		c = min(c, max(j.minGPUs, s.MaxBatch/j.minLocal))
	}
	if s := j.s; s.MaxGPUs > 0 {
		c = min(c, s.MaxGPUs)
	}
	return min(c, total)
}

// localRange is the per-GPU batch range of job j on r GPUs.
func (j *onesJob) localRange(r int) (lo, hi int) {
	lo = j.minLocal
	if j.s.MinBatch > 0 {
		lo = max(lo, (j.s.MinBatch+r-1)/r)
	}
	hi = j.maxLocal
	if j.s.MaxBatch > 0 {
		hi = min(hi, j.s.MaxBatch/r)
	}
	return lo, hi
}

// clampLocal returns l clamped to job j's range on r GPUs and made whole
// micro-steps (fit), or 0 if none is.
func (j *onesJob) clampLocal(r, l int) int {
	lo, hi := j.localRange(r)
	if lo > hi {
		return 0
	}
	return j.fit(min(max(l, lo), hi), lo, hi)
}

// fit returns the count of samples per GPU per iteration in [lo, hi]
// nearest l that splits into whole micro-steps (1 to MaxAccum+1 of them)
// of minLocal to micro samples each, fewer micro-steps on a tie; 0 if none
// does.
func (j *onesJob) fit(l, lo, hi int) int {
	best, bd := 0, math.MaxInt
	for st := 1; st <= j.steps; st++ {
		mlo, mhi := max(j.minLocal, (lo+st-1)/st), min(j.micro, hi/st)
		if mlo > mhi {
			continue
		}
		v := min(max(l/st, mlo), mhi) * st
		if d := max(v-l, l-v); d < bd {
			best, bd = v, d
		}
	}
	return best
}

// split splits l samples per GPU per iteration into micro-steps: the
// fewest whole ones of minLocal to micro samples (acc+1 of them), or, when
// none divides l (fit makes every count ONES chooses one that does), the
// fewest of at most micro samples, each of the largest m with
// m × (acc+1) ≤ l.
func (j *onesJob) split(l int) (m, acc int) {
	for st := max(1, (l+j.micro-1)/max(j.micro, 1)); st <= j.steps; st++ {
		if l%st == 0 && l/st >= j.minLocal && l/st <= j.micro {
			return l / st, st - 1
		}
	}
	if j.micro <= 0 || l <= j.micro {
		return l, 0
	}
	acc = (l+j.micro-1)/j.micro - 1
	return max(l/(acc+1), 1), acc
}

// bestFor returns the batch that maximises predicted goodput of job i on r
// GPUs (multi-node if nodes > 1).
func (ctx *onesCtx) bestFor(i, nodes, r int) bestCfg {
	j := &ctx.jobs[i]
	if r <= 0 || r > j.cap {
		return bestCfg{}
	}
	tab := j.best
	if nodes > 1 {
		tab = j.bestMulti
	}
	if tab[r].ok || tab[r].local < 0 {
		return tab[r]
	}
	rate, local, ok := ctx.searchLocal(j, nodes, r, j.curLocal)
	if !ok {
		tab[r] = bestCfg{local: -1}
		return tab[r]
	}
	tab[r] = bestCfg{ok: true, rate: rate, local: local}
	return tab[r]
}

// searchLocal finds the per-GPU batch (micro-steps folded in) in job j's
// range on r GPUs over nodes nodes that rate predicts fastest: 13 batches
// geometric from the range's least to its most, then extra (its current
// batch, ...), each fitted to the range (fit). ok is false when the range
// is empty; local is 0 when no batch fits it.
func (ctx *onesCtx) searchLocal(j *onesJob, nodes, r int, extra ...int) (rate float64, local int, ok bool) {
	lo, hi := j.localRange(r)
	if lo > hi {
		return 0, 0, false
	}
	try := func(l int) {
		if l < lo || l > hi {
			return
		}
		if l = j.fit(l, lo, hi); l == 0 {
			return
		}
		if rt := ctx.rate(j, nodes, r, l); rt > rate {
			rate, local = rt, l
		}
	}
	const steps = 12
	ratio := math.Pow(float64(hi)/float64(lo), 1.0/steps)
	for k := 0; k <= steps; k++ {
		try(int(math.Round(float64(lo) * math.Pow(ratio, float64(k)))))
	}
	for _, l := range extra {
		try(l)
	}
	return rate, local, true
}

// jobTime is the predicted time to completion of job i on r GPUs over nodes
// nodes at per-GPU batch l, moved or not.
func (ctx *onesCtx) jobTime(i, nodes, r, l int, moved bool) float64 {
	j := &ctx.jobs[i]
	t := j.remain / math.Max(ctx.rate(j, nodes, r, l), 1e-12)
	if moved {
		t += ctx.o.cfg.MoveCost
	} else {
		t += j.restartLeft
	}
	return t
}

func (ctx *onesCtx) newGenome() *genome {
	g := &genome{slots: make([]int32, len(ctx.nodeOf)), local: make([]int, len(ctx.jobs))}
	for k := range g.slots {
		g.slots[k] = -1
	}
	return g
}

func (ctx *onesCtx) clone(a *genome) *genome {
	return &genome{slots: append([]int32(nil), a.slots...), local: append([]int(nil), a.local...)}
}

// current is the genome of the allocations as they are.
func (ctx *onesCtx) current() *genome {
	g := ctx.newGenome()
	for i := range ctx.jobs {
		j := &ctx.jobs[i]
		g.local[i] = j.curLocal
		for node, c := range j.s.Current.PerNode {
			if node >= len(ctx.first) {
				break
			}
			k := ctx.first[node]
			for ; c > 0 && k < ctx.first[node]+ctx.nodeGPUs[node]; k++ {
				if g.slots[k] < 0 {
					g.slots[k] = int32(i)
					c--
				}
			}
		}
	}
	return g
}

// greedyGain is what greedy's marginal extension maximises per GPU.
type greedyGain uint8

const (
	// gainShaped: the fall in the job's predicted completion time, shaped
	// (shapeT: about the relative fall for jobs longer than a minute).
	gainShaped greedyGain = iota
	// gainRate: the rise in the job's completion rate, 1/T — the rise in
	// progress rate over the progress left, so a GPU goes to the job it
	// brings nearest to completing, relative to what is left. For the
	// sum of completion times with jobs that slow as they spread, this is
	// the split that shortest-remaining-first smoothed over the jobs
	// makes (a short job takes more GPUs, a long one keeps a few): as a
	// seed beside the shaped one it cut the mean ratio to Pollux over
	// workloads 1–4 from 0.944 to 0.932 on seeds 1–9 and from 0.947 to
	// 0.937 on seeds 10–18, every workload lower on both.
	gainRate
)

// greedy builds a seed: keep current allocations (if keep), start queued
// jobs shortest-first on one GPU each, then hand spare GPUs one at a time to
// the job whose gain (greedyGain) from one more GPU is largest.
func (ctx *onesCtx) greedy(keep bool, gain greedyGain) *genome {
	total := len(ctx.nodeOf)
	counts := make([]int, len(ctx.jobs))
	used := 0
	if keep {
		for i := range ctx.jobs {
			counts[i] = min(ctx.jobs[i].cur, ctx.jobs[i].cap)
			used += counts[i]
		}
	}
	order := make([]int, len(ctx.jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ctx.jobs[order[a]].t1 < ctx.jobs[order[b]].t1 })
	for _, i := range order {
		if used >= total {
			break
		}
		if n := ctx.jobs[i].minGPUs; counts[i] == 0 && used+n <= total {
			counts[i] = n
			used += n
		}
	}
	// Marginal extension.
	gainOf := func(i int) float64 {
		n := counts[i]
		if n == 0 || n >= ctx.jobs[i].cap {
			return 0
		}
		nodesA, nodesB := ctx.nodesFor(n), ctx.nodesFor(n+1)
		a, b := ctx.bestFor(i, nodesA, n), ctx.bestFor(i, nodesB, n+1)
		if !a.ok || !b.ok {
			return 0
		}
		r := ctx.jobs[i].remain
		if r <= 0 {
			return 0
		}
		if gain == gainRate {
			return (b.rate - a.rate) / r
		}
		return ctx.shapeT(r/a.rate) - ctx.shapeT(r/b.rate)
	}
	gains := make([]float64, len(ctx.jobs))
	for i := range gains {
		gains[i] = gainOf(i)
	}
	for used < total {
		bi, bg := -1, 0.0
		for i, v := range gains {
			if v > bg {
				bi, bg = i, v
			}
		}
		if bi < 0 {
			break
		}
		counts[bi]++
		used++
		gains[bi] = gainOf(bi)
	}
	g := ctx.newGenome()
	k := 0
	for i, c := range counts {
		for ; c > 0; c-- {
			g.slots[k] = int32(i)
			k++
		}
		if c := counts[i]; c > 0 {
			g.local[i] = ctx.bestFor(i, ctx.nodesFor(c), c).local
		}
	}
	return g
}

// nodesFor is the fewest nodes n GPUs can span (on a cluster without GPUs,
// which Schedule answers with no allocation after learning, as if its
// nodes had one each).
func (ctx *onesCtx) nodesFor(n int) int {
	gpn := max(ctx.gpn, 1)
	return (n + gpn - 1) / gpn
}

// restore maps a genome saved at the previous call onto the current jobs.
func (ctx *onesCtx) restore(sg savedGenome) *genome {
	idx := make(map[string]int32, len(ctx.jobs))
	for i := range ctx.jobs {
		idx[ctx.jobs[i].s.ID] = int32(i)
	}
	g := ctx.newGenome()
	for k := 0; k < len(g.slots) && k < len(sg.slots); k++ {
		if i, ok := idx[sg.slots[k]]; ok && sg.slots[k] != "" {
			g.slots[k] = i
		}
	}
	for i := range ctx.jobs {
		g.local[i] = sg.local[ctx.jobs[i].s.ID]
	}
	return g
}

func (ctx *onesCtx) save(g *genome) savedGenome {
	sg := savedGenome{slots: make([]string, len(g.slots)), local: make(map[string]int, len(ctx.jobs))}
	for k, i := range g.slots {
		if i >= 0 {
			sg.slots[k] = ctx.jobs[i].s.ID
		}
	}
	for i, l := range g.local {
		if l > 0 {
			sg.local[ctx.jobs[i].s.ID] = l
		}
	}
	return sg
}

// fittingCurrent is jobs with every current allocation that does not fit
// the GPUs the jobs before it leave on its nodes (a caller's bookkeeping
// error: the simulator and the live loop never pass one) taken as none, so
// the search, its seeds and repair, which keeps unchanged jobs' layouts in
// this order, all see a cluster that is not over-committed; jobs itself
// when all fit (it is not changed either way).
func fittingCurrent(cluster ClusterState, jobs []JobState) []JobState {
	free := make([]int, len(cluster.Nodes))
	for i, n := range cluster.Nodes {
		free[i] = n.GPUs
	}
	out, copied := jobs, false
	for i := range jobs {
		if jobs[i].Current.Empty() {
			continue
		}
		if fitsFree(jobs[i].Current.PerNode, free) {
			for n, x := range jobs[i].Current.PerNode {
				if x > 0 {
					free[n] -= x
				}
			}
			continue
		}
		if !copied {
			out, copied = slices.Clone(jobs), true
		}
		out[i].Current = Allocation{}
	}
	return out
}

// fitsFree says whether a layout (GPUs per node) fits in free; entries of
// zero past its nodes do.
func fitsFree(perNode, free []int) bool {
	for node, x := range perNode {
		if x > 0 && (node >= len(free) || x > free[node]) {
			return false
		}
	}
	return true
}

// repair enforces each job's GPU cap and batch range, its GPU range
// (every count it leaves is 0 or within [minGPUs, cap]), and the hold
// (keepHeld), hands idle GPUs to the jobs g restarts anyway (fillIdle),
// then reorders the genome to minimise moves: jobs whose GPU count is
// unchanged keep their current GPUs; others are packed into what is left,
// fewest nodes first; GPUs still idle start waiting jobs.
func (ctx *onesCtx) repair(g *genome) {
	counts := make([]int, len(ctx.jobs))
	for _, i := range g.slots {
		if i >= 0 {
			counts[i]++
		}
	}
	for i := range counts {
		j := &ctx.jobs[i]
		for counts[i] > 0 && (counts[i] > j.cap || j.clampLocal(counts[i], max(g.local[i], 1)) == 0) {
			counts[i]--
		}
		if counts[i] < j.minGPUs {
			counts[i] = 0
		}
	}
	ctx.keepHeld(counts)
	ctx.fillIdle(counts)
	free := append([]int(nil), ctx.nodeGPUs...)
	for k := range g.slots {
		g.slots[k] = -1
	}
	fill := func(i, node, c int) {
		k := ctx.first[node] + ctx.nodeGPUs[node] - free[node]
		for ; c > 0; c-- {
			g.slots[k] = int32(i)
			k++
			free[node]--
		}
	}
	var moved []int
	for i, c := range counts {
		j := &ctx.jobs[i]
		if c > 0 && c == j.cur { // its layout fits (fittingCurrent)
			for node, x := range j.s.Current.PerNode {
				if x > 0 {
					fill(i, node, x)
				}
			}
		} else if c > 0 {
			moved = append(moved, i)
		}
	}
	sort.SliceStable(moved, func(a, b int) bool { return counts[moved[a]] > counts[moved[b]] })
	for _, i := range moved {
		n := counts[i]
		best := -1
		for node, f := range free {
			if f >= n && (best < 0 || f < free[best]) {
				best = node
			}
		}
		if best >= 0 {
			fill(i, best, n)
			continue
		}
		for n > 0 {
			bn := 0
			for node, f := range free {
				if f > free[bn] {
					bn = node
				}
			}
			x := min(free[bn], n)
			fill(i, bn, x)
			n -= x
		}
	}
	// Work conservation: GPUs left idle go to waiting jobs, shortest
	// first, each on its fewest GPUs (a new arrival starts at once).
	if idle := sum(free); idle > 0 {
		for _, i := range ctx.byT1 {
			if counts[i] > 0 || ctx.jobs[i].remain <= 0 {
				continue
			}
			n := ctx.jobs[i].minGPUs
			if n > idle || n > ctx.jobs[i].cap {
				continue
			}
			counts[i] = n
			idle -= n
			for n > 0 {
				bn := 0
				for node, f := range free {
					if f > free[bn] {
						bn = node
					}
				}
				x := min(free[bn], n)
				fill(i, bn, x)
				n -= x
			}
			if idle == 0 {
				break
			}
		}
	}
	_, nodes := ctx.shape(g)
	for i, c := range counts {
		if c == 0 {
			continue
		}
		// Local search on the batch: the goodput-optimal per-GPU batch
		// (throughput × statistical efficiency, within the job's range
		// and memory) for the GPUs the job holds in g.
		l := ctx.bestFor(i, nodes[i], c).local
		if l <= 0 {
			l = g.local[i]
		}
		g.local[i] = ctx.jobs[i].clampLocal(c, l)
	}
}

// keepHeld gives every held job (ONESConfig.Hold) its current GPU count
// and, if that over-commits the cluster, takes GPUs from the other jobs,
// one at a time from the one with most (a job left below its fewest GPUs
// gives up all).
func (ctx *onesCtx) keepHeld(counts []int) {
	over := -len(ctx.nodeOf)
	for i := range counts {
		if ctx.jobs[i].held {
			counts[i] = ctx.jobs[i].cur
		}
		over += counts[i]
	}
	for over > 0 {
		k := -1
		for i, c := range counts {
			if !ctx.jobs[i].held && c > 0 && (k < 0 || c > counts[k]) {
				k = i
			}
		}
		if k < 0 {
			return // only held jobs: they fit, as they run now
		}
		counts[k]--
		over--
		if counts[k] < ctx.jobs[k].minGPUs {
			over -= counts[k]
			counts[k] = 0
		}
	}
}

// fillIdle hands the GPUs that counts leave idle, beyond those the waiting
// jobs will start on (repair's work conservation) and Reserve more (once a
// job was submitted after the first call: ONES.streaming), to the
// jobs the candidate starts, resizes or moves anyway, shortest first: a
// job that restarts pays the move cost whatever its GPU count, so more
// GPUs cost it nothing more, whereas GPUs left idle now are only used
// after another restart. Each such job grows to the count up to its
// efficient scale (efficientGPUs) with the best predicted goodput, a count
// counting as better only if more than 5% above every smaller one (a
// second node that slows it down is skipped). Up to its cap instead, jobs
// took GPUs that added little and that the next arrivals took back, each
// time with a restart (session 48).
func (ctx *onesCtx) fillIdle(counts []int) {
	idle := len(ctx.nodeOf) - sum(counts)
	for _, i := range ctx.byT1 {
		if idle <= 0 {
			return
		}
		// As repair's work conservation does, skip a job that can never
		// run (n above its cap): it starts on no GPUs.
		if n := ctx.jobs[i].minGPUs; counts[i] == 0 && ctx.jobs[i].remain > 0 && n <= idle && n <= ctx.jobs[i].cap {
			idle -= n
		}
	}
	if ctx.o.streaming {
		idle -= ctx.o.cfg.Reserve
	}
	for _, i := range ctx.byT1 {
		if idle <= 0 {
			return
		}
		j := &ctx.jobs[i]
		c := counts[i]
		if c == 0 || c == j.cur || j.held {
			continue
		}
		b := ctx.bestFor(i, ctx.nodesFor(c), c)
		if !b.ok {
			continue
		}
		best, rate := c, b.rate
		for n := c + 1; n <= min(c+idle, j.eff); n++ {
			if b := ctx.bestFor(i, ctx.nodesFor(n), n); b.ok && b.rate > 1.05*rate {
				best, rate = n, b.rate
			}
		}
		idle -= best - c
		counts[i] = best
	}
}

// shape returns, per job, the GPUs held and nodes spanned by g.
func (ctx *onesCtx) shape(g *genome) (counts, nodes []int) {
	counts = make([]int, len(ctx.jobs))
	nodes = make([]int, len(ctx.jobs))
	last := make([]int, len(ctx.jobs))
	for i := range last {
		last[i] = -1
	}
	for k, i := range g.slots {
		if i < 0 {
			continue
		}
		counts[i]++
		if n := ctx.nodeOf[k]; last[i] != n {
			last[i] = n
			nodes[i]++
		}
	}
	return counts, nodes
}

// fitness is the predicted sum of completion times (seconds from now).
func (ctx *onesCtx) fitnessShaped(g *genome) float64 {
	counts, nodes := ctx.shape(g)
	moved := ctx.movedJobs(g, counts)
	ctx.heap = ctx.heap[:0]
	total := 0.0
	var queued []int
	for i, c := range counts {
		if c == 0 {
			if ctx.jobs[i].remain > 0 {
				queued = append(queued, i)
			}
			continue
		}
		t := ctx.jobTime(i, nodes[i], c, g.local[i], moved[i])
		total += ctx.shapeT(t)
		for k := 0; k < c; k++ {
			ctx.heap = append(ctx.heap, t)
		}
	}
	for k := len(ctx.heap); k < len(ctx.nodeOf); k++ {
		ctx.heap = append(ctx.heap, ctx.o.cfg.Interval)
	}
	if len(queued) == 0 {
		return total
	}
	sort.Slice(queued, func(a, b int) bool { return ctx.jobs[queued[a]].t1 < ctx.jobs[queued[b]].t1 })
	h := floatHeap(ctx.heap)
	h.init()
	defer func() { ctx.heap = h[:0] }()
	for _, i := range queued {
		if n := ctx.jobs[i].minGPUs; n > 1 {
			// Start when the n GPUs that free up first are all free.
			start := 0.0
			for k := 0; k < n && len(h) > 0; k++ {
				start = h.pop()
			}
			end := math.Max(start, ctx.o.cfg.Interval) + ctx.o.cfg.MoveCost + ctx.jobs[i].t1
			total += ctx.shapeT(end)
			for k := 0; k < n; k++ {
				h.push(end)
			}
			continue
		}
		start := math.Max(h[0], ctx.o.cfg.Interval)
		end := start + ctx.o.cfg.MoveCost + ctx.jobs[i].t1
		total += ctx.shapeT(end)
		h[0] = end
		h.down(0)
	}
	return total
}

// shapeT is the fitness weight of a job completing t seconds from now.
func (ctx *onesCtx) shapeT(t float64) float64 {
	h := ctx.o.cfg.Horizon
	if h <= 0 {
		h = 60 // the greedy seeds' shaping
	}
	return h * math.Log1p(t/h)
}

// movedJobs marks jobs whose GPUs in g differ from the current allocation.
func (ctx *onesCtx) movedJobs(g *genome, counts []int) []bool {
	moved := make([]bool, len(ctx.jobs))
	for i, c := range counts {
		if c > 0 && c != ctx.jobs[i].cur {
			moved[i] = true
		}
	}
	for i, c := range counts {
		if c == 0 || moved[i] {
			continue
		}
		moved[i] = !ctx.holds(g, i, ctx.jobs[i].s.Current.PerNode)
	}
	return moved
}

// holds reports whether job i holds exactly cur's GPU counts in g.
func (ctx *onesCtx) holds(g *genome, i int, cur []int) bool {
	for node, x := range cur {
		if node >= len(ctx.first) {
			return false
		}
		n := 0
		for k := ctx.first[node]; k < ctx.first[node]+ctx.nodeGPUs[node]; k++ {
			if int(g.slots[k]) == i {
				n++
			}
		}
		if n != x {
			return false
		}
	}
	return true
}

func (ctx *onesCtx) survivors(pop []*genome, n int) []*genome {
	sort.SliceStable(pop, func(a, b int) bool { return pop[a].fit < pop[b].fit })
	out := pop[:0:0]
	for _, g := range pop {
		if len(out) == n {
			break
		}
		dup := false
		for _, h := range out {
			if h.fit == g.fit && equalSlots(h.slots, g.slots) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, g)
		}
	}
	return out
}

func equalSlots(a, b []int32) bool {
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

func (ctx *onesCtx) tournament(pop []*genome) *genome {
	a, b := pop[ctx.o.rng.Intn(len(pop))], pop[ctx.o.rng.Intn(len(pop))]
	if b.fit < a.fit {
		return b
	}
	return a
}

// crossover replaces a random segment of c's slots, and each job's batch
// with probability 1/2, by b's.
func (ctx *onesCtx) crossover(c, b *genome) {
	rng := ctx.o.rng
	n := len(c.slots)
	p, q := rng.Intn(n), rng.Intn(n)
	if p > q {
		p, q = q, p
	}
	copy(c.slots[p:q+1], b.slots[p:q+1])
	for i := range c.local {
		if rng.Intn(2) == 0 && b.local[i] > 0 {
			c.local[i] = b.local[i]
		}
	}
}

// mutate applies each operator with probability Mutation.
func (ctx *onesCtx) mutate(g *genome) {
	rng := ctx.o.rng
	rate := ctx.o.cfg.Mutation
	nj := len(ctx.jobs)
	counts, _ := ctx.shape(g)
	slotOf := func(i int32) int {
		for k, x := range g.slots {
			if x == i {
				return k
			}
		}
		return -1
	}
	// Grow: a job takes a free slot, or one from the job with most GPUs.
	if rng.Float64() < rate {
		i := int32(rng.Intn(nj))
		if k := slotOf(-1); k >= 0 {
			g.slots[k] = i
		} else {
			big := int32(0)
			for x := range counts {
				if counts[x] > counts[big] {
					big = int32(x)
				}
			}
			if big != i && counts[big] > 1 {
				g.slots[slotOf(big)] = i
			}
		}
	}
	// Shrink: a job gives up half of its GPUs.
	if rng.Float64() < rate {
		i := int32(rng.Intn(nj))
		drop := (counts[i] + 1) / 2
		for k := range g.slots {
			if drop == 0 {
				break
			}
			if g.slots[k] == i {
				g.slots[k] = -1
				drop--
			}
		}
	}
	// Swap: a queued job takes a running job's GPUs.
	if rng.Float64() < rate {
		q, r := int32(rng.Intn(nj)), int32(rng.Intn(nj))
		if counts[q] == 0 && counts[r] > 0 {
			for k := range g.slots {
				if g.slots[k] == r {
					g.slots[k] = q
				}
			}
		}
	}
	// Batch: halve or double one job's batch, or re-optimise it.
	if rng.Float64() < rate {
		i := rng.Intn(nj)
		switch rng.Intn(3) {
		case 0:
			g.local[i] = max(1, g.local[i]/2)
		case 1:
			g.local[i] = max(1, g.local[i]*2)
		default:
			g.local[i] = 0 // repair picks the best
		}
	}
}

// allocations turns a genome into the policy's answer.
func (ctx *onesCtx) allocations(g *genome) map[string]Allocation {
	out := map[string]Allocation{}
	per := make([][]int, len(ctx.jobs))
	for k, i := range g.slots {
		if i < 0 {
			continue
		}
		if per[i] == nil {
			per[i] = make([]int, len(ctx.nodeGPUs))
		}
		per[i][ctx.nodeOf[k]]++
	}
	for i, p := range per {
		if p == nil || g.local[i] <= 0 {
			continue
		}
		m, acc := ctx.jobs[i].split(g.local[i])
		out[ctx.jobs[i].s.ID] = Allocation{PerNode: p, LocalBatch: m, AccumSteps: acc}
	}
	return out
}

// floatHeap is a binary min-heap of float64.
type floatHeap []float64

func (h floatHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h floatHeap) down(i int) {
	n := len(h)
	if n == 0 {
		return
	}
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (h *floatHeap) pop() float64 {
	old := *h
	x := old[0]
	n := len(old) - 1
	old[0] = old[n]
	*h = old[:n]
	h.down(0)
	return x
}

func (h *floatHeap) push(x float64) {
	*h = append(*h, x)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

// hasPrior says whether job s has a step-time prior: given in this call,
// or given for its application before (learn keeps the latest). The live
// loop gives one only when the cost model's time at the job's current
// batch is known by the round's deadline; right after a move to a new
// batch it often is not, and the job, suddenly without a prior, fell back
// to the exploration bound: ONES shrank a lone job it had just grown from
// one GPU to four back to two (a restart for nothing).
func (o *ONES) hasPrior(s *JobState) bool {
	if s.Prior != nil {
		return true
	}
	_, ok := o.priors[s.App]
	return ok
}

// ForgetApp implements AppForgetter.
func (o *ONES) ForgetApp(app string) {
	delete(o.obs, app)
	delete(o.models, app)
	delete(o.priors, app)
	delete(o.eff, app)
	delete(o.sharedGPUs, app)
	delete(o.startStats, app)
	delete(o.tracks, app)
}

// Left implements Departures. A job that left Requeued or Ended is not
// counted as a completed job when the next call misses it; a Requeued
// one's return is not an arrival. A job that completed away is counted as
// completed, with its work when it was last listed.
func (o *ONES) Left(id string, how Departure) {
	w, listed := o.prevWork[id]
	delete(o.prevWork, id)
	switch how {
	case Requeued:
		if listed {
			o.away[id] = w
		}
	case Ended:
		delete(o.away, id)
	case CompletedAway:
		if aw, ok := o.away[id]; ok {
			w, listed = aw, true
			delete(o.away, id)
		}
		if listed {
			o.doneWork = append(o.doneWork, w)
		}
	}
}

// arrivalGPUs records the arrivals and completions seen since the previous
// call and returns the GPUs the projection keeps for jobs not yet submitted:
// round(ArrivalLoad × λ × W), at most half of total, where λ is the arrival
// rate over the last arrivalWindow seconds and W the median GPU-seconds of
// the latest completed jobs (0 until two arrivals and three completions have
// been seen). Only what has happened by now is used.
func (o *ONES) arrivalGPUs(now float64, total int, jobs []JobState) int {
	lo := now - arrivalWindow
	work := make(map[string]float64, len(jobs))
	for i := range jobs {
		s := &jobs[i]
		work[s.ID] = s.Attained
		if _, ok := o.prevWork[s.ID]; ok {
			continue
		}
		if _, ok := o.away[s.ID]; ok {
			delete(o.away, s.ID) // re-queued and back: not an arrival
			continue
		}
		a := s.Arrival
		if !(a <= now) {
			a = now // not a time in the past: count it as arriving now
		}
		if o.nArrived == 0 || a < o.firstArrival {
			o.firstArrival = a
		}
		o.nArrived++
		// Submitted after the first call: a stream. A job submitted
		// with the first ones but listed later (the live loop lists a
		// job once it runs) is not.
		o.streaming = o.streaming || (o.called && a > o.firstCall)
		if a >= lo {
			o.arrivals = slices.Insert(o.arrivals, sort.SearchFloat64s(o.arrivals, a), a)
		}
	}
	var gone []string
	for id := range o.prevWork {
		if _, ok := work[id]; !ok {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	for _, id := range gone {
		o.doneWork = append(o.doneWork, o.prevWork[id])
	}
	if n := len(o.doneWork); n > maxDoneWork {
		o.doneWork = append(o.doneWork[:0], o.doneWork[n-maxDoneWork:]...)
	}
	o.prevWork = work
	o.arrivals = o.arrivals[sort.SearchFloat64s(o.arrivals, lo):]
	if o.cfg.ArrivalLoad <= 0 || o.nArrived < 2 || len(o.doneWork) < 3 {
		return 0
	}
	span := math.Max(math.Min(arrivalWindow, now-o.firstArrival), arrivalMinSpan)
	lambda := float64(len(o.arrivals)) / span
	w := append([]float64(nil), o.doneWork...)
	sort.Float64s(w)
	g := math.Round(o.cfg.ArrivalLoad * lambda * w[len(w)/2])
	return int(math.Min(g, float64(total/2)))
}

// score is what the search minimises: the projected sum of completion
// times plus the hysteresis charge for every running job the candidate
// moves or resizes (but for GPUs ONES did not choose: onesJob.uncharged).
// The current allocation is charged nothing unless repair had to change
// it (a job above its cap), so a candidate replaces it only if its
// predicted saving exceeds its charge.
// Ranking candidates by the charged sum, rather than charging only the
// winner, also keeps the search from preferring a candidate whose saving
// rests on restarts that buy almost nothing: on workload 4 a job with
// seconds of work left was shrunk so that two others could grow now
// instead of at its completion.
//
// A job that only grows, into GPUs nobody waits for, is charged
// min(Hysteresis, 1) × MoveCost instead (idleGrowth): the projection
// already hands a job below its efficient scale GPUs at the next
// completion, so the saving it sees in growing now is about one
// interval's, and at the full charge such a job stayed put call after
// call while GPUs stood idle, each call expecting the next completion to
// grow it (workload 1, seed 1: imagenet-11 sat on two GPUs for 20 minutes
// with 14–47 idle and reached four at 3420 s and 29 at 4020 s; charged
// one move cost it reaches four at 2640 s and 32 at 3480 s).
func (ctx *onesCtx) score(g *genome) float64 {
	counts, nodes := ctx.shape(g)
	moved := ctx.movedJobs(g, counts)
	full, grown := 0, 0
	idle := ctx.idleGrowth(counts)
	for i, m := range moved {
		if !m || ctx.jobs[i].cur == 0 || ctx.jobs[i].uncharged {
			continue
		}
		if idle && counts[i] > ctx.jobs[i].cur {
			grown++
		} else {
			full++
		}
	}
	h, mc := ctx.o.cfg.Hysteresis, ctx.o.cfg.MoveCost
	return ctx.fitnessOf(g, counts, nodes, moved) + h*mc*float64(full) + min(h, 1)*mc*float64(grown)
}

// idleGrowth reports whether the jobs a candidate with these GPU counts
// grows take GPUs nobody waits for: it shrinks or preempts no running job
// below what it may hold (so they were idle; repair shrinks a job above
// its cap in every candidate), leaves no job waiting that is allowed to
// run (cap > 0, fitting or not), and, once jobs arrive after the first
// call (ONES.streaming), Reserve GPUs idle for the next arrivals.
func (ctx *onesCtx) idleGrowth(counts []int) bool {
	idle := len(ctx.nodeOf)
	for i, c := range counts {
		if j := &ctx.jobs[i]; c < min(j.cur, j.cap) || (c == 0 && j.remain > 0 && j.cap > 0) {
			return false
		}
		idle -= c
	}
	return !ctx.o.streaming || idle >= ctx.o.cfg.Reserve
}

// polishPasses bounds polish's passes over the jobs (on workloads 1–4,
// seeds 1–9, two passes and a hundred give the same figures).
const polishPasses = 2

// polish improves best, one running job at a time, by putting the job
// back on the GPU slots and batch it holds now (cur: undo), and keeps
// each undo that lowers the score; it stops after a pass with none. The
// search's operators change several jobs at once, and one generation per
// call rarely separates a change that pays from the ones that came with
// it. It tries at most Population undos, so that it costs at most a
// generation's evaluations. The slots are cur's, not best's: whoever best
// put there is evicted, and since repair packs jobs node by node, that may
// be a job best left alone, which repair then re-fits (a review counted
// 26–38 % of undos on workloads 1–4 evicting such a job; its prototype of
// an undo by GPU counts per node gave mixed results, seed 1: workload 2
// 2917 → 3061 s, workload 4 2210 → 2205 s). An undo is kept on the whole
// candidate's score, and the idle-growth charge depends on the whole
// candidate: undoing one job's shrink may lower another's growth charge
// from Hysteresis to one move cost, and that counts toward the undo.
func (ctx *onesCtx) polish(best, cur *genome) *genome {
	tries := ctx.o.cfg.Population
	for pass := 0; pass < polishPasses; pass++ {
		improved := false
		counts, _ := ctx.shape(best)
		moved := ctx.movedJobs(best, counts)
		for i := range ctx.jobs {
			if ctx.jobs[i].cur == 0 || (counts[i] > 0 && !moved[i]) {
				continue
			}
			if tries--; tries < 0 {
				return best
			}
			c := ctx.undo(best, cur, i)
			ctx.repair(c)
			if c.fit = ctx.score(c); c.fit < best.fit {
				best, improved = c, true
				counts, _ = ctx.shape(best)
				moved = ctx.movedJobs(best, counts)
			}
		}
		if !improved {
			break
		}
	}
	return best
}

// undo returns a copy of g with job i back on the GPU slots and batch it
// holds in cur, evicting whoever g put in those slots (not repaired).
func (ctx *onesCtx) undo(g, cur *genome, i int) *genome {
	c := ctx.clone(g)
	for k, x := range c.slots {
		if int(x) == i {
			c.slots[k] = -1
		}
	}
	for k, x := range cur.slots {
		if int(x) == i {
			c.slots[k] = int32(i)
		}
	}
	c.local[i] = cur.local[i]
	return c
}
