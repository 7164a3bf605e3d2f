package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

// The live elastic loop: every interval of job time the coordinator runs the
// cluster policy (placement.NewPolicy: ones, tiresias or fifo — the code the
// trace-driven simulator runs) on its view of the running elastic jobs and
// sends a resize order to each job whose batch size the policy changed. The
// job actor forwards it to its device, which applies it at the job's next
// iteration boundary and re-plans; the job actor then publishes `resized`.
//
// What the policy sees:
//   - the cluster: every live node with its live GPUs;
//   - each running elastic training job (a batch or GPU range in its spec),
//     with App = the job's id (throughput and memory are per job: its
//     neighbours on its GPU differ from any other job's), batch range from
//     the spec, base batch = the batch its iterations are counted at,
//     requested GPUs (Replicas) = the top of its GPU range, the range
//     itself (MinGPUs, MaxGPUs: no policy gives the job a count outside
//     it), Running (it runs, whatever its current allocation shows: fifo
//     does not let it hold up later jobs when it cannot grow), progress and
//     target in those iterations, attained GPU-seconds = its virtual run
//     time, its current allocation (the GPUs it holds on each node; jobs
//     beyond a node's GPU count, possible because the runtime co-locates
//     jobs on a GPU, are shown as holding none, and so, to fifo and
//     tiresias, which run a job only as requested, is a job not yet
//     holding its requested GPUs), and one observation per batch size it
//     has reported an iteration time at (progress checkpoints);
//   - memory: a MemoryOracle backed by tensorsched's MinBudget (through the
//     coordinator's Predictor): the largest batch whose minimum budget at the
//     job's tolerance fits its GPU's capacity less its neighbours' minimum
//     budgets. TENSILE's minimum is below the vanilla peak, so it widens the
//     batches the policy may choose.
//
// What is applied: the GPUs and the batch size (elastic_job.go). A job
// allocated N GPUs runs as N data-parallel replicas, one per device actor,
// each at the per-GPU batch (the global batch the policy chose, clamped to
// the job's range, divided by N and by the allocation's micro-steps, and
// bounded by the largest whose minimum budget fits the budget free for the
// job on the N GPUs, which for a move are not the GPUs the oracle answered
// for; more micro-steps keep the batch where that bound is tight:
// moreSteps), each with its own TENSILE plan and budget on its
// device. When no batch of the job's range fits there the coordinator
// refuses the change itself (resize_refused) and orders nothing. The
// per-node GPU counts of an allocation become GPUs: a job keeps the GPUs it
// holds on a node, and takes more there from the least loaded ones (in
// the round's view, where the orders of the jobs before it are accounted:
// elasticLoop.bound). The job's iteration time is its slowest
// replica's plus the gradient synchronisation time of a ring all-reduce of
// its parameters (syncSeconds). When the GPUs are the job's own, the order
// is a resize at the next iteration boundary; otherwise it is a move: the
// job restarts from its checkpoint on the new GPUs after MoveCost seconds
// of checkpoint-and-restart and releases the GPUs it leaves. A change a
// device refuses is undone and published as resize_refused; the job keeps
// running where it was. Jobs the policy leaves out (queued or preempted in
// its view) are not preempted; pending jobs are placed by predicted peak as
// before.

// ElasticConfig configures the coordinator's elastic loop.
type ElasticConfig struct {
	// Policy is "ones" (default), "tiresias" or "fifo".
	Policy string
	// Interval is the job time between rounds, in seconds; 0 disables the
	// loop (`coordinator serve` defaults to DefaultElasticInterval).
	Interval float64
	// TimeScale is job seconds per wall second, as the nodes' --time-scale
	// (default 100): a round runs every Interval / TimeScale wall seconds.
	TimeScale float64
	// Seed seeds the policy.
	Seed int64
	// ONES overrides the ones policy's parameters (serve --ones).
	ONES placement.ONESTuning
	// MoveCost is the seconds of job time a moved job makes no progress
	// (checkpoint and restart); the policy weighs the same figure. 0:
	// placement.DefaultMoveCost; negative: none (moves are free, as
	// placement.PolicyOptions.MoveCost).
	MoveCost float64
	// IntraNodeBandwidth and InterNodeBandwidth (bytes per second) and
	// SyncLatency (seconds per step) are the all-reduce model's link
	// figures: replicas on one node synchronise over the intra-node link,
	// replicas on several nodes over the inter-node one (defaults
	// DefaultIntraNodeBandwidth, DefaultInterNodeBandwidth,
	// DefaultSyncLatency).
	IntraNodeBandwidth, InterNodeBandwidth, SyncLatency float64
	// MaxMicroSteps is the most micro-steps per iteration the coordinator
	// splits an order into to keep the policy's batch when the targets'
	// memory caps its micro-batch (moreSteps); beyond that the batch
	// shrinks to what fits. 1 never adds micro-steps (the batch shrinks at
	// once); an allocation the policy itself gave more keeps them. Default
	// DefaultMaxMicroSteps.
	MaxMicroSteps int
	// AnswerTimeout is how long (wall time) a job actor waits for each
	// device's answer to an elastic order before it gives the change up
	// and undoes it there too, in case the device applies it late;
	// default DefaultElasticAnswerTimeout.
	AnswerTimeout time.Duration
	// PlanWait is the most wall time a round waits for a memory
	// prediction it has not made before it decides with the demands
	// already known (elastic_ahead.go); 0 waits as long as predicting
	// takes. `serve`, `demo` and `bench live` default to one round's wall
	// time (Interval / TimeScale).
	PlanWait time.Duration
	// Clock is the loop's clock (nil: time.Now): a round's time is the
	// time since the loop started times TimeScale. Tests give a virtual
	// one that they advance, so that every run's rounds see the same
	// times (and so the same ends of the policy's holds). The periodic
	// loop's ticks stay on wall time, and a job's arrival is its wall
	// submission time less the clock's start, so a virtual clock should
	// start at the wall time.
	Clock func() time.Time
}

// DefaultMaxMicroSteps is the default ElasticConfig.MaxMicroSteps: eight
// micro-steps, the most the simulator's sweep of ONES's accumulation
// measured (`--ones accum=7`). Beyond that a micro-step's batch is a small
// fraction of what the policy planned and the job runs far slower than it
// predicted.
const DefaultMaxMicroSteps = 8

// DefaultElasticAnswerTimeout is the default ElasticConfig.AnswerTimeout.
const DefaultElasticAnswerTimeout = 10 * time.Second

// Defaults of the all-reduce model: a PCIe-4-class or NVLink-bridge link
// inside a node, a 100 Gb/s network between nodes, and 20 µs per ring step.
const (
	DefaultIntraNodeBandwidth = placement.DefaultIntraNodeBandwidth
	DefaultInterNodeBandwidth = placement.DefaultInterNodeBandwidth
	DefaultSyncLatency        = 20e-6
)

// syncSeconds is the gradient synchronisation time per iteration of a job
// whose replicas sit perNode GPUs to a node, with paramBytes bytes of
// parameters: a ring all-reduce (placement.RingAllReduceSeconds) at the
// slowest link the ring crosses (placement.RingLinkBandwidth), with
// cfg.SyncLatency per ring step.
func syncSeconds(paramBytes int64, perNode []int, cfg ElasticConfig) float64 {
	a := placement.Allocation{PerNode: perNode}
	return syncAt(paramBytes, a.NumNodes(), a.NumGPUs(), cfg)
}

// syncAt is syncSeconds for n replicas over nodes nodes (the ring's time
// depends on no more).
func syncAt(paramBytes int64, nodes, n int, cfg ElasticConfig) float64 {
	bw := placement.RingLinkBandwidth(nodes, n, cfg.IntraNodeBandwidth, cfg.InterNodeBandwidth)
	return placement.RingAllReduceSeconds(float64(paramBytes), n, bw, cfg.SyncLatency)
}

// DefaultElasticInterval is the default interval of the elastic loop, in
// seconds of job time (the simulator's default scheduling interval).
const DefaultElasticInterval = 60.0

// elasticLoop is the coordinator actor's elastic state.
type elasticLoop struct {
	cfg    ElasticConfig
	pred   Predictor
	log    *slog.Logger
	mu     sync.Mutex // guards policy (run off the actor's goroutine)
	policy placement.Policy
	oracle *roundOracle // the policy's MemoryOracle
	// ahead holds the loop's memory predictions (elastic_ahead.go);
	// deadline is the running round's for them (zero: none), set and read
	// on the round's goroutine. planning counts, per job, the rounds in a
	// row its order waited for a prediction (on the actor's goroutine).
	ahead    *planAhead
	deadline time.Time
	planning map[string]int
	start    time.Time
	started  bool
	busy     bool
	rounds   int
	// noGPUs holds, per job, why the previous round applied its
	// allocation to no GPUs: the same reason again (the policy proposes
	// it round after round) is logged at debug level.
	noGPUs map[string]string
	obs    map[string]map[obsKey]obsTime // job -> shape -> seconds per micro-step
	// refused holds each job's last refused change: the same change is not
	// ordered again until something leaves one of its GPUs.
	refused map[string]refusedChange
	// sent is each job's last order: its GPUs (sorted), batch, micro-steps
	// and the GPUs' generations when it was sent. A refusal of it keeps
	// those generations, so a neighbour that left while the order was in
	// flight lifts the refusal, as one that leaves later does.
	sent map[string]refusedChange
	// attained is each running elastic job's service so far, in
	// GPU-seconds of job time (Tiresias ranks jobs by it).
	attained map[string]*attainedService
	// left holds departures not yet handed to the policy (elasticRound.left);
	// away the jobs it was told were re-queued and that no round has listed
	// since. Both are used on the coordinator's goroutine only.
	left map[string]placement.Departure
	away map[string]bool
	// ended holds the jobs that ended since the last round: their
	// applications (the job's id) are forgotten by the policy
	// (placement.AppForgetter) in the next round, under mu.
	ended []string
}

// attainedService accrues a job's GPU-seconds: gpus is the count its
// record held at time at (a round, or an update that changed the count:
// followAttained).
type attainedService struct {
	gpuSeconds, at float64
	gpus           int
}

