// Package placement decides where jobs run: cluster-level scheduling policies
// (FIFO, Tiresias, ONES), placement by predicted peak memory, memory-budget
// arbitration, and a trace-driven cluster simulator that drives the same
// policy code with a virtual clock.
//
// Policies are pure in the sense of etcd's raft package: a call to Schedule
// takes the cluster and the jobs as plain values and returns allocations; it
// performs no I/O and, for a given seed and sequence of calls, always returns
// the same result. The simulator and the live coordinator both call them.
package placement

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Node is one machine of the cluster as a policy sees it.
type Node struct {
	// Name identifies the node to the caller; policies only use its index.
	Name string
	// GPUs is the number of GPUs on the node.
	GPUs int
}

// ClusterState is the cluster a policy schedules onto.
type ClusterState struct {
	Nodes []Node
}

// UniformCluster returns a cluster of nodes*gpusPerNode GPUs with nodes named
// node-0, node-1, and so on.
func UniformCluster(nodes, gpusPerNode int) ClusterState {
	c := ClusterState{Nodes: make([]Node, nodes)}
	for i := range c.Nodes {
		c.Nodes[i] = Node{Name: "node-" + strconv.Itoa(i), GPUs: gpusPerNode}
	}
	return c
}

// TotalGPUs is the number of GPUs in the cluster.
func (c ClusterState) TotalGPUs() int {
	n := 0
	for _, nd := range c.Nodes {
		n += nd.GPUs
	}
	return n
}

// Allocation is what a policy gives one job: GPUs on nodes and a batch size.
// The global batch size is NumGPUs() × LocalBatch × (AccumSteps+1).
type Allocation struct {
	// PerNode[i] is the number of GPUs the job holds on cluster node i. It
	// may be shorter than the node list (missing entries are zero).
	PerNode []int
	// LocalBatch is the per-GPU batch size of one micro-step.
	LocalBatch int
	// AccumSteps is the number of extra gradient-accumulation micro-steps
	// per iteration (0: none).
	AccumSteps int
}

// NumGPUs is the number of GPUs the allocation holds.
func (a Allocation) NumGPUs() int {
	n := 0
	for _, g := range a.PerNode {
		n += g
	}
	return n
}

// NumNodes is the number of nodes the allocation spans.
func (a Allocation) NumNodes() int {
	n := 0
	for _, g := range a.PerNode {
		if g > 0 {
			n++
		}
	}
	return n
}

// GlobalBatch is the number of samples per iteration.
func (a Allocation) GlobalBatch() int {
	return a.NumGPUs() * a.LocalBatch * (a.AccumSteps + 1)
}

// Placement returns the per-node GPU counts of the nodes in use, in node
// order, in the data's placement notation: "22" is two nodes with two GPUs.
// Counts above 9 are written in brackets, e.g. "[16]4".
func (a Allocation) Placement() string {
	var b strings.Builder
	for _, g := range a.PerNode {
		switch {
		case g <= 0:
		case g < 10:
			b.WriteByte(byte('0' + g))
		default:
			b.WriteString("[" + strconv.Itoa(g) + "]")
		}
	}
	return b.String()
}

// Counts returns the non-zero per-node GPU counts in node order.
func (a Allocation) Counts() []int {
	var out []int
	for _, g := range a.PerNode {
		if g > 0 {
			out = append(out, g)
		}
	}
	return out
}

// Empty reports whether the allocation holds no GPU.
func (a Allocation) Empty() bool { return a.NumGPUs() == 0 }

// SameGPUs reports whether a and b hold the same GPUs on the same nodes.
func (a Allocation) SameGPUs(b Allocation) bool {
	n := max(len(a.PerNode), len(b.PerNode))
	for i := 0; i < n; i++ {
		if at(a.PerNode, i) != at(b.PerNode, i) {
			return false
		}
	}
	return true
}

// String formats the allocation for logs, e.g. "22×64".
func (a Allocation) String() string {
	if a.Empty() {
		return "-"
	}
	s := a.Placement() + "×" + strconv.Itoa(a.LocalBatch)
	if a.AccumSteps > 0 {
		s += fmt.Sprintf("(+%d accum)", a.AccumSteps)
	}
	return s
}

