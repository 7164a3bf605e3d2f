package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/transport"
)

// resizeOrder is the coordinator's elastic order to a job actor: run at
// batch from the next iteration boundary. gpus is the GPU count the policy
// chose; the live runtime runs a job on one GPU, so only the batch is
// applied and the event reports the count the job really holds.
type resizeOrder struct {
	batch, gpus int
	reason      string
}

// onResize forwards an elastic order to the job's device and, when the
// device accepts it (it has re-planned with the new graph), records the new
// batch and demand and publishes a `resized` event.
func (j *jobActor) onResize(ctx actor.Context, m *resizeOrder) {
	if j.rec == nil || j.rec.State != StateRunning || j.device == nil {
		return
	}
	gpuName := j.rec.GPU
	f := ctx.RequestFuture(j.device, &pb.Resize{JobId: j.id, Batch: int32(m.batch), Reason: m.reason}, 10*time.Second)
	ctx.ReenterAfter(f, func(res any, err error) {
		if j.rec.State != StateRunning || j.rec.GPU != gpuName {
			return // requeued, cancelled or finished meanwhile
		}
		r, ok := res.(*pb.ResizeReply)
		if err != nil || !ok || !r.Accepted {
			why := "no answer"
			switch {
			case err != nil:
				why = err.Error()
			case ok:
				why = r.Reason
			}
			j.log.Info("resize not applied", "batch", m.batch, "why", why)
			return
		}
		if r.NewBatch == r.OldBatch {
			return
		}
		oldBudget := j.rec.Budget
		j.rec.Batch = int(r.NewBatch)
		j.rec.MinBudget, j.rec.VanillaPeak, j.rec.PredSeconds = r.Demand.GetMinBudget(), r.Demand.GetVanillaPeak(), r.Demand.GetIterationSeconds()
		j.rec.Budget, j.rec.PlanVersion = r.Budget, r.PlanVersion
		j.update(ctx, &transport.Event{Type: transport.EvResized, GPU: gpuName, Node: j.rec.Node,
			Batch: int(r.NewBatch), OldBatch: int(r.OldBatch), GPUs: 1, OldGPUs: 1,
			Budget: r.Budget, OldBudget: oldBudget, MinBudget: r.Demand.GetMinBudget(), VanillaPeak: r.Demand.GetVanillaPeak(),
			Iteration: j.rec.Iteration, Total: j.rec.Total, PlanVersion: r.PlanVersion,
			Reason: fmt.Sprintf("batch %d → %d: %s", r.OldBatch, r.NewBatch, m.reason)})
	})
}
