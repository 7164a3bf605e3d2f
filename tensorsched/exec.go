package tensorsched

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// The executor's model (what Execute simulates), in one place:
//
//   - Each job is one stream: its ops run in graph order, one at a time, on
//     the device's shared Compute engine. Among co-located jobs the compute
//     engine runs the op that became ready earliest, ties to the lower job
//     index (pickEarliest; Interleave is the same rule without plans).
//   - An op is ready when the job's previous op (or recompute) has ended, the
//     host has launched it (HostSecondsPerIteration before the first op of
//     every iteration, HostSecondsPerKernel per op after that) and every
//     input is resident and has arrived (a swap-in's copy has ended). The
//     part of the wait caused by copies is the job's StallSeconds.
//   - Memory: params and optimizer state are allocated at t = 0 and persist,
//     except those the plan starts on the host (StartOnHost): their host
//     copy is allocated at t = 0 and the first swap-in of each brings it
//     to the device.
//     Input tensors arrive from the host each iteration: they are allocated
//     when the host's per-iteration time ends, with no copy time (the host
//     time covers loading). An op's outputs are allocated when it starts
//     (unless already resident: in-place writes); every other tensor is
//     freed when its last use ends.
//   - Plan actions (see ActionKind) issued at the end of op After, after the
//     op's own frees: Drop frees at once; SwapOut copies on the D2H engine
//     (host memory allocated when the copy starts, device memory freed when
//     it ends; with Before > After, op Before does not start until the copy
//     has ended, vDNN's per-layer synchronisation, and the wait counts as
//     a stall; Before = -1 or any value not after After: no one waits);
//     SwapIn copies on the H2D engine (device memory allocated when
//     the copy starts, host memory freed when it ends; a copy of a tensor
//     whose swap-out is still in flight starts after that swap-out ends).
//     Recompute re-runs the producing op on the compute engine just before
//     op Before and allocates the tensor when it starts. A recomputed tensor
//     the graph still reads at or after op Before is freed after its last
//     use like any other. One brought back only to feed other recomputes
//     before op Before (its last graph use is earlier) stays until a Drop of
//     it issued at or after op Before when the plan has one; otherwise it is
//     freed when the last recompute before op Before that reads it ends (its
//     own, if none does) instead of staying resident into the next
//     iteration. After = -1 means the iteration's start (the end of the
//     job's previous iteration). Keep moves a tensor's free from its last
//     use to the end of op After.
//   - Memory events reach the device in time order; at equal times frees
//     come before allocations.
//   - ExecOptions.Iterations iterations run back to back (default 2) and the
//     last one is measured: per job from its final iteration's start, for the
//     device from the earliest such start (the window start, time 0 of
//     OpStart, OpEnd and Timeline).

// BudgetError is returned when a job's own resident bytes would exceed its
// budget (Job.Budget > 0).
type BudgetError struct {
	Job     string
	Tensor  int
	Name    string // tensor name
	Request int64
	Budget  int64
	InUse   int64 // the job's resident bytes before the request
	At      float64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("job %q over its memory budget at t=%.6fs: tensor %d (%s) needs %s; budget %s, job in use %s, free %s",
		e.Job, e.At, e.Tensor, e.Name, gpu.FormatBytes(e.Request), gpu.FormatBytes(e.Budget),
		gpu.FormatBytes(e.InUse), gpu.FormatBytes(e.Budget-e.InUse))
}

// tensor residency as the executor sees it.
type tstate uint8

const (
	stAbsent  tstate = iota // neither on the device nor on the host
	stDevice                // on the device (usable from avail[t])
	stSwapOut               // swap-out in flight: device memory held until outEnd[t]
	stHost                  // only a host copy
)

type evKind uint8

// Event kinds, in the order they apply at equal times: frees first.
const (
	evFree evKind = iota
	evHostFree
	evAlloc
	evHostAlloc
)

type memEvent struct {
	t      float64
	seq    uint32
	kind   evKind
	job    int32
	tensor int32
}

func (a *memEvent) less(b *memEvent) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}

// eventHeap is a binary min-heap of pending memory events.
type eventHeap struct {
	ev  []memEvent
	seq uint32
}

func (h *eventHeap) push(t float64, k evKind, job, tensor int) {
	h.seq++
	h.ev = append(h.ev, memEvent{t: t, seq: h.seq, kind: k, job: int32(job), tensor: int32(tensor)})
	i := len(h.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.ev[i].less(&h.ev[p]) {
			break
		}
		h.ev[i], h.ev[p] = h.ev[p], h.ev[i]
		i = p
	}
}

func (h *eventHeap) pop() memEvent {
	top := h.ev[0]
	n := len(h.ev) - 1
	h.ev[0] = h.ev[n]
	h.ev = h.ev[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.ev[r].less(&h.ev[l]) {
			m = r
		}
		if !h.ev[m].less(&h.ev[i]) {
			break
		}
		h.ev[i], h.ev[m] = h.ev[m], h.ev[i]
		i = m
	}
	return top
}

// recItem is one recompute run before an op: producer op and the tensors it
// brings back (recTensors[from:to]).
type recItem struct {
	producer int32
	from, to int32
}