// accrue brings a job's attained service up to now and records the GPUs it
// holds from now on.
func (l *elasticLoop) accrue(id string, now float64, gpus int, seed float64) float64 {
	a := l.attained[id]
	if a == nil {
		// First seen (started before the loop, or the coordinator
		// restarted): its devices' run time on the GPUs it holds now.
		a = &attainedService{gpuSeconds: seed, at: now}
		l.attained[id] = a
	}
	a.gpuSeconds += max(0, now-a.at) * float64(a.gpus)
	a.at, a.gpus = now, gpus
	return a.gpuSeconds
}

// recordAttained sets a record's attained service to the loop's, brought
// up to now, so that the store keeps it across a restart of the
// coordinator (a job the loop has not counted keeps the record's).
func (c *coordActor) recordAttained(r *JobRecord) {
	l := c.elastic
	if l == nil {
		return
	}
	if acc := l.attained[r.ID]; acc != nil {
		r.AttainedGPUSeconds = acc.gpuSeconds + max(0, l.jobNow()-acc.at)*float64(acc.gpus)
	}
}

// jobNow is the loop's time: seconds of job time since it started.
func (l *elasticLoop) jobNow() float64 {
	return l.cfg.Clock().Sub(l.start).Seconds() * l.cfg.TimeScale
}

// heldGPUs is how many GPUs a job's record holds: its replicas' while it
// runs, none otherwise (queued again, or ended).
func heldGPUs(r *JobRecord) int {
	if r == nil || r.State != StateRunning {
		return 0
	}
	return len(r.AllGPUs())
}

// followAttained brings a tracked job's attained service up to now at the
// GPUs it held, when its record now holds another count: a change its
// devices applied, a re-queue, a placement. So the service counts the
// GPUs the job ran on, not the ones a round ordered (a refused or
// unapplied order changes nothing), and a job re-queued between rounds
// stops accruing when it leaves its GPUs.
func (c *coordActor) followAttained(r *JobRecord) {
	l := c.elastic
	if l == nil {
		return
	}
	if acc := l.attained[r.ID]; acc != nil && acc.gpus != heldGPUs(r) {
		l.accrue(r.ID, l.jobNow(), heldGPUs(r), 0)
	}
}

// refusedChange is a change a job refused: its GPUs (sorted), global batch,
// extra micro-steps and the GPUs' generations then.
type refusedChange struct {
	gpus  []string
	batch int
	accum int
	gens  []uint64
	// misses counts the times in a row this change was given up only
	// because devices did not answer in time (0: a device refused it);
	// such a change may be ordered again from round retry on.
	misses int
	retry  int
	// For an order sent (elasticLoop.sent): the job's attempt and GPUs
	// (sorted) it was decided for, when it went out, its sequence number
	// (reconfigure.seq) and its targets in the order's order (the first
	// is the primary replica's).
	attempt int
	from    []string
	at      time.Time
	seq     uint64
	targets []string
}

// orderSeq numbers elastic orders (reconfigure.seq), across every
// coordinator of the process: a job actor's continuation that outlived a
// coordinator stopped in the process names its order to the next one (by
// actor name), and must not match an order of that one's.
var orderSeq atomic.Uint64

// inFlightFor is how long (wall time, in answer timeouts) an order counts
// as in flight when neither its resized nor its resize_refused event nor
// an orderDropped came back (an order lost with a job actor that crashed
// before handling it): a move asks its targets and then its old GPUs, each
// within the answer timeout.
const inFlightFor = 3

// inFlight says whether job rec's last order (l.sent) is still being
// applied: decided for the job's attempt and GPUs as they still are, and
// sent less than inFlightFor answer timeouts ago. An expired one is
// forgotten.
func (l *elasticLoop) inFlight(rec *JobRecord, now time.Time) (refusedChange, bool) {
	o, ok := l.sent[rec.ID]
	if !ok || o.from == nil || o.attempt != rec.Attempt || !slices.Equal(o.from, sortedCopy(rec.AllGPUs())) {
		return o, false
	}
	if now.Sub(o.at) >= inFlightFor*l.cfg.AnswerTimeout {
		delete(l.sent, rec.ID)
		return o, false
	}
	return o, true
}

// maxUnansweredBackoff caps the rounds an unanswered change waits before it
// is ordered again (1, 2, 4, 8, then 16 rounds).
const maxUnansweredBackoff = 16

// obsKey is the shape a job reported an iteration time at.
type obsKey struct{ gpus, nodes, local int }

// obsTime is a job's measured seconds per micro-step at a shape, and the
// gradient synchronisation seconds in it (placement.Observation); shared:
// measured while another elastic training job ran on one of its GPUs
// (placement.Observation.Shared).
type obsTime struct {
	step, sync float64
	shared     bool
}

