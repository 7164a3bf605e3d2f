package placement

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// WorkloadJob is one row of a workload trace: a job, when it arrives, and
// what its user asked for.
type WorkloadJob struct {
	Name     string
	Time     float64 // arrival, seconds from the start of the trace
	App      string
	Replicas int
	Batch    int
}

// LoadWorkload reads a workload CSV (name,time,application,num_replicas,
// batch_size) and checks every row against apps; errors name the file, the
// line and the field. An application that is not in apps but names a zoo
// model (workload/zoo, aliases accepted) is kept under the model's canonical
// name: the caller simulates it from the cost model by adding a synthetic
// profile to apps (placement/zooapps). A measured application wins over a
// zoo alias of the same name ("bert" is the measured one).
func LoadWorkload(path string, apps Apps) ([]WorkloadJob, error) {
	rows, err := readCSV(path, []string{"name", "time", "application", "num_replicas", "batch_size"})
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	seen := map[string]int{}
	out := make([]WorkloadJob, 0, len(rows))
	for _, r := range rows {
		get := func(c string) string { return strings.TrimSpace(r.s[r.cols[c]]) }
		bad := func(field, why string) error {
			return fmt.Errorf("workload %s:%d: field %s: %s", path, r.line, field, why)
		}
		j := WorkloadJob{Name: get("name"), App: get("application")}
		if j.Name == "" {
			return nil, bad("name", "empty")
		}
		if prev, ok := seen[j.Name]; ok {
			return nil, bad("name", fmt.Sprintf("%q already used on line %d", j.Name, prev))
		}
		seen[j.Name] = r.line
		t, err := parseDecimal(get("time"))
		if err != nil {
			return nil, bad("time", fmt.Sprintf("%q is not a number of seconds", get("time")))
		}
		if t < 0 {
			return nil, bad("time", fmt.Sprintf("%v is negative", t))
		}
		j.Time = t
		if apps != nil {
			if _, ok := apps[j.App]; !ok {
				// A zoo model (or alias) is simulated from the cost model;
				// the caller adds its synthetic profile (placement/zooapps).
				c, isZoo := zoo.Canonical(j.App)
				if !isZoo {
					return nil, bad("application", unknownApp(j.App, apps))
				}
				j.App = c
			}
		}
		if j.Replicas, err = strconv.Atoi(get("num_replicas")); err != nil || j.Replicas < 1 {
			return nil, bad("num_replicas", fmt.Sprintf("%q is not a positive integer", get("num_replicas")))
		}
		if j.Replicas > workload.MaxGPUs {
			return nil, bad("num_replicas", fmt.Sprintf("%d is more than %d, the most GPUs a job may ask for", j.Replicas, workload.MaxGPUs))
		}
		if j.Batch, err = strconv.Atoi(get("batch_size")); err != nil || j.Batch < 1 {
			return nil, bad("batch_size", fmt.Sprintf("%q is not a positive integer", get("batch_size")))
		}
		if j.Batch > workload.MaxBatch {
			return nil, bad("batch_size", fmt.Sprintf("%d is more than %d, the largest batch size a job may ask for", j.Batch, workload.MaxBatch))
		}
		out = append(out, j)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("workload %s: no jobs", path)
	}
	return out, nil
}

// unknownApp explains which application names a workload may use.
func unknownApp(name string, apps Apps) string {
	var measured []string
	for _, n := range apps.Names() {
		if !apps[n].Synthetic() {
			measured = append(measured, n)
		}
	}
	have := strings.Join(measured, ", ")
	if have == "" {
		have = "none loaded; pass --apps DIR"
	}
	return fmt.Sprintf("unknown application %q (measured: %s; zoo models, simulated from the cost model: %s)",
		name, have, strings.Join(zoo.Models(), ", "))
}

