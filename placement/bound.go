package placement

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// BoundConfig configures Bound.
type BoundConfig struct {
	Nodes, GPUsPerNode int
	// Memory bounds per-GPU batch sizes as in SimConfig; nil: each
	// application's measured maximum.
	Memory MemoryOracle
	// StartCosts, if set, charges what the simulator charges every job
	// before its first iteration: it starts at the first decision at or
	// after its arrival (a multiple of Interval) and makes no progress for
	// MoveCost seconds. Unset, a job starts at its arrival.
	StartCosts         bool
	Interval, MoveCost float64
	// Reference bounds the reference simulator's model (SimConfig.Reference):
	// the gain uncalibrated, and each epoch up to half a second shorter,
	// since the simulator there rounds the time to an epoch's end (to the
	// nearest second), which can end it that much early.
	Reference bool
}

// Bound returns, as a SimResult with policy "bound", the completion time
// every job of workload would have if it ran alone on an otherwise empty
// cluster from its arrival, in every epoch at the configuration — GPUs on
// up to every node, per-GPU batch from 1 to what fits, any gradient
// accumulation up to the job's largest global batch — that makes progress
// fastest under the simulator's own model (App.StepTime, App.Gain). Nothing
// is queued, shared or restarted, and changing the configuration between
// epochs is free, so no policy simulated on the same cluster can complete a
// job earlier than this (each job's JCT is at least its bound, and so is
// the average). Utilisation and restarts are not computed (zero).
func Bound(apps Apps, workload []WorkloadJob, cfg BoundConfig) (*SimResult, error) {
	wall := time.Now()
	if cfg.Nodes <= 0 || cfg.GPUsPerNode <= 0 {
		return nil, fmt.Errorf("bound: need nodes and GPUs per node > 0 (got %d × %d)", cfg.Nodes, cfg.GPUsPerNode)
	}
	if cfg.StartCosts && !(cfg.Interval > 0 && cfg.MoveCost >= 0) {
		return nil, fmt.Errorf("bound: start costs need a positive interval and a non-negative move cost (got %v, %v)", cfg.Interval, cfg.MoveCost)
	}
	// early is how much sooner than its exact time an epoch may end.
	early := 0.0
	if cfg.Reference {
		apps, early = apps.Uncalibrated(), 0.5
	}
	type key struct {
		app                string
		maxLocal, maxBatch int
	}
	cache := map[key]*jobBound{}
	res := &SimResult{Policy: "bound", GPUs: cfg.Nodes * cfg.GPUsPerNode, NumJobs: len(workload)}
	jcts := make([]float64, 0, len(workload))
	for _, w := range workload {
		// The same limits the simulator enforces (Simulate, checkAllocations).
		app, maxLocal, maxBatch, err := jobLimits(apps, w, cfg.Memory)
		if err != nil {
			return nil, fmt.Errorf("bound: %w", err)
		}
		k := key{w.App, maxLocal, maxBatch}
		b := cache[k]
		if b == nil {
			b = app.bestRun(cfg.Nodes, cfg.GPUsPerNode, maxLocal, maxBatch, early)
			cache[k] = b
		}
		start := w.Time
		if cfg.StartCosts {
			start = max(firstDecision(w.Time, cfg.Interval), w.Time) + cfg.MoveCost
		}
		done := start + b.seconds
		r := JobResult{Name: w.Name, App: w.App, Arrival: w.Time, Start: start, Completion: done,
			JCT: done - w.Time, MaxGPUs: b.maxGPUs, LastBatch: b.lastBatch}
		res.PerJob = append(res.PerJob, r)
		jcts = append(jcts, r.JCT)
		res.Makespan = math.Max(res.Makespan, done)
	}
	res.summarise(jcts)
	res.WallSeconds = time.Since(wall).Seconds()
	return res, nil
}

// firstDecision is the time of the simulator's first decision at or after
// t: the least k × interval by which a job arriving at t has arrived
// (arrivedBy), computed as Simulate computes its decision
// times (⌈t/interval⌉ alone can round past it: 3 × 0.1 is
// 0.30000000000000004, which divided by 0.1 is 3.0000000000000004).
func firstDecision(t, interval float64) float64 {
	k := math.Ceil(t / interval)
	for k > 0 && arrivedBy(t, (k-1)*interval, interval) {
		k--
	}
	for !arrivedBy(t, k*interval, interval) {
		k++
	}
	return k * interval
}

