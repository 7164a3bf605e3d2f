package actors

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

// reconfigure is the coordinator's elastic order to a job actor: run as
// len(targets) data-parallel replicas, one per target GPU (the first is the
// primary), each at the per-replica batch. When the GPUs are the ones the
// job holds, the order is a resize applied at the next iteration boundary;
// otherwise it is a move: the job checkpoints, starts on the new GPUs after
// restart seconds (the checkpoint-and-restart cost) and releases the GPUs
// it leaves.
type reconfigure struct {
	batch   int // per replica and micro-step
	accum   int // extra accumulation micro-steps per iteration
	targets []target
	sync    float64 // gradient synchronisation seconds per iteration on targets
	restart float64
	reason  string
	// timeout is how long the job actor waits for each device's answer
	// (0: DefaultElasticAnswerTimeout).
	timeout time.Duration
	// attempt and from are the job's attempt (JobRecord.Attempt) and the
	// GPUs it held in the snapshot the order was decided from (from nil:
	// not given). The job actor does not apply an order decided for
	// another attempt or other GPUs than it runs now: the policy never
	// decided it for the job as it is.
	attempt int
	from    []string
	// fromBatch and fromAccum are the job's global batch and extra
	// micro-steps in that snapshot (fromBatch 0: not given): an order
	// decided before an in-place change the coordinator had not yet heard
	// of is not applied either.
	fromBatch, fromAccum int
	// seq numbers the order (orderSeq, unique in the process; 0: not
	// tracked): an order the job actor does not apply and publishes no
	// event for is named back by it in an orderDropped.
	seq uint64
}

// orderDropped tells the coordinator that the job actor will not apply
// order seq and publishes no event for it (the order was decided for the
// job as it no longer is, came while another change was being applied,
// asked for nothing new, or was undone because the actor restarted
// meanwhile). The coordinator stops counting that order as in flight.
type orderDropped struct {
	job string
	seq uint64
	why string
}

// dropOrder sends the coordinator an orderDropped for m.
func (j *jobActor) dropOrder(ctx actor.Context, m *reconfigure, why string) {
	if m.seq != 0 && j.coord != nil {
		ctx.Send(j.coord, &orderDropped{job: j.id, seq: m.seq, why: why})
	}
}

// answerTimeout is how long the job actor waits for each device's answer
// to the order.
func (m *reconfigure) answerTimeout() time.Duration {
	if m.timeout > 0 {
		return m.timeout
	}
	return DefaultElasticAnswerTimeout
}

// target is one GPU of an elastic order.
type target struct {
	gpu, node string
	device    *actor.PID
}

// answer is one reply to askAll.
type answer struct {
	res any
	err error
}

// askAll sends msgs[i] to pids[i] and calls done on the actor's goroutine
// with every answer (or error) once all have come back.
func askAll(ctx actor.Context, pids []*actor.PID, msgs []any, d time.Duration, done func([]answer)) {
	out := make([]answer, len(pids))
	left := len(pids)
	if left == 0 {
		done(out)
		return
	}
	for i := range pids {
		f := ctx.RequestFuture(pids[i], msgs[i], d)
		ctx.ReenterAfter(f, func(res any, err error) {
			out[i] = answer{res: res, err: err}
			left--
			if left == 0 {
				done(out)
			}
		})
	}
}

func (j *jobActor) gpuNames() []string {
	out := make([]string, len(j.reps))
	for i, r := range j.reps {
		out[i] = r.gpu
	}
	return out
}

// perBatch is the batch each replica runs now in each micro-step.
func (j *jobActor) perBatch() int {
	b := j.rec.Batch
	if b <= 0 {
		b = int(RunSpec(j.id, &j.rec.Spec).Batch)
	}
	return microBatch(b, j.rec.Accum, len(j.reps))
}