func at(s []int, i int) int {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// Observation is one measured iteration time of a job in one configuration,
// as reported by the job (or, in the simulator, by the application profile).
type Observation struct {
	Nodes      int     // nodes spanned
	GPUs       int     // replicas
	LocalBatch int     // per-GPU micro-batch
	StepTime   float64 // seconds per micro-step including synchronisation
	SyncTime   float64 // seconds of StepTime spent synchronising gradients
	// Shared: measured while another job the policy places ran on one of
	// its GPUs (the live loop's placement by memory co-locates jobs until
	// the policy starts them elsewhere). Such a time says how fast the
	// shape was then, not how fast it is alone: ONES fits no step time to
	// it, though it counts for the exploration bound.
	Shared bool
}

// JobState is everything a policy knows about one active job.
type JobState struct {
	ID  string
	App string
	// Arrival is the submission time in seconds (same clock as Schedule's now).
	Arrival float64
	// Replicas and Batch are what the user asked for; non-elastic policies
	// run the job with exactly these.
	Replicas int
	Batch    int
	// MinGPUs and MaxGPUs bound the GPU count any policy may give the job
	// (0: no bound; the simulator's workload jobs have none). A job that
	// runs at all holds at least MinGPUs and at most MaxGPUs; a job whose
	// MinGPUs exceeds the cluster (or its MaxGPUs) is never run.
	MinGPUs, MaxGPUs int
	// Running reports that the job runs even if Current does not show it
	// (the live loop runs a job that does not yet hold the GPUs it asked
	// for on fewer; a policy leaving it out does not preempt it). FIFO
	// does not let such a job, when it cannot grow, hold up later jobs.
	Running bool
	// MinBatch and MaxBatch bound the global batch size an elastic policy
	// may choose; BaseBatch is the batch size the progress unit refers to.
	MinBatch, MaxBatch, BaseBatch int
	// MinLocal is the smallest useful per-GPU batch size; MaxLocal the
	// largest that fits in one GPU's memory as the caller knows it (0:
	// unbounded).
	MinLocal, MaxLocal int
	// Attained is the GPU-seconds of service received so far.
	Attained float64
	// Progress and Target are the training progress made and needed, in
	// base-batch iterations scaled by statistical efficiency.
	Progress, Target float64
	// GradSqr and GradVar are the latest gradient statistics (squared
	// gradient norm and variance at the base batch); zero when unknown.
	GradSqr, GradVar float64
	// SampleProgress says the job's progress counts samples, whatever the
	// batch: an iteration at global batch B advances it by exactly
	// B / BaseBatch, so a larger batch loses nothing per sample. The live
	// runtime's jobs are such jobs (they end after their spec's samples);
	// a policy weighing statistical efficiency (ONES) then maximises
	// samples per second instead of applying its noise-scale prior, which
	// would favour small batches that train no faster here. Gradient
	// statistics, if given, are ignored.
	SampleProgress bool
	// Current is the job's allocation now (empty when queued or preempted).
	Current Allocation
	// Restarts counts how many times the job was (re)started.
	Restarts int
	// Observed holds the job's measured iteration times, one per
	// configuration seen so far.
	Observed []Observation
	// Prior, if set, is the caller's own prediction of the job's step
	// times (the live loop's: the cost model's compute time on the job's
	// device and the all-reduce model's synchronisation). ONES fills the
	// terms its reports cannot fix yet from it instead of from generic
	// shares (FitThroughput): with one measured shape, the generic shares
	// (30% of compute fixed, synchronisation 10% of it) may predict a
	// second GPU to give 1.4× what the device gives 1.95×. nil: no prior.
	Prior *ThroughputModel
}

// InGPURange reports whether n GPUs are within the job's GPU range.
func (j *JobState) InGPURange(n int) bool {
	return n >= j.MinGPUs && (j.MaxGPUs <= 0 || n <= j.MaxGPUs)
}

// RequestedGPUs is the GPU count a policy that runs jobs as requested
// (FIFO, Tiresias) gives job j on a cluster of total GPUs: Replicas (at
// least one) within the job's GPU range, at most the cluster and at most
// MaxBatch (every GPU trains on at least one sample). ok is false when no
// count satisfies all of them: the job can never run here.
func (j *JobState) RequestedGPUs(total int) (n int, ok bool) {
	n = max(j.Replicas, 1, j.MinGPUs)
	if j.MaxGPUs > 0 {
		n = min(n, j.MaxGPUs)
	}
	if j.MaxBatch > 0 {
		n = min(n, j.MaxBatch)
	}
	n = min(n, total)
	return n, n > 0 && j.InGPURange(n)
}

// Policy decides the allocation of every active job. Schedule returns the
// allocation of each job that should hold GPUs; a job missing from the map
// gets none (it is queued, or preempted if it was running). Implementations
// must never hand out more GPUs on a node than it has, and must be
// deterministic for a given seed and sequence of calls.
type Policy interface {
	Name() string
	Schedule(now float64, cluster ClusterState, jobs []JobState) map[string]Allocation
}

// Departures is implemented by policies that keep state about the jobs
// they have seen (ONES's arrival stream). A job absent from a Schedule's
// list is taken to have completed. A caller whose list also leaves out jobs
// for other reasons (the live loop lists only jobs holding GPUs) calls Left
// before the next Schedule for each job that left without completing, and
// again if one that left as Requeued later ends while still away.
type Departures interface {
	Left(id string, how Departure)
}

// AppForgetter is implemented by policies that keep what they learn per
// application (ONES: step times, the throughput model, the step-time
// prior and the efficiency correction), for later jobs of the same
// application. A caller whose applications end with their jobs (the live
// loop names each job's application after the job) calls ForgetApp once
// no job of app will be listed again, so that a long-running caller's
// policy does not grow with every job it has seen.
type AppForgetter interface {
	ForgetApp(app string)
}

// Departure is how a job left a caller's list (Departures.Left).
type Departure uint8

const (
	// Requeued: the job holds no GPUs now and may come back (then it is
	// not a new arrival).
	Requeued Departure = iota
	// Ended: cancelled or failed; its work so far is not a finished job's.
	Ended
	// CompletedAway: a job that had left as Requeued completed without
	// being listed again; it is a finished job, with the work it had when
	// it was last listed.
	CompletedAway
)

func (d Departure) String() string {
	switch d {
	case Requeued:
		return "requeued"
	case Ended:
		return "ended"
	case CompletedAway:
		return "completed-away"
	}
	return fmt.Sprintf("Departure(%d)", uint8(d))
}

// AsRequested is implemented by policies that run every job with exactly
// the GPU count and batch it asks for (JobState.Replicas within its GPU
// range, and Batch) rather than choosing them: FIFO and Tiresias. A caller
// whose jobs may run on other counts than requested (the live loop) shows
// such a policy a job not holding its requested count as not started.
type AsRequested interface {
	AsRequested() bool
}

// RunsAsRequested reports whether p runs jobs as requested (AsRequested).
func RunsAsRequested(p Policy) bool {
	a, ok := p.(AsRequested)
	return ok && a.AsRequested()
}

// MemoryOracle says how large a per-GPU batch of an application fits in one
// GPU's memory. The default reads the application profiles' measured maxima;
// the coordinator may plug in a predictor (e.g. tensorsched's MinBudget)
// that widens the choice by planning swaps and recomputation.
type MemoryOracle interface {
	// MaxLocalBatch returns the largest per-GPU batch size of app that fits
	// on device dev ("" for the cluster's default device); 0 if unknown.
	MaxLocalBatch(app string, dev string) int
}

// StaticMemory is a MemoryOracle backed by a table of per-application maxima.
type StaticMemory map[string]int

// MaxLocalBatch implements MemoryOracle.
func (m StaticMemory) MaxLocalBatch(app, _ string) int { return m[app] }

// PolicyOptions configures NewPolicy.
type PolicyOptions struct {
	// Seed drives every random choice of the policy.
	Seed int64
	// Memory bounds per-GPU batch sizes (ONES); nil means no bound beyond
	// the job's own batch range.
	Memory MemoryOracle
	// MoveCost is the seconds a job makes no progress after it is started,
	// resized or moved (checkpoint and restart); ONES weighs it. 0:
	// DefaultMoveCost; negative: none.
	MoveCost float64
	// Interval is the scheduling interval in seconds.
	Interval float64
	// Horizon shapes ONES's fitness (see ONESConfig.Horizon); 0: default.
	Horizon float64
	// ONES overrides ONES's search and stability parameters; NewPolicy
	// refuses it for another policy.
	ONES ONESTuning
	// MostFreeFirst makes tiresias place as the reference simulator does
	// (TiresiasConfig.MostFreeFirst); the other policies ignore it.
	MostFreeFirst bool
}

// PolicyNames lists the policies NewPolicy knows.
var PolicyNames = []string{"fifo", "tiresias", "ones"}

// NewPolicy returns the named policy.
func NewPolicy(name string, opt PolicyOptions) (Policy, error) {
	if name != "ones" && !opt.ONES.Empty() {
		return nil, fmt.Errorf("ONES settings (%s) given for policy %q: they apply to ones only", opt.ONES, name)
	}
	switch name {
	case "fifo":
		return NewFIFO(), nil
	case "tiresias":
		return NewTiresias(TiresiasConfig{MostFreeFirst: opt.MostFreeFirst}), nil
	case "ones":
		cfg := ONESConfig{Seed: opt.Seed, Memory: opt.Memory, MoveCost: opt.MoveCost, Interval: opt.Interval, Horizon: opt.Horizon}
		opt.ONES.Apply(&cfg)
		return NewONES(cfg), nil
	}
	return nil, fmt.Errorf("unknown policy %q (want one of %s)", name, strings.Join(PolicyNames, ", "))
}

// fixedBatch splits a requested global batch over n GPUs the way a
// non-elastic job runs it: the per-GPU share, accumulated over micro-steps
// when it exceeds maxLocal.
func fixedBatch(batch, n, maxLocal int) (local, accum int) {
	if n <= 0 {
		return 0, 0
	}
	local = (batch + n - 1) / n
	if maxLocal > 0 && local > maxLocal {
		accum = (local+maxLocal-1)/maxLocal - 1
		local = (local + accum) / (accum + 1)
	}
	return max(local, 1), accum
}

// keepCurrent adds to out the current allocation of every job in ids (in
// that order) whose GPU count is within its range and that still fits the
// cluster beside those kept before it: a job's allocation may name more
// GPUs on a node than the cluster now has, or a node it no longer lists (a
// caller whose nodes changed); such a job is treated as holding nothing.
func keepCurrent(c ClusterState, jobs []JobState, ids []int, out map[string]Allocation) {
	used := make([]int, len(c.Nodes))
	for _, i := range ids {
		j := &jobs[i]
		if j.Current.Empty() || !j.InGPURange(j.Current.NumGPUs()) || len(j.Current.PerNode) > len(c.Nodes) {
			continue
		}
		fits := true
		for n, g := range j.Current.PerNode {
			fits = fits && g >= 0 && used[n]+g <= c.Nodes[n].GPUs
		}
		if !fits {
			continue
		}
		for n, g := range j.Current.PerNode {
			used[n] += g
		}
		out[j.ID] = j.Current
	}
}

// packer hands out free GPUs so that a job spans as few nodes as possible:
// a job that fits on one node goes to the fullest node that still fits it
// (best fit); otherwise it takes the nodes with the most free GPUs first
// (ties: lowest node index).
type packer struct {
	free []int
}

func newPacker(c ClusterState, allocs map[string]Allocation) *packer {
	p := &packer{free: make([]int, len(c.Nodes))}
	for i, n := range c.Nodes {
		p.free[i] = n.GPUs
	}
	for _, a := range allocs {
		for i, g := range a.PerNode {
			if i < len(p.free) {
				p.free[i] -= g
			}
		}
	}
	return p
}

func (p *packer) total() int {
	t := 0
	for _, f := range p.free {
		t += f
	}
	return t
}

// take returns a placement of n GPUs, or nil if fewer are free.
func (p *packer) take(n int) []int {
	if n <= 0 || p.total() < n {
		return nil
	}
	// A single node that fits the whole job, the fullest such (best fit).
	best := -1
	for i, f := range p.free {
		if f >= n && (best < 0 || f < p.free[best]) {
			best = i
		}
	}
	if best >= 0 {
		per := make([]int, len(p.free))
		per[best] = n
		p.free[best] -= n
		return per
	}
	return p.takeMostFree(n)
}

// takeMostFree returns a placement of n GPUs taken node by node from the
// node with the most free GPUs (ties: the lowest index), or nil if fewer
// are free: how take spreads a job no single node fits, and the reference
// simulator's Tiresias placement for every job.
func (p *packer) takeMostFree(n int) []int {
	if n <= 0 || p.total() < n {
		return nil
	}
	per := make([]int, len(p.free))
	order := make([]int, len(p.free))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p.free[order[a]] > p.free[order[b]] })
	left := n
	for _, i := range order {
		if left == 0 {
			break
		}
		g := min(p.free[i], left)
		per[i] = g
		p.free[i] -= g
		left -= g
	}
	return per
}

// arrivalOrder returns the indices of jobs in arrival order (ties: id).
func arrivalOrder(jobs []JobState) []int {
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ja, jb := jobs[idx[a]], jobs[idx[b]]
		if ja.Arrival != jb.Arrival {
			return ja.Arrival < jb.Arrival
		}
		return ja.ID < jb.ID
	})
	return idx
}