// jobBound is one application's fastest run alone on the cluster.
type jobBound struct {
	seconds   float64 // from the first iteration to completion
	maxGPUs   int     // GPUs of the fastest configuration in any epoch
	lastBatch int     // global batch in the final epoch
}

// bestRun finds, for every epoch, the configuration with the highest
// progress rate Gain(B, epoch) / iteration time, on a cluster of nodes ×
// gpn GPUs with per-GPU batch ≤ maxLocal and global batch ≤ maxBatch, and
// sums the epochs' durations at those rates.
//
// The search is exact over what a policy may choose: placements over up to
// as many nodes as the application has measured placements for are
// enumerated GPU count by GPU count on each node, as StepTime looks them up
// (a measured one by its rotation-normalised key, any other by its node and
// GPU counts); beyond that, StepTime depends only on the node and GPU
// counts. First the least
// iteration time of every global batch B is found (over placement, per-GPU
// batch and accumulation steps), then each epoch takes the best B.
func (a *App) bestRun(nodes, gpn, maxLocal, maxBatch int, early float64) *jobBound {
	maxLocal = max(maxLocal, 1)
	// minIter[B]: least seconds per iteration at global batch B; gpus[B]
	// the GPUs that achieve it.
	minIter := make([]float64, maxBatch+1)
	gpus := make([]int, maxBatch+1)
	for i := range minIter {
		minIter[i] = math.Inf(1)
	}
	// try searches per-GPU batch and accumulation on r GPUs whose step
	// time is at(local).
	try := func(r int, at func(l float64) (float64, float64)) {
		for l := 1; l <= maxLocal && r*l <= maxBatch; l++ {
			step, sync := at(float64(l))
			for acc := 0; r*l*(acc+1) <= maxBatch; acc++ {
				b := r * l * (acc + 1)
				it := AccumIterTime(step, sync, acc)
				if it < minIter[b] {
					minIter[b], gpus[b] = it, r
				}
			}
		}
	}
	// byShape is StepTime for a placement that was not measured: it
	// depends only on the node and GPU counts.
	byShape := func(n, r int) func(l float64) (float64, float64) {
		if a.shape != nil {
			return func(l float64) (float64, float64) { return a.shape(n, r, l) }
		}
		return func(l float64) (float64, float64) { return a.stepByShape(n, r, l) }
	}
	// A placement key has one "count." per node ("1.1.2." is 3 nodes).
	measuredNodes := 0
	for k := range a.placements {
		measuredNodes = max(measuredNodes, strings.Count(k, "."))
	}
	seen := map[string]bool{}
	shapeSeen := map[[2]int]bool{}
	counts := make([]int, 0, nodes)
	var enumerate func(n int)
	enumerate = func(n int) {
		if n == 0 {
			r := sum(counts)
			k := placementKey(counts)
			if c := a.placements[k]; c != nil {
				if !seen[k] {
					seen[k] = true
					try(r, c.at)
				}
			} else if s := [2]int{len(counts), r}; !shapeSeen[s] {
				shapeSeen[s] = true
				try(r, byShape(s[0], r))
			}
			return
		}
		for g := 1; g <= gpn; g++ {
			counts = append(counts, g)
			enumerate(n - 1)
			counts = counts[:len(counts)-1]
		}
	}
	for n := 1; n <= nodes; n++ {
		if n <= measuredNodes {
			enumerate(n)
			continue
		}
		for r := n; r <= n*gpn; r++ {
			try(r, byShape(n, r))
		}
	}
	out := &jobBound{}
	p := 0.0
	for e := 0; e < a.Epochs; e++ {
		best, bestB := 0.0, 0
		for b := 1; b <= maxBatch; b++ {
			if math.IsInf(minIter[b], 1) {
				continue
			}
			if rate := a.Gain(float64(b), e) / minIter[b]; rate > best {
				best, bestB = rate, b
			}
		}
		next := a.EpochProgress(e + 1)
		out.seconds += max(0, (next-p)/best-early)
		p = next
		out.maxGPUs = max(out.maxGPUs, gpus[bestB])
		out.lastBatch = bestB
	}
	return out
}
