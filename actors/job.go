package actors

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

// Messages between the coordinator actor and job actors (same process).
type (
	assign struct {
		gpu, node string
		device    *actor.PID
		demand    *pb.Demand
	}
	waitReason struct{ reason string }
	// requeueJob puts a running job back in the queue; avoid, if set, is
	// a GPU it is not offered again until something leaves it (a GPU it
	// is starved on).
	requeueJob struct{ reason, avoid string }
	failJob    struct{ reason string }
	cancelJob  struct{}
	placeMe    struct{ id string }
	jobUpdate  struct {
		rec *JobRecord
		ev  *transport.Event
		// refusedBy names the GPU whose device refused the job (or dropped
		// it because it could not plan it next to its neighbours); the
		// coordinator does not offer that GPU to the job again until
		// something leaves it.
		refusedBy string
	}
	retryPlace struct{}
)

// jobActor owns one job's lifecycle: it asks for placement, negotiates a
// budget with the chosen device, follows progress and budget revisions,
// and reports every change to the coordinator, which stores and publishes
// it. On (re)start it recovers its state from the store.
type jobActor struct {
	id     string
	coord  *actor.PID
	store  *transport.Store
	log    *slog.Logger
	rec    *JobRecord
	device *actor.PID // the first replica's device
	// sends carries its retries to it until it stops (selfsend.go).
	sends selfSends
	// reps are the job's data-parallel replicas (one while it runs on one
	// GPU; elastic_job.go gives it more); pace is the iteration time its
	// replicas were last told to step at; changing is true while an
	// elastic change is being negotiated with the devices.
	reps     []*replica
	pace     float64
	changing bool
	// admits is the admissions of the move in flight (nil: none), which
	// the job actor must take back if the job stops or is requeued before
	// the move's answers are in (elastic_job.go).
	admits *moveAdmits
	// life is shared by the incarnations of the job's actor (its
	// supervisor restarts it after a crash); gone is set in one that
	// crashed or stopped. The answers to a crashed incarnation's requests
	// still come back to it (continuations run on whichever incarnation
	// the actor has then), and must not act on its stale state: they undo
	// the change they were part of instead, since the next incarnation
	// runs the job as recorded before that change. A stopped actor's
	// continuations are delivered by name (protoactor sends them to the
	// requester's PID), so they run on the next actor spawned under it:
	// the job's actor spawned again by a coordinator restarted in the
	// process, which also runs the job as recorded.
	life *jobLife
	gone bool
	// strays is when a replica the job does not follow was last asked to
	// go, by GPU (releaseStray).
	strays map[string]time.Time
	// budgetTimeout is how long it waits for a device to answer its
	// budget request.
	budgetTimeout time.Duration
}

// jobLife is what the incarnations of one job actor share.
type jobLife struct {
	incarnations int
	// afterCrash: the job's actor was spawned by a coordinator actor
	// restarted after a crash (see loadRecord).
	afterCrash bool
	// settling counts the elastic changes whose answers are still due,
	// whichever incarnation made them: a new change waits for them.
	settling int
}

// replica is one replica of a running job as its job actor follows it.
type replica struct {
	gpu, node string
	pid       *actor.PID
	budget    int64
	ver       int64 // the device's plan version of the last revision of budget (0: none)
	iter      int64
	secs      float64 // its own seconds per iteration (kernels plus sync)
	finished  bool
}

// rep is the replica on GPU g, or nil.
func (j *jobActor) rep(g string) *replica {
	for _, r := range j.reps {
		if r.gpu == g {
			return r
		}
	}
	return nil
}

// setReps makes reps the job's replicas and records them.
func (j *jobActor) setReps(reps []*replica) {
	j.reps = reps
	if len(reps) == 0 {
		j.device = nil
		j.rec.GPU, j.rec.Node, j.rec.DeviceAddr, j.rec.DeviceID = "", "", "", ""
		j.rec.GPUs, j.rec.Replicas, j.rec.SyncSeconds = nil, nil, 0
		return
	}
	p := reps[0]
	j.device = p.pid
	j.rec.GPU, j.rec.Node, j.rec.DeviceAddr, j.rec.DeviceID = p.gpu, p.node, p.pid.Address, p.pid.Id
	j.rec.GPUs = make([]string, len(reps))
	j.rec.Replicas = nil
	for i, r := range reps {
		j.rec.GPUs[i] = r.gpu
		if len(reps) > 1 {
			j.rec.Replicas = append(j.rec.Replicas, Replica{GPU: r.gpu, Node: r.node, DeviceAddr: r.pid.Address, DeviceID: r.pid.Id, Budget: r.budget})
		}
	}
}