// xjob is a job's precomputed tables and running state.
type xjob struct {
	job  *Job
	name string
	g    *workload.Graph
	dur  []float64
	def  []int32
	last []int32
	// freeAt[freeOff[i]:freeOff[i+1]]: tensors freed at the end of op i.
	freeOff []int32
	freeAt  []int32
	// acts[actOff[i+1]:actOff[i+2]]: actions issued at the end of op i
	// (index 0: iteration start), drops first, then swap-outs, then swap-ins.
	actOff []int32
	acts   []Action
	// syncAt[syncOff[i]:syncOff[i+1]]: tensors whose swap-out op i waits
	// for (SwapOut actions with Before = i).
	syncOff []int32
	syncAt  []int32
	// rec[recOff[i]:recOff[i+1]]: recompute runs before op i.
	recOff     []int32
	rec        []recItem
	recTensors []int32
	// recFree[recFreeOff[k]:recFreeOff[k+1]]: recomputed tensors with no
	// graph use left, freed when recompute run k ends (it is their last
	// reader among the runs before the same op).
	recFreeOff []int32
	recFree    []int32
	persistent []int32
	inputs     []int32
	// hostStart[t]: tensor t starts the run on the host (StartOnHost).
	hostStart []bool

	state  []tstate
	avail  []float64
	outEnd []float64

	use, peak  int64
	peakSeen   bool
	measuring  bool
	t0         float64 // start of the job's measured iteration
	iter       int     // 1-based
	pos        int     // next op
	recPos     int     // next recompute run of op pos (index into rec)
	prevEnd    float64
	iterBase   float64 // when the host has launched the iteration's first op
	ready      float64
	dataReady  float64
	baseReady  float64
	firstStart float64
	lastEnd    float64
	// runFirst is the first op's start in the first iteration; runPeak
	// the job's high-water mark over every iteration.
	runFirst float64
	runPeak  int64
	// iterEnds is the last op's end in every iteration so far
	// (JobResult.IterationEnds).
	iterEnds []float64
	res      *JobResult
}

// Execute simulates jobs on dev: every job's ops on the shared compute
// engine, swaps on the shared copy engines, exact memory accounting with the
// device's capacity and each job's budget enforced, plan actions applied as
// ActionKind documents. It runs opt.Iterations iterations (default 2) and
// reports the last. With opt.Check it also runs the correctness checker.
//
// The device should be fresh (nothing allocated, engines idle at t = 0); the
// executor allocates with gpu.MakeKey(job index, tensor id).
func Execute(dev gpu.Device, jobs []Job, opt ExecOptions) (*Result, error) {
	e, err := newExecutor(dev, jobs, opt)
	if err != nil {
		return nil, err
	}
	return e.run()
}

type executor struct {
	dev     gpu.Device
	p       gpu.Profile
	opt     ExecOptions
	iters   int
	xs      []xjob
	ready   []float64
	active  []bool
	h       eventHeap
	chk     *checker
	t0      float64
	t0Set   bool
	devPeak int64
	flushed float64 // memory events up to this time have reached the device
	seen    bool    // an event after t0 has been applied
	tl      []MemSample
	result  *Result
	// mark serves executeMarked.
	mark *execMark
	// turns: the jobs take turns by iterations (Job.Turns, takeTurns).
	turns bool
}

func newExecutor(dev gpu.Device, jobs []Job, opt ExecOptions) (*executor, error) {
	e := &executor{dev: dev, p: dev.Profile(), opt: opt, iters: opt.Iterations}
	if e.iters <= 0 {
		e.iters = 2
	}
	turns, err := takeTurns(jobs)
	if err != nil {
		return nil, err
	}
	e.turns = turns
	e.xs = make([]xjob, len(jobs))
	e.ready = make([]float64, len(jobs))
	e.active = make([]bool, len(jobs))
	res := &Result{Jobs: make([]JobResult, len(jobs))}
	for j := range jobs {
		x := &e.xs[j]
		x.res = &res.Jobs[j]
		if err := x.prepare(e.p, &jobs[j], j); err != nil {
			return nil, err
		}
		x.res.Name = x.name
	}
	if opt.Check {
		e.chk = newChecker(e.xs)
	}
	e.result = res
	return e, nil
}

func jobName(job *Job, j int) string {
	if job.Name != "" {
		return job.Name
	}
	if job.Graph != nil && job.Graph.Model != "" {
		return fmt.Sprintf("%s#%d", job.Graph.Model, j)
	}
	return fmt.Sprintf("job%d", j)
}

