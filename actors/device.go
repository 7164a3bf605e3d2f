package actors

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/tensorsched/fikit"
)

// DeviceConfig configures one device actor.
type DeviceConfig struct {
	Node    string
	Index   int
	Profile gpu.Profile
	// TimeScale paces virtual time in wall-clock: 100 runs a hundred times
	// faster than real time.
	TimeScale float64
	Predictor Predictor
	Planner   Planner
	// Tick is the wall-clock interval between progress steps (default 50ms).
	Tick time.Duration
	// ProgressEvery is the least wall-clock time between progress reports
	// to a job actor (default 250ms); completion is reported at once.
	ProgressEvery time.Duration
	Log           *slog.Logger
	Metrics       *NodeMetrics
	// KernelMode is how the GPU dispatches its jobs' kernels (fikit.FIKIT
	// when empty; fikit_device.go).
	KernelMode fikit.Mode
}

// GPUName is a device's cluster-wide name: "<node>/gpu<index>".
func GPUName(node string, index int) string { return fmt.Sprintf("%s/gpu%d", node, index) }

// DeviceActorName is the device actor's id under the node actor.
func DeviceActorName(index int) string { return fmt.Sprintf("gpu%d", index) }

// ledger is the part of a device's state that survives a restart of its
// actor: which jobs it admitted, with what demand and how far they got. A
// restarted device actor rebuilds everything else (graphs, budgets, the
// plan) from it and re-plans.
type ledger struct {
	mu       sync.Mutex
	jobs     map[string]*ledgerEntry
	finished map[string]*pb.Progress
	restarts int64
	high     int64
	// planVersion continues across restarts, so versions never repeat.
	planVersion int64
}

type ledgerEntry struct {
	req  *pb.BudgetRequest
	done float64 // iterations done (fractional)
	virt float64 // virtual seconds run
	seq  uint64  // admission order
	// debt is virtual time the job still spends finishing an iteration at
	// its previous batch size after a resize (no progress counted meanwhile
	// beyond the completed iteration already credited), or restarts after
	// an elastic move: kept here so that a restart of the device actor
	// does not let the job skip it.
	debt float64
	// told is the budget the job's actor was last told: a restarted
	// device actor answers an attach with it, and revises it when its
	// first plan differs, as before the restart.
	told int64
}

func newLedger() *ledger {
	return &ledger{jobs: map[string]*ledgerEntry{}, finished: map[string]*pb.Progress{}}
}

// deviceActor owns one GPU: its jobs' budgets, their joint memory plan, and
// the iterations they run.
type deviceActor struct {
	cfg  DeviceConfig
	name string
	led  *ledger
	log  *slog.Logger
	// sends carries its ticks and plans to it until it stops (selfsend.go).
	sends selfSends

	jobs        map[string]*devJob
	planVersion int64
	round       *tensorsched.Result // the joint round of the plan in force
	tickGen     int
	lastTick    time.Time
	admitSeq    uint64
	dropErr     error // why planning last left a job out
	// Planning runs in the background (device_plan.go): planning says a
	// plan is being made, stale that the jobs changed since its snapshot,
	// why lists the changes the next plan is for.
	planning, stale bool
	why             []string
}

func (d *deviceActor) runRound(pl Planner, tj []tensorsched.Job) (*tensorsched.Result, error) {
	if rp, ok := pl.(RoundPlanner); ok {
		return rp.PlanRound(d.cfg.Profile, tj)
	}
	if err := pl.Plan(d.cfg.Profile, tj); err != nil {
		return nil, err
	}
	return runPlanned(d.cfg.Profile, tj)
}

type devJob struct {
	entry    *ledgerEntry
	pred     *Prediction
	budget   int64
	res      tensorsched.JobResult
	actions  int32
	lastSent time.Time
	pid      *actor.PID
	kern     kernelState // speed under the kernel dispatcher
	// planned: a plan that includes the job is in force (until then it
	// waits); budget is its budget in that plan (entry.told is the budget
	// its job actor was last told).
	planned bool
	// planPred is the prediction (graph and batch) the plan in force was
	// made for; after a resize it differs from pred until the new plan is
	// installed.
	planPred *Prediction
	// pace is the iteration time of the job's slowest replica plus
	// synchronisation, set by its job actor when it has several replicas.
	pace float64
}