// SimConfig configures a simulation.
type SimConfig struct {
	Nodes, GPUsPerNode int
	// Interval is the scheduling interval in seconds (default 60).
	Interval float64
	// MoveCost is the seconds without progress after each start, resize or
	// move (checkpoint and restart); 0 means none (the simulate command
	// passes DefaultMoveCost unless told otherwise). Batch-size
	// changes on the same GPUs are applied at an iteration boundary and
	// cost nothing.
	MoveCost float64
	// Memory bounds per-GPU batch sizes; default: each application's
	// measured maximum.
	Memory MemoryOracle
	// Progress, if set, receives a line every 10% of jobs completed.
	Progress io.Writer
	// MaxTime aborts a simulation that runs longer (virtual seconds;
	// default 30 days after the last arrival).
	MaxTime float64
	// Reference replays the workload as the data's reference simulator
	// does, where it differs from the profiles' own reading: the
	// noise-scale gain uncalibrated (Apps.Uncalibrated: a run at a fixed
	// validated batch then needs the iterations the gradient statistics
	// give, not its validation file's), the time to each epoch's end
	// rounded to the nearest second (so epochs end on whole seconds when
	// the interval and move cost are whole seconds, as in the reference),
	// and a placement's step time looked up with its nodes in
	// descending GPU count (the reference's allocation order). With
	// PolicyOptions.MostFreeFirst, tiresias reproduces the reference
	// Tiresias figures (ReferenceMode).
	Reference bool
	// OnEvent, if set, receives every change to a job as it happens: its
	// start, each change of its GPUs or batch, a preemption, a resumption
	// and its completion (SimEvent), in virtual-time order.
	OnEvent func(SimEvent)
}

// The kinds of SimEvent.
const (
	EventStart    = "start"    // first GPUs
	EventResume   = "resume"   // GPUs again after a preemption
	EventGrow     = "grow"     // more GPUs (a restart)
	EventShrink   = "shrink"   // fewer GPUs (a restart)
	EventMove     = "move"     // as many GPUs, others (a restart)
	EventBatch    = "batch"    // same GPUs, another batch (no restart)
	EventPreempt  = "preempt"  // all its GPUs taken; it waits
	EventComplete = "complete" // final epoch reached
)

// SimEvent is one change to a job in a simulation. A start, resume, grow,
// shrink or move costs the job MoveCost seconds without progress; a batch
// change, a preemption (the resumption pays) and a completion cost
// nothing.
type SimEvent struct {
	T    float64 `json:"t_s"` // virtual seconds
	Job  string  `json:"job"`
	App  string  `json:"app"`
	Kind string  `json:"event"` // Event*
	// FromGPUs and ToGPUs are the GPUs the job held before and after.
	FromGPUs int `json:"from_gpus"`
	ToGPUs   int `json:"to_gpus"`
	// Placement is the allocation after the event in the data's
	// placement notation ("22": two GPUs on each of two nodes; "" when it
	// holds none), Nodes the nodes it spans.
	Placement string `json:"placement"`
	Nodes     int    `json:"nodes"`
	// Batch is the global batch after the event (samples per iteration on
	// all its GPUs; for complete, the batch it completed at), LocalBatch
	// and AccumSteps its per-GPU micro-batch and extra micro-steps.
	Batch      int `json:"batch"`
	LocalBatch int `json:"local_batch"`
	AccumSteps int `json:"accum_steps"`
	// Progress is the fraction of the job's target progress reached at T.
	Progress float64 `json:"progress"`
}

// DefaultMoveCost is the default checkpoint-and-restart time, in seconds,
// of starting, resizing or moving a job (the reference simulator's value).
const DefaultMoveCost = 30.0

// JobResult is the outcome of one simulated job.
type JobResult struct {
	Name       string  `json:"name"`
	App        string  `json:"app"`
	Arrival    float64 `json:"arrival_s"`
	Start      float64 `json:"start_s"`
	Completion float64 `json:"completion_s"`
	JCT        float64 `json:"jct_s"`
	Restarts   int     `json:"restarts"`
	GPUSeconds float64 `json:"gpu_seconds"`
	MaxGPUs    int     `json:"max_gpus"`
	LastBatch  int     `json:"last_batch"`
}

// TimePoint is the cluster's state after one scheduling decision.
type TimePoint struct {
	T       float64 `json:"t_s"`
	Used    int     `json:"used_gpus"`
	Running int     `json:"running"`
	Queued  int     `json:"queued"`
}

