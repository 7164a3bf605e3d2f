package actors

import (
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
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
//     progress and target in those iterations, attained GPU-seconds = its
//     virtual run time, its current allocation (one GPU on its node; jobs
//     beyond a node's GPU count, possible because the runtime co-locates
//     jobs on a GPU, are shown as holding none), and one observation per
//     batch size it has reported an iteration time at (progress
//     checkpoints);
//   - memory: a MemoryOracle backed by tensorsched's MinBudget (through the
//     coordinator's Predictor): the largest batch whose minimum budget at the
//     job's tolerance fits its GPU's capacity less its neighbours' minimum
//     budgets. TENSILE's minimum is below the vanilla peak, so it widens the
//     batches the policy may choose.
//
// What is applied: the batch size. The live runtime runs a job on one GPU,
// so a GPU count other than one is not applied: the job runs the global
// batch the policy chose (GPUs × per-GPU batch × accumulation steps) on its
// one GPU, clamped to its range and to the memory bound, and the event
// reports the GPUs it really holds. Jobs the policy leaves out (queued or
// preempted in its view) are not preempted; pending jobs are placed by
// predicted peak as before.

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
}

// DefaultElasticInterval is the default interval of the elastic loop, in
// seconds of job time (the simulator's default scheduling interval).
const DefaultElasticInterval = 60.0

// elasticLoop is the coordinator actor's elastic state.
type elasticLoop struct {
	cfg     ElasticConfig
	pred    Predictor
	log     *slog.Logger
	mu      sync.Mutex // guards policy (run off the actor's goroutine)
	policy  placement.Policy
	oracle  *roundOracle // the policy's MemoryOracle
	start   time.Time
	started bool
	busy    bool
	rounds  int
	obs     map[string]map[int]float64 // job -> batch -> seconds per iteration
}

func newElasticLoop(cfg ElasticConfig, pred Predictor, log *slog.Logger) (*elasticLoop, error) {
	if cfg.Policy == "" {
		cfg.Policy = "ones"
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 100
	}
	if cfg.Interval < 0 || math.IsNaN(cfg.Interval) || math.IsInf(cfg.Interval, 0) {
		return nil, fmt.Errorf("elastic interval %v: must be a finite number of seconds ≥ 0 (0 disables the loop)", cfg.Interval)
	}
	l := &elasticLoop{cfg: cfg, pred: pred, log: log.With("loop", "elastic"), obs: map[string]map[int]float64{}}
	var err error
	// The memory oracle answers from the round being scheduled.
	l.oracle = &roundOracle{l: l}
	l.policy, err = placement.NewPolicy(cfg.Policy, placement.PolicyOptions{Seed: cfg.Seed, Memory: l.oracle,
		Interval: cfg.Interval})
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	return l, nil
}

