package tensorsched

import (
	"github.com/gpusched/gpusched/gpu"
)

// OpRef names one op of one job.
type OpRef struct {
	Job int `json:"job"`
	Op  int `json:"op"`
}

// pickEarliest is the compute engine's arbitration rule between co-located
// jobs, shared by Execute and Interleave: among the jobs that still have
// work (active), the one whose next kernel is ready earliest runs next; a
// tie goes to the lower job index. It returns -1 when no job is active.
func pickEarliest(ready []float64, active []bool) int {
	best := -1
	for j := range ready {
		if !active[j] {
			continue
		}
		if best < 0 || ready[j] < ready[best] {
			best = j
		}
	}
	return best
}

// opSeconds is the duration the executor uses for op i of job j: the job's
// Seconds override when present, the cost model otherwise.
func opSeconds(p gpu.Profile, job *Job, i int) float64 {
	if i < len(job.Seconds) && job.Seconds[i] > 0 {
		return job.Seconds[i]
	}
	return p.OpSeconds(&job.Graph.Ops[i])
}

// Interleave is the vanilla timing model of co-located jobs on one GPU, the
// same rule Execute applies: every job issues its ops in order, each op
// becomes ready when the job's previous op has ended and the host has
// launched it (one iteration starting at t = 0 after the graph's
// HostSecondsPerIteration, plus HostSecondsPerKernel per op), and the shared
// compute engine runs the ready op that became ready earliest, ties going to
// the lower job index. Op durations are Job.Seconds when set, the cost model
// otherwise. Plans are ignored (no swaps, no stalls).
//
// It returns the global execution order and each job's op start and end
// times (start[j][i], end[j][i]).
func Interleave(p gpu.Profile, jobs []Job) (order []OpRef, start, end [][]float64) {
	n := len(jobs)
	start = make([][]float64, n)
	end = make([][]float64, n)
	ready := make([]float64, n)
	active := make([]bool, n)
	next := make([]int, n)
	total := 0
	for j := range jobs {
		g := jobs[j].Graph
		start[j] = make([]float64, len(g.Ops))
		end[j] = make([]float64, len(g.Ops))
		total += len(g.Ops)
		active[j] = len(g.Ops) > 0
		ready[j] = g.HostSecondsPerIteration
	}
	order = make([]OpRef, 0, total)
	free := 0.0
	for {
		j := pickEarliest(ready, active)
		if j < 0 {
			break
		}
		g := jobs[j].Graph
		i := next[j]
		s := ready[j]
		if free > s {
			s = free
		}
		e := s + opSeconds(p, &jobs[j], i)
		start[j][i], end[j][i] = s, e
		free = e
		order = append(order, OpRef{Job: j, Op: i})
		next[j]++
		if next[j] == len(g.Ops) {
			active[j] = false
			continue
		}
		launch := g.HostSecondsPerIteration + float64(next[j])*g.HostSecondsPerKernel
		ready[j] = e
		if launch > e {
			ready[j] = launch
		}
	}
	return order, start, end
}
