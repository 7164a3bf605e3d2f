package placement

// FIFO runs jobs exactly as requested (replicas and batch size), in arrival
// order, packed onto as few nodes as possible. It never preempts: a running
// job keeps its GPUs until it completes, and a queued job waits until the
// job ahead of it has started (no back-filling), as a plain batch queue does.
type FIFO struct{}

// NewFIFO returns the FIFO policy.
func NewFIFO() *FIFO { return &FIFO{} }

// Name implements Policy.
func (*FIFO) Name() string { return "fifo" }

// Schedule implements Policy.
func (*FIFO) Schedule(_ float64, cluster ClusterState, jobs []JobState) map[string]Allocation {
	out := map[string]Allocation{}
	for _, j := range jobs {
		if !j.Current.Empty() {
			out[j.ID] = j.Current
		}
	}
	p := newPacker(cluster, out)
	for _, i := range arrivalOrder(jobs) {
		j := jobs[i]
		if !j.Current.Empty() {
			continue
		}
		n := min(max(j.Replicas, 1), cluster.TotalGPUs())
		per := p.take(n)
		if per == nil {
			break // head of the queue blocks the rest
		}
		local, accum := requestedBatch(j, n)
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
	}
	return local, accum
}