func (x *xjob) prepare(p gpu.Profile, job *Job, j int) error {
	x.job = job
	x.name = jobName(job, j)
	g := job.Graph
	if g == nil {
		return fmt.Errorf("job %q: no graph", x.name)
	}
	x.g = g
	nt, no := len(g.Tensors), len(g.Ops)
	if job.Seconds != nil && len(job.Seconds) != no {
		return fmt.Errorf("job %q: Seconds has %d entries, graph has %d ops", x.name, len(job.Seconds), no)
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		for _, t := range op.Inputs {
			if t < 0 || t >= nt {
				return fmt.Errorf("job %q: op %d (%s) reads tensor %d, which does not exist (graph has %d tensors)", x.name, i, op.Name, t, nt)
			}
		}
		for _, t := range op.Outputs {
			if t < 0 || t >= nt {
				return fmt.Errorf("job %q: op %d (%s) writes tensor %d, which does not exist (graph has %d tensors)", x.name, i, op.Name, t, nt)
			}
		}
	}
	x.dur = make([]float64, no)
	for i := range x.dur {
		x.dur[i] = opSeconds(p, job, i)
	}
	lt := g.Lifetimes()
	x.def = make([]int32, nt)
	x.last = make([]int32, nt)
	x.freeOff = make([]int32, no+1)
	for t, l := range lt {
		x.def[t], x.last[t] = int32(l.Def), int32(l.LastUse)
		k := g.Tensors[t].Kind
		switch {
		case k.Persistent():
			x.persistent = append(x.persistent, int32(t))
		case k == workload.Input:
			x.inputs = append(x.inputs, int32(t))
		}
		if !k.Persistent() && l.LastUse >= 0 {
			x.freeOff[l.LastUse+1]++
		}
	}
	for i := 0; i < no; i++ {
		x.freeOff[i+1] += x.freeOff[i]
	}
	x.freeAt = make([]int32, x.freeOff[no])
	fill := make([]int32, no)
	for t, l := range lt {
		if !g.Tensors[t].Kind.Persistent() && l.LastUse >= 0 {
			x.freeAt[x.freeOff[l.LastUse]+fill[l.LastUse]] = int32(t)
			fill[l.LastUse]++
		}
	}
	// Reading a produced tensor before any op produces it is a broken graph.
	for i := range g.Ops {
		for _, t := range g.Ops[i].Inputs {
			k := g.Tensors[t].Kind
			if !k.Persistent() && k != workload.Input && (x.def[t] < 0 || int(x.def[t]) > i) {
				return fmt.Errorf("job %q: op %d (%s) reads tensor %d (%s) before any op produces it", x.name, i, g.Ops[i].Name, t, g.Tensors[t].Name)
			}
		}
	}
	if err := x.preparePlan(); err != nil {
		return err
	}
	x.state = make([]tstate, nt)
	x.avail = make([]float64, nt)
	x.outEnd = make([]float64, nt)
	return nil
}

func (x *xjob) preparePlan() error {
	g := x.g
	no, nt := len(g.Ops), len(g.Tensors)
	x.actOff = make([]int32, no+2)
	x.recOff = make([]int32, no+1)
	x.syncOff = make([]int32, no+1)
	if x.job.Plan == nil {
		return nil
	}
	var recs, syncs, keeps []Action
	for ai, a := range x.job.Plan.Actions {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("job %q: plan %q action %d (%s of tensor %d): %s", x.name, x.job.Plan.Policy, ai, a.Kind, a.Tensor, fmt.Sprintf(format, args...))
		}
		if a.Tensor < 0 || a.Tensor >= nt {
			return bad("tensor does not exist (graph has %d tensors)", nt)
		}
		switch a.Kind {
		case SwapOut, SwapIn, Drop:
			if a.After < -1 || a.After >= no {
				return bad("after = %d is not an op (-1..%d)", a.After, no-1)
			}
			if a.Kind == SwapIn && (a.Before <= a.After || a.Before >= no) {
				return bad("before = %d must be an op after op %d (after)", a.Before, a.After)
			}
			if a.Kind == SwapOut && a.Before > a.After {
				if a.Before >= no {
					return bad("before = %d is not an op (%d..%d)", a.Before, a.After+1, no-1)
				}
				syncs = append(syncs, a)
			}
			x.acts = append(x.acts, a)
		case StartOnHost:
			if !g.Tensors[a.Tensor].Kind.Persistent() {
				return bad("only parameters and optimizer state can start on the host (tensor %s is %s)", g.Tensors[a.Tensor].Name, g.Tensors[a.Tensor].Kind)
			}
			if x.hostStart == nil {
				x.hostStart = make([]bool, nt)
			}
			x.hostStart[a.Tensor] = true
		case Keep:
			if err := checkKeep(g, x.def, x.last, &a); err != nil {
				return bad("%v", err)
			}
			keeps = append(keeps, a)
		case Recompute:
			if a.Before < 0 || a.Before >= no {
				return bad("before = %d is not an op (0..%d)", a.Before, no-1)
			}
			if x.def[a.Tensor] < 0 {
				return bad("tensor %s has no producing op to re-run", g.Tensors[a.Tensor].Name)
			}
			if int(x.def[a.Tensor]) >= a.Before {
				return bad("producer op %d does not precede op %d (before)", x.def[a.Tensor], a.Before)
			}
			recs = append(recs, a)
		default:
			return bad("unknown action kind")
		}
	}
	if len(keeps) > 0 {
		x.freeOff, x.freeAt, x.last = keptFrees(x.freeOff, x.freeAt, x.last, keeps)
	}
	x.syncOff = make([]int32, no+1)
	for _, a := range syncs {
		x.syncOff[a.Before+1]++
	}
	for i := 1; i <= no; i++ {
		x.syncOff[i] += x.syncOff[i-1]
	}
	x.syncAt = make([]int32, len(syncs))
	fill := append([]int32(nil), x.syncOff[:no]...)
	for _, a := range syncs {
		x.syncAt[fill[a.Before]] = int32(a.Tensor)
		fill[a.Before]++
	}
	sort.SliceStable(x.acts, func(i, j int) bool {
		a, b := &x.acts[i], &x.acts[j]
		if a.After != b.After {
			return a.After < b.After
		}
		return actRank(a.Kind) < actRank(b.Kind)
	})
	for _, a := range x.acts {
		x.actOff[a.After+2]++
	}
	for i := 1; i < len(x.actOff); i++ {
		x.actOff[i] += x.actOff[i-1]
	}
	sort.SliceStable(recs, func(i, j int) bool {
		a, b := &recs[i], &recs[j]
		if a.Before != b.Before {
			return a.Before < b.Before
		}
		if x.def[a.Tensor] != x.def[b.Tensor] {
			return x.def[a.Tensor] < x.def[b.Tensor]
		}
		return a.Tensor < b.Tensor
	})
	for i := 0; i < len(recs); {
		b := recs[i].Before
		prod := x.def[recs[i].Tensor]
		it := recItem{producer: prod, from: int32(len(x.recTensors))}
		for ; i < len(recs) && recs[i].Before == b && x.def[recs[i].Tensor] == prod; i++ {
			if n := len(x.recTensors); n > int(it.from) && x.recTensors[n-1] == int32(recs[i].Tensor) {
				continue // duplicate action
			}
			x.recTensors = append(x.recTensors, int32(recs[i].Tensor))
		}
		it.to = int32(len(x.recTensors))
		x.rec = append(x.rec, it)
		x.recOff[b+1]++
	}
	for i := 1; i < len(x.recOff); i++ {
		x.recOff[i] += x.recOff[i-1]
	}
	x.prepareRecFrees()
	return nil
}