// recordBudgets copies the replicas' budgets into the record.
func (j *jobActor) recordBudgets() {
	if len(j.reps) == 0 {
		return
	}
	j.rec.Budget = j.reps[0].budget
	for i := range j.rec.Replicas {
		if i < len(j.reps) {
			j.rec.Replicas[i].Budget = j.reps[i].budget
		}
	}
}

func newJobProps(id string, coord *actor.PID, store *transport.Store, log *slog.Logger, budgetTimeout time.Duration, afterCrash bool) *actor.Props {
	life := &jobLife{afterCrash: afterCrash}
	return actor.PropsFromProducer(func() actor.Actor {
		life.incarnations++ // at spawn and at each restart, never while the actor runs
		return &jobActor{id: id, coord: coord, store: store, log: log.With("job", id), life: life, budgetTimeout: budgetTimeout}
	})
}

// JobActorName is the id of a job's actor under the coordinator actor.
func JobActorName(id string) string { return "job-" + id }

func (j *jobActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		j.recover(ctx)
	case *actor.Restarting:
		j.gone = true // a new incarnation takes over (see jobLife)
	case *actor.Stopping:
		j.sends.stop()
		j.gone = true // its continuations may reach the next actor of its name
	case *assign:
		j.onAssign(ctx, m)
	case *waitReason:
		if j.rec != nil && j.rec.State == StatePending && j.rec.Reason != m.reason {
			j.rec.Reason = m.reason
			j.update(ctx, nil)
		}
	case *retryPlace:
		if j.rec != nil && j.rec.State == StatePending {
			ctx.Send(j.coord, &placeMe{id: j.id})
		}
	case *pb.BudgetRevised:
		if field, why := j.checkRevised(m); field != "" {
			j.log.Warn("ignored a garbled budget revision", "gpu", m.Gpu, "field", field, "err", why)
			return
		}
		if j.admits != nil {
			j.admits.revise(m) // the move in flight commits the newest
		}
		r := j.rep(m.Gpu)
		if j.rec == nil || r == nil || j.rec.State.Terminal() {
			return
		}
		r.budget, r.ver = m.NewBudget, m.PlanVersion
		j.recordBudgets()
		j.rec.Resizes++
		j.rec.PlanVersion = m.PlanVersion
		j.rec.PlanActions = m.PlanActions
		j.update(ctx, &transport.Event{Type: transport.EvResized, GPU: m.Gpu, Node: j.rec.Node, Budget: m.NewBudget,
			OldBudget: m.OldBudget, PlanVersion: m.PlanVersion, PlanActions: m.PlanActions, Reason: m.Reason})
	case *pb.Progress:
		j.onProgress(ctx, m)
	case *requeueJob:
		if m.avoid != "" && (j.rec == nil || j.rec.State != StateRunning || j.rec.GPU != m.avoid) {
			return // it moved or was requeued since the coordinator asked
		}
		j.requeueAvoiding(ctx, m.reason, "", m.avoid)
	case *reconfigure: // elastic_job.go
		j.onReconfigure(ctx, m)
	case *failJob:
		if j.rec != nil && !j.rec.State.Terminal() {
			j.finish(ctx, StateFailed, m.reason)
		}
	case *cancelJob:
		if j.rec == nil || j.rec.State.Terminal() {
			return
		}
		for _, r := range j.reps {
			ctx.Send(r.pid, &pb.ReleaseJob{JobId: j.id, Reason: "cancelled"})
		}
		j.finish(ctx, StateCancelled, "cancelled by user")
	case *pb.Crash:
		panic(fmt.Sprintf("job %s: crash requested: %s", j.id, m.Reason))
	}
}

// deviceReq asks the coordinator actor for the device actor of a GPU
// (answer: *actor.PID, nil when no node it knows has the GPU).
type deviceReq struct{ gpu string }

