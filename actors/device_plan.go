package actors

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/tensorsched"
)

// Planning a GPU's jobs together (TENSILE's joint plan, a round on the sim
// device, the kernel dispatcher) takes from milliseconds to many seconds of
// CPU. The device actor therefore plans off its own goroutine: it takes a
// snapshot of its jobs, plans it in the background, and installs the result
// when it arrives, while it keeps answering budget requests, status and
// attach requests and keeps running its jobs on the plan in force. Changes
// that arrive meanwhile are coalesced into the next plan.
//
// Memory stays within the plan in force: a job joins the running set only
// when a plan that includes it is installed (until then it waits, at no
// memory), and the jobs already running keep the budgets of their installed
// plan until a plan under their new budgets replaces it. Every installed
// plan comes from one arbitration, so the budgets in force never sum to more
// than the capacity.

// planJob is one job in a planning snapshot: what the planner reads, owned
// by the planning goroutine.
type planJob struct {
	id     string
	spec   *pb.JobSpec
	demand *pb.Demand
	pred   *Prediction
}

// plannedJob is one job's part of a plan.
type plannedJob struct {
	planJob
	budget  int64
	res     tensorsched.JobResult
	actions int32
	kern    kernelState
}

// planDone is a finished plan, sent by the planning goroutine to the device
// actor that started it (owner: a restarted actor ignores its predecessor's).
type planDone struct {
	owner   *deviceActor
	why     string
	jobs    []plannedJob
	round   *tensorsched.Result
	dropped []string // newest jobs that could not be planned next to the others
	// droppedSpec is each dropped job's spec in the snapshot (a job that
	// left and came back while it was planned has another).
	droppedSpec map[string]*pb.JobSpec
	err         error         // why they could not
	took        time.Duration // wall time the planning took
}

// slowPlan is how long a planning may take before the device logs it at
// info level (it is always in gpusched_gpu_plan_seconds): the jobs not yet
// in a plan wait meanwhile.
const slowPlan = 2 * time.Second

// rebudget asks for a new plan of the device's jobs because of why (a job
// joined, left, completed or was resized). Without an actor context (tests
// that drive a device directly) it plans at once.
func (d *deviceActor) rebudget(ctx actor.Context, why string) {
	d.why = append(d.why, why)
	if ctx == nil {
		d.planning = true
		d.install(ctx, d.plan(d.snapshot(), strings.Join(d.why, "; ")))
		d.why = nil
		return
	}
	if d.planning {
		d.stale = true
		return
	}
	d.startPlan(ctx)
}

func (d *deviceActor) snapshot() []planJob {
	js := d.sortedJobs()
	snap := make([]planJob, len(js))
	for i, j := range js {
		snap[i] = planJob{id: j.entry.req.Spec.Id, spec: j.entry.req.Spec, demand: j.entry.req.Demand, pred: j.pred}
	}
	return snap
}

func (d *deviceActor) startPlan(ctx actor.Context) {
	d.planning, d.stale = true, false
	snap, why := d.snapshot(), strings.Join(d.why, "; ")
	d.why = nil
	self, sys := ctx.Self(), ctx.ActorSystem()
	go func() { d.sends.send(sys, self, d.plan(snap, why)) }()
}

// targets arbitrates the capacity among jobs (Arbitrate: each gets its
// minimum, the rest by priority, never above its vanilla peak).
func (d *deviceActor) targets(jobs []planJob) ([]int64, error) {
	return d.raisedTargets(jobs, nil)
}

// raisedTargets is targets with the jobs in raised given a raised
// minimum: raised[id] (at least the job's own minimum, at most its vanilla
// peak; fullRaise for the vanilla peak itself). It returns Arbitrate's
// error when the raised minimums do not fit.
func (d *deviceActor) raisedTargets(jobs []planJob, raised map[string]int64) ([]int64, error) {
	asks := make([]placement.BudgetAsk, len(jobs))
	for i, j := range jobs {
		lo, top := raisedMin(j, raised)
		asks[i] = placement.BudgetAsk{ID: j.id, Min: lo, Max: top, Priority: int(j.spec.Priority)}
	}
	return placement.Arbitrate(d.cfg.Profile.MemoryBytes, asks)
}

// raisedMin is job j's arbitration minimum, its own or the one raised gives
// it (within its own minimum and its vanilla peak), and that top.
func raisedMin(j planJob, raised map[string]int64) (lo, top int64) {
	lo, top = j.demand.MinBudget, max(j.demand.MinBudget, j.demand.VanillaPeak)
	if m, ok := raised[j.id]; ok {
		lo = min(top, max(lo, m))
	}
	return lo, top
}

// fullRaise in raisedTargets' map raises a job to its vanilla peak.
const fullRaise = math.MaxInt64