// prepareRecFrees finds, for every recompute run, the recomputed tensors it
// is the last reader of among the runs before the same op, when the graph
// itself no longer reads them at or after that op (temporaries recomputed
// only to recompute something else) and the plan has no Drop for them at or
// after that op. Without this they would stay resident until their producer
// overwrote them in the next iteration: it is the executor's
// free-after-last-use rule applied to recomputes. Plans that drop their
// temporaries explicitly keep exactly the timing they asked for.
func (x *xjob) prepareRecFrees() {
	x.recFreeOff = make([]int32, len(x.rec)+1)
	if len(x.rec) == 0 {
		return
	}
	lastDrop := map[int32]int{} // tensor -> latest After of a Drop of it
	for _, a := range x.acts {
		if a.Kind == Drop {
			if d, ok := lastDrop[int32(a.Tensor)]; !ok || a.After > d {
				lastDrop[int32(a.Tensor)] = a.After
			}
		}
	}
	lastReader := make([]int32, len(x.rec))
	var frees [][2]int32 // (run, tensor)
	for b := 0; b+1 < len(x.recOff); b++ {
		from, to := int(x.recOff[b]), int(x.recOff[b+1])
		for k := from; k < to; k++ {
			for _, t := range x.recTensors[x.rec[k].from:x.rec[k].to] {
				if int(x.last[t]) >= b {
					continue
				}
				if d, ok := lastDrop[t]; ok && d >= b {
					continue // the plan drops it itself
				}
				last := int32(k)
				for k2 := k + 1; k2 < to; k2++ {
					for _, in := range x.g.Ops[x.rec[k2].producer].Inputs {
						if int32(in) == t {
							last = int32(k2)
						}
					}
				}
				frees = append(frees, [2]int32{last, t})
			}
		}
	}
	for _, f := range frees {
		lastReader[f[0]]++
	}
	for k := range x.rec {
		x.recFreeOff[k+1] = x.recFreeOff[k] + lastReader[k]
	}
	x.recFree = make([]int32, len(frees))
	fill := append([]int32(nil), x.recFreeOff[:len(x.rec)]...)
	for _, f := range frees {
		x.recFree[fill[f[0]]] = f[1]
		fill[f[0]]++
	}
}

func actRank(k ActionKind) int {
	switch k {
	case Drop:
		return 0
	case SwapOut:
		return 1
	}
	return 2
}

func (e *executor) run() (*Result, error) {
	if e.iters == 1 {
		e.t0Set = true
	}
	// Iteration 1 starts at t = 0 for every job: persistent tensors first,
	// on the host those the plan starts there.
	for j := range e.xs {
		x := &e.xs[j]
		for _, t := range x.persistent {
			if x.hostStart != nil && x.hostStart[t] {
				if err := e.dev.HostAlloc(0, gpu.MakeKey(j, int(t)), x.g.Tensors[t].Bytes); err != nil {
					return nil, fmt.Errorf("job %q tensor %d (%s): %w", x.name, t, x.g.Tensors[t].Name, err)
				}
				x.state[t] = stHost
				if e.chk != nil {
					e.chk.initialHost(j, int(t))
				}
				continue
			}
			if err := e.alloc(0, j, int(t)); err != nil {
				return nil, err
			}
			x.state[t] = stDevice
			if e.chk != nil {
				e.chk.initial(j, int(t))
			}
		}
	}
	if e.turns {
		// The first turn (nextTurn) starts at 0 (turns ignore start
		// offsets); the others come as turns end.
		for j := range e.ready {
			e.ready[j] = math.Inf(1)
		}
		if err := e.startIteration(e.nextTurn(), 0); err != nil {
			return nil, err
		}
	} else {
		for j := range e.xs {
			if err := e.startIteration(j, math.Max(0, e.xs[j].job.StartOffset)); err != nil {
				return nil, err
			}
		}
	}
	if err := e.loop(); err != nil {
		return nil, err
	}
	return e.finish(), nil
}

// loop runs the jobs until every one has ended its last iteration and
// applies the remaining memory events.
func (e *executor) loop() error {
	for {
		j := pickEarliest(e.ready, e.active)
		if j < 0 {
			break
		}
		x := &e.xs[j]
		var err error
		if x.recPos < int(x.recOff[x.pos+1]) {
			err = e.runRecompute(j)
		} else {
			err = e.runOp(j)
		}
		if err != nil {
			return err
		}
	}
	return e.flush(math.Inf(1))
}

// markedRun is what executeMarked returns: the short run's result and its
// device's high-water mark, the same for the long run.
type markedRun struct {
	short, long         *Result
	shortHigh, longHigh int64
}