// strayRelease is how long a stray replica's reports are ignored after it
// was asked to go, before it is asked again.
const strayRelease = 5 * time.Second

// releaseStray has a replica of the job that reports from a GPU the job
// does not follow released: a change the devices applied but no job actor
// heard (its answers were lost with a coordinator that stopped or died)
// left it running there for no one, unseen by placement. A move's GPUs
// that have not answered yet are not strays; the check is made again when
// the coordinator names the device, so a move or placement onto the GPU
// meanwhile keeps its replica (the release reaches the device before any
// later request of this actor's).
func (j *jobActor) releaseStray(ctx actor.Context, gpu string) {
	stray := func() bool {
		return !j.gone && j.rep(gpu) == nil && !j.changing && (j.admits == nil || !slices.Contains(j.admits.gpus, gpu))
	}
	if !stray() || time.Since(j.strays[gpu]) < strayRelease {
		return
	}
	if j.strays == nil {
		j.strays = map[string]time.Time{}
	}
	j.strays[gpu] = time.Now()
	ctx.ReenterAfter(ctx.RequestFuture(j.coord, &deviceReq{gpu: gpu}, 5*time.Second), func(res any, err error) {
		pid, _ := res.(*actor.PID)
		if err != nil || pid == nil || !stray() {
			return
		}
		j.log.Info("releasing a replica the job does not run on (a change lost when the coordinator stopped)", "gpu", gpu)
		ctx.Send(pid, &pb.ReleaseJob{JobId: j.id, Reason: "released: not one of the job's replicas (a change made while the coordinator restarted was never recorded)"})
	})
}

// recordReq asks the coordinator actor for a job's record (answer:
// *JobRecord, or nil when it has none).
type recordReq struct{ id string }

// loadRecord is the job's record: from the coordinator after a restart of
// the job actor or of the coordinator actor, else (or if the coordinator
// does not answer) from the store.
//
// A restarted incarnation must see every update its crashed predecessor
// sent: the supervisor restarts the actor on a system message, which the
// coordinator handles ahead of those updates still in its mailbox, so the
// store may not have them yet. The coordinator answers this request after
// them (one sender's messages arrive in order). So must a job actor spawned
// again by a coordinator actor that crashed (afterCrash): the coordinator's
// supervisor restarts it ahead of the updates its stopped job actors sent,
// and it rebuilds its records from the store and spawns their job actors
// before it handles them; it answers this request after them (they were
// sent before it spawned this actor). A coordinator stopped in the process
// handles every update before it stops, so the next one's store has them.
func (j *jobActor) loadRecord(ctx actor.Context) (*JobRecord, error) {
	if j.life.incarnations > 1 || j.life.afterCrash {
		res, err := ctx.RequestFuture(j.coord, &recordReq{id: j.id}, 5*time.Second).Result()
		if r, ok := res.(*JobRecord); err == nil && ok && r != nil {
			return r, nil
		}
		j.log.Warn("restarted job actor: the coordinator did not give its record; reading the store", "err", err)
	}
	b, err := j.store.Get(JobKey(j.id))
	if err != nil {
		return nil, err
	}
	return decodeRecord(b)
}