// tick carries the actor instance that scheduled it: a tick from before a
// restart must not step the new instance (their generations may coincide).
type tick struct {
	gen   int
	owner *deviceActor
}

func newDeviceProps(cfg DeviceConfig, led *ledger) *actor.Props {
	if cfg.Tick <= 0 {
		cfg.Tick = 50 * time.Millisecond
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 250 * time.Millisecond
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &deviceActor{cfg: cfg, led: led, name: GPUName(cfg.Node, cfg.Index),
			log: cfg.Log.With("gpu", GPUName(cfg.Node, cfg.Index))}
	})
}

func (d *deviceActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d.recover(ctx)
	case *actor.Stopping:
		d.sends.stop()
	case *actor.Restarting:
		d.led.mu.Lock()
		d.led.restarts++
		d.led.mu.Unlock()
	case *pb.BudgetRequest:
		ctx.Respond(d.admit(ctx, m))
	case *pb.ReleaseJob:
		d.release(ctx, m.JobId, m.Reason)
	case *pb.Attach:
		ctx.Respond(d.attach(m))
	case *pb.DeviceStatusRequest:
		ctx.Respond(d.status())
	case *pb.Resize: // elastic_device.go
		ctx.Respond(d.resize(ctx, m))
	case *pb.Pace:
		if j := d.jobs[m.JobId]; j != nil && m.IterationSeconds >= 0 {
			j.pace = m.IterationSeconds
		}
	case *planDone:
		d.onPlanDone(ctx, m)
	case *tick:
		if m.gen == d.tickGen && m.owner == d {
			d.step(ctx)
		}
	case *pb.Crash:
		panic(fmt.Sprintf("device %s: crash requested: %s", d.name, m.Reason))
	}
}

// recover rebuilds the device from its ledger (empty on first start) and re-plans.
func (d *deviceActor) recover(ctx actor.Context) {
	d.jobs = map[string]*devJob{}
	d.led.mu.Lock()
	entries := make([]*ledgerEntry, 0, len(d.led.jobs))
	for _, e := range d.led.jobs {
		entries = append(entries, e)
	}
	restarts := d.led.restarts
	d.planVersion = d.led.planVersion
	d.led.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].seq < entries[j].seq })
	for _, e := range entries {
		pred, err := d.cfg.Predictor.Predict(e.req.Spec, d.cfg.Profile.Name)
		if err != nil {
			d.log.Error("recover: cannot rebuild job", "job", e.req.Spec.Id, "err", err)
			continue
		}
		d.jobs[e.req.Spec.Id] = &devJob{entry: e, pred: pred, pid: refPID(e.req.Job)}
		if e.seq > d.admitSeq {
			d.admitSeq = e.seq
		}
	}
	if restarts > 0 {
		d.log.Warn("device actor restarted; re-planning", "jobs", len(d.jobs), "restarts", restarts)
	}
	d.rebudget(ctx, "device restarted")
	d.publishMetrics() // its jobs wait for that plan
	d.lastTick = time.Now()
	d.scheduleTick(ctx)
}

func refPID(r *pb.ActorRef) *actor.PID {
	if r == nil {
		return nil
	}
	return actor.NewPID(r.Address, r.Id)
}