// execMark is a run of fewer iterations that executeMarked finishes on
// the way (see there).
type execMark struct {
	iters   int // the long run's
	short   *Result
	high    int64
	err     error
	reached bool
}

// errShortFailed stops a marked run whose short run failed.
var errShortFailed = errors.New("tensile: the marked run's short run failed")

// executeMarked runs jobs on sim for opt.Iterations iterations as Execute
// does and, in the same pass, the run of mark iterations (0 < mark <
// opt.Iterations) that Execute with Iterations = mark would make on a
// device like sim. Both runs are the same event for event until the first
// job ends its mark-th iteration: in the short run it stops there, in the
// long one it starts its next. The executor runs the common part once,
// copies its state and the device there, finishes the short run on the
// copies (the other jobs end their mark-th iterations without it) and
// goes on with the long run: each result equals its own run's. shortErr
// is the short run's error (an error before the runs part is the short
// run's too: it fails first), longErr the long run's after they part;
// with shortErr the long run is not finished. Jobs without ops (whose
// iterations all start at once) run the two runs one after the other.
func executeMarked(sim *gpu.Sim, jobs []Job, opt ExecOptions, mark int) (mr markedRun, shortErr, longErr error) {
	iters := opt.Iterations
	if mark <= 0 || mark >= iters {
		return mr, fmt.Errorf("tensile: marked run of %d iterations within %d", mark, iters), nil
	}
	turns, err := takeTurns(jobs)
	if err != nil {
		return mr, err, nil
	}
	for j := range jobs {
		// Jobs taking turns part later than the first job's mark-th
		// iteration (it waits for the others' turns in both runs).
		if turns || jobs[j].Graph != nil && len(jobs[j].Graph.Ops) == 0 {
			so := opt
			so.Iterations = mark
			short := sim.Clone()
			if mr.short, shortErr = Execute(short, jobs, so); shortErr != nil {
				return mr, shortErr, nil
			}
			mr.shortHigh = short.HighWater()
			if mr.long, longErr = Execute(sim, jobs, opt); longErr == nil {
				mr.longHigh = sim.HighWater()
			}
			return mr, nil, longErr
		}
	}
	so := opt
	so.Iterations = mark
	e, err := newExecutor(sim, jobs, so)
	if err != nil {
		return mr, err, nil
	}
	e.mark = &execMark{iters: iters}
	res, err := e.run()
	mk := e.mark
	switch {
	case mk.err != nil:
		return mr, mk.err, nil
	case !mk.reached:
		return mr, err, nil
	}
	mr.short, mr.shortHigh = mk.short, mk.high
	if err != nil {
		return mr, nil, err
	}
	mr.long, mr.longHigh = res, sim.HighWater()
	return mr, nil, nil
}

// fork parts a marked run where job j has ended the short run's last
// iteration at t: it finishes the short run on a copy of the executor and
// the device, then turns e into the long run and starts job j's next
// iteration.
func (e *executor) fork(j int, t float64) error {
	mk := e.mark
	mk.reached = true
	short := e.clone()
	short.mark = nil
	if err := short.loop(); err != nil {
		mk.err = err
		return errShortFailed
	}
	mk.short, mk.high = short.finish(), short.dev.(*gpu.Sim).HighWater()
	// The long run measures only its own last iteration: nothing so far.
	e.iters = mk.iters
	e.t0, e.t0Set, e.devPeak, e.seen, e.tl = 0, false, 0, false, nil
	for k := range e.xs {
		x := &e.xs[k]
		x.measuring, x.t0, x.peak, x.peakSeen, x.firstStart, x.lastEnd = false, 0, 0, false, 0, 0
		name := x.res.Name
		*x.res = JobResult{Name: name}
	}
	return e.startIteration(j, t)
}

// clone returns an independent copy of a running executor, with a copy of
// its device (a *gpu.Sim): the copy carries on exactly as e would.
func (e *executor) clone() *executor {
	c := *e
	c.dev = e.dev.(*gpu.Sim).Clone()
	c.ready = slices.Clone(e.ready)
	c.active = slices.Clone(e.active)
	c.h.ev = slices.Clone(e.h.ev)
	c.tl = slices.Clone(e.tl)
	r := *e.result
	r.Jobs = slices.Clone(e.result.Jobs)
	c.result = &r
	c.xs = slices.Clone(e.xs)
	for k := range c.xs {
		x := &c.xs[k]
		x.state = slices.Clone(x.state)
		x.avail = slices.Clone(x.avail)
		x.outEnd = slices.Clone(x.outEnd)
		x.iterEnds = slices.Clone(x.iterEnds)
		x.res = &r.Jobs[k]
		x.res.OpStart = slices.Clone(x.res.OpStart)
		x.res.OpEnd = slices.Clone(x.res.OpEnd)
	}
	if e.chk != nil {
		c.chk = &checker{jobs: slices.Clone(e.chk.jobs)}
		for k := range c.chk.jobs {
			cj := &c.chk.jobs[k]
			cj.x = &c.xs[k]
			cj.ver = slices.Clone(cj.ver)
			cj.dev = slices.Clone(cj.dev)
			cj.host = slices.Clone(cj.host)
			cj.defv = slices.Clone(cj.defv)
			cj.reason = slices.Clone(cj.reason)
			cj.goneAt = slices.Clone(cj.goneAt)
			cj.inVer = slices.Clone(cj.inVer)
			cj.outVer = slices.Clone(cj.outVer)
		}
	}
	return &c
}