func (j *jobActor) recover(ctx actor.Context) {
	var err error
	if j.rec, err = j.loadRecord(ctx); err != nil {
		j.log.Error("job actor cannot load its record; stopping", "err", err)
		ctx.Stop(ctx.Self())
		return
	}
	switch {
	case j.rec.State.Terminal():
		ctx.Stop(ctx.Self())
	case j.rec.State == StatePending:
		ctx.Send(j.coord, &placeMe{id: j.id})
	default: // placed or running: find the job on its device(s) again
		// Each replica is at least at the job's checkpoint until its
		// device says how far it is (the job is as far as its slowest).
		var reps []*replica
		for _, r := range j.rec.Replicas {
			reps = append(reps, &replica{gpu: r.GPU, node: r.Node, pid: actor.NewPID(r.DeviceAddr, r.DeviceID), budget: r.Budget, iter: j.rec.Iteration})
		}
		if len(reps) == 0 {
			reps = []*replica{{gpu: j.rec.GPU, node: j.rec.Node, pid: actor.NewPID(j.rec.DeviceAddr, j.rec.DeviceID), budget: j.rec.Budget}}
		}
		sync := j.rec.SyncSeconds
		j.setReps(reps)
		j.rec.SyncSeconds = sync
		msgs := make([]any, len(reps))
		pids := make([]*actor.PID, len(reps))
		for i, r := range reps {
			pids[i], msgs[i] = r.pid, &pb.Attach{JobId: j.id, Job: &pb.ActorRef{Address: ctx.Self().Address, Id: ctx.Self().Id}}
		}
		askAll(ctx, pids, msgs, 3*time.Second, func(rs []answer) {
			if j.gone {
				return // crashed again meanwhile; its next incarnation attaches anew
			}
			for i, a := range rs {
				r, ok := a.res.(*pb.AttachReply)
				if a.err != nil || !ok || !r.Known {
					why := fmt.Sprintf("its device %s no longer has it", reps[i].gpu)
					if a.err != nil {
						why = fmt.Sprintf("its device %s did not answer (%v)", reps[i].gpu, a.err)
						// It may still run the job (requeueFrom releases
						// only the other replicas): take it back so it
						// does not run there unseen.
						ctx.Send(reps[i].pid, &pb.ReleaseJob{JobId: j.id, Reason: "requeued: " + why})
					}
					j.requeueFrom(ctx, "recovered after a restart but "+why, reps[i].gpu)
					return
				}
			}
			// A change the devices applied whose answers no actor heard (the
			// coordinator stopped, or its process died, with it in flight)
			// left them at another batch or count of micro-steps than the
			// record: their reports would be dropped as older than the
			// change for good. The job runs as recorded, as when such an
			// answer does arrive.
			per := j.perBatch()
			for i, a := range rs {
				if p := a.res.(*pb.AttachReply).Progress; p != nil && p.Batch > 0 && j.staleReport(p) && !p.Finished {
					j.log.Info("undoing a change its device applied unrecorded", "gpu", reps[i].gpu, "device_batch", p.Batch,
						"device_accum_steps", p.AccumSteps, "batch", per, "accum_steps", j.rec.Accum)
					ctx.Send(reps[i].pid, &pb.Resize{JobId: j.id, Batch: int32(per), Replicas: int32(len(reps)), SyncSeconds: j.rec.SyncSeconds,
						AccumSteps: int32(j.rec.Accum), Reason: "undo: a change applied while the coordinator restarted was not recorded"})
				}
			}
			if j.rec.State == StatePlaced {
				// The previous incarnation crashed with its budget request
				// in flight and the device admitted the job: its grant went
				// to that incarnation, which ignores it, so the job starts
				// here, as it would have there, waiting for its plan.
				j.rec.Reason = waitingForPlan(reps[0].gpu)
				j.start(ctx, rs[0].res.(*pb.AttachReply).Progress)
			}
			for _, a := range rs {
				if p := a.res.(*pb.AttachReply).Progress; p != nil {
					j.onProgress(ctx, p)
				}
			}
		})
	}
}