// JCTStats are a run's completion-time figures: what a simulation reports
// and what each run of the cluster benchmark keeps of it.
type JCTStats struct {
	AvgJCT      float64 `json:"avg_jct_s"`
	MedianJCT   float64 `json:"median_jct_s"`
	P95JCT      float64 `json:"p95_jct_s"`
	P99JCT      float64 `json:"p99_jct_s"`
	Makespan    float64 `json:"makespan_s"`
	Utilisation float64 `json:"avg_utilisation"`
	Restarts    int     `json:"restarts"`
}

// SimResult summarises a simulation.
type SimResult struct {
	Policy  string `json:"policy"`
	GPUs    int    `json:"gpus"`
	NumJobs int    `json:"jobs"`
	JCTStats
	Decisions   int         `json:"decisions"`
	WallSeconds float64     `json:"wall_s"`
	PolicyWall  float64     `json:"policy_wall_s"`
	PerJob      []JobResult `json:"per_job"`
	// PerApp breaks the results down by application (ByApp).
	PerApp []AppStats `json:"per_app"`
	// GPUTime splits the cluster's GPU-hours from time 0 to the makespan
	// by what the GPUs did (zero for Bound).
	GPUTime  GPUTime     `json:"gpu_time"`
	Timeline []TimePoint `json:"timeline,omitempty"`
}

// GPUTime is where a simulated cluster's GPU-hours went, from time 0 to
// the makespan; the four parts add up to GPUs × makespan. Training and
// Restarting are the GPU-hours jobs held (Utilisation is their share):
// Restarting while a job paid the move cost after its first start, a
// resumption, a resize or a move, making no progress. The idle GPU-hours
// are IdleWaiting while some job that had arrived held no GPUs — waiting
// for the next decision, or left waiting by the policy (GPUs kept back,
// or too few for the job's request) — and IdleNoneWaiting otherwise.
type GPUTime struct {
	Training        float64 `json:"training_gpu_h"`
	Restarting      float64 `json:"restarting_gpu_h"`
	IdleWaiting     float64 `json:"idle_waiting_gpu_h"`
	IdleNoneWaiting float64 `json:"idle_none_waiting_gpu_h"`
}

// AppStats is one application's part of a simulation's results.
type AppStats struct {
	App    string  `json:"app"`
	Jobs   int     `json:"jobs"`
	AvgJCT float64 `json:"avg_jct_s"`
	// Share is what the application's jobs add to the run's average JCT:
	// their completion times summed, divided by every job's count. The
	// shares of all applications add up to the average.
	Share float64 `json:"share_of_avg_jct_s"`
	// AvgWait is the mean time from arrival to first start (JobResult.Start:
	// the first allocation; for Bound, when progress starts).
	AvgWait  float64 `json:"avg_wait_s"`
	GPUHours float64 `json:"gpu_hours"`
	Restarts int     `json:"restarts"`
}

// ByApp groups per-job results by application, largest share of the
// average JCT first (then by name).
func ByApp(jobs []JobResult) []AppStats {
	idx := map[string]int{}
	var out []AppStats
	for _, j := range jobs {
		k, ok := idx[j.App]
		if !ok {
			k = len(out)
			idx[j.App] = k
			out = append(out, AppStats{App: j.App})
		}
		a := &out[k]
		a.Jobs++
		a.AvgJCT += j.JCT
		a.AvgWait += j.Start - j.Arrival
		a.GPUHours += j.GPUSeconds / 3600
		a.Restarts += j.Restarts
	}
	for k := range out {
		a := &out[k]
		a.Share = a.AvgJCT / float64(len(jobs))
		a.AvgJCT /= float64(a.Jobs)
		a.AvgWait /= float64(a.Jobs)
	}
	sort.Slice(out, func(x, y int) bool {
		if out[x].Share != out[y].Share {
			return out[x].Share > out[y].Share
		}
		return out[x].App < out[y].App
	})
	return out
}

// simJob is the simulator's private state of one job.
type simJob struct {
	w          WorkloadJob
	app        *App
	state      JobState
	epoch      int
	rescale    float64
	started    bool
	start      float64
	done       bool
	completion float64
	iterTime   float64 // cached for state.Current
	seen       map[[3]int]bool
	maxGPUs    int
	ref        bool // SimConfig.Reference
}