// startIteration begins job j's next iteration at time t (the end of its
// previous one, or the job's StartOffset for the first).
func (e *executor) startIteration(j int, t float64) error {
	x := &e.xs[j]
	x.iter++
	x.pos, x.recPos = 0, 0
	x.prevEnd = t
	x.iterBase = t + x.g.HostSecondsPerIteration
	if x.iter == e.iters {
		x.measuring = true
		x.t0 = t
		if !e.t0Set {
			e.t0Set, e.t0 = true, t
		}
	}
	// Inputs arrive when the host's per-iteration work ends.
	for _, t32 := range x.inputs {
		ti := int(t32)
		switch x.state[ti] {
		case stDevice:
			// still resident (e.g. never read): overwritten in place
		case stSwapOut:
			return fmt.Errorf("job %q: iteration %d: input tensor %d (%s) is being swapped out when the next batch arrives", x.name, x.iter, ti, x.g.Tensors[ti].Name)
		case stHost:
			e.h.push(x.iterBase, evHostFree, j, ti)
			fallthrough
		default:
			e.h.push(x.iterBase, evAlloc, j, ti)
			x.state[ti] = stDevice
		}
		x.avail[ti] = x.iterBase
		if e.chk != nil {
			e.chk.write(j, -1, ti)
		}
	}
	if err := e.issueActions(j, -1, t); err != nil {
		return err
	}
	e.active[j] = len(x.g.Ops) > 0
	if e.active[j] {
		e.computeReady(j)
	} else if x.iter < e.iters {
		return e.startIteration(j, t)
	}
	return nil
}

// computeReady sets the ready time of job j's next compute item.
func (e *executor) computeReady(j int) {
	x := &e.xs[j]
	base := x.prevEnd
	if l := x.iterBase + float64(x.pos)*x.g.HostSecondsPerKernel; l > base {
		base = l
	}
	data := 0.0
	var inputs []int
	if x.recPos < int(x.recOff[x.pos+1]) {
		inputs = x.g.Ops[x.rec[x.recPos].producer].Inputs
	} else {
		inputs = x.g.Ops[x.pos].Inputs
		for _, t := range x.syncAt[x.syncOff[x.pos]:x.syncOff[x.pos+1]] {
			if (x.state[t] == stSwapOut || x.state[t] == stHost) && x.outEnd[t] > data {
				data = x.outEnd[t]
			}
		}
	}
	for _, t := range inputs {
		if x.state[t] == stDevice && x.avail[t] > data {
			data = x.avail[t]
		}
	}
	x.baseReady, x.dataReady = base, data
	x.ready = math.Max(base, data)
	e.ready[j] = x.ready
}

func (e *executor) accountStall(x *xjob) {
	if x.measuring && x.dataReady > x.baseReady {
		x.res.StallSeconds += x.dataReady - x.baseReady
	}
}

func (e *executor) runRecompute(j int) error {
	x := &e.xs[j]
	k := x.recPos
	it := x.rec[k]
	x.recPos++
	tensors := x.recTensors[it.from:it.to]
	need := false
	for _, t := range tensors {
		if x.state[t] != stDevice {
			need = true
		}
	}
	if !need { // everything it would bring back is resident: nothing to do
		// Other jobs may have moved the device past this job's clock.
		e.freeRecomputed(j, k, math.Max(x.prevEnd, e.flushed))
		e.computeReady(j)
		return nil
	}
	p := int(it.producer)
	op := &x.g.Ops[p]
	start, end := e.dev.Run(gpu.Compute, x.ready, x.dur[p])
	if err := e.flush(start); err != nil {
		return err
	}
	e.accountStall(x)
	for _, t := range op.Inputs {
		if x.state[t] != stDevice {
			return fmt.Errorf("job %q: recompute of op %d (%s) before op %d (%s) needs tensor %d (%s), which is not resident (%s)",
				x.name, p, op.Name, x.pos, x.g.Ops[x.pos].Name, t, x.g.Tensors[t].Name, stateWord(x.state[t]))
		}
	}
	if e.chk != nil {
		if err := e.chk.recompute(j, p, x.pos, tensors); err != nil {
			return err
		}
	}
	for _, t := range tensors {
		switch x.state[t] {
		case stDevice:
			continue
		case stSwapOut:
			return fmt.Errorf("job %q: recompute of tensor %d (%s) before op %d while its swap-out is in flight", x.name, t, x.g.Tensors[t].Name, x.pos)
		case stHost:
			e.h.push(start, evHostFree, j, int(t))
		}
		if err := e.alloc(start, j, int(t)); err != nil {
			return err
		}
		x.state[t] = stDevice
		x.avail[t] = end
	}
	if x.measuring {
		x.res.RecomputedOps++
	}
	x.prevEnd = end
	e.freeRecomputed(j, k, end)
	e.computeReady(j)
	return nil
}

// freeRecomputed frees, at time t, the recomputed tensors whose last reader
// is recompute run k (see prepareRecFrees).
func (e *executor) freeRecomputed(j, k int, t float64) {
	x := &e.xs[j]
	p := int(x.rec[k].producer)
	for _, ti := range x.recFree[x.recFreeOff[k]:x.recFreeOff[k+1]] {
		if x.state[ti] != stDevice {
			continue
		}
		e.h.push(t, evFree, j, int(ti))
		x.state[ti] = stAbsent
		if e.chk != nil {
			e.chk.gone(j, int(ti), goneFreed, p)
		}
	}
}