func (j *jobActor) onAssign(ctx actor.Context, m *assign) {
	if j.rec == nil || j.rec.State != StatePending {
		return
	}
	j.rec.State = StatePlaced
	j.rec.Reason = ""
	j.pace = 0
	j.setReps([]*replica{{gpu: m.gpu, node: m.node, pid: m.device}})
	// It runs at its spec's batch again (an elastic change made before a
	// requeue is not carried over).
	j.rec.Batch, j.rec.Accum = int(RunSpec(j.id, &j.rec.Spec).Batch), 0
	j.rec.MinBudget, j.rec.VanillaPeak, j.rec.PredSeconds = m.demand.MinBudget, m.demand.VanillaPeak, m.demand.IterationSeconds
	j.rec.IterSeconds = 0 // measured before the re-queue, perhaps at another batch or GPU
	j.rec.PlacedAt = time.Now().UTC()
	j.update(ctx, &transport.Event{Type: transport.EvPlaced, GPU: m.gpu, Node: m.node,
		MinBudget: m.demand.MinBudget, VanillaPeak: m.demand.VanillaPeak, Attempt: j.rec.Attempt})
	spec := RunSpec(j.id, &j.rec.Spec)
	req := &pb.BudgetRequest{Spec: spec, Demand: m.demand, DoneIterations: j.rec.Iteration,
		Job: &pb.ActorRef{Address: ctx.Self().Address, Id: ctx.Self().Id}}
	gpuName, attempt := m.gpu, j.rec.Attempt
	f := ctx.RequestFuture(m.device, req, j.budgetTimeout)
	ctx.ReenterAfter(f, func(res any, err error) {
		if j.gone {
			// The actor crashed meanwhile; its next incarnation found the
			// job placed and attaches to the device, which answers after
			// this admission (or requeues it if the device refused).
			return
		}
		if j.rec.State != StatePlaced || j.rec.GPU != gpuName || j.rec.Attempt != attempt {
			return // cancelled or requeued meanwhile (perhaps back onto this GPU)
		}
		g, ok := res.(*pb.BudgetGrant)
		if err != nil {
			// No answer in time is not a refusal (a refusal keeps the GPU
			// from being offered again until something leaves it): the
			// job is placed again, the same GPU included. The device may
			// still admit it meanwhile; requeueFrom releases it there so
			// it does not run unseen.
			j.requeueFrom(ctx, fmt.Sprintf("device %s gave no answer to the budget request (%v)", gpuName, err), "")
			return
		}
		if !ok || !g.Accepted {
			why := "no answer"
			if ok {
				why = g.Reason
			}
			j.requeueFrom(ctx, fmt.Sprintf("device %s refused the budget request: %s", gpuName, why), gpuName)
			return
		}
		// The device plans its jobs together before a new one runs (in the
		// background; seconds with many large jobs): until its first
		// report the record says so, not just 0 %.
		j.rec.Reason = waitingForPlan(gpuName)
		j.start(ctx, &pb.Progress{Budget: g.Budget, PlanVersion: g.PlanVersion})
	})
}

// waitingForPlan is a running job's reason while it waits for its first
// plan on gpu (JobRecord.WaitsForPlan).
func waitingForPlan(gpu string) string {
	return fmt.Sprintf("waiting for %s's memory plan (its jobs are planned together before a new one runs)", gpu)
}

// WaitsForPlan reports whether the job was admitted to its GPU and waits
// for the device's plan that includes it, before its first iteration there.
func (r *JobRecord) WaitsForPlan() bool {
	return r.State == StateRunning && r.GPU != "" && r.Reason == waitingForPlan(r.GPU)
}

// defaultBudgetAnswerTimeout is how long a job waits for a device to answer
// its budget request (CoordinatorConfig's seam shortens it in tests).
const defaultBudgetAnswerTimeout = 10 * time.Second

// start makes the placed job running on its device, which admitted it with
// the budget and plan version of p, and publishes started.
func (j *jobActor) start(ctx actor.Context, p *pb.Progress) {
	j.rec.State = StateRunning
	j.reps[0].budget = p.GetBudget()
	j.recordBudgets()
	j.rec.PlanVersion = p.GetPlanVersion()
	if j.rec.StartedAt.IsZero() {
		j.rec.StartedAt = time.Now().UTC()
	}
	j.update(ctx, &transport.Event{Type: transport.EvStarted, GPU: j.rec.GPU, Node: j.rec.Node, Budget: j.reps[0].budget,
		MinBudget: j.rec.MinBudget, VanillaPeak: j.rec.VanillaPeak, Iteration: j.rec.Iteration, Total: j.rec.Total, PlanVersion: j.rec.PlanVersion})
}

