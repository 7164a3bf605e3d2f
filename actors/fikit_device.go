package actors

import (
	"math"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/tensorsched"
)

// kernelState is a job's speed under the device's kernel dispatcher.
type kernelState struct {
	rate  kernelRate
	valid bool
}

// dispatchKernels runs the device's jobs, with the plans just made (tj, in
// the order of js), through the kernel engine and records each job's speed.
// When the engine fails, the joint memory round's iteration times stay in
// force.
func (d *deviceActor) dispatchKernels(js []*devJob, tj []tensorsched.Job) {
	kj := make([]kernelJob, len(js))
	for i, j := range js {
		s := j.entry.req.Spec
		kj[i] = kernelJob{Name: s.Id, Graph: j.pred.Graph, Plan: tj[i].Plan, Priority: int(s.Priority),
			PerIteration: s.HostPerIteration, PerKernel: s.HostPerKernel, PerRequest: s.HostPerRequest, Rate: s.ArrivalRate}
	}
	r, err := runKernelRound(d.cfg.Profile, kj, kernelOptions{Mode: d.cfg.KernelMode})
	for i, j := range js {
		j.kern.valid = err == nil
		if err == nil {
			j.kern.rate = r.Jobs[i]
		}
	}
	if err != nil {
		d.log.Warn("kernel dispatch round failed; pacing jobs by the memory round", "err", err)
		return
	}
	d.log.Debug("kernel dispatch", "mode", d.cfg.KernelMode, "jobs", len(js), "gap_fill", r.GapFill, "kernels", r.Kernels)
}

// kernelSeconds is the job's virtual seconds per iteration at its current
// batch on the shared GPU: under the kernel dispatcher when it ran, else
// the joint memory round's, else the prediction. +Inf when the dispatcher
// leaves it no time. Until a plan for its current graph is in force (after
// it joins, or after a resize while the new plan is made) it is the
// prediction at the current batch: the plan in force was made for the old
// batch, and its time, reported under the new batch, would teach the
// elastic loop a wrong speed.
func (j *devJob) kernelSeconds() float64 {
	if j.planPred != j.pred {
		return j.pred.Demand.IterationSeconds
	}
	if j.kern.valid {
		return j.kern.rate.IterationSeconds
	}
	if it := j.res.IterationSeconds; it > 0 {
		return it
	}
	return j.pred.Demand.IterationSeconds
}

// ownSeconds is the job's (replica's) own seconds per iteration: its
// kernel time for each of its accumulation micro-steps plus, for a job
// with several replicas, the gradient synchronisation time (once per
// iteration).
func (j *devJob) ownSeconds() float64 {
	s := j.entry.req.Spec
	return j.kernelSeconds()*float64(microSteps(s)) + s.SyncSeconds
}

// microSteps is how many micro-steps one iteration of the job runs: its
// extra accumulation micro-steps plus one.
func microSteps(s *pb.JobSpec) int { return 1 + max(0, int(s.AccumSteps)) }

// stepSeconds is the virtual seconds the job takes per iteration here: its
// own time, or the job's pace when that is longer (a replica waits for the
// slowest replica of its job).
func (j *devJob) stepSeconds() float64 {
	return math.Max(j.ownSeconds(), j.pace)
}

// reportedSeconds is ownSeconds for progress reports: 0 while the job is
// starved (no finite time to report).
func (j *devJob) reportedSeconds() float64 {
	if it := j.ownSeconds(); it > 0 && !math.IsInf(it, 0) {
		return it
	}
	return 0
}

// batchFactor is how far one iteration at the job's current batch advances
// it, counted in iterations of its base batch: a replica of a job with n
// replicas runs 1/n of the job's global batch, and its iteration is the
// job's iteration; an iteration of k accumulation micro-steps runs k
// times its (micro-step) batch.
func (j *devJob) batchFactor() float64 {
	s := j.entry.req.Spec
	if s.BaseBatch <= 0 || s.Batch <= 0 {
		return 1
	}
	return float64(s.Batch) * float64(microSteps(s)) * float64(max(1, s.Replicas)) / float64(s.BaseBatch)
}

// advance runs the job for virt virtual seconds.
func (j *devJob) advance(virt float64) {
	j.entry.virt += virt
	if j.entry.debt > 0 {
		used := math.Min(virt, j.entry.debt)
		j.entry.debt -= used
		virt -= used
	}
	if it := j.stepSeconds(); it > 0 && !math.IsInf(it, 0) {
		j.entry.done += virt / it * j.batchFactor()
	}
}