func stateWord(s tstate) string {
	switch s {
	case stAbsent:
		return "freed or dropped"
	case stSwapOut:
		return "being swapped out"
	case stHost:
		return "swapped out to the host"
	}
	return "resident"
}

func (e *executor) runOp(j int) error {
	x := &e.xs[j]
	i := x.pos
	op := &x.g.Ops[i]
	start, end := e.dev.Run(gpu.Compute, x.ready, x.dur[i])
	if err := e.flush(start); err != nil {
		return err
	}
	e.accountStall(x)
	for _, t := range op.Inputs {
		if x.state[t] == stDevice {
			continue
		}
		if x.state[t] == stSwapOut && e.chk == nil {
			continue // still physically present until the copy ends
		}
		if e.chk != nil {
			return e.chk.readError(j, i, t)
		}
		return fmt.Errorf("job %q: op %d (%s) reads tensor %d (%s), which is %s at iteration %d",
			x.name, i, op.Name, t, x.g.Tensors[t].Name, stateWord(x.state[t]), x.iter)
	}
	if e.chk != nil {
		if err := e.chk.op(j, i); err != nil {
			return err
		}
	}
	for _, t := range op.Outputs {
		switch x.state[t] {
		case stDevice:
			continue
		case stSwapOut:
			return fmt.Errorf("job %q: op %d (%s) writes tensor %d (%s) while its swap-out is in flight",
				x.name, i, op.Name, t, x.g.Tensors[t].Name)
		case stHost:
			e.h.push(start, evHostFree, j, t)
		}
		if err := e.alloc(start, j, t); err != nil {
			return err
		}
		x.state[t] = stDevice
		x.avail[t] = end
	}
	if i == 0 && x.iter == 1 {
		x.runFirst = start
	}
	if x.measuring {
		if x.res.OpStart == nil {
			x.res.OpStart = make([]float64, len(x.g.Ops))
			x.res.OpEnd = make([]float64, len(x.g.Ops))
		}
		x.res.OpStart[i], x.res.OpEnd[i] = start-e.t0, end-e.t0
		if i == 0 {
			x.firstStart = start
		}
		x.lastEnd = end
	}
	x.prevEnd = end
	// Frees after last use, then the plan's actions.
	for _, t := range x.freeAt[x.freeOff[i]:x.freeOff[i+1]] {
		if x.state[t] == stDevice {
			e.h.push(end, evFree, j, int(t))
			x.state[t] = stAbsent
			if e.chk != nil {
				e.chk.gone(j, int(t), goneFreed, i)
			}
		}
	}
	if err := e.issueActions(j, i, end); err != nil {
		return err
	}
	x.pos++
	if x.pos < len(x.g.Ops) {
		e.computeReady(j)
		return nil
	}
	e.active[j] = false
	x.iterEnds = append(x.iterEnds, end)
	if e.turns {
		// The turn passes to the next job (nextTurn), unless every job
		// has ended its last iteration.
		if n := e.nextTurn(); n >= 0 {
			return e.startIteration(n, end)
		}
		return nil
	}
	if x.iter < e.iters {
		return e.startIteration(j, end)
	}
	if e.mark != nil && !e.mark.reached {
		return e.fork(j, end)
	}
	return nil
}

// nextTurn returns the job whose turn comes next (nextTurn, Job.TurnKeys);
// -1 when every job has ended its last iteration.
func (e *executor) nextTurn() int {
	return nextTurn(len(e.xs), func(j int) (float64, bool) {
		x := &e.xs[j]
		return turnKey(x.job.TurnKeys, x.iter), x.iter < e.iters
	})
}

// issueActions applies the plan's actions issued at the end of op after
// (-1: iteration start) at time t.
func (e *executor) issueActions(j, after int, t float64) error {
	x := &e.xs[j]
	for k := x.actOff[after+1]; k < x.actOff[after+2]; k++ {
		a := &x.acts[k]
		ti := a.Tensor
		bytes := x.g.Tensors[ti].Bytes
		switch a.Kind {
		case Drop:
			if x.state[ti] != stDevice {
				continue
			}
			e.h.push(t, evFree, j, ti)
			x.state[ti] = stAbsent
			if e.chk != nil {
				e.chk.gone(j, ti, goneDropped, after)
			}
		case SwapOut:
			if x.state[ti] != stDevice {
				continue
			}
			ready := math.Max(t, x.avail[ti])
			s, end := e.dev.Run(gpu.D2H, ready, e.p.D2HSeconds(bytes))
			e.h.push(s, evHostAlloc, j, ti)
			e.h.push(end, evFree, j, ti)
			x.state[ti] = stSwapOut
			x.outEnd[ti] = end
			if x.measuring {
				x.res.SwappedOutBytes += bytes
			}
			if e.chk != nil {
				e.chk.gone(j, ti, goneSwapped, after)
			}
		case SwapIn:
			if x.state[ti] == stDevice {
				continue
			}
			if x.state[ti] == stAbsent {
				if e.chk != nil {
					return e.chk.swapInError(j, ti, after, a.Before)
				}
				return fmt.Errorf("job %q: swap-in of tensor %d (%s) after op %d: it has no host copy (never swapped out, or freed)",
					x.name, ti, x.g.Tensors[ti].Name, after)
			}
			ready := t
			if x.state[ti] == stSwapOut && x.outEnd[ti] > ready {
				ready = x.outEnd[ti]
			}
			s, end := e.dev.Run(gpu.H2D, ready, e.p.H2DSeconds(bytes))
			e.h.push(s, evAlloc, j, ti)
			e.h.push(end, evHostFree, j, ti)
			x.state[ti] = stDevice
			x.avail[ti] = end
			if x.measuring {
				x.res.SwappedInBytes += bytes
			}
			if e.chk != nil {
				e.chk.swapIn(j, ti)
			}
		}
	}
	return nil
}