func (j *jobActor) onProgress(ctx actor.Context, m *pb.Progress) {
	if m.JobId != j.id {
		j.log.Warn("ignored a progress report for another job", "gpu", m.Gpu, "field", "job_id", "err", fmt.Sprintf("job_id %q: this is job %s's actor", m.JobId, j.id))
		return
	}
	rp := j.rep(m.Gpu)
	if rp == nil && m.Error != "" && j.admits != nil && slices.Contains(j.admits.gpus, m.Gpu) {
		// A GPU the move in flight was admitted on dropped the job: the
		// move must not make it a replica (elastic_job.go).
		j.admits.lost = append(j.admits.lost, m.Gpu+": "+m.Error)
		return
	}
	if rp == nil && j.rec != nil && m.Error == "" && !m.Finished {
		j.releaseStray(ctx, m.Gpu)
	}
	if j.rec == nil || j.rec.State.Terminal() || rp == nil {
		return
	}
	if m.Error != "" {
		// The device could not keep running the job: try another GPU from
		// the last checkpoint.
		j.requeueFrom(ctx, m.Error, m.Gpu)
		return
	}
	if field, why := j.checkProgress(m); field != "" {
		j.log.Warn("ignored a garbled progress report; the job keeps its record", "gpu", m.Gpu, "node", rp.node, "field", field, "err", why)
		return
	}
	if j.rec.State == StatePlaced {
		j.rec.State = StateRunning
	}
	if m.VirtualSeconds > 0 {
		// It ran: no longer waiting for a plan. (A device answers an
		// attach with a report of a job that waits too, at no time run.)
		j.rec.Reason = ""
	}
	if j.changing && !m.Finished {
		return // replicas are being restarted or resized; reports resume after
	}
	if j.rec.Batch > 0 && m.Batch > 0 && j.staleReport(m) && !m.Finished {
		// Sent before the device applied the job's last change (a report
		// queued behind the change's answers): its batch or micro-steps,
		// and so the record's, would be the old ones.
		return
	}
	if len(j.reps) > 1 {
		j.onReplicaProgress(ctx, rp, m) // elastic_job.go
		return
	}
	rp.budget = m.Budget
	j.rec.Iteration, j.rec.Total = m.Iteration, m.Total
	j.rec.IterSeconds, j.rec.PeakBytes, j.rec.SwappedBytes = m.IterationSeconds, m.PeakBytes, m.SwappedBytes
	j.rec.Budget, j.rec.PlanVersion, j.rec.PlanActions, j.rec.VirtualSeconds = m.Budget, m.PlanVersion, m.PlanActions, m.VirtualSeconds
	if m.Batch > 0 {
		j.takeReportBatch(m, 1)
	}
	if m.Finished {
		j.finish(ctx, StateCompleted, "")
		return
	}
	j.update(ctx, &transport.Event{Type: transport.EvProgress, GPU: m.Gpu, Node: j.rec.Node, Iteration: m.Iteration, Total: m.Total,
		IterSeconds: m.IterationSeconds, PeakBytes: m.PeakBytes, Swapped: m.SwappedBytes, Budget: m.Budget, PlanVersion: m.PlanVersion})
}

// checkProgress says which field of a device's progress report (it comes
// off the network) the job cannot take, and why; "" when it can take them
// all. A report's numbers go into the job's record, its events and the
// elastic loop's view: a NaN or infinite time cannot be stored (the record
// is JSON), an iteration count behind the record would move the job's
// checkpoint back (a requeue restarts it from there), and one that says it
// finished short of its total would complete it early. The device is given
// the job's total and starts it at its checkpoint, so a report that
// disagrees is garbled.
func (j *jobActor) checkProgress(m *pb.Progress) (field, why string) {
	switch {
	case !workload.FiniteNonNeg(m.IterationSeconds):
		return "iteration_seconds", fmt.Sprintf("%v: must be a finite number of seconds ≥ 0", m.IterationSeconds)
	case !workload.FiniteNonNeg(m.VirtualSeconds):
		return "virtual_seconds", fmt.Sprintf("%v: must be a finite number of seconds ≥ 0", m.VirtualSeconds)
	case m.Total != j.rec.Total:
		return "total", fmt.Sprintf("%d: the job has %d iterations", m.Total, j.rec.Total)
	case m.Iteration < j.rec.Iteration || m.Iteration > m.Total:
		return "iteration", fmt.Sprintf("%d: must be from the job's checkpoint, %d, to its total, %d", m.Iteration, j.rec.Iteration, m.Total)
	case m.Finished && m.Iteration != m.Total:
		return "finished", fmt.Sprintf("at iteration %d of %d: a job finishes at its total", m.Iteration, m.Total)
	case m.PeakBytes < 0:
		return "peak_bytes", fmt.Sprintf("%d: must be ≥ 0", m.PeakBytes)
	case m.SwappedBytes < 0:
		return "swapped_bytes", fmt.Sprintf("%d: must be ≥ 0", m.SwappedBytes)
	case m.Budget < 0:
		return "budget", fmt.Sprintf("%d: must be ≥ 0", m.Budget)
	case m.Batch < 0:
		return "batch", fmt.Sprintf("%d: must be ≥ 0 (0: not given)", m.Batch)
	}
	return "", ""
}

