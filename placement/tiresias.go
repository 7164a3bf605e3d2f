package placement

import "sort"

// TiresiasConfig configures the Tiresias policy.
type TiresiasConfig struct {
	// Thresholds are the attained-service values, in GPU-seconds, at which a
	// job is demoted to the next priority queue; len(Thresholds)+1 queues.
	// Default: one threshold at 16 GPU-hours (two queues), the setting of
	// the reference simulator.
	Thresholds []float64
	// MostFreeFirst places a job as the reference simulator's Tiresias
	// does: GPUs from the node with the most free first, node by node
	// (ties: the lowest index). Unset, a job that fits on one node goes to
	// the fullest node that fits it (packer.take).
	MostFreeFirst bool
}

// Tiresias is two-dimensional least-attained-service scheduling (NSDI'19)
// with discretised priority queues: a job's priority is the
// GPU-time it has received (GPUs × time, the two dimensions); it starts in
// the highest queue and is demoted when its attained service crosses a
// threshold. Queues are served in priority order, FIFO within a queue (by
// the time the job entered it); a job that does not fit is skipped so that
// smaller jobs behind it may run, and a running job whose place is taken by
// higher-priority jobs is preempted (it resumes later from its checkpoint).
// Jobs run with their requested replicas (within their GPU range) and batch
// size; a job whose range's minimum exceeds the cluster never runs.
type Tiresias struct {
	cfg   TiresiasConfig
	queue map[string]int // job id → queue index
	seq   map[string]int // job id → order of entry into its queue
	next  int
}

// NewTiresias returns a Tiresias policy.
func NewTiresias(cfg TiresiasConfig) *Tiresias {
	if len(cfg.Thresholds) == 0 {
		cfg.Thresholds = []float64{16 * 3600}
	}
	return &Tiresias{cfg: cfg, queue: map[string]int{}, seq: map[string]int{}}
}

// Name implements Policy.
func (*Tiresias) Name() string { return "tiresias" }

// AsRequested implements AsRequested: Tiresias runs jobs as requested.
func (*Tiresias) AsRequested() bool { return true }

// Schedule implements Policy.
func (t *Tiresias) Schedule(_ float64, cluster ClusterState, jobs []JobState) map[string]Allocation {
	live := make(map[string]bool, len(jobs))
	// New jobs enter the top queue in arrival order.
	for _, i := range arrivalOrder(jobs) {
		j := jobs[i]
		live[j.ID] = true
		if _, ok := t.queue[j.ID]; !ok {
			t.queue[j.ID] = 0
			t.seq[j.ID] = t.next
			t.next++
		}
	}
	for id := range t.queue {
		if !live[id] {
			delete(t.queue, id)
			delete(t.seq, id)
		}
	}
	// Demote by attained GPU-time (in a stable order so entry order is
	// deterministic).
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return t.seq[jobs[order[a]].ID] < t.seq[jobs[order[b]].ID] })
	for _, i := range order {
		j := jobs[i]
		q := 0
		for q < len(t.cfg.Thresholds) && j.Attained >= t.cfg.Thresholds[q] {
			q++
		}
		if q > t.queue[j.ID] {
			t.queue[j.ID] = q
			t.seq[j.ID] = t.next
			t.next++
		}
	}
	// Admit in priority order.
	sort.SliceStable(order, func(a, b int) bool {
		ja, jb := jobs[order[a]], jobs[order[b]]
		if t.queue[ja.ID] != t.queue[jb.ID] {
			return t.queue[ja.ID] < t.queue[jb.ID]
		}
		return t.seq[ja.ID] < t.seq[jb.ID]
	})
	total := cluster.TotalGPUs()
	free := total
	admitted := make([]int, 0, len(jobs))
	for _, i := range order {
		n, ok := jobs[i].RequestedGPUs(total)
		if ok && n <= free {
			free -= n
			admitted = append(admitted, i)
		}
	}
	out := map[string]Allocation{}
	keepCurrent(cluster, jobs, admitted, out)
	p := newPacker(cluster, out)
	for _, i := range admitted {
		j := &jobs[i]
		if _, ok := out[j.ID]; ok {
			continue
		}
		n, _ := j.RequestedGPUs(total)
		take := p.take
		if t.cfg.MostFreeFirst {
			take = p.takeMostFree
		}
		per := take(n)
		if per == nil {
			continue
		}
		local, accum := requestedBatch(*j, n)
		out[j.ID] = Allocation{PerNode: per, LocalBatch: local, AccumSteps: accum}
	}
	return out
}