// Messages of the loop to the coordinator actor. Ticks and results carry
// the actor that scheduled them: a coordinator started later in the same
// process takes the stopped one's name, and must not act on its timers.
type (
	elasticTick   struct{ owner *coordActor }
	elasticNow    struct{ run bool } // (run one round now and) answer *elasticReport
	elasticReport struct {
		rounds, orders int
		err            error
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
	batch   int   // current
	free    int64 // its GPU's capacity less its neighbours' minimum budgets
	devType string
	// Memory bounds from the oracle: largest batch by TENSILE's minimum
	// budget and by the vanilla peak (0 until asked).
	memMax, vanillaMax int
}

// elasticRound is one round's snapshot, handed to the policy goroutine.
type elasticRound struct {
	now     float64
	cluster placement.ClusterState
	states  []placement.JobState
	jobs    map[string]*elasticJob
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

// maxBatch is the largest batch in the job's range whose minimum budget
// (and, for comparison, whose vanilla peak) fits the job's free budget; the
// smallest batch of the range when none does. Both grow with the batch, so
// a binary search finds them.
func (l *elasticLoop) maxBatch(j *elasticJob) (byMin, byVanilla int) {
	demand := func(b int) (*pb.Demand, bool) {
		s := proto.Clone(j.spec).(*pb.JobSpec)
		s.Batch = int32(b)
		p, err := l.pred.Predict(s, j.devType)
		if err != nil {
			return nil, false
		}
		return p.Demand, true
	}
	search := func(fits func(*pb.Demand) bool) int {
		lo, hi := j.min, j.max
		if d, ok := demand(lo); !ok || !fits(d) {
			return j.min
		}
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if d, ok := demand(mid); ok && fits(d) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo
	}
	byMin = search(func(d *pb.Demand) bool { return d.MinBudget <= j.free })
	byVanilla = search(func(d *pb.Demand) bool { return max(d.VanillaPeak, d.MinBudget) <= j.free })
	return byMin, byVanilla
}

// startElastic schedules the first round (once per coordinator).
func (c *coordActor) startElastic(ctx actor.Context) {
	l := c.elastic
	if l == nil || l.started || l.cfg.Interval <= 0 {
		return
	}
	l.started, l.start = true, time.Now()
	l.log.Info("elastic loop started", "policy", l.cfg.Policy, "interval_s", l.cfg.Interval, "time_scale", l.cfg.TimeScale)
	c.nextElasticTick(ctx)
}

func (c *coordActor) nextElasticTick(ctx actor.Context) {
	wall := time.Duration(c.elastic.cfg.Interval / c.elastic.cfg.TimeScale * float64(time.Second))
	self, sys := ctx.Self(), ctx.ActorSystem()
	time.AfterFunc(max(wall, time.Millisecond), func() { sys.Root.Send(self, &elasticTick{owner: c}) })
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
					sys.Root.Send(self, &elasticResult{owner: c, round: r, allocs: allocs, took: time.Since(start)})
				}()
			}
		}
		c.nextElasticTick(ctx)
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
		if l.busy {
			rep.err = fmt.Errorf("an elastic round is already running")
		} else if r := c.elasticSnapshot(); r != nil {
			start := time.Now()
			allocs := l.schedule(r)
			l.rounds++
			rep.rounds = l.rounds
			rep.orders = c.applyElastic(ctx, &elasticResult{owner: c, round: r, allocs: allocs, took: time.Since(start)})
		}
		ctx.Respond(rep)
	}
}

// RunElasticRound runs one round of the elastic loop now (whether or not
// the periodic loop is on) and returns how many resize orders it sent.
func (co *Coordinator) RunElasticRound() (int, error) {
	r, err := co.ask(&elasticNow{run: true})
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

// schedule runs the policy on a snapshot (off the actor's goroutine).
func (l *elasticLoop) schedule(r *elasticRound) map[string]placement.Allocation {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.oracle.round = r
	defer func() { l.oracle.round = nil }()
	// The bound applied later is the oracle's, asked for every job even
	// when the policy itself did not ask (fifo, tiresias).
	for _, st := range r.states {
		l.oracle.MaxLocalBatch(st.App, "")
	}
	return l.policy.Schedule(r.now, r.cluster, r.states)
}

// elasticSnapshot builds the policy's view, or nil when no elastic job runs.
func (c *coordActor) elasticSnapshot() *elasticRound {
	l := c.elastic
	r := &elasticRound{now: time.Since(l.start).Seconds() * l.cfg.TimeScale, jobs: map[string]*elasticJob{}}
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
	recs := make([]*JobRecord, 0, len(c.recs))
	for _, rec := range c.recs {
		if rec.State == StateRunning && rec.GPU != "" && rec.Spec.Kind == workload.Train && rec.Spec.Elastic() {
			recs = append(recs, rec)
		}
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].Seq < recs[b].Seq })
	held := make([]int, len(r.cluster.Nodes))
	for _, rec := range recs {
		ni, ok := nodeIdx[rec.Node]
		g := c.fitGPU(rec.GPU)
		if !ok || g == nil {
			continue
		}
		spec := RunSpec(rec.ID, &rec.Spec)
		base := int(spec.Batch)
		batch := rec.Batch
		if batch <= 0 {
			batch = base
		}
		spec.Batch = int32(batch)
		free := g.Capacity
		for _, fj := range g.Jobs {
			if fj.ID != rec.ID {
				free -= fj.Min
			}
		}
		bmin, bmax := rec.Spec.BatchRange()
		if bmin <= 0 {
			bmin = batch
		}
		if bmax < bmin {
			bmax = max(bmin, batch)
		}
		r.jobs[rec.ID] = &elasticJob{id: rec.ID, spec: spec, min: bmin, max: bmax, batch: batch, free: free, devType: g.DeviceType}
		st := placement.JobState{ID: rec.ID, App: rec.ID, Arrival: rec.SubmittedAt.Sub(l.start).Seconds() * l.cfg.TimeScale,
			Replicas: 1, Batch: batch, MinBatch: bmin, MaxBatch: bmax, BaseBatch: base, MinLocal: bmin,
			Attained: rec.VirtualSeconds, Progress: float64(rec.Iteration), Target: float64(rec.Total), Restarts: rec.Attempt}
		if held[ni] < r.cluster.Nodes[ni].GPUs {
			held[ni]++
			per := make([]int, len(r.cluster.Nodes))
			per[ni] = 1
			st.Current = placement.Allocation{PerNode: per, LocalBatch: batch}
		}
		bs := make([]int, 0, len(l.obs[rec.ID]))
		for b := range l.obs[rec.ID] {
			bs = append(bs, b)
		}
		sort.Ints(bs)
		for _, b := range bs {
			st.Observed = append(st.Observed, placement.Observation{Nodes: 1, GPUs: 1, LocalBatch: b, StepTime: l.obs[rec.ID][b]})
		}
		r.states = append(r.states, st)
	}
	if len(r.states) == 0 || len(r.cluster.Nodes) == 0 {
		return nil
	}
	return r
}