// checkRevised is checkProgress for a device's budget revision.
func (j *jobActor) checkRevised(m *pb.BudgetRevised) (field, why string) {
	switch {
	case m.JobId != j.id:
		return "job_id", fmt.Sprintf("%q: this is job %s's actor", m.JobId, j.id)
	case m.NewBudget < 0:
		return "new_budget", fmt.Sprintf("%d: must be ≥ 0", m.NewBudget)
	}
	return "", ""
}

func (j *jobActor) requeue(ctx actor.Context, reason string) { j.requeueFrom(ctx, reason, "") }

// requeueFrom puts the job back in the queue; refusedBy names the GPU whose
// device refused it, if that is why.
func (j *jobActor) requeueFrom(ctx actor.Context, reason, refusedBy string) {
	j.requeueAvoiding(ctx, reason, refusedBy, refusedBy)
}

// requeueAvoiding is requeueFrom with the GPU placement is not to offer the
// job again (avoid) given apart from the one that holds no replica of it
// (refusedBy): a job moved off a GPU it is starved on is released there.
func (j *jobActor) requeueAvoiding(ctx actor.Context, reason, refusedBy, avoid string) {
	if j.rec == nil || j.rec.State.Terminal() {
		return
	}
	from := j.rec.GPU
	// The job's replicas stop (the one whose device refused or dropped it
	// has none there): it restarts from its checkpoint wherever it is
	// placed next. A node declared dead may still be running (a false
	// suspicion), and its device would keep running the job unseen.
	for _, r := range j.reps {
		if r.gpu != refusedBy {
			ctx.Send(r.pid, &pb.ReleaseJob{JobId: j.id, Reason: "requeued: " + reason})
		}
	}
	// A move's admissions go back now, ahead of any admission of the job
	// where it is placed next (which may be one of them).
	j.dropAdmits(ctx, "requeued: "+reason)
	j.changing, j.pace = false, 0
	j.rec.State = StatePending
	j.rec.Reason = reason
	j.setReps(nil)
	j.rec.Budget = 0
	j.rec.Attempt++
	ev := &transport.Event{Type: transport.EvRequeued, GPU: from, Iteration: j.rec.Iteration, Total: j.rec.Total,
		Attempt: j.rec.Attempt, Reason: reason, Job: j.id, Name: j.rec.Spec.Name}
	ctx.Send(j.coord, &jobUpdate{rec: j.rec.clone(), ev: ev, refusedBy: avoid})
	j.sends.after(ctx, 200*time.Millisecond, &retryPlace{})
}

func (j *jobActor) finish(ctx actor.Context, s JobState, reason string) {
	// The actor stops: a move's answers would come to no one, and its
	// admissions would run the job on their GPUs for no one.
	j.dropAdmits(ctx, fmt.Sprintf("job %s", s))
	j.rec.State = s
	j.rec.Reason = reason
	j.rec.FinishedAt = time.Now().UTC()
	typ := map[JobState]string{StateCompleted: transport.EvCompleted, StateFailed: transport.EvFailed, StateCancelled: transport.EvCancelled}[s]
	j.update(ctx, &transport.Event{Type: typ, GPU: j.rec.GPU, Node: j.rec.Node, Iteration: j.rec.Iteration, Total: j.rec.Total,
		Budget: j.rec.Budget, PeakBytes: j.rec.PeakBytes, Swapped: j.rec.SwappedBytes, IterSeconds: j.rec.IterSeconds, Reason: reason})
	ctx.Stop(ctx.Self())
}

// update sends the record (and an event, if any) to the coordinator, the
// single writer of the store and publisher of events.
func (j *jobActor) update(ctx actor.Context, ev *transport.Event) {
	if ev != nil {
		ev.Job, ev.Name = j.id, j.rec.Spec.Name
	}
	ctx.Send(j.coord, &jobUpdate{rec: j.rec.clone(), ev: ev})
}