// raiseRoom is the most the job at index k of jobs may have as its minimum
// beside the others' minimums (raised ones at their raised minimum): the
// capacity less those minimums, at most the job's vanilla peak.
func (d *deviceActor) raiseRoom(jobs []planJob, k int, raised map[string]int64) int64 {
	room := d.cfg.Profile.MemoryBytes
	for i, j := range jobs {
		if i != k {
			lo, _ := raisedMin(j, raised)
			room -= lo
		}
	}
	_, top := raisedMin(jobs[k], nil)
	return min(room, top)
}

// missedBudget is the job a failed plan names as over its budget, if any.
func missedBudget(err error) string {
	var b *tensorsched.BudgetError
	if errors.As(err, &b) {
		return b.Job
	}
	return ""
}

// plan arbitrates budgets among the snapshot's jobs, plans them together
// under those budgets and runs one joint round on a fresh sim device (and
// the kernel dispatcher) to learn each job's iteration time, peak and
// swapping. When the plan does not hold, the newest job is left out and the
// rest re-arbitrated. Before that, a job the failed plan names as over its
// budget is given its vanilla peak (it then needs no swaps, so its copies no
// longer contend with its neighbours'), when the capacity allows, and the
// jobs planned again: a job's minimum is what it needs alone, and next to a
// neighbour that swaps heavily the copies it relies on may come too late.
// When its vanilla peak does not fit beside the other jobs' minimums (raised
// ones at their raised minimum), it is raised as far as the capacity allows
// instead, if that is above the budget it missed (fewer swaps, less
// contention), and the jobs planned again; only when that fails too, or
// there is no room above that budget, is the newest job left out. Each job
// is raised at most once per set of jobs, so the re-plans end: a raise to
// the vanilla peak is kept when the newest job is left out, a partial one
// is forgotten (the room that bounded it has grown).
// It reads only its arguments and the device's fixed configuration, so it
// may run on any goroutine.
func (d *deviceActor) plan(snap []planJob, why string) *planDone {
	out := &planDone{owner: d, why: why, droppedSpec: map[string]*pb.JobSpec{}}
	start, n := time.Now(), len(snap)
	defer func() {
		out.took = time.Since(start)
		if out.took >= slowPlan {
			d.log.Info("planning took long; jobs not yet in a plan wait for it", "jobs", n,
				"dropped", len(out.dropped), "took", out.took.Round(time.Millisecond), "why", why)
		}
	}()
	raised := map[string]int64{}
	for len(snap) > 0 {
		budgets, err := d.raisedTargets(snap, raised)
		if err != nil { // admit checks the minimums, so only a bug gets here
			out.err = err
			d.log.Error("arbitrate", "err", err)
			return out
		}
		tj := make([]tensorsched.Job, len(snap))
		for i, j := range snap {
			tj[i] = tensorsched.Job{Name: j.id, Graph: j.pred.Graph, Budget: budgets[i]}
		}
		res, err := d.runRound(d.cfg.Planner, tj)
		if err != nil && d.cfg.Planner.Name() != "baselines" {
			// The joint plan did not hold on the executor: fall back to
			// per-job baseline plans under the same budgets.
			for i := range tj {
				tj[i].Plan = nil
			}
			var ferr error
			if res, ferr = d.runRound(&BaselinePlanner{}, tj); ferr == nil {
				err = nil
			}
		}
		if err != nil && len(snap) > 1 {
			// Each job is raised at most once per set of jobs (to its
			// vanilla peak, or as far as the capacity allows), so the
			// re-plans end.
			if id := missedBudget(err); id != "" {
				if _, done := raised[id]; !done {
					if k := slices.IndexFunc(snap, func(j planJob) bool { return j.id == id }); k >= 0 {
						raised[id] = fullRaise
						if _, aerr := d.raisedTargets(snap, raised); aerr == nil {
							d.log.Info("plan failed; giving the job that missed its budget its vanilla peak", "job", id, "err", err)
							continue
						}
						// The vanilla peak does not fit beside the others'
						// minimums: raise it as far as the capacity allows,
						// when that is above the budget it missed.
						if room := d.raiseRoom(snap, k, raised); room > budgets[k] {
							raised[id] = room
							d.log.Info("plan failed; the vanilla peak of the job that missed its budget does not fit, raising it as far as the capacity allows",
								"job", id, "from", gpu.FormatBytes(budgets[k]), "min", gpu.FormatBytes(room), "err", err)
							continue
						}
						delete(raised, id)
					}
				}
			}
		}
		if err == nil {
			// The kernel dispatcher sets each job's speed on copies that
			// this goroutine owns.
			tmp := make([]*devJob, len(snap))
			for i, j := range snap {
				tmp[i] = &devJob{entry: &ledgerEntry{req: &pb.BudgetRequest{Spec: j.spec, Demand: j.demand}}, pred: j.pred}
			}
			d.dispatchKernels(tmp, tj)
			out.round = res
			out.jobs = make([]plannedJob, len(snap))
			for i, j := range snap {
				out.jobs[i] = plannedJob{planJob: j, budget: budgets[i], res: res.Jobs[i], kern: tmp[i].kern}
				if tj[i].Plan != nil {
					out.jobs[i].actions = int32(len(tj[i].Plan.Actions))
				}
			}
			return out
		}
		last := snap[len(snap)-1]
		d.log.Warn("plan failed; leaving out the newest job", "job", last.id, "err", err)
		out.dropped, out.err = append(out.dropped, last.id), err
		out.droppedSpec[last.id] = last.spec
		snap = snap[:len(snap)-1]
		// A partial raise was bounded by the room the left-out job's
		// minimum took too: forget it, so the job may be raised again
		// (to its vanilla peak, if that fits now) among the fewer jobs.
		maps.DeleteFunc(raised, func(_ string, m int64) bool { return m != fullRaise })
	}
	return out
}