// Simulate runs jobs through policy on a cluster in virtual time and
// returns the completion times. Every Interval seconds it calls the policy
// with the jobs that have arrived and not completed, applies its decisions
// (a changed GPU set costs MoveCost seconds of no progress), and advances
// every running job by the application profile: iteration time from the
// step-time measurements, progress per iteration from the gradient noise
// scale, completion at the application's final epoch.
func Simulate(apps Apps, workload []WorkloadJob, policy Policy, cfg SimConfig) (*SimResult, error) {
	wall := time.Now()
	if cfg.Nodes <= 0 || cfg.GPUsPerNode <= 0 {
		return nil, fmt.Errorf("simulate: need nodes and GPUs per node > 0 (got %d × %d)", cfg.Nodes, cfg.GPUsPerNode)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 60
	}
	if cfg.MoveCost < 0 {
		return nil, fmt.Errorf("simulate: negative move cost %v", cfg.MoveCost)
	}
	// The simulator decides at every interval, idle ones included, and
	// records each in the timeline: a job arriving millions of intervals
	// in (a time in milliseconds, a typo) would take hours and gigabytes.
	for _, w := range workload {
		if !(w.Time/cfg.Interval <= maxArrivalDecisions) {
			return nil, fmt.Errorf("simulate: job %q arrives at t=%gs, %.3g decisions of %gs into the simulation (at most %g): give arrival times in seconds from the trace's start, or raise the interval", w.Name, w.Time, w.Time/cfg.Interval, cfg.Interval, float64(maxArrivalDecisions))
		}
	}
	if cfg.MaxTime <= 0 {
		cfg.MaxTime = 30 * 86400
		for _, w := range workload {
			cfg.MaxTime = max(cfg.MaxTime, w.Time+30*86400)
		}
	}
	if cfg.Reference {
		apps = apps.Uncalibrated()
	}
	cluster := UniformCluster(cfg.Nodes, cfg.GPUsPerNode)
	jobs := make([]*simJob, len(workload))
	names := make(map[string]bool, len(workload))
	for i, w := range workload {
		// Policies answer by job name: two jobs of one name would both
		// take the GPUs meant for one.
		if names[w.Name] {
			return nil, fmt.Errorf("simulate: job name %q used twice (names must be unique)", w.Name)
		}
		names[w.Name] = true
		app, maxLocal, maxBatch, err := jobLimits(apps, w, cfg.Memory)
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		// The batch range is the profile's, widened to the job's own
		// batch (below the base batch as above the largest): fifo and
		// tiresias run a job at the batch it asks for.
		jobs[i] = &simJob{w: w, app: app, ref: cfg.Reference, seen: map[[3]int]bool{}, state: JobState{
			ID: w.Name, App: w.App, Arrival: w.Time, Replicas: w.Replicas, Batch: w.Batch,
			MinBatch: min(app.BaseBatch, w.Batch), MaxBatch: maxBatch, BaseBatch: app.BaseBatch,
			MinLocal: app.MinLocal, MaxLocal: maxLocal, Target: app.Target(), Prior: app.StepPrior(cfg.Nodes, cfg.GPUsPerNode),
		}}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].w.Time < jobs[b].w.Time })
	res := &SimResult{Policy: policy.Name(), GPUs: cluster.TotalGPUs(), NumJobs: len(jobs)}
	nextReport, completed := 1, 0
	var policyWall time.Duration
	// GPU-seconds held, training, restarting, and idle while a job waits
	// (GPUTime).
	var usedGPUSeconds, trainGPUSeconds, restartGPUSeconds, idleWaitingGPUSeconds float64
	now := 0.0
	idle := 0 // consecutive decisions that left the cluster idle with jobs waiting
	active := make([]JobState, 0, len(jobs))
	var ended []SimEvent // completions within the current interval (OnEvent)
	for step := 1; completed < len(jobs); step++ {
		if now > cfg.MaxTime {
			return nil, fmt.Errorf("simulate: %d of %d jobs still running after %.0f virtual seconds (policy %s starves them?)%s", len(jobs)-completed, len(jobs), cfg.MaxTime, policy.Name(), neverStarted(jobs))
		}
		// Decide.
		active = active[:0]
		var idx []*simJob
		next := len(jobs) // the first job yet to arrive
		for k, j := range jobs {
			if !arrivedBy(j.w.Time, now, cfg.Interval) {
				next = k
				break
			}
			if !j.done {
				active = append(active, j.state)
				idx = append(idx, j)
			}
		}
		if len(active) > 0 {
			t0 := time.Now()
			allocs := policy.Schedule(now, cluster, active)
			policyWall += time.Since(t0)
			res.Decisions++
			if err := checkAllocations(cluster, active, allocs); err != nil {
				return nil, fmt.Errorf("simulate: policy %s at t=%.0fs: %w", policy.Name(), now, err)
			}
			for _, j := range idx {
				j.apply(allocs[j.w.Name], now, cfg.MoveCost, cfg.OnEvent)
			}
		}
		tp := TimePoint{T: now}
		for _, j := range idx {
			if g := j.state.Current.NumGPUs(); g > 0 {
				tp.Used += g
				tp.Running++
			} else {
				tp.Queued++
			}
		}
		res.Timeline = append(res.Timeline, tp)
		// With every job arrived and none holding a GPU, the policy sees
		// the same jobs at every decision from now on: a cluster it
		// leaves idle stays idle (a job no allocation can run, such as
		// one whose batch range fits no per-GPU batch within memory on
		// the GPUs there are under a policy without accumulation).
		if tp.Used == 0 && tp.Queued > 0 && arrivedBy(jobs[len(jobs)-1].w.Time, now, cfg.Interval) {
			if idle++; idle >= maxIdleDecisions {
				return nil, fmt.Errorf("simulate: policy %s left all %d GPUs idle for %d decisions up to t=%.0fs with %d jobs waiting and none to arrive: they cannot run under it on this cluster%s",
					policy.Name(), res.GPUs, idle, now, tp.Queued, neverStarted(jobs))
			}
		} else {
			idle = 0
		}
		// Advance.
		ended = ended[:0]
		// A job waits from the decision if it left one on no GPUs, else
		// from the next arrival within the interval (next seen at the
		// next decision). The interval's idle GPU-seconds from then on
		// are idle with a job waiting.
		end, waitFrom := now+cfg.Interval, math.Inf(1)
		if tp.Queued > 0 {
			waitFrom = now
		} else if next < len(jobs) && jobs[next].w.Time < end {
			waitFrom = max(jobs[next].w.Time, now)
		}
		heldNow, heldWaiting := 0.0, 0.0 // GPU-seconds held in this interval, and from waitFrom on
		for _, j := range idx {
			if j.state.Current.Empty() {
				continue
			}
			used, restarting := j.advance(now, cfg.Interval)
			g := float64(j.state.Current.NumGPUs())
			heldNow += used * g
			heldWaiting += max(now+used-waitFrom, 0) * g
			restartGPUSeconds += restarting * g
			// used − restarting, never below 0 (a reference-mode epoch
			// rounded to nothing ends a job as its restart ends, and the
			// two times may then differ in the last bit).
			trainGPUSeconds += max(used-restarting, 0) * g
			if j.done {
				completed++
				if cfg.OnEvent != nil {
					ev := j.event(j.completion, EventComplete, j.state.Current.NumGPUs())
					ev.ToGPUs, ev.Placement, ev.Nodes = 0, "", 0
					ended = append(ended, ev)
				}
				// One line per 10% step reached, with the true share
				// (one completion may reach several steps of a few jobs).
				if cfg.Progress != nil && completed*10 >= nextReport*len(jobs) {
					fmt.Fprintf(cfg.Progress, "simulate %s: %d%% of jobs complete (%d/%d) at t=%.0fs\n",
						policy.Name(), completed*100/len(jobs), completed, len(jobs), j.completion)
					nextReport = completed*10/len(jobs) + 1
				}
			}
		}
		usedGPUSeconds += heldNow
		if waitFrom < end {
			// The waiting job holds no GPUs in this interval, so it
			// cannot complete in it: the makespan is at or after end,
			// and the whole stretch lies within it.
			idleWaitingGPUSeconds += float64(res.GPUs)*(end-waitFrom) - heldWaiting
		}
		// The interval's completions, told in time order (jobs advance
		// in arrival order, and a later arrival may complete sooner).
		slices.SortStableFunc(ended, func(a, b SimEvent) int { return cmp.Compare(a.T, b.T) })
		for _, ev := range ended {
			cfg.OnEvent(ev)
		}
		// The step-th decision falls at exactly step × Interval: adding
		// a fractional interval up drifts (ten additions of 0.1 make
		// 0.9999999999999999, and a job arriving at 1 s waited for the
		// decision after).
		now = float64(step) * cfg.Interval
	}
	// Results.
	jcts := make([]float64, 0, len(jobs))
	for _, j := range jobs {
		r := JobResult{Name: j.w.Name, App: j.w.App, Arrival: j.w.Time, Start: j.start, Completion: j.completion,
			JCT: j.completion - j.w.Time, Restarts: max(j.state.Restarts-1, 0), GPUSeconds: j.state.Attained,
			MaxGPUs: j.maxGPUs, LastBatch: j.state.Current.GlobalBatch()}
		res.PerJob = append(res.PerJob, r)
		res.Restarts += r.Restarts
		jcts = append(jcts, r.JCT)
		res.Makespan = math.Max(res.Makespan, j.completion)
	}
	res.summarise(jcts)
	if res.Makespan > 0 {
		res.Utilisation = usedGPUSeconds / (res.Makespan * float64(res.GPUs))
	}
	res.GPUTime = GPUTime{
		Training:        trainGPUSeconds / 3600,
		Restarting:      restartGPUSeconds / 3600,
		IdleWaiting:     idleWaitingGPUSeconds / 3600,
		IdleNoneWaiting: max(res.Makespan*float64(res.GPUs)-usedGPUSeconds-idleWaitingGPUSeconds, 0) / 3600,
	}
	res.PolicyWall = policyWall.Seconds()
	res.WallSeconds = time.Since(wall).Seconds()
	return res, nil
}