func (c *coordActor) fitGPU(id string) *placement.FitGPU {
	for i := range c.gpus {
		if c.gpus[i].ID == id {
			return &c.gpus[i]
		}
	}
	return nil
}

// applyElastic turns the policy's allocations into resize orders.
func (c *coordActor) applyElastic(ctx actor.Context, m *elasticResult) int {
	l := c.elastic
	ids := make([]string, 0, len(m.round.jobs))
	for id := range m.round.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	orders := 0
	for _, id := range ids {
		j := m.round.jobs[id]
		a, ok := m.allocs[id]
		rec, pid := c.recs[id], c.pids[id]
		if !ok || a.Empty() || rec == nil || pid == nil || rec.State != StateRunning {
			continue
		}
		if cur := rec.Batch; cur > 0 && cur != j.batch {
			continue // resized since the snapshot
		}
		limit := j.max
		if j.memMax > 0 {
			limit = min(limit, j.memMax)
		}
		nb := min(max(a.GlobalBatch(), j.min), limit)
		if nb == j.batch {
			continue
		}
		why := fmt.Sprintf("%s: %s", l.cfg.Policy, a)
		if a.NumGPUs() != 1 {
			why += fmt.Sprintf(" (global batch %d on the job's one GPU; the live runtime runs a job on one GPU)", a.GlobalBatch())
		}
		if j.memMax > 0 {
			why += fmt.Sprintf("; memory allows batch ≤ %d with TENSILE, ≤ %d at vanilla peak in %s free", j.memMax, j.vanillaMax, gpu.FormatBytes(j.free))
		}
		ctx.Send(pid, &resizeOrder{batch: nb, gpus: a.NumGPUs(), reason: why})
		orders++
	}
	l.log.Debug("elastic round", "round", l.rounds, "jobs", len(m.round.jobs), "orders", orders, "took", m.took)
	return orders
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
		return
	}
	if r.State == StateRunning && r.Batch > 0 && r.IterSeconds > 0 {
		if l.obs[r.ID] == nil {
			l.obs[r.ID] = map[int]float64{}
		}
		l.obs[r.ID][r.Batch] = r.IterSeconds
	}
	if g := c.fitGPU(r.GPU); g != nil && r.MinBudget > 0 {
		for k := range g.Jobs {
			if g.Jobs[k].ID == r.ID {
				g.Jobs[k].Min, g.Jobs[k].Vanilla = r.MinBudget, r.VanillaPeak
			}
		}
	}
}