// flush applies every pending memory event up to time t.
func (e *executor) flush(t float64) error {
	if t > e.flushed {
		e.flushed = t
	}
	for len(e.h.ev) > 0 && e.h.ev[0].t <= t {
		ev := e.h.pop()
		j, ti := int(ev.job), int(ev.tensor)
		x := &e.xs[j]
		key := gpu.MakeKey(j, ti)
		var err error
		switch ev.kind {
		case evAlloc:
			if err := e.alloc(ev.t, j, ti); err != nil {
				return err
			}
			continue
		case evFree:
			e.noteBefore(ev.t, x)
			if err = e.dev.Free(ev.t, key); err == nil {
				x.use -= x.g.Tensors[ti].Bytes
				e.noteAfter(ev.t, x)
			}
		case evHostAlloc:
			err = e.dev.HostAlloc(ev.t, key, x.g.Tensors[ti].Bytes)
		case evHostFree:
			err = e.dev.HostFree(ev.t, key)
		}
		if err != nil {
			return fmt.Errorf("job %q tensor %d (%s): %w", x.name, ti, x.g.Tensors[ti].Name, err)
		}
	}
	return nil
}

// alloc allocates tensor ti of job j at time t, enforcing the job's budget.
func (e *executor) alloc(t float64, j, ti int) error {
	x := &e.xs[j]
	tn := &x.g.Tensors[ti]
	if b := x.job.Budget; b > 0 && x.use+tn.Bytes > b {
		return &BudgetError{Job: x.name, Tensor: ti, Name: tn.Name, Request: tn.Bytes, Budget: b, InUse: x.use, At: t}
	}
	e.noteBefore(t, x)
	if err := e.dev.Alloc(t, gpu.MakeKey(j, ti), tn.Bytes); err != nil {
		return fmt.Errorf("job %q tensor %d (%s): %w", x.name, ti, tn.Name, err)
	}
	x.use += tn.Bytes
	x.runPeak = max(x.runPeak, x.use)
	e.noteAfter(t, x)
	return nil
}

// noteBefore records the level at the window start (the device's, and job
// x's at its own measured iteration's start) before the first memory event
// strictly after it: levels change only at events.
func (e *executor) noteBefore(t float64, x *xjob) {
	if x.measuring && !x.peakSeen && t > x.t0 {
		x.peakSeen = true
		if x.use > x.peak {
			x.peak = x.use
		}
	}
	if !e.t0Set || e.seen || t < e.t0 {
		return
	}
	if t > e.t0 {
		e.seen = true
		lvl := e.dev.InUse()
		if lvl > e.devPeak {
			e.devPeak = lvl
		}
		if e.opt.RecordTimeline && len(e.tl) == 0 {
			e.tl = append(e.tl, MemSample{T: 0, Bytes: lvl})
		}
	}
}

// noteAfter updates peaks and the timeline after an event of job x.
func (e *executor) noteAfter(t float64, x *xjob) {
	if x.measuring && t >= x.t0 {
		if x.use > x.peak {
			x.peak = x.use
		}
	}
	if !e.t0Set || t < e.t0 {
		return
	}
	lvl := e.dev.InUse()
	if lvl > e.devPeak {
		e.devPeak = lvl
	}
	if e.opt.RecordTimeline {
		rt := t - e.t0
		if n := len(e.tl); n > 0 && e.tl[n-1].T == rt {
			e.tl[n-1].Bytes = lvl
		} else {
			e.tl = append(e.tl, MemSample{T: rt, Bytes: lvl})
		}
	}
}

func (e *executor) finish() *Result {
	res := e.result
	first, last := math.Inf(1), math.Inf(-1)
	for j := range e.xs {
		x := &e.xs[j]
		if !x.peakSeen && x.use > x.peak {
			x.peak = x.use
		}
		r := x.res
		r.PeakBytes = x.peak
		r.RunPeakBytes = x.runPeak
		if len(x.g.Ops) > 0 {
			r.IterationSeconds = x.lastEnd - x.firstStart
			r.RunSeconds = x.lastEnd - x.runFirst
			r.IterationEnds = slices.Clone(x.iterEnds)
			if e.iters > 1 {
				r.PeriodSeconds = (x.lastEnd - x.iterEnds[0]) / float64(e.iters-1)
			}
			first = math.Min(first, x.firstStart)
			last = math.Max(last, x.lastEnd)
		}
	}
	if !e.seen {
		if lvl := e.dev.InUse(); lvl > e.devPeak {
			e.devPeak = lvl
		}
	}
	if e.opt.RecordTimeline && len(e.tl) == 0 {
		e.tl = append(e.tl, MemSample{T: 0, Bytes: e.dev.InUse()})
	}
	res.PeakBytes = e.devPeak
	if last > first {
		res.Seconds = last - first
	}
	res.Timeline = e.tl
	return res
}

// IsOOM reports whether err is (or wraps) a device or budget out-of-memory
// error.
func IsOOM(err error) bool {
	var o *gpu.OOMError
	var b *BudgetError
	return errors.As(err, &o) || errors.As(err, &b)
}