func (d *deviceActor) admit(ctx actor.Context, m *pb.BudgetRequest) *pb.BudgetGrant {
	id := m.Spec.GetId()
	if id == "" {
		// Off the network: a request without a spec (or a job id) names no
		// job to run; the spec is read below.
		reason := "budget request has no spec"
		if m.Spec != nil {
			reason = "budget request's spec has no id"
		}
		d.log.Warn("refused a malformed budget request", "reason", reason)
		return &pb.BudgetGrant{Gpu: d.name, Accepted: false, Reason: reason}
	}
	if j, ok := d.jobs[id]; ok { // a retry: the job is already here
		j.pid = refPID(m.Job)
		return &pb.BudgetGrant{JobId: id, Gpu: d.name, Accepted: true, Budget: j.entry.told, PlanVersion: d.planVersion, Demand: j.entry.req.Demand,
			AccumSteps: j.entry.req.Spec.AccumSteps}
	}
	refuse := func(reason string) *pb.BudgetGrant {
		return &pb.BudgetGrant{JobId: id, Gpu: d.name, Accepted: false, Reason: reason}
	}
	if a := m.Spec.AccumSteps; a < 0 {
		return refuse(fmt.Sprintf("spec's accum_steps %d: must be ≥ 0 (0: no gradient accumulation)", a))
	}
	pred, err := d.cfg.Predictor.Predict(m.Spec, d.cfg.Profile.Name)
	if err != nil {
		return refuse(err.Error())
	}
	if m.Demand == nil {
		m.Demand = pred.Demand
	}
	if m.Demand.MinBudget < 0 {
		// Off the network: no arbitration could include it, so no plan of
		// this GPU's jobs could be made once it was admitted.
		return refuse(fmt.Sprintf("bad demand: minimum budget %d is negative", m.Demand.MinBudget))
	}
	var reserved int64
	for _, j := range d.jobs {
		reserved += j.entry.req.Demand.MinBudget
	}
	// Compared without adding, so a huge minimum cannot wrap the sum.
	if m.Demand.MinBudget > d.cfg.Profile.MemoryBytes-reserved {
		return refuse(fmt.Sprintf("needs ≥ %s; %s of %s already reserved",
			gpu.FormatBytes(m.Demand.MinBudget), gpu.FormatBytes(reserved), gpu.FormatBytes(d.cfg.Profile.MemoryBytes)))
	}
	d.admitSeq++
	e := &ledgerEntry{req: m, done: float64(m.DoneIterations), seq: d.admitSeq, debt: max(0, m.RestartSeconds)}
	d.led.mu.Lock()
	d.led.jobs[id] = e
	delete(d.led.finished, id)
	d.led.mu.Unlock()
	d.jobs[id] = &devJob{entry: e, pred: pred, pid: refPID(m.Job)}
	d.rebudget(ctx, fmt.Sprintf("job %s joined", id))
	j := d.jobs[id]
	if j == nil { // planned at once (no actor context) and left out
		return refuse(fmt.Sprintf("cannot plan job %s on %s next to its neighbours: %v", id, d.name, d.dropErr))
	}
	if !j.planned {
		// Its share once the plan being made is in force; if that plan
		// cannot take it, the job is told then and re-queued.
		j.entry.told = d.grantBudget(id)
	}
	d.publishMetrics() // it waits for its plan
	return &pb.BudgetGrant{JobId: id, Gpu: d.name, Accepted: true, Budget: j.entry.told, PlanVersion: d.planVersion, Demand: m.Demand,
		AccumSteps: j.entry.req.Spec.AccumSteps}
}

func (d *deviceActor) release(ctx actor.Context, id, reason string) {
	if _, ok := d.jobs[id]; !ok {
		return
	}
	d.drop(id)
	d.rebudget(ctx, leftReason(id, reason))
	d.publishMetrics()
}

func (d *deviceActor) drop(id string) {
	delete(d.jobs, id)
	d.led.mu.Lock()
	delete(d.led.jobs, id)
	d.led.mu.Unlock()
}

func (d *deviceActor) attach(m *pb.Attach) *pb.AttachReply {
	if j, ok := d.jobs[m.JobId]; ok {
		j.pid = refPID(m.Job)
		j.entry.req.Job = m.Job
		return &pb.AttachReply{JobId: m.JobId, Known: true, Progress: d.progress(j, false)}
	}
	d.led.mu.Lock()
	p, ok := d.led.finished[m.JobId]
	d.led.mu.Unlock()
	if ok {
		return &pb.AttachReply{JobId: m.JobId, Known: true, Progress: p}
	}
	return &pb.AttachReply{JobId: m.JobId, Known: false}
}

// sortedJobs returns the jobs in admission order.
func (d *deviceActor) sortedJobs() []*devJob {
	js := make([]*devJob, 0, len(d.jobs))
	for _, j := range d.jobs {
		js = append(js, j)
	}
	sort.Slice(js, func(a, b int) bool { return js[a].entry.seq < js[b].entry.seq })
	return js
}

func (d *deviceActor) scheduleTick(ctx actor.Context) {
	d.tickGen++
	d.sends.after(ctx, d.cfg.Tick, &tick{gen: d.tickGen, owner: d})
}