// staleReport says whether a device's report is of another micro-batch or
// count of micro-steps than the job runs as recorded.
func (j *jobActor) staleReport(m *pb.Progress) bool {
	return int(m.Batch) != j.perBatch() || int(max(0, m.AccumSteps)) != j.rec.Accum
}

// global is the job's global batch at per-replica micro-batch per, accum
// extra micro-steps, on n replicas.
func global(per, accum, n int) int { return per * (accum + 1) * n }

// microBatch is global's inverse: the per-replica micro-batch of global
// batch b in accum+1 micro-steps on n replicas (at least 1).
func microBatch(b, accum, n int) int { return max(1, b/(max(1, n)*(1+max(0, accum)))) }

// takeReportBatch records the batch and micro-steps a device reports the
// job (its n replicas) runs at.
func (j *jobActor) takeReportBatch(m *pb.Progress, n int) {
	j.rec.Accum = int(max(0, m.AccumSteps))
	j.rec.Batch = global(int(m.Batch), j.rec.Accum, n)
}

// batchText says the global batch of per samples per replica and
// micro-step, accum extra micro-steps and n replicas, and how it splits
// when it runs on several GPUs or in several micro-steps.
func batchText(per, accum, n int) string {
	s := fmt.Sprintf("%d", global(per, accum, n))
	switch {
	case accum > 0 && n > 1:
		s += fmt.Sprintf(" (%d per GPU × %d micro-steps on %d GPUs)", per, accum+1, n)
	case accum > 0:
		s += fmt.Sprintf(" (%d × %d micro-steps)", per, accum+1)
	case n > 1:
		s += fmt.Sprintf(" (%d per GPU on %d GPUs)", per, n)
	}
	return s
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// onReconfigure applies an elastic order: a resize in place when the GPUs
// are unchanged, else a move. A change that a device refuses is undone on
// the devices that accepted it, logged and published as resize_refused; the
// job keeps running where it was.
func (j *jobActor) onReconfigure(ctx actor.Context, m *reconfigure) {
	if j.rec == nil || j.rec.State != StateRunning || len(j.reps) == 0 || len(m.targets) == 0 || m.batch <= 0 {
		j.dropOrder(ctx, m, "the job is not running")
		return
	}
	names := make([]string, len(m.targets))
	for i, t := range m.targets {
		names[i] = t.gpu
	}
	if why := j.staleOrder(m); why != "" {
		// Not a refusal by a device either (a resize_refused would keep
		// the loop from ordering this change again until something
		// leaves its GPUs): the next round decides from the job's record
		// as it is now.
		j.log.Info("elastic order not applied: decided for the job as it was", "to", names, "batch", global(m.batch, m.accum, len(names)), "why", why)
		j.dropOrder(ctx, m, why)
		return
	}
	if j.life.settling > 0 { // any change in flight, this incarnation's (changing) or a crashed one's
		// Not a refusal: the next round orders it again if it still holds.
		j.log.Info("elastic order ignored: an earlier change is still being applied", "to", names, "batch", global(m.batch, m.accum, len(names)))
		j.dropOrder(ctx, m, "an earlier change is still being applied")
		return
	}
	same := sameSet(names, j.gpuNames())
	if same && m.batch == j.perBatch() && m.accum == j.rec.Accum {
		j.dropOrder(ctx, m, "the job already runs as ordered")
		return
	}
	j.changing = true
	j.life.settling++
	if same {
		j.resizeInPlace(ctx, m)
	} else {
		j.move(ctx, m, names)
	}
}

// staleOrder says why order m was decided for the job as it no longer is
// (another attempt, other GPUs, or another batch or micro-steps); "" when
// it was decided for it as it is.
func (j *jobActor) staleOrder(m *reconfigure) string {
	if m.attempt != j.rec.Attempt {
		return fmt.Sprintf("order for attempt %d, job is at attempt %d", m.attempt, j.rec.Attempt)
	}
	if m.from != nil && !sameSet(m.from, j.gpuNames()) {
		return fmt.Sprintf("order for the job on %s, job runs on %s", strings.Join(m.from, ","), strings.Join(j.gpuNames(), ","))
	}
	if m.fromBatch > 0 && j.rec.Batch > 0 && (m.fromBatch != j.rec.Batch || m.fromAccum != j.rec.Accum) {
		return fmt.Sprintf("order for the job at batch %d in %d micro-steps, job runs at %d in %d", m.fromBatch, m.fromAccum+1, j.rec.Batch, j.rec.Accum+1)
	}
	return ""
}

// endChange ends the change in flight (each change ends once, when its
// last answers are in, even in an incarnation of the actor that crashed).
func (j *jobActor) endChange() {
	j.changing = false
	j.life.settling--
}

// still reports whether the job is still running the attempt a change began in.
func (j *jobActor) still(attempt int) bool {
	return j.rec.State == StateRunning && j.rec.Attempt == attempt
}

// refusals describes the refusals among answers (nil: all accepted), and
// whether every one of them is a device that did not answer in time (none
// refused). An acceptance the job cannot take (checkAnswer: the order ran
// the job at per-GPU batch batch) counts as a refusal, and is logged.
func (j *jobActor) refusals(rs []answer, gpus []string, batch, accum int) (out []string, unanswered bool) {
	unanswered = true
	for i, a := range rs {
		why, silent := "", false
		switch r := a.res.(type) {
		case *pb.ResizeReply:
			if !r.Accepted {
				why = r.Reason
			}
		case *pb.BudgetGrant:
			if !r.Accepted {
				why = r.Reason
			}
		default:
			why, silent = "no answer", true
		}
		if why == "" && a.err == nil {
			if field, bad := checkAnswer(a.res, batch, accum); field != "" {
				j.log.Warn("a device accepted an elastic change with a garbled answer; taken as a refusal", "gpu", gpus[i], "field", field, "err", bad)
				why = fmt.Sprintf("garbled answer: %s %s", field, bad)
			}
		}
		if a.err != nil {
			why, silent = fmt.Sprintf("no answer (%v)", a.err), true
		}
		if why != "" {
			out = append(out, gpus[i]+": "+why)
			unanswered = unanswered && silent
		}
	}
	return out, unanswered && len(out) > 0
}

// checkAnswer says which field of a device's acceptance of an elastic order
// (a *pb.ResizeReply or *pb.BudgetGrant, off the network) the job cannot
// take, and why; "" when it can. The demand becomes the job's reservation
// on its GPUs (a negative minimum budget would show room the GPUs do not
// have) and its record's predicted iteration time (stored as JSON, which
// has no NaN); a resize's new batch and micro-steps (an admission's
// micro-steps) must be the ones ordered (batch, accum), or the job would
// take its device's reports at them for stale ones (a device that does not
// know micro-steps answers none).
func checkAnswer(res any, batch, accum int) (field, why string) {
	var d *pb.Demand
	var budget int64
	switch r := res.(type) {
	case *pb.ResizeReply:
		if int(r.NewBatch) != batch {
			return "new_batch", fmt.Sprintf("%d: the order was batch %d", r.NewBatch, batch)
		}
		if int(r.NewAccumSteps) != accum {
			return "new_accum_steps", fmt.Sprintf("%d: the order was %d extra micro-steps%s", r.NewAccumSteps, accum, olderDevice(r.NewAccumSteps, accum))
		}
		d, budget = r.Demand, r.Budget
	case *pb.BudgetGrant:
		if int(r.AccumSteps) != accum {
			return "accum_steps", fmt.Sprintf("%d: the order was %d extra micro-steps%s", r.AccumSteps, accum, olderDevice(r.AccumSteps, accum))
		}
		d, budget = r.Demand, r.Budget
	}
	switch {
	case budget < 0:
		return "budget", fmt.Sprintf("%d: must be ≥ 0", budget)
	case d == nil:
		return "demand", "missing: an acceptance carries the job's demand at the new batch"
	case d.MinBudget < 0:
		return "demand.min_budget", fmt.Sprintf("%d: must be ≥ 0", d.MinBudget)
	case d.VanillaPeak < 0:
		return "demand.vanilla_peak", fmt.Sprintf("%d: must be ≥ 0", d.VanillaPeak)
	case !workload.FiniteNonNeg(d.IterationSeconds):
		return "demand.iteration_seconds", fmt.Sprintf("%v: must be a finite number of seconds ≥ 0", d.IterationSeconds)
	}
	return "", ""
}

// olderDevice is the hint checkAnswer adds when a device answers an
// accumulating order with no micro-steps: a node built before micro-steps
// (session 35) does not know the field and answers none.
func olderDevice(answered int32, ordered int) string {
	if answered == 0 && ordered > 0 {
		return " (a device that answers none runs a gpusched built without gradient accumulation: upgrade its node; until then serve --ones accum=0 --max-micro-steps 1 keeps ONES's orders in one step)"
	}
	return ""
}

// resizeInPlace changes the per-replica batch on the GPUs the job holds.
func (j *jobActor) resizeInPlace(ctx actor.Context, m *reconfigure) {
	attempt, oldPer, oldAccum, n := j.rec.Attempt, j.perBatch(), j.rec.Accum, len(j.reps)
	oldSync := j.rec.SyncSeconds
	pids, msgs := make([]*actor.PID, n), make([]any, n)
	for i, r := range j.reps {
		pids[i] = r.pid
		msgs[i] = &pb.Resize{JobId: j.id, Batch: int32(m.batch), Reason: m.reason, Replicas: int32(n), SyncSeconds: m.sync, AccumSteps: int32(m.accum)}
	}
	reps := slices.Clone(j.reps)
	names := j.gpuNames()
	undo := func(why string) *pb.Resize {
		return &pb.Resize{JobId: j.id, Batch: int32(oldPer), Reason: why, Replicas: int32(n), SyncSeconds: oldSync, AccumSteps: int32(oldAccum)}
	}
	askAll(ctx, pids, msgs, m.answerTimeout(), func(rs []answer) {
		j.endChange()
		if j.gone {
			// The actor crashed meanwhile; its next incarnation runs the
			// job as recorded before this change, so the change is undone.
			j.dropOrder(ctx, m, "undone: the job's actor restarted during the resize")
			undoResize(ctx, rs, pids, undo("undo: the job's actor restarted during the resize"))
			return
		}
		if !j.still(attempt) {
			j.dropOrder(ctx, m, "the job was requeued or ended during the resize")
			return
		}
		if bad, silent := j.refusals(rs, names, m.batch, m.accum); len(bad) > 0 {
			undoResize(ctx, rs, pids, undo("undo: another replica refused or did not answer"))
			j.refuse(ctx, m, names, strings.Join(bad, "; "), silent)
			return
		}
		// Every replica runs the ordered batch now (refusals: the new
		// batch an acceptance names is the one ordered), whatever batch
		// its device says it ran before.
		first := rs[0].res.(*pb.ResizeReply)
		oldBatch, oldBudget := global(oldPer, oldAccum, n), j.rec.Budget
		for i, a := range rs {
			// Its time at the old batch no longer says how fast it
			// runs: the job's pace is the replicas' reports from now on
			// (the devices dropped the old pace too).
			// A budget the GPU revised after answering (its re-plan
			// for the new batch, or a neighbour's) is newer.
			if a := a.res.(*pb.ResizeReply); a.PlanVersion >= reps[i].ver {
				reps[i].budget, reps[i].ver = a.Budget, a.PlanVersion
			}
			reps[i].secs = 0
		}
		j.pace = 0
		j.recordBudgets()
		why := fmt.Sprintf("batch %d → %s", oldBatch, batchText(m.batch, m.accum, n))
		j.applied(ctx, m, first.Demand, first.PlanVersion, oldBatch, oldBudget, names, why)
	})
}

// moveAdmits are the GPUs a move in flight asked to admit the job.
// Released once: by the move when it is refused or overtaken, or by the
// job actor when the job stops or is requeued first (the move's answers
// then come too late to release them ahead of a new placement, or never).
//
// A GPU that admitted the job may drop it before the move is committed
// (its next plan cannot take the job next to its neighbours) and tell the
// job actor, which does not count it as a replica yet: lost keeps those
// reports, and the move is refused as if the GPU had refused the
// admission.
//
// A GPU may also revise the job's budget while the move is in flight (a
// neighbour joined or left it): revised keeps the newest revision of each
// GPU, and the commit records it when it is newer than the GPU's answer.
type moveAdmits struct {
	pids     []*actor.PID
	gpus     []string
	released bool
	lost     []string
	revised  map[string]*pb.BudgetRevised
}

// revise remembers m if it is the newest revision of its GPU so far.
func (a *moveAdmits) revise(m *pb.BudgetRevised) {
	if old := a.revised[m.Gpu]; old != nil && old.PlanVersion > m.PlanVersion {
		return
	}
	if a.revised == nil {
		a.revised = map[string]*pb.BudgetRevised{}
	}
	a.revised[m.Gpu] = m
}

// budget is the budget GPU gpu answered at plan version ver, or the newer
// one it revised it to while the move was in flight.
func (a *moveAdmits) budget(gpu string, budget, ver int64) (int64, int64) {
	if r := a.revised[gpu]; r != nil && r.PlanVersion > ver {
		return r.NewBudget, r.PlanVersion
	}
	return budget, ver
}

func (a *moveAdmits) release(ctx actor.Context, id, why string) {
	if a.released {
		return
	}
	a.released = true
	for _, pid := range a.pids {
		ctx.Send(pid, &pb.ReleaseJob{JobId: id, Reason: why})
	}
}

// dropAdmits releases the admissions of the move in flight, if any.
func (j *jobActor) dropAdmits(ctx actor.Context, why string) {
	if j.admits != nil {
		j.admits.release(ctx, j.id, why)
		j.admits = nil
	}
}

// move runs the job on other GPUs: it is admitted on the GPUs it does not
// hold yet (starting from its checkpoint after the restart cost), restarted
// from the same checkpoint on the GPUs it keeps, and released from the
// GPUs it leaves, in that order, so that a refusal at any step leaves it
// running where it was.
func (j *jobActor) move(ctx actor.Context, m *reconfigure, names []string) {
	attempt, n := j.rec.Attempt, len(m.targets)
	oldPer, oldAccum, oldN, oldSync := j.perBatch(), j.rec.Accum, len(j.reps), j.rec.SyncSeconds
	oldNames, oldReps := j.gpuNames(), slices.Clone(j.reps)
	checkpoint := j.rec.Iteration
	spec := RunSpec(j.id, &j.rec.Spec)
	spec.Batch, spec.Replicas, spec.SyncSeconds, spec.AccumSteps = int32(m.batch), int32(n), m.sync, int32(m.accum)
	self := &pb.ActorRef{Address: ctx.Self().Address, Id: ctx.Self().Id}

	var addIdx, keepIdx []int // indices into m.targets
	for i, t := range m.targets {
		if j.rep(t.gpu) != nil {
			keepIdx = append(keepIdx, i)
		} else {
			addIdx = append(addIdx, i)
		}
	}
	pids := func(idx []int) []*actor.PID {
		out := make([]*actor.PID, len(idx))
		for k, i := range idx {
			out[k] = m.targets[i].device
		}
		return out
	}
	gpus := func(idx []int) []string {
		out := make([]string, len(idx))
		for k, i := range idx {
			out[k] = m.targets[i].gpu
		}
		return out
	}
	mv := &moveAdmits{pids: pids(addIdx), gpus: gpus(addIdx)}
	j.admits = mv
	releaseAdded := func(why string) {
		mv.release(ctx, j.id, why)
		if j.admits == mv {
			j.admits = nil
		}
	}
	admits := make([]any, len(addIdx))
	for k := range addIdx {
		admits[k] = &pb.BudgetRequest{Spec: proto.Clone(spec).(*pb.JobSpec), DoneIterations: checkpoint, Job: self, RestartSeconds: m.restart}
	}
	undoKept := func(kept []answer, why string) {
		undoResize(ctx, kept, pids(keepIdx), &pb.Resize{JobId: j.id, Batch: int32(oldPer), Reason: why,
			Replicas: int32(oldN), SyncSeconds: oldSync, AccumSteps: int32(oldAccum), Restart: true, DoneIterations: checkpoint})
	}
	const restarted = "the job's actor restarted during the move"
	// A device that does not answer the admission in time may still
	// admit the job later: a refused or abandoned move releases every GPU
	// it asked (releaseAdded), after the admission in each one's mailbox.
	askAll(ctx, pids(addIdx), admits, m.answerTimeout(), func(added []answer) {
		if j.gone {
			// The actor crashed meanwhile; its next incarnation runs the
			// job where it was recorded before the move.
			j.endChange()
			j.dropOrder(ctx, m, "undone: "+restarted)
			releaseAdded(restarted)
			return
		}
		if !j.still(attempt) {
			j.endChange()
			j.dropOrder(ctx, m, "the move was overtaken")
			releaseAdded("the move was overtaken")
			return
		}
		bad, silent := j.refusals(added, gpus(addIdx), m.batch, m.accum)
		if len(mv.lost) > 0 {
			bad, silent = append(bad, mv.lost...), false
		}
		if len(bad) > 0 {
			j.endChange()
			releaseAdded("the move was refused")
			j.refuse(ctx, m, names, strings.Join(bad, "; "), silent)
			return
		}
		restarts := make([]any, len(keepIdx))
		for k := range keepIdx {
			restarts[k] = &pb.Resize{JobId: j.id, Batch: int32(m.batch), Reason: m.reason, Replicas: int32(n), SyncSeconds: m.sync,
				AccumSteps: int32(m.accum), Restart: true, DoneIterations: checkpoint, RestartSeconds: m.restart}
		}
		askAll(ctx, pids(keepIdx), restarts, m.answerTimeout(), func(kept []answer) {
			j.endChange()
			if j.gone {
				j.dropOrder(ctx, m, "undone: "+restarted)
				releaseAdded(restarted)
				undoKept(kept, "undo: "+restarted)
				return
			}
			if !j.still(attempt) {
				j.dropOrder(ctx, m, "the move was overtaken")
				releaseAdded("the move was overtaken")
				return
			}
			bad, silent := j.refusals(kept, gpus(keepIdx), m.batch, m.accum)
			if len(mv.lost) > 0 {
				bad, silent = append(bad, mv.lost...), false
			}
			if len(bad) > 0 {
				releaseAdded("the move was refused")
				undoKept(kept, "undo: the move was refused")
				j.refuse(ctx, m, names, strings.Join(bad, "; "), silent)
				return
			}
			// Commit: leave the GPUs not kept, run on the new set.
			j.admits = nil
			for _, r := range oldReps {
				if !slices.Contains(names, r.gpu) {
					ctx.Send(r.pid, &pb.ReleaseJob{JobId: j.id, Reason: fmt.Sprintf("moved to %s", strings.Join(names, ","))})
				}
			}
			reps := make([]*replica, n)
			var demand *pb.Demand
			var version int64
			for k, i := range addIdx {
				g := added[k].res.(*pb.BudgetGrant)
				reps[i] = &replica{}
				reps[i].budget, reps[i].ver = mv.budget(m.targets[i].gpu, g.Budget, g.PlanVersion)
				if i == 0 {
					demand, version = g.Demand, g.PlanVersion
				}
			}
			for k, i := range keepIdx {
				r := kept[k].res.(*pb.ResizeReply)
				reps[i] = &replica{}
				reps[i].budget, reps[i].ver = mv.budget(m.targets[i].gpu, r.Budget, r.PlanVersion)
				if i == 0 {
					demand, version = r.Demand, r.PlanVersion
				}
			}
			for i, t := range m.targets {
				reps[i].gpu, reps[i].node, reps[i].pid, reps[i].iter = t.gpu, t.node, t.device, checkpoint
			}
			oldBatch, oldBudget := global(oldPer, oldAccum, oldN), j.rec.Budget
			waited := j.rec.WaitsForPlan() // it has run nowhere yet
			j.setReps(reps)
			if waited {
				// It waits for its new GPU's plan now.
				j.rec.Reason = waitingForPlan(j.rec.GPU)
			}
			j.recordBudgets()
			j.pace = 0
			j.rec.Iteration = checkpoint
			why := fmt.Sprintf("moved from %s to %s, batch %d → %s", strings.Join(oldNames, ","), strings.Join(names, ","), oldBatch, batchText(m.batch, m.accum, n))
			if n > 1 {
				why += fmt.Sprintf(", gradient sync %.1f ms per iteration", m.sync*1000)
			}
			why += fmt.Sprintf("; restarts from iteration %d after %gs checkpoint-and-restart", checkpoint, m.restart)
			j.log.Info("elastic move", "from", oldNames, "to", names, "batch", global(m.batch, m.accum, n), "budget", gpu.FormatBytes(j.rec.Budget))
			j.applied(ctx, m, demand, version, oldBatch, oldBudget, oldNames, why)
		})
	})
}

// applied records an elastic change the devices accepted (the job now runs
// m's batch on m's GPUs, with demand and plan version from its first
// replica) and publishes it as one resized event.
func (j *jobActor) applied(ctx actor.Context, m *reconfigure, demand *pb.Demand, version int64, oldBatch int, oldBudget int64, oldNames []string, why string) {
	n, names, oldAccum := len(j.reps), j.gpuNames(), j.rec.Accum
	j.rec.Batch, j.rec.Accum, j.rec.SyncSeconds = global(m.batch, m.accum, n), m.accum, m.sync
	j.rec.MinBudget, j.rec.VanillaPeak, j.rec.PredSeconds = demand.GetMinBudget(), demand.GetVanillaPeak(), demand.GetIterationSeconds()
	// The iteration time was measured at the old shape; the loop learns
	// the new shape's from the next report (elasticObserve).
	j.rec.IterSeconds = 0
	j.rec.PlanVersion = version
	j.update(ctx, &transport.Event{Type: transport.EvResized, GPU: j.rec.GPU, Node: j.rec.Node,
		Batch: j.rec.Batch, OldBatch: oldBatch, Accum: m.accum, OldAccum: oldAccum, GPUs: n, OldGPUs: len(oldNames), GPUIDs: names, OldGPUIDs: oldNames,
		Budget: j.rec.Budget, OldBudget: oldBudget, MinBudget: j.rec.MinBudget, VanillaPeak: j.rec.VanillaPeak,
		Iteration: j.rec.Iteration, Total: j.rec.Total, PlanVersion: version, Reason: why + ": " + m.reason})
}

// undoResize sends undo to every device in pids whose answer in rs
// accepted a resize or never came (the ask timed out), so a change refused
// elsewhere, or abandoned by a crashed incarnation, leaves no trace.
//
// A device that did not answer in time may have applied the resize, or
// may apply it later (the order may still be in its mailbox; its answer
// then goes nowhere: the ask's future is gone), so its state is unknown.
// The undo reaches it after the resize (one sender's messages arrive in
// order) and takes it back to the job's recorded batch either way: a
// device that never applied an in-place resize finds the undo's batch is
// the one it runs, and accepts it without a change (a move's undo
// restarts a kept replica from the move's checkpoint whether or not it
// had restarted).
func undoResize(ctx actor.Context, rs []answer, pids []*actor.PID, undo *pb.Resize) {
	for i, a := range rs {
		r, ok := a.res.(*pb.ResizeReply)
		if a.err != nil || a.res == nil || ok && r.Accepted {
			ctx.Send(pids[i], proto.Clone(undo))
		}
	}
}

// refuse logs and publishes an elastic change that was not applied;
// unanswered: only because devices did not answer in time.
func (j *jobActor) refuse(ctx actor.Context, m *reconfigure, names []string, why string, unanswered bool) {
	old := j.gpuNames()
	j.log.Info("elastic change refused; the job keeps running where it was", "to", names, "batch", global(m.batch, m.accum, len(names)), "why", why)
	j.update(ctx, &transport.Event{Type: transport.EvResizeRefused, GPU: j.rec.GPU, Node: j.rec.Node,
		Batch: global(m.batch, m.accum, len(names)), OldBatch: j.rec.Batch, Accum: m.accum, OldAccum: j.rec.Accum, GPUs: len(names), OldGPUs: len(old), GPUIDs: names, OldGPUIDs: old,
		Iteration: j.rec.Iteration, Total: j.rec.Total, Unanswered: unanswered,
		Reason: fmt.Sprintf("not applied (%s); keeps running on %s at batch %d: %s", why, strings.Join(old, ","), j.rec.Batch, m.reason)})
}

// onReplicaProgress follows one replica of a job with several: the job is
// as far as its slowest replica, its iteration time is the slowest
// replica's (each includes the synchronisation), and every replica is told
// to step at that pace. The first replica's reports are published.
func (j *jobActor) onReplicaProgress(ctx actor.Context, rp *replica, m *pb.Progress) {
	rp.iter, rp.secs, rp.budget = m.Iteration, m.IterationSeconds, m.Budget
	rp.finished = rp.finished || m.Finished
	iter, secs, done := int64(math.MaxInt64), 0.0, true
	for _, r := range j.reps {
		iter = min(iter, r.iter)
		secs = max(secs, r.secs)
		done = done && r.finished
	}
	j.recordBudgets()
	j.rec.Iteration, j.rec.Total = iter, m.Total
	if secs > 0 {
		j.rec.IterSeconds = secs
	}
	if m.Batch > 0 {
		j.takeReportBatch(m, len(j.reps))
	}
	if done {
		j.finish(ctx, StateCompleted, "")
		return
	}
	// The pace goes to every replica when it changes, and again with each
	// report of the first replica (a restarted device actor forgets it).
	if secs > 0 && (math.Abs(secs-j.pace) > 1e-3*secs || rp == j.reps[0]) {
		j.pace = secs
		for _, r := range j.reps {
			ctx.Send(r.pid, &pb.Pace{JobId: j.id, IterationSeconds: secs})
		}
	}
	if rp != j.reps[0] {
		return
	}
	j.rec.PeakBytes, j.rec.SwappedBytes = m.PeakBytes, m.SwappedBytes
	j.rec.PlanVersion, j.rec.PlanActions, j.rec.VirtualSeconds = m.PlanVersion, m.PlanActions, m.VirtualSeconds
	j.update(ctx, &transport.Event{Type: transport.EvProgress, GPU: m.Gpu, Node: j.rec.Node, Iteration: iter, Total: m.Total,
		IterSeconds: j.rec.IterSeconds, PeakBytes: m.PeakBytes, Swapped: m.SwappedBytes, Budget: j.rec.Budget, PlanVersion: m.PlanVersion})
}
