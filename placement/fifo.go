package placement

// FIFO runs jobs exactly as requested (replicas, within the job's GPU
// range, and batch size), in arrival order, packed onto as few nodes as
// possible. It never preempts: a running job keeps its GPUs until it
// completes, and a queued job waits until the job ahead of it has started
// (no back-filling), as a plain batch queue does.
//
// Two kinds of job do not hold up the queue. A job that can never run
// (its GPU range's minimum exceeds the cluster) is skipped. A job that
// runs already although the policy does not see it holding its requested
// GPUs (JobState.Running: the live loop, where a job starts on fewer GPUs
// than it asks for and FIFO grows it) and that cannot be given them now
// is skipped too: it keeps running as it is and is tried again, ahead of
// the later jobs, at the next call. Its growth is not worth idling the
// GPUs later jobs could use now; a job that is not running at all still
// blocks the jobs behind it.
type FIFO struct{}

// NewFIFO returns the FIFO policy.
func NewFIFO() *FIFO { return &FIFO{} }

// Name implements Policy.
func (*FIFO) Name() string { return "fifo" }

// AsRequested implements AsRequested: FIFO runs jobs as requested.
func (*FIFO) AsRequested() bool { return true }

// Schedule implements Policy.
func (*FIFO) Schedule(_ float64, cluster ClusterState, jobs []JobState) map[string]Allocation {
	out := map[string]Allocation{}
	order := arrivalOrder(jobs)
	keepCurrent(cluster, jobs, order, out)
	p := newPacker(cluster, out)
	total := cluster.TotalGPUs()
	for _, i := range order {
		j := &jobs[i]
		if _, ok := out[j.ID]; ok {
			continue
		}
		n, ok := j.RequestedGPUs(total)
		if !ok {
			continue // can never run here
		}
		per := p.take(n)
		if per == nil {
			if j.Running {
				continue // runs already; its growth waits for the next call
			}
			break // head of the queue blocks the rest
		}
		local, accum := requestedBatch(*j, n)
		out[j.ID] = Allocation{PerNode: per, LocalBatch: local, AccumSteps: accum}
	}
	return out
}

// requestedBatch splits the job's requested global batch over n GPUs as a
// non-elastic job runs it: micro-steps are accumulated when the per-GPU
// share exceeds the largest that fits (MaxLocal), and a single-GPU job asked
// for more than its base batch accumulates at least two micro-steps (the
// reference simulator's convention).
func requestedBatch(j JobState, n int) (local, accum int) {
	local, accum = fixedBatch(max(j.Batch, 1), n, j.MaxLocal)
	if n == 1 && j.BaseBatch > 0 && j.Batch > j.BaseBatch && accum == 0 {
		accum = 1
		local = (j.Batch + 1) / 2
	}
	if j.MaxBatch > 0 {
		local = max(1, min(local, j.MaxBatch/(n*(accum+1))))
		if n*local*(accum+1) > j.MaxBatch {
			// One sample per GPU per micro-step is already too many:
			// fewer micro-steps (RequestedGPUs keeps n ≤ MaxBatch).
			accum = max(0, j.MaxBatch/(n*local)-1)
		}
	}
	return local, accum
}
