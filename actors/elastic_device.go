package actors

import (
	"fmt"
	"math"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
)

// resize applies an elastic order to one of the device's jobs: the job runs
// at a new batch size (and replica count) from the end of the iteration in
// progress or, for a move, from its checkpoint after the restart cost. The device
// rebuilds the job's graph at the new batch, checks that the minimum
// budgets still fit, re-arbitrates budgets and re-plans every job together
// (TENSILE on the new graph, then the kernel dispatcher), exactly as when a
// job joins.
func (d *deviceActor) resize(ctx actor.Context, m *pb.Resize) *pb.ResizeReply {
	refuse := func(format string, a ...any) *pb.ResizeReply {
		return &pb.ResizeReply{JobId: m.JobId, Accepted: false, Reason: fmt.Sprintf(format, a...)}
	}
	j := d.jobs[m.JobId]
	if j == nil {
		return refuse("job %s is not on %s", m.JobId, d.name)
	}
	old := j.entry.req.Spec.Batch
	if m.Batch <= 0 {
		return refuse("batch %d must be at least 1", m.Batch)
	}
	if m.Replicas < 0 || m.SyncSeconds < 0 || m.RestartSeconds < 0 || m.DoneIterations < 0 || m.AccumSteps < 0 {
		return refuse("replicas %d, sync_seconds %g, restart_seconds %g, done_iterations %d and accum_steps %d must not be negative",
			m.Replicas, m.SyncSeconds, m.RestartSeconds, m.DoneIterations, m.AccumSteps)
	}
	spec := proto.Clone(j.entry.req.Spec).(*pb.JobSpec)
	spec.Batch, spec.AccumSteps = m.Batch, m.AccumSteps
	if m.Replicas > 0 {
		spec.Replicas, spec.SyncSeconds = m.Replicas, m.SyncSeconds
	}
	if spec.BaseBatch <= 0 {
		spec.BaseBatch = old
	}
	if m.Batch == old && !m.Restart {
		if cur := j.entry.req.Spec; spec.Replicas != cur.Replicas || spec.SyncSeconds != cur.SyncSeconds || spec.AccumSteps != cur.AccumSteps {
			// Same graph, other replica count or micro-steps: no re-plan.
			j.finishIteration()
			j.entry.req.Spec = spec
			if spec.AccumSteps != cur.AccumSteps || spec.SyncSeconds != cur.SyncSeconds {
				// Its iteration takes another time: the pace set for the
				// old one no longer holds (as after a new batch).
				j.pace = 0
			}
		}
		return &pb.ResizeReply{JobId: m.JobId, Accepted: true, NewAccumSteps: m.AccumSteps, OldBatch: old, NewBatch: old, Demand: j.entry.req.Demand,
			Budget: j.budget, PlanVersion: d.planVersion}
	}
	pred := j.pred
	if m.Batch != old {
		var err error
		if pred, err = d.cfg.Predictor.Predict(spec, d.cfg.Profile.Name); err != nil {
			return refuse("cannot predict batch %d: %v", m.Batch, err)
		}
	}
	var reserved int64
	for id, o := range d.jobs {
		if id != m.JobId {
			reserved += o.entry.req.Demand.MinBudget
		}
	}
	if reserved+pred.Demand.MinBudget > d.cfg.Profile.MemoryBytes {
		return refuse("batch %d needs ≥ %s; %s of %s is reserved by its neighbours", m.Batch,
			gpu.FormatBytes(pred.Demand.MinBudget), gpu.FormatBytes(reserved), gpu.FormatBytes(d.cfg.Profile.MemoryBytes))
	}
	if m.Restart {
		// An elastic move: the job restarts from its checkpoint after the
		// checkpoint-and-restart time.
		j.entry.done = float64(m.DoneIterations)
		j.entry.debt = m.RestartSeconds
		j.pace = 0
	} else {
		j.finishIteration()
		// The pace was the job's slowest replica at the old batch: at the
		// new one the replica steps at its own time until its job actor
		// paces it again (as after a move).
		j.pace = 0
	}
	if m.Batch == old {
		j.entry.req.Spec = spec
		return &pb.ResizeReply{JobId: m.JobId, Accepted: true, NewAccumSteps: m.AccumSteps, OldBatch: old, NewBatch: old, Demand: j.entry.req.Demand,
			Budget: j.budget, PlanVersion: d.planVersion}
	}
	j.entry.req.Spec, j.entry.req.Demand, j.pred = spec, pred.Demand, pred
	why := fmt.Sprintf("job %s resized from batch %d to %d", m.JobId, old, m.Batch)
	if m.Reason != "" {
		why += " (" + m.Reason + ")"
	}
	d.rebudget(ctx, why)
	if d.jobs[m.JobId] == nil { // re-planning dropped it; the job actor was told
		return refuse("cannot plan batch %d next to its neighbours: %v", m.Batch, d.dropErr)
	}
	d.log.Info("resized", "job", m.JobId, "batch", m.Batch, "old", old, "budget", gpu.FormatBytes(j.budget))
	return &pb.ResizeReply{JobId: m.JobId, Accepted: true, NewAccumSteps: m.AccumSteps, OldBatch: old, NewBatch: m.Batch, Demand: pred.Demand,
		Budget: j.budget, PlanVersion: d.planVersion}
}

// finishIteration moves a job to its next iteration boundary before a
// resize: the iteration in progress is credited at once and finished at the
// old batch's speed, during which (the debt) the job makes no more progress.
func (j *devJob) finishIteration() {
	f := j.batchFactor()
	it := j.stepSeconds()
	real := j.entry.done / f
	left := math.Ceil(real) - real
	if left <= 1e-9 || !(it > 0) || math.IsInf(it, 0) {
		return
	}
	j.entry.done = math.Ceil(real) * f
	j.entry.debt += left * it
}