// step advances virtual time by the wall time since the last step times
// the time scale; each job advances by that over its iteration time in the
// current joint plan.
func (d *deviceActor) step(ctx actor.Context) {
	now := time.Now()
	virt := now.Sub(d.lastTick).Seconds() * d.cfg.TimeScale
	d.lastTick = now
	var finished []string
	for _, j := range d.sortedJobs() {
		if !j.planned {
			continue // waits for a plan that includes it
		}
		total := float64(j.entry.req.Spec.Iterations)
		j.advance(virt) // at its speed under the kernel dispatcher
		done := j.entry.done >= total
		if done {
			j.entry.done = total
			p := d.progress(j, true)
			d.led.mu.Lock()
			d.led.finished[j.entry.req.Spec.Id] = p
			d.led.mu.Unlock()
			if j.pid != nil {
				ctx.Send(j.pid, p)
			}
			finished = append(finished, j.entry.req.Spec.Id)
			continue
		}
		if now.Sub(j.lastSent) >= d.cfg.ProgressEvery && j.pid != nil {
			j.lastSent = now
			ctx.Send(j.pid, d.progress(j, false))
		}
	}
	if len(finished) > 0 {
		for _, id := range finished {
			d.drop(id)
		}
		d.rebudget(ctx, completedReason(finished))
	}
	d.scheduleTick(ctx)
}

// leftReason is the re-budget reason after job id left for reason, with
// the reason's headline only ("requeued", "moved to n2/gpu1", "cancelled"):
// the job's own event carries the whole reason, and the other jobs'
// re-budget lines repeated it, nested, for every job that left.
func leftReason(id, reason string) string {
	head, _, _ := strings.Cut(reason, ":")
	if head == "" {
		head = "released"
	}
	return fmt.Sprintf("job %s left (%s)", id, head)
}

// completedReason is the re-budget reason for jobs that finished in one
// tick: "job j-7 completed", "jobs j-7 and j-9 completed".
func completedReason(ids []string) string {
	if len(ids) == 1 {
		return "job " + ids[0] + " completed"
	}
	return "jobs " + strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1] + " completed"
}

func (d *deviceActor) progress(j *devJob, finished bool) *pb.Progress {
	return &pb.Progress{
		JobId: j.entry.req.Spec.Id, Gpu: d.name,
		Iteration: int64(j.entry.done), Total: j.entry.req.Spec.Iterations,
		IterationSeconds: j.reportedSeconds(), PeakBytes: j.res.PeakBytes, Batch: j.entry.req.Spec.Batch,
		AccumSteps:   j.entry.req.Spec.AccumSteps,
		SwappedBytes: j.res.SwappedOutBytes, Budget: j.entry.told,
		PlanVersion: d.planVersion, PlanActions: j.actions,
		VirtualSeconds: j.entry.virt, Finished: finished,
	}
}

func (d *deviceActor) status() *pb.DeviceStatus {
	s := &pb.DeviceStatus{Gpu: d.name, Node: d.cfg.Node, DeviceType: d.cfg.Profile.Name,
		Capacity: d.cfg.Profile.MemoryBytes, PlanVersion: d.planVersion}
	if d.round != nil {
		s.UsedBytes = d.round.PeakBytes
		s.RoundSeconds = d.round.Seconds
	}
	d.led.mu.Lock()
	s.HighWater, s.Restarts = d.led.high, d.led.restarts
	d.led.mu.Unlock()
	for _, j := range d.sortedJobs() {
		dm := j.entry.req.Demand
		s.Budgeted += j.budget
		s.Jobs = append(s.Jobs, &pb.JobOnDevice{JobId: j.entry.req.Spec.Id, Budget: j.budget,
			MinBudget: dm.MinBudget, VanillaPeak: dm.VanillaPeak, Priority: j.entry.req.Spec.Priority,
			Iteration: int64(j.entry.done), Total: j.entry.req.Spec.Iterations,
			PeakBytes: j.res.PeakBytes, SwappedBytes: j.res.SwappedOutBytes, PlanActions: j.actions,
			Batch: j.entry.req.Spec.Batch, Replicas: j.entry.req.Spec.Replicas, AccumSteps: j.entry.req.Spec.AccumSteps})
	}
	return s
}

// publishMetrics records the device's state in its node's metrics: what the
// plan in force uses and budgets, the high-water mark, the jobs it runs
// (these change when a plan is installed) and the jobs that wait for a plan
// (also when a job is admitted or leaves, and when the device restarts).
func (d *deviceActor) publishMetrics() {
	if d.cfg.Metrics == nil {
		return
	}
	running := 0
	for _, j := range d.jobs {
		if j.planned {
			running++
		}
	}
	d.cfg.Metrics.SetGPU(d.status(), running)
}