func newElasticLoop(cfg ElasticConfig, pred Predictor, log *slog.Logger) (*elasticLoop, error) {
	if cfg.Policy == "" {
		cfg.Policy = "ones"
	}
	if cfg.TimeScale < 0 || math.IsNaN(cfg.TimeScale) || math.IsInf(cfg.TimeScale, 0) {
		return nil, fmt.Errorf("elastic time scale %v: must be a finite number of job seconds per wall second > 0 (0: the default, 100)", cfg.TimeScale)
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 100
	}
	if cfg.Interval < 0 || math.IsNaN(cfg.Interval) || math.IsInf(cfg.Interval, 0) {
		return nil, fmt.Errorf("elastic interval %v: must be a finite number of seconds ≥ 0 (0 disables the loop)", cfg.Interval)
	}
	if math.IsNaN(cfg.MoveCost) || math.IsInf(cfg.MoveCost, 0) {
		return nil, fmt.Errorf("elastic move cost %v: must be a finite number of seconds (0: the default, %g; negative: moves are free)", cfg.MoveCost, placement.DefaultMoveCost)
	}
	if cfg.MoveCost == 0 {
		cfg.MoveCost = placement.DefaultMoveCost
	}
	for _, f := range []struct {
		name string
		v    *float64
		def  float64
	}{{"intra-node bandwidth", &cfg.IntraNodeBandwidth, DefaultIntraNodeBandwidth},
		{"inter-node bandwidth", &cfg.InterNodeBandwidth, DefaultInterNodeBandwidth}, {"sync latency", &cfg.SyncLatency, DefaultSyncLatency}} {
		if *f.v < 0 || math.IsNaN(*f.v) || math.IsInf(*f.v, 0) {
			return nil, fmt.Errorf("elastic %s %v: must be a finite number ≥ 0 (0: the default, %g)", f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if cfg.MaxMicroSteps < 0 {
		return nil, fmt.Errorf("elastic max micro-steps %d: must be ≥ 1 (1: never split an order to keep its batch; 0: the default, %d)", cfg.MaxMicroSteps, DefaultMaxMicroSteps)
	}
	if cfg.MaxMicroSteps == 0 {
		cfg.MaxMicroSteps = DefaultMaxMicroSteps
	}
	if cfg.AnswerTimeout < 0 {
		return nil, fmt.Errorf("elastic answer timeout %v: must be ≥ 0 (0: the default, %v)", cfg.AnswerTimeout, DefaultElasticAnswerTimeout)
	}
	if cfg.AnswerTimeout == 0 {
		cfg.AnswerTimeout = DefaultElasticAnswerTimeout
	}
	if cfg.PlanWait < 0 {
		return nil, fmt.Errorf("elastic plan wait %v: must be ≥ 0 (0: as long as predicting takes)", cfg.PlanWait)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	// The loop's clock starts now; startElastic restarts it with the
	// periodic loop. Rounds run on demand with the loop off (tests,
	// RunElasticRound) read it too: from the zero time it saturated, so
	// the policy saw the same time every round (ONES's hold never ended).
	l := &elasticLoop{cfg: cfg, pred: pred, log: log.With("loop", "elastic"), obs: map[string]map[obsKey]obsTime{}, refused: map[string]refusedChange{}, sent: map[string]refusedChange{}, attained: map[string]*attainedService{},
		start: cfg.Clock(), ahead: newPlanAhead(pred)}
	var err error
	// The memory oracle answers from the round being scheduled.
	l.oracle = &roundOracle{l: l}
	l.policy, err = placement.NewPolicy(cfg.Policy, placement.PolicyOptions{Seed: cfg.Seed, Memory: l.oracle,
		Interval: cfg.Interval, MoveCost: cfg.MoveCost, ONES: cfg.ONES})
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	return l, nil
}

// Messages of the loop to the coordinator actor. Ticks and results carry
// the actor that scheduled them: a coordinator started later in the same
// process takes the stopped one's name, and must not act on its timers.
type (
	elasticTick struct{ owner *coordActor }
	elasticNow  struct {
		run bool // (run one round now and) answer *elasticReport
		// allocs, if set, are applied instead of the policy's (tests).
		allocs map[string]placement.Allocation
		// hold: the round is scheduled but not applied; the answer's held
		// is applied later by an elasticNow whose apply it is, as the
		// periodic loop applies a round scheduled off the actor's
		// goroutine while the coordinator goes on handling updates (tests).
		hold  bool
		apply *elasticResult
	}
	elasticReport struct {
		rounds, orders int
		err            error
		states         []placement.JobState // the round's view of its jobs (tests)
		held           *elasticResult
	}
	elasticResult struct {
		owner  *coordActor
		round  *elasticRound
		allocs map[string]placement.Allocation
		took   time.Duration
	}
)

// elasticJob is one job in a round's snapshot.
type elasticJob struct {
	id      string
	spec    *pb.JobSpec // at the job's current batch
	min     int         // batch range
	max     int
	batch   int   // current (global)
	accum   int   // current extra accumulation micro-steps per iteration
	free    int64 // its GPUs' least capacity less their neighbours' minimum budgets
	devType string
	gpus    []string // the GPUs it holds, one per replica
	// shared are the GPUs of gpus a job the policy sees runs on, when the
	// policy sees this one as not started (elasticSnapshot): an order
	// keeps none of them. Kept, the shared GPU stayed shared.
	shared []string
	// moving: an order is in flight and gpus, batch and accum are its
	// targets, global batch and micro-steps, not the record's
	// (elasticSnapshot).
	moving  bool
	attempt int   // its record's attempt (JobRecord.Attempt)
	params  int64 // parameter bytes (what an all-reduce moves)
	// Memory bounds from the oracle: largest per-GPU micro-batch by
	// TENSILE's minimum budget and by the vanilla peak (0 until asked).
	memMax, vanillaMax int
	// undecided: a bound asked about a batch whose demand was still
	// being predicted at the round's deadline and that the known ones
	// did not decide (fitsAt).
	undecided bool
	// to bounds the order the policy's allocation makes (set by
	// elasticLoop.bound): the GPUs it would run on (picked in the round's
	// view, after the orders of jobs before it), their least budget
	// free for it (capacity less their other jobs' minimum budgets) and
	// the GPU with that least, the largest micro-batch whose minimum
	// budget fits it (0: none does), and the split the order runs.
	to *orderBound
}

// orderBound is the memory bound of one order on its target GPUs.
type orderBound struct {
	gpus     []string
	free     int64
	tightest string
	maxLocal int
	// lowNeeds is the minimum budget of lowMicro, the smallest
	// micro-batch the order could run at (1 when memory caps it below
	// lo and even that does not fit).
	lowNeeds int64
	lowMicro int
	// micro and accum are the order's micro-batch (its range's smallest
	// when none fits) and extra micro-steps (orderRange, orderMicro,
	// moreSteps): applyElastic orders what bound reserved for.
	micro, accum int
	// per is the samples per GPU per iteration the allocation asked for,
	// within the job's range (orderRange).
	per int
	// moreSteps says that accum exceeds the allocation's because the
	// targets' memory caps the micro-batch (elasticLoop.moreSteps).
	moreSteps bool
	// needs is the minimum budget of the per-GPU batch the order runs at
	// (0 when it orders nothing): what it reserves on each of gpus in the
	// round's view.
	needs int64
	err   error // why no GPUs were picked
}

// unchanged says whether the order would run job j as it runs now: on
// the GPUs it holds, at its micro-batch and micro-steps.
func (b *orderBound) unchanged(j *elasticJob) bool {
	return sameSet(b.gpus, j.gpus) && b.micro == j.local() && b.accum == j.accum
}

// elasticRound is one round's snapshot, handed to the policy goroutine.
type elasticRound struct {
	now     float64
	cluster placement.ClusterState
	states  []placement.JobState
	jobs    map[string]*elasticJob
	gpus    []placement.FitGPU // the coordinator's GPUs and their reservations
	// busy holds the jobs on gpus that leave no kernel gaps (training
	// jobs and back-to-back services; coordActor.leavesNoGaps): a higher
	// priority one leaves a lower priority nothing to run in, so an order
	// avoids its GPUs when it can.
	busy map[string]bool
	// inflight holds, by GPU, the job whose order still being applied
	// moves it there (elasticLoop.inFlight). The policy sees that job at
	// those GPUs (unless one is down); no other job's order takes them (it
	// would land beside the move when it ends: two jobs on a node's GPUs
	// while another node stood idle). The GPUs the move leaves are not
	// kept: another job's order may take them, and lands beside the job
	// if the move is refused.
	inflight map[string]string
	// left holds the jobs that left the policy's list without completing,
	// or completed while away from it, since the last round
	// (placement.Departures); ended those that ended (their applications
	// are forgotten: placement.AppForgetter).
	left  map[string]placement.Departure
	ended []string
}

// roundOracle is the policy's MemoryOracle: it answers from the round being
// scheduled (set under elasticLoop.mu).
type roundOracle struct {
	l     *elasticLoop
	round *elasticRound
}

// MaxLocalBatch implements placement.MemoryOracle: app is a job id.
func (o *roundOracle) MaxLocalBatch(app, _ string) int {
	if o.round == nil {
		return 0
	}
	j := o.round.jobs[app]
	if j == nil {
		return 0
	}
	if j.memMax == 0 {
		j.memMax, j.vanillaMax = o.l.maxBatch(j)
	}
	return j.memMax
}

// maxBatch is the largest per-GPU micro-batch, up to the job's largest
// batch, whose minimum budget (and, for comparison, whose vanilla peak)
// fits the job's free budget; 1 when none does. It may be below the job's
// smallest batch: the policy then reaches that batch with more GPUs or
// micro-steps.
func (l *elasticLoop) maxBatch(j *elasticJob) (byMin, byVanilla int) {
	byMin = l.largestFitting(j, 1, j.max, func(d *pb.Demand) bool { return d.MinBudget <= j.free })
	byVanilla = l.largestFitting(j, 1, j.max, func(d *pb.Demand) bool { return max(d.VanillaPeak, d.MinBudget) <= j.free })
	return max(byMin, 1), max(byVanilla, 1)
}

// WarmElasticBounds plans, for a job of spec with batch range lo..hi
// alone on an empty GPU of devType with capacity bytes, what the elastic
// loop's memory bound asks first: the largest per-GPU batch whose minimum
// budget, and whose vanilla peak, fits (binary searches over 1…hi), and
// the largest in lo…hi whose minimum fits (an order's bound on one GPU).
// Predictions are cached (by pred and by tensorsched), so the first
// rounds do not wait for these plans: Inception-v3's take about 16 s of
// wall time on two cores, which at a demo's time scale of 100 is 1600 s
// of job time in which no round decided anything. A batch that cannot be
// predicted is skipped, as the loop skips it.
func WarmElasticBounds(pred Predictor, spec *pb.JobSpec, lo, hi int, devType string, capacity int64) {
	l := &elasticLoop{pred: pred, ahead: newPlanAhead(pred)}
	j := &elasticJob{spec: spec, min: lo, max: hi, free: capacity, devType: devType}
	l.maxBatch(j)
	l.largestFitting(j, max(lo, 1), hi, func(d *pb.Demand) bool { return d.MinBudget <= j.free })
}

// demand is the job's predicted demand at a per-GPU batch (false: the
// prediction failed, or is not done by the round's deadline).
func (l *elasticLoop) demand(j *elasticJob, batch int) (*pb.Demand, bool) {
	d, st := l.lookup(j, batch)
	return d, st == demandKnown
}

// lookup is the job's demand at a per-GPU batch and whether it is known,
// failed or, past the round's deadline (PlanWait), still unknown.
func (l *elasticLoop) lookup(j *elasticJob, batch int) (*pb.Demand, int) {
	return l.lookupSpec(specAt(j, batch), j.devType)
}

// specAt is a copy of the job's spec at a per-GPU batch.
func specAt(j *elasticJob, batch int) *pb.JobSpec {
	s := proto.Clone(j.spec).(*pb.JobSpec)
	s.Batch = int32(batch)
	return s
}

// lookupSpec is lookup for a spec at its batch.
func (l *elasticLoop) lookupSpec(s *pb.JobSpec, devType string) (*pb.Demand, int) {
	if l.deadline.IsZero() {
		if d, ok := l.ahead.predict(s, devType); ok {
			return d, demandKnown
		}
		return nil, demandFailed
	}
	return l.ahead.lookup(s, devType, l.deadline)
}

// fitsAt says whether the job's demand at a per-GPU batch fits: from its
// prediction, or, while that is unknown at the round's deadline, from the
// demands known at other batches (planAhead.envelope); neither deciding,
// it does not fit and the job is marked undecided. upper and lower bound
// the batch's demand (its own when known; else a larger and a smaller
// batch's; nil: none known).
func (l *elasticLoop) fitsAt(j *elasticJob, batch int, fits func(*pb.Demand) bool) (yes bool, upper, lower *pb.Demand) {
	s := specAt(j, batch)
	d, st := l.lookupSpec(s, j.devType)
	switch st {
	case demandKnown:
		return fits(d), d, d
	case demandFailed:
		return false, nil, nil
	}
	yes, decided, upper, lower := l.ahead.envelope(s, j.devType, batch, fits)
	if !decided {
		j.undecided = true
	}
	return yes, upper, lower
}

// largestFitting is the largest batch in lo..hi whose demand fits, or 0
// when lo does not. Demands grow with the batch, so a binary search finds
// it.
func (l *elasticLoop) largestFitting(j *elasticJob, lo, hi int, fits func(*pb.Demand) bool) int {
	if ok, _, _ := l.fitsAt(j, lo, fits); !ok {
		return 0
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if ok, _, _ := l.fitsAt(j, mid, fits); ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// local is the per-GPU batch of each of the job's micro-steps now.
func (j *elasticJob) local() int { return microBatch(j.batch, j.accum, len(j.gpus)) }

// orderRange is what an allocation orders for a job: per, its samples per
// GPU per iteration (its global batch over its GPUs, within the job's
// range), in accum+1 micro-steps (the allocation's, fewer when the range
// leaves no whole micro-batch for that many), and the range lo..hi of the
// micro-batch (one micro-step's per-GPU batch) that keeps the global
// batch in the job's range.
func orderRange(j *elasticJob, a placement.Allocation) (per, accum, lo, hi int) {
	perLo, perHi := perRange(j, a.NumGPUs())
	per = min(max(a.GlobalBatch()/max(1, a.NumGPUs()), perLo), perHi)
	accum = max(0, a.AccumSteps)
	for accum > 0 {
		if lo, hi := microRange(perLo, perHi, accum); lo <= hi {
			break
		}
		accum--
	}
	lo, hi = microRange(perLo, perHi, accum)
	return per, accum, lo, hi
}

// perRange is the range of samples per GPU per iteration that keeps the
// job's global batch in its range on n GPUs (empty, lo > hi, when the
// range is narrower than the count).
func perRange(j *elasticJob, n int) (lo, hi int) {
	n = max(1, n)
	return max(1, (j.min+n-1)/n), j.max / n
}

// microRange is the range of the micro-batch in accum+1 micro-steps of
// perLo..perHi samples per GPU per iteration (empty, lo > hi, when no
// whole micro-batch gives a batch in that range).
func microRange(perLo, perHi, accum int) (lo, hi int) {
	return max(1, (perLo+accum)/(accum+1)), perHi / (accum + 1)
}

// maxOrderAccum is the most extra micro-steps the coordinator adds to an
// order whose micro-batch the targets' memory caps (moreSteps).
func (l *elasticLoop) maxOrderAccum() int { return l.cfg.MaxMicroSteps - 1 }

// moreSteps is the split of an order of per samples per GPU per iteration
// on n GPUs when the targets' memory caps its micro-batch below the even
// share of its accum+1 micro-steps: most is the largest micro-batch of the
// order's range lo.. that fits (0: not even lo does). Of the splits into
// k+1 micro-steps, accum < k < MaxMicroSteps (or the allocation's own
// count, if larger), whose micro-batch range holds a micro-batch that
// fits, it is the one whose batch (orderMicro's micro-batch × k+1) comes
// closest to per, the fewest micro-steps among equals: so the job keeps
// the batch the policy chose where some split allows it (as a job whose
// requested batch does not fit one GPU accumulates), even when that takes
// more micro-steps than the fewest whose share fits (a batch of exactly
// 4096 with room for about 1500 runs in 4 micro-steps of 1024: 3 would need
// 1365.3), and comes as close as the cap and the job's range allow when
// none does (a range of 9–15 with room for 2 per micro-step runs 7 × 2 =
// 14: 8 micro-steps leave no whole micro-batch in the range). ok is false
// when no split fits. m is the largest micro-batch that fits (0: not even
// one sample does).
func (l *elasticLoop) moreSteps(j *elasticJob, n, per, accum, lo, most int, fits func(*pb.Demand) bool) (k, lo2, hi2, m int, ok bool) {
	if m = most; m == 0 && lo > 1 {
		m = l.largestFitting(j, 1, lo-1, fits)
	}
	if m == 0 {
		return 0, 0, 0, 0, false
	}
	perLo, perHi := perRange(j, n)
	gap := -1
	for s, last := accum+1, max(accum, l.maxOrderAccum()); s <= last; s++ {
		sl, sh := microRange(perLo, perHi, s)
		if sl > min(sh, m) {
			continue // no whole micro-batch in the range fits
		}
		d := orderMicro(per, s, sl, sh, m) * (s + 1)
		d = max(d-per, per-d)
		if gap < 0 || d < gap {
			gap, k, lo2, hi2 = d, s, sl, sh
		}
	}
	if gap < 0 {
		return 0, 0, 0, m, false
	}
	return k, lo2, hi2, m, true
}

// orderMicro is the micro-batch of an order of per samples per GPU per
// iteration in accum+1 micro-steps: their even share, within lo..hi and at
// most maxLocal (what fits in memory on the order's GPUs; 0: not bounded).
func orderMicro(per, accum, lo, hi, maxLocal int) int {
	m := (per + accum/2) / (accum + 1)
	if maxLocal > 0 {
		hi = min(hi, maxLocal)
	}
	return max(min(max(m, lo), hi), 1)
}

// freeFor is the least budget the GPUs leave a job (capacity less the
// minimum budgets of their other jobs) and the GPU that leaves it.
func freeFor(gs []*placement.FitGPU, id string) (free int64, tightest string) {
	free = math.MaxInt64
	for _, g := range gs {
		f := g.Capacity
		for _, fj := range g.Jobs {
			if fj.ID != id {
				f -= fj.Min
			}
		}
		if f < free {
			free, tightest = f, g.ID
		}
	}
	return free, tightest
}

// bound sets, for each job an allocation would change, its target GPUs and
// the memory bound of the order on them (off the actor's goroutine: it
// predicts demands). The oracle the policy asked answered for the job's
// current GPUs; a move's targets may have less room.
//
// The orders of a round pick their GPUs one after another (by job id, the
// order applyElastic sends them in) from one view of the round's GPUs, in
// which each order that will be sent is accounted before the next picks:
// on every GPU it will run on, the job reserves the minimum budget of its
// new per-GPU batch (the larger of that and its current one on a GPU it
// keeps, as the device holds the current one until the change is applied).
// Two jobs that grow in one round thus do not both take the same least
// loaded GPU while another is free, and a job that must share a GPU with
// one ordered before it is bounded by the room that one leaves. The GPUs a
// job leaves keep its reservation for the rest of the round: it releases
// them only once its move is done, and an order that counted on that room
// would race it (the next round sees them free).
func (l *elasticLoop) bound(r *elasticRound, allocs map[string]placement.Allocation) {
	ids := make([]string, 0, len(allocs))
	for id := range allocs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	view := cloneGPUs(r.gpus)
	stay := staying(r, allocs)
	for _, id := range ids {
		a, j := allocs[id], r.jobs[id]
		if j == nil || a.Empty() {
			continue
		}
		prio := int(j.spec.GetPriority())
		keep := slices.DeleteFunc(slices.Clone(j.gpus), func(g string) bool { return slices.Contains(j.shared, g) })
		gs, err := pickTargets(view, r.cluster.Nodes, keep, a, func(g *placement.FitGPU) bool {
			return outrankedByBusy(g, id, prio, r.busy)
		}, func(g *placement.FitGPU) bool {
			other, moving := r.inflight[g.ID]
			return stay[g.ID] || moving && other != id
		})
		if err != nil {
			j.to = &orderBound{err: err} // applyElastic says why
			continue
		}
		if g := newOutranked(gs, j, prio, r.busy); g != nil {
			// Its replica there would get no gaps to run in, and a
			// data-parallel job waits for its slowest replica: the
			// whole job would stall. It keeps what it has.
			j.to = &orderBound{err: fmt.Errorf("GPU %s runs a higher-priority job that leaves no kernel gaps (training, or a back-to-back service) and no other GPU of its node is free of one: a replica there would get no kernel time and stall the job", g.ID)}
			continue
		}
		per, accum, lo, hi := orderRange(j, a)
		if lo > hi {
			// No per-GPU batch gives a global batch in the job's range
			// on this many GPUs (a range narrower than the count).
			j.to = &orderBound{err: fmt.Errorf("no per-GPU batch on %d GPUs gives a global batch in the job's range %d–%d", a.NumGPUs(), j.min, j.max)}
			continue
		}
		j.undecided = false
		b := &orderBound{gpus: make([]string, len(gs)), per: per}
		for i, g := range gs {
			b.gpus[i] = g.ID
		}
		b.free, b.tightest = freeFor(gs, id)
		fits := func(d *pb.Demand) bool { return d.MinBudget <= b.free }
		b.maxLocal = l.largestFitting(j, lo, hi, fits)
		share, shareAccum := orderMicro(per, accum, lo, hi, 0), accum
		if b.maxLocal >= share {
			// The even share fits (a fit is never a guess): batches
			// above it that are still being predicted do not matter.
			j.undecided = false
		}
		notEvenOne := false
		if b.maxLocal < share {
			// Memory on the targets caps the micro-batch below the even
			// share of the allocation's micro-steps: more micro-steps
			// keep the batch the policy chose where the job's range
			// allows (the memory oracle answered for the job's current
			// GPUs; a move's targets may have less room).
			k, lo2, hi2, m, ok := l.moreSteps(j, a.NumGPUs(), per, accum, lo, b.maxLocal, fits)
			switch {
			case ok:
				accum, lo, hi, b.maxLocal = k, lo2, hi2, m
				b.moreSteps = true
			case m == 0:
				notEvenOne = true
			}
		}
		if j.undecided {
			if keep := (&orderBound{gpus: b.gpus, micro: share, accum: shareAccum}); keep.unchanged(j) {
				// The allocation runs the job as it runs now, which
				// fits: nothing to order, nothing to wait for.
				b.micro, b.accum, b.lowMicro, b.maxLocal, b.moreSteps = share, shareAccum, share, max(b.maxLocal, share), false
				j.to = b
				continue
			}
			// A batch the bound asked about is still being predicted:
			// the next round orders it, with its demand known.
			j.to = &orderBound{err: errPlanning}
			continue
		}
		b.micro, b.accum, b.lowMicro = lo, accum, lo
		if notEvenOne {
			b.lowMicro = 1 // not even one sample per GPU fits
		}
		if _, _, d := l.fitsAt(j, b.lowMicro, fits); d != nil {
			b.lowNeeds = d.MinBudget // its own, or a smaller batch's while it is being predicted
		}
		j.to = b
		if b.maxLocal == 0 {
			continue // refused by the coordinator: reserves nothing
		}
		b.micro = orderMicro(per, accum, lo, hi, b.maxLocal)
		if b.unchanged(j) {
			continue // no change
		}
		b.needs = b.lowNeeds
		if _, d, _ := l.fitsAt(j, b.micro, fits); d != nil {
			b.needs = d.MinBudget // its own, or a larger batch's when it is not known yet
		}
		reserveOrder(view, id, prio, b.gpus, b.needs)
	}
}

// staying are the GPUs where a job the policy sees runs and goes on running
// after the round: all of its GPUs when the allocation leaves it out (the
// loop does not preempt), else those its order keeps (keptOn, as
// pickTargets keeps them). No other job's order takes one: when the policy
// leaves a job out to hand its GPU to another, that order is not applied,
// where it crowded the job left out or a neighbour the policy keeps. A GPU
// a job the policy sees leaves may be taken (two jobs may swap GPUs).
func staying(r *elasticRound, allocs map[string]placement.Allocation) map[string]bool {
	stay := map[string]bool{}
	for _, st := range r.states {
		j := r.jobs[st.ID]
		if st.Current.Empty() || j == nil {
			continue
		}
		a := allocs[st.ID]
		if a.Empty() {
			for _, id := range j.gpus {
				stay[id] = true
			}
			continue
		}
		for ni, k := range a.PerNode {
			if ni < len(r.cluster.Nodes) {
				for _, g := range keptOn(r.gpus, j.gpus, r.cluster.Nodes[ni].Name, k) {
					stay[g.ID] = true
				}
			}
		}
	}
	return stay
}

// newOutranked is the first GPU of gs that job j does not hold already and
// where a higher-priority job in busy runs (nil: none).
func newOutranked(gs []*placement.FitGPU, j *elasticJob, prio int, busy map[string]bool) *placement.FitGPU {
	for _, g := range gs {
		if !slices.Contains(j.gpus, g.ID) && outrankedByBusy(g, j.id, prio, busy) {
			return g
		}
	}
	return nil
}

// outrankedByBusy says whether g runs a job other than id of a higher
// priority than prio that leaves no kernel gaps (busy names the round's).
func outrankedByBusy(g *placement.FitGPU, id string, prio int, busy map[string]bool) bool {
	return outranks(g, prio, func(fj placement.FitJob) bool { return fj.ID != id && busy[fj.ID] })
}

// cloneGPUs is a copy of gpus whose jobs can be changed without touching
// gpus.
func cloneGPUs(gpus []placement.FitGPU) []placement.FitGPU {
	out := slices.Clone(gpus)
	for i := range out {
		out[i].Jobs = slices.Clone(out[i].Jobs)
	}
	return out
}

// reserveOrder accounts an order in a round's view of the GPUs: the job
// (of priority prio) reserves needs (a replica's minimum budget) on each
// GPU of gpus, or keeps its reservation there if that is larger.
func reserveOrder(view []placement.FitGPU, id string, prio int, gpus []string, needs int64) {
	for _, name := range gpus {
		g := findGPU(view, name)
		if g == nil {
			continue
		}
		found := false
		for k := range g.Jobs {
			if g.Jobs[k].ID == id {
				g.Jobs[k].Min = max(g.Jobs[k].Min, needs)
				found = true
			}
		}
		if !found {
			g.Jobs = append(g.Jobs, placement.FitJob{ID: id, Min: needs, Priority: prio})
		}
	}
}

// startElastic schedules the first round (once per coordinator).
func (c *coordActor) startElastic(ctx actor.Context) {
	l := c.elastic
	if l == nil || l.started || l.cfg.Interval <= 0 {
		return
	}
	l.started, l.start = true, l.cfg.Clock()
	l.log.Info("elastic loop started", "policy", l.cfg.Policy, "interval_s", l.cfg.Interval, "time_scale", l.cfg.TimeScale)
	c.nextElasticTick(ctx)
}

func (c *coordActor) nextElasticTick(ctx actor.Context) {
	c.sends.after(ctx, tickWall(c.elastic.cfg.Interval, c.elastic.cfg.TimeScale), &elasticTick{owner: c})
}

// tickWall is the wall time between rounds every interval seconds of job
// time at scale job seconds per wall second: at least a millisecond, and
// at most a year (a tiny scale would overflow time.Duration, which wraps
// to a negative wait: rounds every millisecond instead of almost never).
func tickWall(interval, scale float64) time.Duration {
	const most = 365 * 24 * time.Hour
	secs := interval / scale
	if !(secs < most.Seconds()) {
		return most
	}
	return max(time.Duration(secs*float64(time.Second)), time.Millisecond)
}

// onElastic handles the loop's messages in the coordinator actor.
func (c *coordActor) onElastic(ctx actor.Context, msg any) {
	l := c.elastic
	if l == nil {
		return
	}
	switch m := msg.(type) {
	case *elasticTick:
		if m.owner != c {
			return
		}
		if !l.busy {
			if r := c.elasticSnapshot(); r != nil {
				l.busy = true
				self, sys := ctx.Self(), ctx.ActorSystem()
				go func() {
					start := time.Now()
					allocs := l.schedule(r)
					l.bound(r, allocs)
					c.sends.send(sys, self, &elasticResult{owner: c, round: r, allocs: allocs, took: time.Since(start)})
				}()
			}
		}
		c.nextElasticTick(ctx)
	case *orderDropped:
		if o, ok := l.sent[m.job]; ok && o.seq == m.seq {
			l.log.Debug("elastic order dropped by the job actor", "job", m.job, "to", o.targets, "why", m.why)
			delete(l.sent, m.job)
		}
	case *elasticResult:
		if m.owner != c {
			return
		}
		l.busy = false
		l.rounds++
		c.applyElastic(ctx, m)
	case *elasticNow:
		rep := &elasticReport{rounds: l.rounds}
		if !m.run {
			ctx.Respond(rep)
			return
		}
		if m.apply != nil {
			l.rounds++
			rep.rounds = l.rounds
			rep.orders = c.applyElastic(ctx, m.apply)
		} else if l.busy {
			rep.err = fmt.Errorf("an elastic round is already running")
		} else if r := c.elasticSnapshot(); r != nil {
			start := time.Now()
			allocs := l.schedule(r)
			if m.allocs != nil {
				allocs = m.allocs
			}
			l.bound(r, allocs)
			if m.hold {
				rep.held = &elasticResult{owner: c, round: r, allocs: allocs, took: time.Since(start)}
				ctx.Respond(rep)
				return
			}
			l.rounds++
			rep.rounds, rep.states = l.rounds, r.states
			rep.orders = c.applyElastic(ctx, &elasticResult{owner: c, round: r, allocs: allocs, took: time.Since(start)})
		}
		ctx.Respond(rep)
	}
}

// elasticRoundWait is how long RunElasticRound waits for a round: its
// memory bounds plan the jobs' minimum budgets at batches not planned
// before, which took over 10 s under the race detector beside other
// packages' tests (one ResNet-50 job).
const elasticRoundWait = 2 * time.Minute

// RunElasticRound runs one round of the elastic loop now (whether or not
// the periodic loop is on) and returns how many resize orders it sent.
func (co *Coordinator) RunElasticRound() (int, error) {
	r, err := co.askWithin(&elasticNow{run: true}, elasticRoundWait)
	if err != nil {
		return 0, err
	}
	rep := r.(*elasticReport)
	return rep.orders, rep.err
}

// applyAllocations runs one round whose allocations are allocs instead of
// the policy's (the rest of the round as RunElasticRound): tests order
// exact moves through it.
func (co *Coordinator) applyAllocations(allocs map[string]placement.Allocation) (int, error) {
	r, err := co.askWithin(&elasticNow{run: true, allocs: allocs}, elasticRoundWait)
	if err != nil {
		return 0, err
	}
	rep := r.(*elasticReport)
	return rep.orders, rep.err
}

// holdAllocations schedules a round whose allocations are allocs (as
// applyAllocations) but does not apply it: applyHeld does, later, as the
// periodic loop applies a round it scheduled off the coordinator's
// goroutine after the coordinator handled what came meanwhile (tests).
func (co *Coordinator) holdAllocations(allocs map[string]placement.Allocation) (*elasticResult, error) {
	r, err := co.askWithin(&elasticNow{run: true, allocs: allocs, hold: true}, elasticRoundWait)
	if err != nil {
		return nil, err
	}
	rep := r.(*elasticReport)
	if rep.err == nil && rep.held == nil {
		return nil, fmt.Errorf("no elastic job runs: nothing to schedule")
	}
	return rep.held, rep.err
}

// applyHeld applies a round holdAllocations scheduled and returns how many
// orders it sent.
func (co *Coordinator) applyHeld(held *elasticResult) (int, error) {
	r, err := co.askWithin(&elasticNow{run: true, apply: held}, elasticRoundWait)
	if err != nil {
		return 0, err
	}
	rep := r.(*elasticReport)
	return rep.orders, rep.err
}

// ElasticRounds is how many elastic rounds the coordinator has completed.
func (co *Coordinator) ElasticRounds() (int, error) {
	r, err := co.ask(&elasticNow{})
	if err != nil {
		return 0, err
	}
	return r.(*elasticReport).rounds, nil
}

// forget settles the jobs seen in earlier rounds that are not in this
// one's list (seen): a re-queued job keeps what it has attained, a finished
// or unknown one is forgotten. The policy takes a job missing from its list
// for a completed one; the others, and a job that completed after it was
// told the job was re-queued, are recorded in l.left, for the next round's
// placement.Departures.
func (l *elasticLoop) forget(recs map[string]*JobRecord, seen map[string]bool, now float64) {
	depart := func(id string, how placement.Departure) {
		if l.left == nil {
			l.left = map[string]placement.Departure{}
		}
		l.left[id] = how
	}
	for id := range l.attained {
		rec := recs[id]
		wasAway := l.away[id]
		switch {
		case seen[id]:
			delete(l.away, id)
		case rec == nil || rec.State.Terminal():
			delete(l.attained, id)
			delete(l.away, id)
			l.ended = append(l.ended, id)
			switch {
			case rec == nil || rec.State != StateCompleted:
				depart(id, placement.Ended)
			case wasAway:
				depart(id, placement.CompletedAway)
			}
		default:
			// Told to the policy as re-queued; its service follows its
			// record (a job on a node gossip suspects still runs there).
			l.accrue(id, now, heldGPUs(rec), 0)
			depart(id, placement.Requeued)
			if l.away == nil {
				l.away = map[string]bool{}
			}
			l.away[id] = true
		}
	}
}

// schedule runs the policy on a snapshot (off the actor's goroutine).
func (l *elasticLoop) schedule(r *elasticRound) map[string]placement.Allocation {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.policy.(placement.Departures); ok {
		for _, id := range slices.Sorted(maps.Keys(r.left)) {
			d.Left(id, r.left[id])
		}
	}
	if f, ok := l.policy.(placement.AppForgetter); ok {
		for _, id := range r.ended {
			f.ForgetApp(id) // the loop names each job's application after it
		}
	}
	l.oracle.round = r
	defer func() { l.oracle.round = nil }()
	// The round's deadline for predictions, for the policy's bounds here
	// and the orders' bounds after (bound, on the same goroutine).
	l.deadline = time.Time{}
	if l.cfg.PlanWait > 0 {
		l.deadline = time.Now().Add(l.cfg.PlanWait)
	}
	// The bound applied later is the oracle's, asked for every job even
	// when the policy itself did not ask (fifo, tiresias).
	for i := range r.states {
		st := &r.states[i]
		l.oracle.MaxLocalBatch(st.App, "")
		if j := r.jobs[st.App]; j != nil {
			// Its demand at its micro-batch now (within the deadline),
			// and its parameters from any batch's graph.
			d, ok := l.demand(j, int(j.spec.Batch))
			if g := l.ahead.graph(j.spec, j.devType); g != nil {
				j.params = paramBytes(g)
			}
			if ok {
				st.Prior = l.stepPrior(j, d, r.cluster)
			}
		}
	}
	return l.policy.Schedule(r.now, r.cluster, r.states)
}

// stepPrior is job j's predicted step times for the policy
// (placement.JobState.Prior, placement.PriorModel), cur being its demand at
// its micro-batch now: compute through the predictor's vanilla iteration
// times at that micro-batch and at the largest whose minimum budget (else
// vanilla peak) fits, or at batch 1 when the job already runs at that
// largest (all three already predicted for the memory bound: its binary
// search asks for batch 1 first); synchronisation from the loop's
// all-reduce model (syncAt) on this cluster's nodes. nil when the
// predictor gives no iteration time.
func (l *elasticLoop) stepPrior(j *elasticJob, cur *pb.Demand, cluster placement.ClusterState) *placement.ThroughputModel {
	l1, t1 := float64(j.spec.Batch), cur.GetIterationSeconds()
	if !(l1 > 0 && t1 > 0) {
		return nil
	}
	var l2, t2 float64
	for _, b := range []int{j.memMax, j.vanillaMax, 1} {
		if float64(b) == l1 || b <= 0 {
			continue
		}
		if d, ok := l.demand(j, b); ok && d.GetIterationSeconds() > 0 {
			l2, t2 = float64(b), d.GetIterationSeconds()
			break
		}
	}
	most := 0
	for _, n := range cluster.Nodes {
		most = max(most, n.GPUs)
	}
	sync := func(nodes, gpus int) float64 { return syncAt(j.params, nodes, gpus, l.cfg) }
	return placement.PriorModel(l1, t1, l2, t2, sync, len(cluster.Nodes), most, cluster.TotalGPUs())
}

// elasticSnapshot builds the policy's view, or nil when no elastic job runs.
func (c *coordActor) elasticSnapshot() *elasticRound {
	l := c.elastic
	r := &elasticRound{now: l.jobNow(), jobs: map[string]*elasticJob{}}
	names := make([]string, 0, len(c.nodes))
	for n, e := range c.nodes {
		if e.info.State == "alive" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	nodeIdx := map[string]int{}
	for _, n := range names {
		g := 0
		for i := range c.gpus {
			if c.gpus[i].Node == n && !c.gpus[i].Down {
				g++
			}
		}
		if g > 0 {
			nodeIdx[n] = len(r.cluster.Nodes)
			r.cluster.Nodes = append(r.cluster.Nodes, placement.Node{Name: n, GPUs: g})
		}
	}
	r.gpus = make([]placement.FitGPU, len(c.gpus))
	r.busy = map[string]bool{}
	for i, g := range c.gpus {
		r.gpus[i] = g
		r.gpus[i].Jobs = slices.Clone(g.Jobs)
		for _, fj := range g.Jobs {
			if c.leavesNoGaps(fj.ID) {
				r.busy[fj.ID] = true
			}
		}
	}
	recs := make([]*JobRecord, 0, len(c.recs))
	for _, rec := range c.recs {
		if inElasticLoop(rec) {
			recs = append(recs, rec)
		}
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].Seq < recs[b].Seq })
	r.inflight = map[string]string{}
	wall := time.Now()
	// claimed holds the GPUs of the jobs the policy sees running, earliest
	// submitted first: a later job on one of them (placement by predicted
	// peak shares GPUs) is seen as not started, so the policy may start it
	// elsewhere. Counted per node instead, two jobs on one GPU of a node
	// of two looked to the policy like one on each, and the other GPU
	// stood idle while they shared.
	claimed := map[string]bool{}
	for _, rec := range recs {
		held := rec.AllGPUs()
		gpus := held
		per, fg := c.onNodes(gpus, nodeIdx, len(r.cluster.Nodes))
		if fg == nil {
			continue // a replica's GPU is down or gone
		}
		spec := RunSpec(rec.ID, &rec.Spec)
		base := int(spec.Batch)
		batch := rec.Batch
		if batch <= 0 {
			batch = base
		}
		accum := max(0, rec.Accum)
		moving := false
		if o, ok := l.inFlight(rec, wall); ok {
			// The policy sees the job where its order in flight takes
			// it, at the order's batch: seen where it was, it was
			// ordered again (its job actor ignored the order) and its
			// targets looked free. Every target is kept from other
			// jobs' orders, a GPU the job also holds now too (the
			// allocation may leave it out of staying's).
			for _, g := range o.gpus {
				r.inflight[g] = rec.ID
			}
			if tper, tfg := c.onNodes(o.targets, nodeIdx, len(r.cluster.Nodes)); tfg != nil && !slices.ContainsFunc(tfg, func(g *placement.FitGPU) bool { return g.Down }) {
				gpus, per, fg, batch, accum, moving = o.targets, tper, tfg, o.batch, o.accum, true
			}
		}
		local := microBatch(batch, accum, len(gpus))
		spec.Batch = int32(local)
		free, _ := freeFor(fg, rec.ID)
		bmin, bmax := rec.Spec.BatchRange()
		if bmin <= 0 {
			bmin = batch
		}
		if bmax < bmin {
			bmax = max(bmin, batch)
		}
		r.jobs[rec.ID] = &elasticJob{id: rec.ID, spec: spec, min: bmin, max: bmax, batch: batch, accum: accum, free: free, devType: fg[0].DeviceType,
			gpus: slices.Clone(gpus), moving: moving, attempt: rec.Attempt}
		gmin, gmax := rec.Spec.GPURange()
		gmax = capUnoutranked(r, nodeIdx, rec.ID, int(rec.Spec.Priority), gpus, gmin, gmax)
		st := placement.JobState{ID: rec.ID, App: rec.ID, Arrival: rec.SubmittedAt.Sub(l.start).Seconds() * l.cfg.TimeScale,
			Replicas: requestedGPUs(&rec.Spec), Batch: batch, MinBatch: bmin, MaxBatch: bmax, BaseBatch: base, MinLocal: 1,
			MinGPUs: max(gmin, 0), MaxGPUs: max(gmax, 0), Running: true, SampleProgress: true,
			Attained: l.accrue(rec.ID, r.now, len(held), attainedSeed(rec)), Progress: float64(rec.Iteration), Target: float64(rec.Total), Restarts: rec.Attempt}
		fits := true
		for _, id := range gpus {
			fits = fits && !claimed[id]
		}
		if n, ok := st.RequestedGPUs(r.cluster.TotalGPUs()); l.asRequested() && (!ok || len(gpus) != n) {
			// fifo and tiresias run a job on exactly the GPUs it asks for,
			// as in the simulator, where they start it; here placement by
			// predicted peak started it on one GPU. Until it runs as asked
			// they see it as not started, and start it as asked when it
			// is its turn and the GPUs are free (it is never preempted:
			// left out, it keeps running where it is).
			fits = false
		}
		if fits {
			for _, id := range gpus {
				claimed[id] = true
			}
			st.Current = placement.Allocation{PerNode: per, LocalBatch: local, AccumSteps: accum}
		}
		keys := make([]obsKey, 0, len(l.obs[rec.ID]))
		for k := range l.obs[rec.ID] {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(a, b int) bool {
			x, y := keys[a], keys[b]
			return x.gpus < y.gpus || x.gpus == y.gpus && (x.nodes < y.nodes || x.nodes == y.nodes && x.local < y.local)
		})
		for _, k := range keys {
			o := l.obs[rec.ID][k]
			st.Observed = append(st.Observed, placement.Observation{Nodes: k.nodes, GPUs: k.gpus, LocalBatch: k.local, StepTime: o.step, SyncTime: o.sync, Shared: o.shared})
		}
		r.states = append(r.states, st)
	}
	// A job seen as not started keeps none of the GPUs the seen jobs run
	// on: an order starting it on their node would otherwise keep the
	// shared GPU, change nothing, and leave the node's other GPU idle.
	for _, st := range r.states {
		if j := r.jobs[st.ID]; st.Current.Empty() && j != nil {
			for _, id := range j.gpus {
				if claimed[id] {
					j.shared = append(j.shared, id)
				}
			}
		}
	}
	// A job left out of this round holds no GPUs from now on (see forget).
	seen := make(map[string]bool, len(r.states))
	for _, st := range r.states {
		seen[st.ID] = true
	}
	l.forget(c.recs, seen, r.now)
	if len(r.states) == 0 || len(r.cluster.Nodes) == 0 {
		return nil
	}
	r.left, l.left = l.left, nil
	r.ended, l.ended = l.ended, nil
	return r
}

// onNodes counts gpus per node of the round (nodeIdx: a live node's index,
// of n) and finds them among the coordinator's GPUs; fg nil: one is down,
// gone or on a node the round leaves out.
func (c *coordActor) onNodes(gpus []string, nodeIdx map[string]int, n int) (per []int, fg []*placement.FitGPU) {
	per = make([]int, n)
	for _, id := range gpus {
		g := c.fitGPU(id)
		if g == nil {
			return nil, nil
		}
		ni, ok := nodeIdx[g.Node]
		if !ok {
			return nil, nil
		}
		per[ni]++
		fg = append(fg, g)
	}
	if len(fg) == 0 {
		return nil, nil
	}
	return per, fg
}

// capUnoutranked is the top of a job's GPU range for this round (gmax; 0:
// no bound): at most the GPUs it holds plus the live GPUs where no
// higher-priority job that leaves no kernel gaps runs. bound refuses an
// order that would put a replica beside such a job (it would stall the
// whole data-parallel job), so without the cap the policy proposed that
// growth again every round and every round it was not applied. The cap
// never goes below the GPUs the job holds or its minimum, and it lifts as
// soon as the higher-priority job leaves. It is a count: the policy picks
// GPUs per node, so a layout that needs more such GPUs on one node than
// the node has can still be refused.
func capUnoutranked(r *elasticRound, nodeIdx map[string]int, id string, prio int, held []string, gmin, gmax int) int {
	n := len(held)
	for i := range r.gpus {
		g := &r.gpus[i]
		if _, alive := nodeIdx[g.Node]; !alive || g.Down || slices.Contains(held, g.ID) {
			continue
		}
		if !outrankedByBusy(g, id, prio, r.busy) {
			n++
		}
	}
	n = max(n, gmin, 1)
	if gmax > 0 && gmax <= n {
		return gmax
	}
	return n
}

// attainedSeed is the attained service of a job the loop sees for the
// first time: what the store kept for it (the coordinator restarted), or
// else its devices' run time on the GPUs it holds now (it started before
// the loop counted it).
func attainedSeed(rec *JobRecord) float64 {
	if rec.AttainedGPUSeconds > 0 {
		return rec.AttainedGPUSeconds
	}
	return rec.VirtualSeconds * float64(len(rec.AllGPUs()))
}

// requestedGPUs is the GPU count a job asks for: the top of its GPU range
// (its count when fixed), at least one.
func requestedGPUs(s *workload.Spec) int {
	lo, hi := s.GPURange()
	return max(lo, hi, 1)
}

// asRequested reports whether the policy runs jobs with exactly the GPUs
// and batch they ask for (it implements placement.AsRequested, as FIFO and
// Tiresias do) rather than choosing them (ONES).
func (l *elasticLoop) asRequested() bool { return placement.RunsAsRequested(l.policy) }

func (c *coordActor) fitGPU(id string) *placement.FitGPU { return findGPU(c.gpus, id) }

// findGPU returns the GPU of gpus with this id, or nil.
func findGPU(gpus []placement.FitGPU, id string) *placement.FitGPU {
	for i := range gpus {
		if gpus[i].ID == id {
			return &gpus[i]
		}
	}
	return nil
}

// applyElastic turns the policy's allocations into orders to job actors.
// An order's per-GPU batch is bounded by the budget free for the job on the
// GPUs it would run on (a move's targets may have less room than the GPUs
// it holds, which the policy's memory oracle answered for); when not even
// the smallest per-GPU batch of the job's range fits there, the change is
// refused here, with a resize_refused event saying why, and nothing is
// ordered.
func (c *coordActor) applyElastic(ctx actor.Context, m *elasticResult) int {
	l := c.elastic
	ids := make([]string, 0, len(m.round.jobs))
	for id := range m.round.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// The GPUs now, with the orders this round has sent accounted as
	// bound accounted them (a job that joined a target since the snapshot
	// leaves less room than bound saw: that order waits for the next
	// round).
	view := cloneGPUs(c.gpus)
	orders := 0
	noGPUs := map[string]string{}
	planning := map[string]int{}
	defer func() { l.noGPUs, l.planning = noGPUs, planning }()
	for _, id := range ids {
		j := m.round.jobs[id]
		a, ok := m.allocs[id]
		rec, pid := c.recs[id], c.pids[id]
		if !ok || a.Empty() || rec == nil || pid == nil || rec.State != StateRunning {
			continue
		}
		if j.moving && rec.Attempt == j.attempt && (!sameSet(rec.AllGPUs(), j.gpus) || rec.Batch != j.batch || rec.Accum != j.accum) {
			// Its order is still in flight (the policy saw it at the
			// order's targets): an allocation that keeps it there needs
			// nothing; any other waits for the order to end.
			if b := j.to; b == nil || b.err != nil || !b.unchanged(j) {
				l.log.Debug("elastic allocation not applied: the job's previous order is still being applied", "job", id, "allocation", a.String(), "to", j.gpus)
				c.notApplied(NotAppliedInFlight)
			}
			continue
		}
		if cur := rec.Batch; (cur > 0 && cur != j.batch) || rec.Accum != j.accum || !sameSet(rec.AllGPUs(), j.gpus) || rec.Attempt != j.attempt {
			// Changed since the snapshot: resized (perhaps only into
			// other micro-steps), moved, or requeued and
			// placed again (perhaps on the same GPUs at the same batch,
			// but the policy decided for the attempt it saw). The next
			// round decides from the record as it is then.
			continue
		}
		n := a.NumGPUs()
		if gmin, gmax := rec.Spec.GPURange(); n < gmin || gmax > 0 && n > gmax {
			// No policy does this (placement.JobState.MinGPUs, MaxGPUs);
			// the coordinator does not order it either.
			l.log.Info("elastic allocation not applied: outside the job's GPU range", "job", id, "allocation", a.String(), "min", gmin, "max", gmax)
			c.notApplied(NotAppliedGPURange)
			continue
		}
		b := j.to
		if b != nil && errors.Is(b.err, errPlanning) {
			// Logged at info level once it has waited planningRounds
			// rounds in a row: a prediction that takes that long (or
			// never ends) holds the job's changes back.
			planning[id] = l.planning[id] + 1
			logf := l.log.Debug
			if planning[id] == planningRounds {
				logf = l.log.Info
			}
			logf("elastic allocation not applied yet", "job", id, "allocation", a.String(), "rounds", planning[id], "why", b.err)
			c.notApplied(NotAppliedPlanning)
			continue
		}
		if b == nil || b.err != nil {
			err := fmt.Errorf("no GPUs were picked for it")
			if b != nil {
				err = b.err
			}
			logf := l.log.Info
			if l.noGPUs[id] == err.Error() {
				logf = l.log.Debug
			}
			noGPUs[id] = err.Error()
			logf("elastic allocation not applied", "job", id, "allocation", a.String(), "err", err)
			c.notApplied(NotAppliedNoGPUs)
			continue
		}
		targets, gs, err := c.elasticTargets(view, b.gpus)
		if err != nil {
			l.log.Info("elastic allocation not applied", "job", id, "allocation", a.String(), "err", err)
			c.notApplied(NotAppliedGPUDown)
			continue
		}
		names := slices.Clone(b.gpus)
		if free, _ := freeFor(gs, id); free < b.free {
			// Jobs joined those GPUs since the round's snapshot: the
			// next round bounds the order again.
			l.log.Info("elastic allocation not applied: its GPUs changed since the round began", "job", id, "allocation", a.String(), "gpus", names)
			c.notApplied(NotAppliedGPUsChanged)
			continue
		}
		fits := b.maxLocal > 0
		if b.unchanged(j) {
			continue
		}
		micro, accum := b.micro, b.accum
		batch := global(micro, accum, n)
		if c.refusedAgain(id, names, batch, accum) {
			l.log.Debug("elastic change refused before; not ordered again until its GPUs change", "job", id, "gpus", names)
			c.notApplied(NotAppliedRefusedBefore)
			continue
		}
		why := fmt.Sprintf("%s: %s", l.cfg.Policy, a)
		switch {
		case b.moreSteps:
			why += fmt.Sprintf(" (in %d micro-steps: at most %d per GPU fits in one", accum+1, b.maxLocal)
			if want := b.per * n; batch != want {
				why += fmt.Sprintf("; batch %d: the closest to %d that fits in at most %d micro-steps within the job's range", batch, want, max(l.cfg.MaxMicroSteps, a.AccumSteps+1))
			}
			why += ")"
		case accum != a.AccumSteps:
			why += fmt.Sprintf(" (in %d micro-steps: the job's batch range leaves no whole micro-batch for %d)", accum+1, a.AccumSteps+1)
		}
		if j.memMax > 0 {
			why += fmt.Sprintf("; memory allows batch ≤ %d per GPU with TENSILE, ≤ %d at vanilla peak in %s free", j.memMax, j.vanillaMax, gpu.FormatBytes(j.free))
		}
		if !fits {
			c.refuseElastic(rec, j, batch, accum, names, fmt.Sprintf("%s has %s free after its other jobs' minimum budgets; the smallest per-GPU batch, %d, needs ≥ %s",
				b.tightest, gpu.FormatBytes(b.free), b.lowMicro, gpu.FormatBytes(b.lowNeeds)), why)
			c.notApplied(NotAppliedMemory)
			continue
		}
		if b.free < j.free || !sameSet(names, j.gpus) {
			why += fmt.Sprintf("; ≤ %d per GPU fits the %s free on %s", b.maxLocal, gpu.FormatBytes(b.free), b.tightest)
		}
		sync := syncSeconds(j.params, a.PerNode, l.cfg)
		seq := orderSeq.Add(1)
		ctx.Send(pid, &reconfigure{batch: micro, accum: accum, targets: targets, sync: sync, restart: max(0, l.cfg.MoveCost), reason: why, timeout: l.cfg.AnswerTimeout,
			attempt: j.attempt, from: slices.Clone(j.gpus), fromBatch: j.batch, fromAccum: j.accum, seq: seq})
		reserveOrder(view, id, int(rec.Spec.Priority), names, b.needs)
		orders++
		now := time.Now()
		if _, busy := l.inFlight(rec, now); !busy {
			// An order sent while an earlier one is still being
			// applied is ignored by the job actor: the earlier one's
			// targets stay the ones kept from other jobs.
			o := c.changeNow(names, batch, accum)
			o.attempt, o.from, o.at, o.seq, o.targets = j.attempt, sortedCopy(j.gpus), now, seq, names
			l.sent[id] = o
		}
	}
	l.log.Debug("elastic round", "round", l.rounds, "jobs", len(m.round.jobs), "orders", orders, "took", m.took)
	if c.metrics != nil {
		c.metrics.ElasticRounds.Inc()
		c.metrics.ElasticOrders.Add(float64(orders))
	}
	return orders
}

// notApplied counts an allocation of the round that is not ordered.
func (c *coordActor) notApplied(reason NotAppliedReason) {
	if c.metrics != nil {
		c.metrics.ElasticNotApplied.WithLabelValues(string(reason)).Inc()
	}
}

// refuseElastic publishes a change the coordinator does not order (as the
// job actor publishes one its devices refuse) and remembers it.
func (c *coordActor) refuseElastic(rec *JobRecord, j *elasticJob, batch, accum int, names []string, why, order string) {
	c.elastic.log.Info("elastic change refused; the job keeps running where it was", "job", rec.ID, "to", names, "batch", batch, "why", why)
	e := transport.Event{Type: transport.EvResizeRefused, Job: rec.ID, Name: rec.Spec.Name, GPU: rec.GPU, Node: rec.Node,
		Batch: batch, OldBatch: j.batch, Accum: accum, OldAccum: j.accum, GPUs: len(names), OldGPUs: len(j.gpus), GPUIDs: names, OldGPUIDs: slices.Clone(j.gpus),
		Iteration: rec.Iteration, Total: rec.Total,
		Reason: fmt.Sprintf("not applied (%s); keeps running on %s at batch %d: %s", why, strings.Join(j.gpus, ","), j.batch, order)}
	c.publish(e)
	delete(c.elastic.sent, rec.ID) // refused now, not an order in flight
	c.elasticRefused(&e)
}

// changeNow is a change to GPUs at a global batch and extra micro-steps,
// with its GPUs sorted and their generations now.
func (c *coordActor) changeNow(gpus []string, batch, accum int) refusedChange {
	ch := refusedChange{gpus: sortedCopy(gpus), batch: batch, accum: accum}
	for _, g := range ch.gpus {
		ch.gens = append(ch.gens, c.gpuGen[g])
	}
	return ch
}

// refusedAgain reports whether the job refused this change (GPUs, global
// batch and micro-steps: the same batch in more micro-steps needs less
// memory) and nothing has left those GPUs since, or, for a change that was
// only unanswered, its wait is not over. It is called while a round is
// applied, which l.rounds already counts.
func (c *coordActor) refusedAgain(id string, gpus []string, batch, accum int) bool {
	rf, ok := c.elastic.refused[id]
	if !ok || rf.batch != batch || rf.accum != accum || !slices.Equal(rf.gpus, sortedCopy(gpus)) {
		return false
	}
	if rf.misses > 0 && c.elastic.rounds >= rf.retry {
		return false // unanswered, and its wait is over
	}
	for i, g := range rf.gpus {
		if c.gpuGen[g] != rf.gens[i] {
			return false
		}
	}
	return true
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// elasticTargets finds the GPUs bound picked for an order in gpus (the
// coordinator's GPUs now) with their device actors; they must still be up.
func (c *coordActor) elasticTargets(gpus []placement.FitGPU, names []string) ([]target, []*placement.FitGPU, error) {
	out := make([]target, len(names))
	chosen := make([]*placement.FitGPU, len(names))
	for i, id := range names {
		g := findGPU(gpus, id)
		if g == nil || g.Down {
			return nil, nil, fmt.Errorf("GPU %s is down or gone since the round began", id)
		}
		if c.nodes[g.Node] == nil {
			return nil, nil, fmt.Errorf("node %s of GPU %s is unknown", g.Node, g.ID)
		}
		out[i], chosen[i] = target{gpu: g.ID, node: g.Node, device: c.devicePID(g)}, g
	}
	return out, chosen, nil
}

// pickTargets turns an allocation's per-node GPU counts into GPUs of gpus:
// on each node the job keeps the GPUs it holds there (as many as the count
// allows) and takes the rest from the node's live GPUs that are not taken
// (another job the policy sees runs there): those where it is not
// outranked first, then the fewest jobs, then the least reserved memory,
// then by name. The job's first GPU stays first when it keeps it.
func pickTargets(gpus []placement.FitGPU, nodes []placement.Node, held []string, a placement.Allocation, outranked, taken func(*placement.FitGPU) bool) ([]*placement.FitGPU, error) {
	var chosen []*placement.FitGPU
	for ni, k := range a.PerNode {
		if k <= 0 {
			continue
		}
		if ni >= len(nodes) {
			return nil, fmt.Errorf("allocation names node %d of %d", ni, len(nodes))
		}
		node := nodes[ni].Name
		here := keptOn(gpus, held, node, k)
		var cands []*placement.FitGPU
		nTaken := 0
		for i := range gpus {
			g := &gpus[i]
			if g.Node != node || g.Down || slices.Contains(held, g.ID) {
				continue
			}
			if taken(g) {
				nTaken++
				continue
			}
			cands = append(cands, g)
		}
		down := make(map[*placement.FitGPU]bool, len(cands))
		for _, g := range cands {
			down[g] = outranked(g)
		}
		sort.SliceStable(cands, func(x, y int) bool {
			if down[cands[x]] != down[cands[y]] {
				return !down[cands[x]]
			}
			if len(cands[x].Jobs) != len(cands[y].Jobs) {
				return len(cands[x].Jobs) < len(cands[y].Jobs)
			}
			if cands[x].Reserved() != cands[y].Reserved() {
				return cands[x].Reserved() < cands[y].Reserved()
			}
			return cands[x].ID < cands[y].ID
		})
		for _, g := range cands {
			if len(here) == k {
				break
			}
			here = append(here, g)
		}
		if len(here) < k {
			if nTaken > 0 {
				return nil, fmt.Errorf("node %s has %d GPUs for the job for the %d the allocation gives: %d more run jobs that stay there (left out by the policy, or kept there; the loop does not preempt a job) or are the targets of another job's move still in flight", node, len(here), k, nTaken)
			}
			return nil, fmt.Errorf("node %s has %d live GPUs for the %d the allocation gives", node, len(here), k)
		}
		chosen = append(chosen, here...)
	}
	if len(held) > 0 {
		for i, g := range chosen {
			if g.ID == held[0] {
				chosen[0], chosen[i] = chosen[i], chosen[0]
				break
			}
		}
	}
	return chosen, nil
}

// keptOn is what an order giving a job k GPUs on node keeps of the GPUs
// it holds (held): the first k of them there that are live.
func keptOn(gpus []placement.FitGPU, held []string, node string, k int) []*placement.FitGPU {
	var here []*placement.FitGPU
	for _, id := range held {
		if g := findGPU(gpus, id); g != nil && g.Node == node && !g.Down && len(here) < k {
			here = append(here, g)
		}
	}
	return here
}

// paramBytes is the bytes of a graph's parameters.
func paramBytes(g *workload.Graph) int64 {
	var b int64
	for i := range g.Tensors {
		if g.Tensors[i].Kind == workload.Param {
			b += g.Tensors[i].Bytes
		}
	}
	return b
}

// elasticRefused remembers a refused change (a resize_refused event). A
// change given up only because devices did not answer in time (they may
// have been slow, not full) skips the next 1, 2, 4, … rounds (doubling with
// each miss in a row, up to maxUnansweredBackoff) and may be ordered again
// after them; one a device refused waits until something leaves one of
// its GPUs.
func (c *coordActor) elasticRefused(e *transport.Event) {
	if c.elastic == nil || e == nil {
		return
	}
	l := c.elastic
	if e.Type == transport.EvResized && e.Batch > 0 {
		delete(l.sent, e.Job)
		// An elastic change was applied: misses of an unanswered change
		// before it are no longer in a row (a device's refusal stays until
		// something leaves its GPUs).
		if rf, ok := l.refused[e.Job]; ok && rf.misses > 0 {
			delete(l.refused, e.Job)
		}
		return
	}
	if e.Type != transport.EvResizeRefused {
		return
	}
	rf := c.changeNow(e.GPUIDs, e.Batch, e.Accum)
	if o, ok := l.sent[e.Job]; ok && o.batch == rf.batch && o.accum == rf.accum && slices.Equal(o.gpus, rf.gpus) {
		rf.gens = o.gens // as they were when the order went out
	}
	delete(l.sent, e.Job)
	if e.Unanswered {
		rf.misses = 1
		if prev, ok := l.refused[e.Job]; ok && prev.misses > 0 && prev.batch == rf.batch && prev.accum == rf.accum && slices.Equal(prev.gpus, rf.gpus) {
			rf.misses = prev.misses + 1
		}
		wait := maxUnansweredBackoff
		if rf.misses <= 4 {
			wait = min(1<<(rf.misses-1), wait)
		}
		rf.retry = l.rounds + 1 + wait
	}
	l.refused[e.Job] = rf
}

// elasticObserve keeps what the loop learns from job updates: measured
// iteration times by batch, and the minimum budget a resized job reserves
// on its GPU.
func (c *coordActor) elasticObserve(r *JobRecord) {
	l := c.elastic
	if l == nil {
		return
	}
	if r.State.Terminal() {
		delete(l.obs, r.ID)
		delete(l.refused, r.ID)
		delete(l.sent, r.ID)
		return
	}
	gpus := r.AllGPUs()
	if r.State == StateRunning && r.Batch > 0 && r.IterSeconds > 0 && len(gpus) > 0 && !l.implausible(r) {
		if l.obs[r.ID] == nil {
			l.obs[r.ID] = map[obsKey]obsTime{}
		}
		nodes := map[string]bool{}
		for _, id := range gpus {
			if g := c.fitGPU(id); g != nil {
				nodes[g.Node] = true
			}
		}
		// An iteration of several micro-steps synchronises once: each
		// micro-step but the last takes its step time less the sync.
		sync := math.Min(r.SyncSeconds, r.IterSeconds)
		l.obs[r.ID][obsKey{gpus: len(gpus), nodes: max(1, len(nodes)), local: microBatch(r.Batch, r.Accum, len(gpus))}] =
			obsTime{step: placement.MicroStepTime(r.IterSeconds, sync, max(0, r.Accum)), sync: sync, shared: c.sharesElastic(r.ID, gpus)}
	}
	for _, id := range gpus {
		if g := c.fitGPU(id); g != nil && r.MinBudget > 0 {
			for k := range g.Jobs {
				if g.Jobs[k].ID == r.ID {
					g.Jobs[k].Min, g.Jobs[k].Vanilla = r.MinBudget, r.VanillaPeak
				}
			}
		}
	}
}

// inElasticLoop says whether the elastic loop's policy places rec: a
// running elastic training job on GPUs.
func inElasticLoop(rec *JobRecord) bool {
	return rec.State == StateRunning && rec.GPU != "" && rec.Spec.Kind == workload.Train && rec.Spec.Elastic()
}

// sharesElastic says whether another running elastic training job (one the
// policy places, which the loop will start elsewhere when the policy says)
// is on one of gpus besides job id. A job's time beside an inference
// service or a fixed job is how fast it runs there for good; beside another
// elastic job it is how fast it ran until the policy parted them.
func (c *coordActor) sharesElastic(id string, gpus []string) bool {
	for _, gid := range gpus {
		g := c.fitGPU(gid)
		if g == nil {
			continue
		}
		for _, fj := range g.Jobs {
			if o := c.recs[fj.ID]; fj.ID != id && o != nil && inElasticLoop(o) {
				return true
			}
		}
	}
	return false
}

// maxIterFactor bounds the iteration times the elastic loop learns: at most
// this many times faster or slower than the job's predicted one.
const maxIterFactor = 1000

// implausible reports (and logs) a running job's iteration time that is
// more than maxIterFactor times away from its predicted one (the vanilla
// time of its per-GPU batch alone on its GPU type; 0: not known), which the
// loop does not learn. A device measures the job's time under its memory
// plan, beside its neighbours and, with replicas, with their
// synchronisation: slower than the prediction, by a small factor, or a
// large one for a job that a higher priority leaves few kernel gaps; it
// never runs the job a thousand times faster. ONES takes the first
// iteration time it is given for a shape as the shape's time, and follows
// later changes only through the median of several rounds' reports (see
// ONES.learn), so one garbled report at the round that first sees a shape
// would set its model of that shape until the job's later reports there
// outvote it; later garbled reports move nothing. The round passes the
// latest time per shape, so a lasting change is followed.
func (l *elasticLoop) implausible(r *JobRecord) bool {
	pred := r.PredSeconds
	if !(pred > 0) || (r.IterSeconds >= pred/maxIterFactor && r.IterSeconds <= pred*maxIterFactor) {
		return false
	}
	l.log.Warn("reported iteration time not learned: over a thousand times away from the job's predicted one", "job", r.ID, "gpus", r.AllGPUs(),
		"iteration_seconds", r.IterSeconds, "predicted_seconds", pred)
	return true
}