// arrivedBy reports whether a job arriving at t has arrived by the
// decision at now (step × interval). A decision time is a product in
// float64 and may fall an ulp short of the time it stands for (3 × 1.2 is
// 3.5999999999999996): an arrival within a billionth of an interval after
// it counts as at it, so that a job arriving at 3.6 s is decided on at the
// third decision of a 1.2 s interval, not the fourth.
func arrivedBy(t, now, interval float64) bool {
	return t <= now+arrivalSlack*interval
}

// arrivalSlack is arrivedBy's tolerance, in intervals.
const arrivalSlack = 1e-9

// maxArrivalDecisions is the most scheduling intervals Simulate steps
// through before a job's arrival: 10^7 (19 years at the default 60 s, 116
// days at the shortest interval simulate accepts) takes a few seconds.
const maxArrivalDecisions = 10_000_000

// maxIdleDecisions is how many decisions in a row Simulate lets a policy
// leave the whole cluster idle while jobs wait and none is to arrive
// before it gives up.
const maxIdleDecisions = 10

// neverStarted names the jobs that arrived but never held a GPU, for an
// error (", never started: a, b"); "" if none.
func neverStarted(jobs []*simJob) string {
	var names []string
	for _, j := range jobs {
		if !j.started && !j.done {
			names = append(names, j.w.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; never started: " + strings.Join(names, ", ")
}

// checkAllocations enforces the invariants every policy must keep: no node
// over-committed, and each job's GPU count within its GPU range and its
// batch within its batch range and memory.
func checkAllocations(c ClusterState, jobs []JobState, allocs map[string]Allocation) error {
	byID := make(map[string]*JobState, len(jobs))
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	// Check in id order so that, of several violations, the same one is
	// reported on every run.
	ids := make([]string, 0, len(allocs))
	for id := range allocs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	used := make([]int, len(c.Nodes))
	for _, id := range ids {
		a := allocs[id]
		j := byID[id]
		if j == nil {
			return fmt.Errorf("allocation for unknown or inactive job %q", id)
		}
		if len(a.PerNode) > len(c.Nodes) {
			return fmt.Errorf("job %s: allocation names %d nodes, cluster has %d", id, len(a.PerNode), len(c.Nodes))
		}
		for i, g := range a.PerNode {
			if g < 0 {
				return fmt.Errorf("job %s: negative GPU count on node %d", id, i)
			}
			used[i] += g
		}
		if a.Empty() {
			continue
		}
		s := j
		if n := a.NumGPUs(); !s.InGPURange(n) {
			return fmt.Errorf("job %s: %d GPUs outside its GPU range (min %d, max %s)", id, n, s.MinGPUs, orNone(s.MaxGPUs))
		}
		if a.LocalBatch < 1 || a.AccumSteps < 0 {
			return fmt.Errorf("job %s: local batch %d, accumulation %d", id, a.LocalBatch, a.AccumSteps)
		}
		if s.MaxLocal > 0 && a.LocalBatch > s.MaxLocal {
			return fmt.Errorf("job %s: local batch %d exceeds the %d that fits in memory", id, a.LocalBatch, s.MaxLocal)
		}
		// Below the range only by splitting it evenly: one more sample
		// per GPU and micro-step would reach MinBatch (fifo runs a batch
		// of 32 on the 3 GPUs a job asks for as 3 × 10).
		if b, steps := a.GlobalBatch(), a.NumGPUs()*(a.AccumSteps+1); b > s.MaxBatch || b+steps <= s.MinBatch {
			return fmt.Errorf("job %s: global batch %d outside [%d, %d]", id, b, s.MinBatch, s.MaxBatch)
		}
	}
	for i, u := range used {
		if u > c.Nodes[i].GPUs {
			return fmt.Errorf("node %d: %d GPUs allocated, it has %d", i, u, c.Nodes[i].GPUs)
		}
	}
	return nil
}

// orNone formats a bound, 0 as "none".
func orNone(v int) string {
	if v <= 0 {
		return "none"
	}
	return strconv.Itoa(v)
}

// event is a SimEvent of job j at time t, of the given kind, from held
// GPUs to its current allocation.
func (j *simJob) event(t float64, kind string, held int) SimEvent {
	a := j.state.Current
	return SimEvent{T: t, Job: j.w.Name, App: j.w.App, Kind: kind, FromGPUs: held, ToGPUs: a.NumGPUs(),
		Placement: a.Placement(), Nodes: a.NumNodes(), Batch: a.GlobalBatch(), LocalBatch: a.LocalBatch,
		AccumSteps: a.AccumSteps, Progress: j.state.Progress / j.state.Target}
}

// eventKind names the change from allocation cur to a (a not empty) of a
// job that has started before or not.
func eventKind(cur, a Allocation, started bool) string {
	switch n, m := cur.NumGPUs(), a.NumGPUs(); {
	case n == 0 && !started:
		return EventStart
	case n == 0:
		return EventResume
	case m > n:
		return EventGrow
	case m < n:
		return EventShrink
	case !cur.SameGPUs(a):
		return EventMove
	}
	return EventBatch
}

// apply installs a policy decision for one job at time now, and tells on
// (if set) what changed.
func (j *simJob) apply(a Allocation, now, moveCost float64, on func(SimEvent)) {
	cur := j.state.Current
	if a.Empty() {
		j.state.Current = Allocation{}
		j.rescale = 0
		if on != nil && !cur.Empty() {
			on(j.event(now, EventPreempt, cur.NumGPUs()))
		}
		return
	}
	if cur.SameGPUs(a) && cur.LocalBatch == a.LocalBatch && cur.AccumSteps == a.AccumSteps {
		return
	}
	var kind string
	if on != nil {
		kind = eventKind(cur, a, j.started) // before the start is recorded
	}
	moved := !cur.SameGPUs(a)
	j.state.Current = Allocation{PerNode: append([]int(nil), a.PerNode...), LocalBatch: a.LocalBatch, AccumSteps: a.AccumSteps}
	counts := a.Counts()
	if j.ref {
		// The reference looks a placement up in allocation order, its
		// nodes by descending GPU count (2+4+2+4 is 4422: measured as
		// 2244, not 2424).
		slices.SortFunc(counts, func(x, y int) int { return y - x })
	}
	step, sync := j.app.StepTime(counts, float64(a.LocalBatch))
	j.iterTime = AccumIterTime(step, sync, a.AccumSteps)
	if moved {
		j.rescale = moveCost
		j.state.Restarts++
	}
	if !j.started {
		// At its arrival at the earliest (a decision an ulp short of it
		// counts as at it: arrivedBy).
		j.started, j.start = true, max(now, j.w.Time)
	}
	j.maxGPUs = max(j.maxGPUs, a.NumGPUs())
	key := [3]int{len(counts), a.NumGPUs(), a.LocalBatch}
	if !j.seen[key] {
		j.seen[key] = true
		j.state.Observed = append(j.state.Observed, Observation{Nodes: len(counts), GPUs: a.NumGPUs(), LocalBatch: a.LocalBatch, StepTime: step, SyncTime: sync})
	}
	if on != nil {
		t := now
		if kind == EventStart {
			t = j.start
		}
		on(j.event(t, kind, cur.NumGPUs()))
	}
}

// advance runs the job for up to dt seconds from now and returns the
// seconds it held its GPUs (less than dt if it completed) and, of those,
// the seconds it spent restarting (paying the move cost).
func (j *simJob) advance(now, dt float64) (held, restarting float64) {
	a := j.state.Current
	g := float64(a.NumGPUs())
	t := now
	d := math.Min(j.rescale, dt)
	j.rescale -= d
	t += d
	left := dt - d
	batch := float64(a.GlobalBatch())
	for left > 0 {
		gain := j.app.Gain(batch, j.epoch)
		sqr, vr := j.app.GradStats(batch, j.epoch)
		j.state.GradSqr, j.state.GradVar = sqr, vr
		rate := gain / j.iterTime
		next := j.app.EpochProgress(j.epoch + 1)
		need := (next - j.state.Progress) / rate
		if j.ref && need <= left {
			// The reference ends an epoch at a whole second.
			need = min(math.RoundToEven(need), left)
		}
		if need > left {
			j.state.Progress += rate * left
			t += left
			left = 0
			break
		}
		j.state.Progress = next
		j.epoch++
		t += need
		left -= need
		if j.epoch >= j.app.Epochs {
			j.done, j.completion = true, t
			break
		}
	}
	j.state.Attained += (t - now) * g
	return t - now, d
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// percentile of sorted xs with linear interpolation between ranks.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	r := p / 100 * float64(len(xs)-1)
	i := int(math.Floor(r))
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	return xs[i] + (r-float64(i))*(xs[i+1]-xs[i])
}

// jobLimits returns job w's application profile and the batch limits the
// simulator enforces on it: the largest per-GPU batch (the memory oracle's
// bound when it gives one, else the profile's) and the largest global batch
// (the profile's, or the job's own batch when that is larger). The bound
// (Bound) uses the same limits.
func jobLimits(apps Apps, w WorkloadJob, mem MemoryOracle) (app *App, maxLocal, maxBatch int, err error) {
	app = apps[w.App]
	if app == nil {
		return nil, 0, 0, fmt.Errorf("job %s: no profile for application %q in apps (for a zoo model, add its synthetic profile first: placement/zooapps)", w.Name, w.App)
	}
	maxLocal = app.MaxLocal
	if mem != nil {
		if m := mem.MaxLocalBatch(w.App, ""); m > 0 {
			maxLocal = m
		}
	}
	return app, maxLocal, max(app.MaxBatch, w.Batch), nil
}

// summarise orders the per-job results by arrival (then name) and sets the
// JCT statistics from jcts (sorted in place).
func (res *SimResult) summarise(jcts []float64) {
	sort.Slice(res.PerJob, func(a, b int) bool {
		if res.PerJob[a].Arrival != res.PerJob[b].Arrival {
			return res.PerJob[a].Arrival < res.PerJob[b].Arrival
		}
		return res.PerJob[a].Name < res.PerJob[b].Name
	})
	res.PerApp = ByApp(res.PerJob)
	sort.Float64s(jcts)
	res.AvgJCT = mean(jcts)
	res.MedianJCT = percentile(jcts, 50)
	res.P95JCT = percentile(jcts, 95)
	res.P99JCT = percentile(jcts, 99)
}