// onPlanDone installs a finished plan if it still holds, and starts the next
// one if the jobs changed meanwhile.
func (d *deviceActor) onPlanDone(ctx actor.Context, r *planDone) {
	if r.owner != d {
		return
	}
	d.install(ctx, r)
	if d.stale || len(d.why) > 0 {
		d.startPlan(ctx)
	}
}

// install puts a plan in force. A fresh plan (nothing changed since its
// snapshot) always holds. A stale one holds when every job it planned that
// is still here runs the same graph and may still have the budget it was
// planned under (only departures happened since); otherwise it is
// discarded and the next plan follows. The jobs a plan that holds left out
// are dropped and told, so they are re-queued (a stale plan's too: planning
// them again beside the same jobs would repeat the whole failing search,
// seconds of CPU with large models, while they wait; re-queued, they may be
// placed here again if the departures made room).
func (d *deviceActor) install(ctx actor.Context, r *planDone) {
	d.planning = false
	if d.cfg.Metrics != nil {
		d.cfg.Metrics.PlanSeconds.WithLabelValues(d.name).Observe(r.took.Seconds())
	}
	var drop []string // the left-out jobs still here
	for _, id := range r.dropped {
		// A fresh plan's is the job it planned (nothing joined or left
		// since), though a resize that needs no re-plan may have
		// replaced its spec.
		if j := d.jobs[id]; j != nil && (!d.stale || j.entry.req.Spec == r.droppedSpec[id]) {
			drop = append(drop, id)
		} // else it left, or left and came back while it was planned
	}
	if d.stale {
		// The budgets now, without the jobs the plan leaves out.
		now := slices.DeleteFunc(d.snapshot(), func(j planJob) bool { return slices.Contains(drop, j.id) })
		target := map[string]int64{}
		if bs, err := d.targets(now); err == nil {
			for i, j := range now {
				target[j.id] = bs[i]
			}
		}
		for _, p := range r.jobs {
			j := d.jobs[p.id]
			if j != nil && (j.pred != p.pred || p.budget > target[p.id]) {
				// Discarded: the next plan is for its changes too.
				d.why = append([]string{r.why}, d.why...)
				return
			}
		}
	}
	for _, id := range drop {
		j := d.jobs[id]
		d.drop(id)
		d.dropErr = r.err
		if j.pid != nil && ctx != nil {
			ctx.Send(j.pid, &pb.Progress{JobId: id, Gpu: d.name,
				Error: fmt.Sprintf("device %s could not plan it next to its neighbours: %v", d.name, r.err)})
		}
	}
	d.planVersion++
	d.led.mu.Lock()
	d.led.planVersion = d.planVersion
	if r.round != nil {
		d.led.high = max(d.led.high, r.round.PeakBytes)
	}
	d.led.mu.Unlock()
	d.round = r.round
	for _, p := range r.jobs {
		j := d.jobs[p.id]
		if j == nil {
			continue
		}
		j.planned, j.planPred = true, p.pred
		j.budget, j.res, j.actions = p.budget, p.res, p.actions
		j.kern.rate, j.kern.valid = p.kern.rate, p.kern.valid
		if j.entry.told != 0 && j.entry.told != j.budget && j.pid != nil && ctx != nil {
			ctx.Send(j.pid, &pb.BudgetRevised{JobId: p.id, Gpu: d.name, OldBudget: j.entry.told, NewBudget: j.budget,
				Reason: r.why, PlanVersion: d.planVersion, PlanActions: j.actions})
		}
		j.entry.told = j.budget
	}
	if r.round != nil {
		d.log.Debug("re-planned", "why", r.why, "version", d.planVersion, "jobs", len(r.jobs), "peak", gpu.FormatBytes(r.round.PeakBytes),
			"took", r.took.Round(time.Millisecond))
	}
	d.publishMetrics()
}

// grantBudget is the budget a newly admitted job is told: its share when
// the plan now being made is installed.
func (d *deviceActor) grantBudget(id string) int64 {
	snap := d.snapshot()
	bs, err := d.targets(snap)
	if err != nil {
		return 0
	}
	for i, j := range snap {
		if j.id == id {
			return bs[i]
		}
	}
	return 0
}
