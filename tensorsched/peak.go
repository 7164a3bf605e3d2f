package tensorsched

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// Peak analysis and the planner's timing model.
//
// The planner predicts what Execute will measure by simulating the jobs
// exactly as the executor runs them (see the model comment in exec.go):
// every job starts its first iteration at its StartOffset with params and
// optimizer state resident (on the host those its plan starts there), runs
// simIterations iterations back to back (each starts when the job's previous one ends, so jobs of different lengths
// drift out of phase as they do on the device), and the last iteration is
// measured; the shared compute engine runs the earliest-ready op (ties to
// the lower job index); an op waits for its inputs' swap-ins; recomputes run
// on the compute engine before the op that needs them; swaps queue in issue
// order on the shared H2D and D2H engines; outputs are allocated when an op
// starts, tensors freed when their last use ends; at equal times frees come
// before allocations. Peaks are taken as the executor takes them: the
// device's over the window from the earliest start of a job's last
// iteration, each job's over its own last iteration; budgets are checked
// against the high-water marks of the whole run. Times are absolute
// (seconds from the simulation's start); the planner reads each job's op
// times in the iteration it is running at the peak.

// TensorRef names one tensor of one job on a GPU.
type TensorRef struct {
	Job    int `json:"job"`
	Tensor int `json:"tensor"`
}

// ResidentTensor is a tensor in device memory at the peak.
type ResidentTensor struct {
	TensorRef
	Bytes int64 `json:"bytes"`
	// LastAccess is the last op of the tensor's job to access it before the
	// peak (-1: none in this iteration), NextAccess the first one after it
	// (-1: none in this iteration).
	LastAccess int `json:"last_access"`
	NextAccess int `json:"next_access"`
}

// PeakReport is the result of peak analysis on the combined timeline of the
// jobs on one GPU.
type PeakReport struct {
	// Bytes is the device high-water mark of the steady-state iteration.
	Bytes int64 `json:"bytes"`
	// RunPeakBytes is the device high-water mark over the whole simulated
	// run, first iteration and start offsets included.
	RunPeakBytes int64 `json:"run_peak_bytes"`
	// Time is when it is reached, seconds from the start of the measured
	// window (the earliest start of a job's last iteration).
	Time float64 `json:"time"`
	// Job and Op name the op running (or the last to start) at the peak;
	// Op is -1 when no op of that job has started.
	Job int `json:"job"`
	Op  int `json:"op"`
	// LastOp[j] is the last op of job j that started at or before the peak
	// (-1: none): the last access before the peak on job j's timeline.
	LastOp []int `json:"last_op"`
	// Resident lists the tensors in device memory at the peak, largest first.
	Resident []ResidentTensor `json:"resident"`
	// JobPeaks is each job's own high-water mark.
	JobPeaks []int64 `json:"job_peaks"`
	// Seconds is the predicted makespan of the iteration; JobSeconds each
	// job's first-op-start to last-op-end time, StallSeconds each job's
	// wait on copies.
	Seconds      float64   `json:"seconds"`
	JobSeconds   []float64 `json:"job_seconds"`
	StallSeconds []float64 `json:"stall_seconds"`
	// RecomputeSeconds is each job's compute time spent re-running ops.
	RecomputeSeconds []float64 `json:"recompute_seconds"`
}

// AnalyzePeak predicts the steady-state iteration of jobs (with their
// plans; nil plans are vanilla) on device p and reports the memory peak of
// the combined timeline. It returns an error when a plan is malformed or
// would make an op read a tensor that is not resident.
func AnalyzePeak(jobs []Job, p gpu.Profile) (*PeakReport, error) {
	m, err := newModel(jobs, p)
	if err != nil {
		return nil, err
	}
	plans := make([][]Action, len(jobs))
	for j := range jobs {
		if jobs[j].Plan != nil {
			plans[j] = jobs[j].Plan.Actions
		}
	}
	r, err := m.sim.steady(plans)
	if err != nil {
		return nil, err
	}
	return m.report(r), nil
}

// jobInfo holds the static tables of one job.
type jobInfo struct {
	name       string
	g          *workload.Graph
	dur        []float64
	bytes      []int64
	def, last  []int32
	persistent []bool
	// writers counts the ops that write each tensor.
	writers []int32
	// acc[accOff[t]:accOff[t+1]]: ops accessing tensor t, ascending, unique.
	accOff, acc []int32
	// freeAt[freeOff[i]:freeOff[i+1]]: tensors freed at the end of op i.
	freeOff, freeAt []int32
	persList        []int32
	inputs          []int32
	hostIter        float64
	hostKernel      float64
	// opSecs is the sum of op durations.
	opSecs float64
	// outputs counts the ops' outputs (at most one allocation each per
	// iteration).
	outputs int
	// offset is the job's StartOffset.
	offset float64
	// turns: the jobs take turns by iterations (Job.Turns, takeTurns);
	// turnKeys order them (Job.TurnKeys).
	turns    bool
	turnKeys []float64
}

// model is the planner's view of the jobs on one GPU.
type model struct {
	p    gpu.Profile
	jobs []*jobInfo
	sim  simulator
	// turns: the jobs take turns by iterations (Job.Turns).
	turns bool
}

func newModel(jobs []Job, p gpu.Profile) (*model, error) {
	turns, err := takeTurns(jobs)
	if err != nil {
		return nil, err
	}
	m := &model{p: p, jobs: make([]*jobInfo, len(jobs)), turns: turns}
	for j := range jobs {
		ji, err := newJobInfo(p, &jobs[j], j)
		if err != nil {
			return nil, err
		}
		ji.turns = turns
		if turns {
			ji.turnKeys = jobs[j].TurnKeys
		}
		m.jobs[j] = ji
	}
	m.sim.init(m)
	return m, nil
}

func newJobInfo(p gpu.Profile, job *Job, j int) (*jobInfo, error) {
	name := jobName(job, j)
	g := job.Graph
	if g == nil {
		return nil, fmt.Errorf("job %q: no graph", name)
	}
	nt, no := len(g.Tensors), len(g.Ops)
	if job.Seconds != nil && len(job.Seconds) != no {
		return nil, fmt.Errorf("job %q: Seconds has %d entries, graph has %d ops", name, len(job.Seconds), no)
	}
	ji := &jobInfo{
		name: name, g: g,
		dur:        make([]float64, no),
		bytes:      make([]int64, nt),
		def:        make([]int32, nt),
		last:       make([]int32, nt),
		persistent: make([]bool, nt),
		writers:    make([]int32, nt),
		accOff:     make([]int32, nt+1),
		freeOff:    make([]int32, no+1),
		hostIter:   g.HostSecondsPerIteration,
		hostKernel: g.HostSecondsPerKernel,
		offset:     job.StartOffset,
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		for _, t := range op.Inputs {
			if t < 0 || t >= nt {
				return nil, fmt.Errorf("job %q: op %d (%s) reads tensor %d, which does not exist", name, i, op.Name, t)
			}
		}
		for _, t := range op.Outputs {
			if t < 0 || t >= nt {
				return nil, fmt.Errorf("job %q: op %d (%s) writes tensor %d, which does not exist", name, i, op.Name, t)
			}
			ji.writers[t]++
		}
		ji.outputs += len(op.Outputs)
		ji.dur[i] = opSeconds(p, job, i)
		ji.opSecs += ji.dur[i]
	}
	for t := range g.Tensors {
		ji.bytes[t] = g.Tensors[t].Bytes
		ji.persistent[t] = g.Tensors[t].Kind.Persistent()
	}
	lt := g.Lifetimes()
	for t, l := range lt {
		ji.def[t], ji.last[t] = int32(l.Def), int32(l.LastUse)
		switch {
		case ji.persistent[t]:
			ji.persList = append(ji.persList, int32(t))
		case g.Tensors[t].Kind == workload.Input:
			ji.inputs = append(ji.inputs, int32(t))
		}
		if !ji.persistent[t] && l.LastUse >= 0 {
			ji.freeOff[l.LastUse+1]++
		}
	}
	for i := 0; i < no; i++ {
		ji.freeOff[i+1] += ji.freeOff[i]
	}
	ji.freeAt = make([]int32, ji.freeOff[no])
	fill := make([]int32, no)
	for t, l := range lt {
		if !ji.persistent[t] && l.LastUse >= 0 {
			ji.freeAt[ji.freeOff[l.LastUse]+fill[l.LastUse]] = int32(t)
			fill[l.LastUse]++
		}
	}
	// Accesses per tensor (CSR), unique and ascending since ops are visited in order.
	lastSeen := make([]int32, nt)
	for t := range lastSeen {
		lastSeen[t] = -1
	}
	count := func(i int, t int) {
		if lastSeen[t] != int32(i) {
			lastSeen[t] = int32(i)
			ji.accOff[t+1]++
		}
	}
	for i := range g.Ops {
		for _, t := range g.Ops[i].Inputs {
			count(i, t)
		}
		for _, t := range g.Ops[i].Outputs {
			count(i, t)
		}
	}
	for t := 0; t < nt; t++ {
		ji.accOff[t+1] += ji.accOff[t]
	}
	ji.acc = make([]int32, ji.accOff[nt])
	pos := append([]int32(nil), ji.accOff[:nt]...)
	for t := range lastSeen {
		lastSeen[t] = -1
	}
	add := func(i int, t int) {
		if lastSeen[t] != int32(i) {
			lastSeen[t] = int32(i)
			ji.acc[pos[t]] = int32(i)
			pos[t]++
		}
	}
	for i := range g.Ops {
		for _, t := range g.Ops[i].Inputs {
			add(i, t)
		}
		for _, t := range g.Ops[i].Outputs {
			add(i, t)
		}
	}
	for i := range g.Ops {
		for _, t := range g.Ops[i].Inputs {
			k := g.Tensors[t].Kind
			if !k.Persistent() && k != workload.Input && (ji.def[t] < 0 || int(ji.def[t]) > i) {
				return nil, fmt.Errorf("job %q: op %d (%s) reads tensor %d (%s) before any op produces it", name, i, g.Ops[i].Name, t, g.Tensors[t].Name)
			}
		}
	}
	return ji, nil
}

// accesses returns the ops accessing tensor t, ascending.
func (ji *jobInfo) accesses(t int) []int32 { return ji.acc[ji.accOff[t]:ji.accOff[t+1]] }

// Tensor states in the simulator (the executor's states).
const (
	sAbsent uint8 = iota
	sDevice
	sSwapOut
	sHost
)

func recLess(def []int32, a, b *Action) bool {
	if a.Before != b.Before {
		return a.Before < b.Before
	}
	if def[a.Tensor] != def[b.Tensor] {
		return def[a.Tensor] < def[b.Tensor]
	}
	return a.Tensor < b.Tensor
}

// simEvent is one change of device memory.
type simEvent struct {
	t      float64
	delta  int64
	job    int32
	tensor int32
}

// copySpan is one copy on a copy engine, in issue order.
type copySpan struct {
	issue, start, end float64
	job, tensor       int32
}

// simJob is the per-job state of one simulation.
type simJob struct {
	info *jobInfo
	// actions issued after op i: acts[actOff[i+1]:actOff[i+2]] (index 0: start).
	actOff []int32
	acts   []Action
	// syncAt[syncOff[i]:syncOff[i+1]]: tensors whose swap-out op i waits for.
	syncOff, syncAt []int32
	// recompute runs before op i: rec[recOff[i]:recOff[i+1]].
	recOff     []int32
	rec        []recItem
	recTensors []int32
	recBuf     []Action
	bucket     []int32
	// kinds counts the plan's drops, swap-outs and swap-ins (by actRank).
	kinds [3]int
	// hostStart[t]: the plan starts tensor t on the host; hostList lists
	// those tensors.
	hostStart []bool
	hostList  []int32
	// freeAt[freeOff[i]:freeOff[i+1]]: tensors freed at the end of op i,
	// the job's own (jobInfo's) unless the plan keeps tensors past their
	// last use (Keep); keeps are the Keep actions they were built for.
	freeOff, freeAt []int32
	keeps, keepBuf  []Action
	// last is each tensor's last use, past it for the tensors kept.
	last []int32
	// recFree[recFreeOff[k]:recFreeOff[k+1]]: recomputed tensors freed
	// after recompute run k, their last reader (the executor's
	// prepareRecFrees); dropAt is scratch for building them.
	recFreeOff, recFree []int32
	dropAt, freeBuf     []int32

	state  []uint8
	avail  []float64
	outEnd []float64

	// its[k] holds iteration k's op times; start, end and recStart alias
	// the measured (last) iteration's.
	its        []iterTimes
	start, end []float64
	// recStart[i] is when the first recompute before op i started (-1: none).
	recStart []float64
	iter     int // current iteration (0-based)
	pos      int
	recPos   int
	prevEnd  float64
	iterBase float64 // when the host has launched the iteration's first op
	base     float64
	data     float64
	ready    float64
	// first and lastEnd bound the measured iteration; t0 is its start.
	first   float64
	lastEnd float64
	t0      float64
	stall   float64
	recSecs float64
	use     int64
	peak    int64
	// peakIdx and peakT locate the job's own peak in the merged events.
	peakIdx  int
	peakT    float64
	peakSeen bool
	// allPeak is the job's high-water mark over every simulated iteration.
	allPeak int64
	// slowAt is the op end from which the run's time limit is checked
	// (simAbort; +Inf: not checked).
	slowAt float64
}

// iterTimes are one iteration's op times (absolute, seconds from the
// simulation's start).
type iterTimes struct {
	start, end, recStart []float64
	// base is the iteration's start: the end of the job's previous
	// iteration, or its StartOffset for the first; actions After = -1 are
	// issued then.
	base           float64
	first, lastEnd float64
}

// reset clears the iteration's times for a fresh pass over it.
func (it *iterTimes) reset() {
	clear(it.start)
	clear(it.end)
	for i := range it.recStart {
		it.recStart[i] = -1
	}
	it.base, it.first, it.lastEnd = 0, 0, 0
}

// iterSeconds is the job's mean iteration time over the run: from its
// first op's start (after its start offset) to the end of its last
// iteration, over the number of iterations. Over a long run it is the
// steady-state iteration time, without the start-up and end effects of a
// single iteration of offset co-located jobs.
//
// Jobs taking turns (Job.Turns) wait for the others' turns between their
// iterations, and the first and last of them start and end the run alone:
// their time is the mean period between the ends of consecutive
// iterations, a whole round each (the first iteration's end to the last's,
// over one fewer iterations).
func (sj *simJob) iterSeconds() float64 {
	n := sj.iter + 1
	if n <= 0 {
		return 0
	}
	if sj.info.turns && n > 1 {
		return sj.periodOver(n)
	}
	return (sj.its[sj.iter].lastEnd - sj.its[0].first) / float64(n)
}

// periodOver is a job taking turns' mean period over its first n > 1
// iterations of the run (iterSeconds of a run of n iterations).
func (sj *simJob) periodOver(n int) float64 {
	return (sj.its[n-1].lastEnd - sj.its[0].lastEnd) / float64(n-1)
}

// view returns the iteration of the job in progress at time t: the latest
// one that started at or before t (the first when none has).
func (sj *simJob) view(t float64) *iterTimes {
	k := 0
	for i := 1; i <= sj.iter && i < len(sj.its); i++ {
		if sj.its[i].base <= t {
			k = i
		}
	}
	return &sj.its[k]
}

// simResult is the outcome of one simulation. Slices are owned by the
// simulator and valid until its next run.
type simResult struct {
	// peak is the device high-water mark of the measured window (from the
	// earliest start of a job's last iteration on, as Execute measures it),
	// reached after event peakIdx at peakTime.
	peak     int64
	peakIdx  int
	peakTime float64
	events   []simEvent
	jobs     []*simJob
	h2d, d2h []copySpan
	makespan float64
	// t0 is the measured window's start.
	t0  float64
	err error
	// firstPeak and firstJobPeak are the device's and each job's
	// high-water marks over every simulated iteration (the first included,
	// when params and optimizer state swapped across iterations are still
	// on the device): budgets hold in every iteration, not only the
	// measured one.
	firstPeak    int64
	firstJobPeak []int64
	// allIdx and allTime locate firstPeak in events.
	allIdx  int
	allTime float64
}

// simIterations is how many iterations the planner simulates back to back,
// as Execute does by default: the last one is measured.
const simIterations = 2

// simAbort describes results the caller will reject, so that a run stops
// (with errAborted) as soon as it is certain to produce one: the device's
// high-water mark over the run above peak (0: no limit), or a job j
// slower than maxSlow × ref[j] (ref nil: no limit), a job's time being its
// mean iteration over the run (wholeRun, simJob.iterSeconds) or its last
// iteration. Both only grow as a run goes on, and the checks use the same
// arithmetic as the caller's, so a stopped run is one the caller would
// have rejected.
type simAbort struct {
	peak     int64
	ref      []float64
	maxSlow  float64
	wholeRun bool
}

// errAborted is the error of a run stopped by simAbort.
var errAborted = errors.New("tensile: simulation stopped: its result would be rejected")

type simulator struct {
	m     *model
	abort simAbort
	// peaksOnly keeps merge from storing the merged events and issue from
	// recording the copy spans (res.events, res.d2h and res.h2d stay
	// empty; the event indices in the result count the events all the
	// same): for runs whose callers read only peaks and times, not what is
	// resident when (residentAt, report) nor where the copy engines are
	// busy (the greedy's swaps), such as joint planning's checks, offset
	// trials and time references.
	peaksOnly bool
	jobs      []simJob
	ready     []float64
	active    []bool
	compute   []simEvent
	inputEv   []simEvent
	h2dEv     []simEvent
	d2hEv     []simEvent
	startEv   []simEvent
	res       simResult
	// mark and snap serve runMarked.
	mark *simMark
	snap simSnap

	iters                   int
	t0                      float64
	t0Set                   bool
	cFree, h2dFree, d2hFree float64
	// cStart is when the latest compute item started (the executor's
	// flushed time).
	cStart float64
}

func (s *simulator) init(m *model) {
	s.m = m
	s.jobs = make([]simJob, len(m.jobs))
	s.ready = make([]float64, len(m.jobs))
	s.active = make([]bool, len(m.jobs))
	for j, ji := range m.jobs {
		sj := &s.jobs[j]
		sj.info = ji
		nt, no := len(ji.g.Tensors), len(ji.g.Ops)
		sj.state = make([]uint8, nt)
		sj.avail = make([]float64, nt)
		sj.outEnd = make([]float64, nt)
		sj.hostStart = make([]bool, nt)
		sj.actOff = make([]int32, no+2)
		sj.recOff = make([]int32, no+1)
		sj.syncOff = make([]int32, no+1)
	}
}

// index builds job j's per-op action tables, ordered as the executor orders
// them: by issuing op, then drops, swap-outs, swap-ins, stable otherwise.
func (sj *simJob) index(plan []Action) error {
	ji := sj.info
	no, nt := len(ji.g.Ops), len(ji.g.Tensors)
	clear(sj.actOff)
	clear(sj.recOff)
	clear(sj.syncOff)
	sj.acts = sj.acts[:0]
	sj.rec = sj.rec[:0]
	sj.recTensors = sj.recTensors[:0]
	sj.recBuf = sj.recBuf[:0]
	sj.syncAt = sj.syncAt[:0]
	for _, t := range sj.hostList {
		sj.hostStart[t] = false
	}
	sj.hostList = sj.hostList[:0]
	sj.keepBuf = sj.keepBuf[:0]
	sj.kinds = [3]int{}
	defer func() {
		sj.keptFrees()
		sj.recFrees(plan)
	}()
	// Count per (After, rank) bucket: rank 0 drops, 1 swap-outs, 2 swap-ins.
	nb := 3 * (no + 1)
	if cap(sj.bucket) < nb+1 {
		sj.bucket = make([]int32, nb+1)
	}
	bucket := sj.bucket[:nb+1]
	clear(bucket)
	nacts, nsync := 0, 0
	for ai := range plan {
		a := &plan[ai]
		if a.Tensor < 0 || a.Tensor >= nt {
			return fmt.Errorf("job %q: action %d (%s): tensor %d does not exist", ji.name, ai, a.Kind, a.Tensor)
		}
		switch a.Kind {
		case SwapOut, SwapIn, Drop:
			if a.After < -1 || a.After >= no {
				return fmt.Errorf("job %q: action %d (%s of tensor %d): after = %d is not an op", ji.name, ai, a.Kind, a.Tensor, a.After)
			}
			if a.Kind == SwapIn && (a.Before <= a.After || a.Before >= no) {
				return fmt.Errorf("job %q: action %d (swap-in of tensor %d): before = %d must follow after = %d", ji.name, ai, a.Tensor, a.Before, a.After)
			}
			if a.Kind == SwapOut && a.Before > a.After {
				if a.Before >= no {
					return fmt.Errorf("job %q: action %d (swap-out of tensor %d): before = %d is not an op", ji.name, ai, a.Tensor, a.Before)
				}
				sj.syncOff[a.Before+1]++
				nsync++
			}
			r := actRank(a.Kind)
			bucket[3*(a.After+1)+r+1]++
			sj.kinds[r]++
			nacts++
		case Recompute:
			if a.Before < 0 || a.Before >= no || ji.def[a.Tensor] < 0 || int(ji.def[a.Tensor]) >= a.Before {
				return fmt.Errorf("job %q: action %d (recompute of tensor %d before op %d): no producing op before it", ji.name, ai, a.Tensor, a.Before)
			}
			sj.recBuf = append(sj.recBuf, *a)
		case Keep:
			if err := checkKeep(ji.g, ji.def, ji.last, a); err != nil {
				return fmt.Errorf("job %q: action %d (keep of tensor %d): %v", ji.name, ai, a.Tensor, err)
			}
			sj.keepBuf = append(sj.keepBuf, *a)
		case StartOnHost:
			if !ji.persistent[a.Tensor] {
				return fmt.Errorf("job %q: action %d (start-on-host of tensor %d): only parameters and optimizer state can start on the host", ji.name, ai, a.Tensor)
			}
			if !sj.hostStart[a.Tensor] {
				sj.hostStart[a.Tensor] = true
				sj.hostList = append(sj.hostList, int32(a.Tensor))
			}
		default:
			return fmt.Errorf("job %q: action %d: unknown kind %d", ji.name, ai, a.Kind)
		}
	}
	if nsync > 0 {
		for i := 1; i <= no; i++ {
			sj.syncOff[i] += sj.syncOff[i-1]
		}
		sj.syncAt = append(sj.syncAt, make([]int32, nsync)...)
		fill := append([]int32(nil), sj.syncOff[:no]...)
		for ai := range plan {
			a := &plan[ai]
			if a.Kind == SwapOut && a.Before > a.After {
				sj.syncAt[fill[a.Before]] = int32(a.Tensor)
				fill[a.Before]++
			}
		}
	}
	for i := 1; i <= nb; i++ {
		bucket[i] += bucket[i-1]
	}
	if cap(sj.acts) < nacts {
		// With room to spare: the greedy's plans grow by a few actions
		// a step.
		sj.acts = make([]Action, nacts, nacts+nacts/4)
	}
	sj.acts = sj.acts[:nacts]
	for ai := range plan {
		a := &plan[ai]
		if a.Kind == Recompute || a.Kind == StartOnHost || a.Kind == Keep {
			continue
		}
		b := 3*(a.After+1) + actRank(a.Kind)
		sj.acts[bucket[b]] = *a
		bucket[b]++
	}
	// bucket[b] is now the end of bucket b: the actions after op i end at
	// bucket[3*(i+1)+2].
	sj.actOff[0] = 0
	for i := -1; i < no; i++ {
		sj.actOff[i+2] = bucket[3*(i+1)+2]
	}
	recs := sj.recBuf
	def := ji.def
	// Recomputes: by Before, then producer, then tensor (insertion sort:
	// plans are built in nearly this order).
	for x := 1; x < len(recs); x++ {
		for y := x; y > 0 && recLess(def, &recs[y], &recs[y-1]); y-- {
			recs[y], recs[y-1] = recs[y-1], recs[y]
		}
	}
	for i := 0; i < len(recs); {
		b := recs[i].Before
		prod := def[recs[i].Tensor]
		it := recItem{producer: prod, from: int32(len(sj.recTensors))}
		for ; i < len(recs) && recs[i].Before == b && def[recs[i].Tensor] == prod; i++ {
			if n := len(sj.recTensors); n > int(it.from) && sj.recTensors[n-1] == int32(recs[i].Tensor) {
				continue
			}
			sj.recTensors = append(sj.recTensors, int32(recs[i].Tensor))
		}
		it.to = int32(len(sj.recTensors))
		sj.rec = append(sj.rec, it)
		sj.recOff[b+1]++
	}
	for i := 1; i < len(sj.recOff); i++ {
		sj.recOff[i] += sj.recOff[i-1]
	}
	return nil
}

// keptFrees sets the job's free tables for the Keep actions in keepBuf
// (jobInfo's without any), rebuilding them only when the keeps changed.
func (sj *simJob) keptFrees() {
	ji := sj.info
	if len(sj.keepBuf) == 0 {
		sj.freeOff, sj.freeAt, sj.last, sj.keeps = ji.freeOff, ji.freeAt, ji.last, sj.keeps[:0]
		return
	}
	if sj.freeOff != nil && len(sj.keeps) > 0 && slices.Equal(sj.keeps, sj.keepBuf) {
		return
	}
	sj.freeOff, sj.freeAt, sj.last = keptFrees(ji.freeOff, ji.freeAt, ji.last, sj.keepBuf)
	sj.keeps = append(sj.keeps[:0], sj.keepBuf...)
}

// recFrees finds, as the executor's prepareRecFrees does, the recomputed
// tensors that the graph no longer reads at or after the op their
// recompute precedes and that the plan does not drop itself at or after
// it: each is freed after the last recompute run before that op that reads
// it (the one that recomputes it when none does).
func (sj *simJob) recFrees(plan []Action) {
	sj.recFreeOff = slices.Grow(sj.recFreeOff[:0], len(sj.rec)+1)[:len(sj.rec)+1]
	clear(sj.recFreeOff)
	sj.recFree = sj.recFree[:0]
	if len(sj.rec) == 0 {
		return
	}
	// Most plans recompute only tensors still read later: nothing to do.
	past := false
	for b := 0; b+1 < len(sj.recOff) && !past; b++ {
		for k := int(sj.recOff[b]); k < int(sj.recOff[b+1]) && !past; k++ {
			for _, t := range sj.recTensors[sj.rec[k].from:sj.rec[k].to] {
				if int(sj.last[t]) < b {
					past = true
					break
				}
			}
		}
	}
	if !past {
		return
	}
	g := sj.info.g
	if len(sj.dropAt) != len(g.Tensors) {
		sj.dropAt = make([]int32, len(g.Tensors))
		for t := range sj.dropAt {
			sj.dropAt[t] = -2
		}
	}
	for ai := range plan {
		if a := &plan[ai]; a.Kind == Drop && a.Tensor >= 0 && a.Tensor < len(sj.dropAt) && int32(a.After) > sj.dropAt[a.Tensor] {
			sj.dropAt[a.Tensor] = int32(a.After)
		}
	}
	frees := sj.freeBuf[:0] // (run, tensor) pairs
	for b := 0; b+1 < len(sj.recOff); b++ {
		from, to := int(sj.recOff[b]), int(sj.recOff[b+1])
		for k := from; k < to; k++ {
			for _, t := range sj.recTensors[sj.rec[k].from:sj.rec[k].to] {
				if int(sj.last[t]) >= b || int(sj.dropAt[t]) >= b {
					continue
				}
				last := int32(k)
				for k2 := k + 1; k2 < to; k2++ {
					if slices.Contains(g.Ops[sj.rec[k2].producer].Inputs, int(t)) {
						last = int32(k2)
					}
				}
				frees = append(frees, last, t)
			}
		}
	}
	for ai := range plan {
		if a := &plan[ai]; a.Kind == Drop && a.Tensor >= 0 && a.Tensor < len(sj.dropAt) {
			sj.dropAt[a.Tensor] = -2
		}
	}
	sj.freeBuf = frees
	if len(frees) == 0 {
		return
	}
	// Counting sort by run, stable: each run's tensors in the order found.
	for f := 0; f < len(frees); f += 2 {
		sj.recFreeOff[frees[f]+1]++
	}
	for k := range sj.rec {
		sj.recFreeOff[k+1] += sj.recFreeOff[k]
	}
	sj.recFree = slices.Grow(sj.recFree, len(frees)/2)[:len(frees)/2]
	for f := 0; f < len(frees); f += 2 {
		run := frees[f]
		sj.recFree[sj.recFreeOff[run]] = frees[f+1]
		sj.recFreeOff[run]++
	}
	// Each offset now ends its run: shift back to starts.
	copy(sj.recFreeOff[1:], sj.recFreeOff[:len(sj.rec)])
	sj.recFreeOff[0] = 0
}

// freeRecomputed frees at time t the recomputed tensors of job j whose
// last reader is recompute run k (see recFrees), keeping the compute
// stream in time order with frees before allocations at equal times.
func (s *simulator) freeRecomputed(j, k int, t float64) {
	sj := &s.jobs[j]
	ji := sj.info
	for _, ti := range sj.recFree[sj.recFreeOff[k]:sj.recFreeOff[k+1]] {
		if sj.state[ti] != sDevice {
			continue
		}
		sj.state[ti] = sAbsent
		ev := simEvent{t: t, delta: -ji.bytes[ti], job: int32(j), tensor: ti}
		n := len(s.compute)
		s.compute = append(s.compute, ev)
		for n > 0 && (s.compute[n-1].t > t || s.compute[n-1].t == t && s.compute[n-1].delta > 0) {
			s.compute[n] = s.compute[n-1]
			n--
		}
		s.compute[n] = ev
	}
}

// run simulates iters iterations of every job back to back, exactly as
// Execute runs them: every job starts at its StartOffset with params and
// optimizer state resident (except those its plan starts on the host),
// each next iteration starts when the job's previous one ends, and the
// last iteration is measured.
func (s *simulator) run(plans [][]Action, iters int) *simResult {
	if s.begin(plans, iters, 0) {
		s.loop()
	}
	return &s.res
}

// begin sets up a run of iters iterations (see run), with iteration
// tables for alloc iterations when more; it reports false when a plan is
// invalid (res.err).
func (s *simulator) begin(plans [][]Action, iters, alloc int) bool {
	res := &s.res
	*res = simResult{jobs: res.jobs[:0], h2d: res.h2d[:0], d2h: res.d2h[:0], events: res.events[:0], firstJobPeak: res.firstJobPeak[:0]}
	s.compute = s.compute[:0]
	s.inputEv = s.inputEv[:0]
	s.h2dEv = s.h2dEv[:0]
	s.d2hEv = s.d2hEv[:0]
	s.startEv = s.startEv[:0]
	s.cFree, s.h2dFree, s.d2hFree, s.cStart = 0, 0, 0, 0
	s.iters = max(iters, 1)
	alloc = max(alloc, s.iters)
	s.t0, s.t0Set = 0, s.iters == 1
	for j := range s.jobs {
		sj := &s.jobs[j]
		res.jobs = append(res.jobs, sj)
		var plan []Action
		if j < len(plans) {
			plan = plans[j]
		}
		if err := sj.index(plan); err != nil {
			res.err = err
			return false
		}
		ji := sj.info
		no := len(ji.g.Ops)
		for len(sj.its) < alloc {
			sj.its = append(sj.its, iterTimes{start: make([]float64, no), end: make([]float64, no), recStart: make([]float64, no)})
		}
		for k := range sj.its {
			it := &sj.its[k]
			it.reset()
		}
		last := &sj.its[s.iters-1]
		sj.start, sj.end, sj.recStart = last.start, last.end, last.recStart
		clear(sj.state)
		clear(sj.avail)
		clear(sj.outEnd)
		sj.use, sj.peak, sj.allPeak, sj.stall, sj.recSecs = 0, 0, 0, 0, 0
		sj.peakIdx, sj.peakT, sj.peakSeen = -1, 0, false
		sj.iter = -1
		sj.first, sj.lastEnd, sj.t0 = 0, 0, 0
		sj.slowAt = math.Inf(1)
		for _, t := range ji.persList {
			if sj.hostStart[t] {
				sj.state[t] = sHost
				continue
			}
			sj.state[t] = sDevice
			s.startEv = append(s.startEv, simEvent{t: 0, delta: ji.bytes[t], job: int32(j), tensor: t})
		}
	}
	s.reserve(alloc)
	if s.m.turns {
		// The first turn (nextTurn) starts at 0 (turns ignore start
		// offsets); the others come as turns end.
		for j := range s.jobs {
			s.active[j], s.ready[j] = false, math.Inf(1)
		}
		s.startIter(s.nextTurn(), 0)
	} else {
		for j := range s.jobs {
			s.startIter(j, max(0, s.jobs[j].info.offset))
		}
	}
	return true
}

// reserve grows the event buffers, once, to what a run of iters
// iterations of the indexed plans can append: every op output allocated
// and every free, drop, recompute, input and copy taken place, in every
// iteration. A fresh simulator's buffers would otherwise grow by doubling
// through its first runs (joint planning makes dozens of simulators per
// plan). It changes capacities only, not what a run computes.
func (s *simulator) reserve(iters int) {
	var comp, inputs, outs, ins int
	for j := range s.jobs {
		sj := &s.jobs[j]
		comp += sj.info.outputs + len(sj.freeAt) + sj.kinds[0] + len(sj.recTensors) + len(sj.recFree)
		inputs += len(sj.info.inputs)
		outs += sj.kinds[1]
		ins += sj.kinds[2]
	}
	s.compute = slices.Grow(s.compute, iters*comp)
	s.inputEv = slices.Grow(s.inputEv, iters*inputs)
	s.d2hEv = slices.Grow(s.d2hEv, iters*outs)
	s.h2dEv = slices.Grow(s.h2dEv, iters*ins)
	if !s.peaksOnly {
		s.res.d2h = slices.Grow(s.res.d2h, iters*outs)
		s.res.h2d = slices.Grow(s.res.h2d, iters*ins)
	}
}

// loop runs the jobs until every one has ended its last iteration (or the
// run is aborted) and merges the memory events.
func (s *simulator) loop() {
	res := &s.res
	for {
		j := pickEarliest(s.ready, s.active)
		if j < 0 {
			break
		}
		sj := &s.jobs[j]
		ji := sj.info
		it := &sj.its[sj.iter]
		measuring := sj.iter == s.iters-1
		if sj.recPos < int(sj.recOff[sj.pos+1]) {
			rk := sj.recPos
			rit := sj.rec[rk]
			sj.recPos++
			need := false
			for _, t := range sj.recTensors[rit.from:rit.to] {
				if sj.state[t] != sDevice {
					need = true
				}
			}
			if need {
				p := int(rit.producer)
				st := max(sj.ready, s.cFree)
				en := st + ji.dur[p]
				s.cFree, s.cStart = en, st
				if measuring && sj.data > sj.base {
					sj.stall += sj.data - sj.base
				}
				for _, t := range ji.g.Ops[p].Inputs {
					if sj.state[t] != sDevice && res.err == nil {
						res.err = fmt.Errorf("job %q: recompute of op %d before op %d needs tensor %d (%s), which is not resident", ji.name, p, sj.pos, t, ji.g.Tensors[t].Name)
					}
				}
				for _, t := range sj.recTensors[rit.from:rit.to] {
					if sj.state[t] == sDevice {
						continue
					}
					if sj.state[t] == sSwapOut && res.err == nil {
						res.err = fmt.Errorf("job %q: recompute of tensor %d while its swap-out is in flight", ji.name, t)
					}
					s.compute = append(s.compute, simEvent{t: st, delta: ji.bytes[t], job: int32(j), tensor: t})
					sj.state[t] = sDevice
					sj.avail[t] = en
				}
				if it.recStart[sj.pos] < 0 {
					it.recStart[sj.pos] = st
				}
				if measuring {
					sj.recSecs += ji.dur[p]
				}
				sj.prevEnd = en
				s.freeRecomputed(j, rk, en)
			} else {
				// Other jobs may have moved the device past this job's clock.
				s.freeRecomputed(j, rk, max(sj.prevEnd, s.cStart))
			}
			s.computeReady(j)
			continue
		}
		i := sj.pos
		op := &ji.g.Ops[i]
		st := max(sj.ready, s.cFree)
		en := st + ji.dur[i]
		s.cFree, s.cStart = en, st
		if measuring && sj.data > sj.base {
			sj.stall += sj.data - sj.base
		}
		for _, t := range op.Inputs {
			if sj.state[t] != sDevice && res.err == nil {
				res.err = fmt.Errorf("job %q: op %d (%s) reads tensor %d (%s), which is not resident", ji.name, i, op.Name, t, ji.g.Tensors[t].Name)
			}
		}
		for _, t := range op.Outputs {
			if sj.state[t] == sDevice {
				continue
			}
			if sj.state[t] == sSwapOut && res.err == nil {
				res.err = fmt.Errorf("job %q: op %d writes tensor %d while its swap-out is in flight", ji.name, i, t)
			}
			s.compute = append(s.compute, simEvent{t: st, delta: ji.bytes[t], job: int32(j), tensor: int32(t)})
			sj.state[t] = sDevice
			sj.avail[t] = en
		}
		if i == 0 {
			it.first = st
			if s.abort.ref != nil {
				s.noteFirst(sj, j)
			}
		}
		it.start[i], it.end[i] = st, en
		it.lastEnd = en
		if en > sj.slowAt && s.tooSlow(sj, j, en) {
			if res.err == nil {
				res.err = errAborted
			}
			return
		}
		sj.prevEnd = en
		for _, t := range sj.freeAt[sj.freeOff[i]:sj.freeOff[i+1]] {
			if sj.state[t] == sDevice {
				s.compute = append(s.compute, simEvent{t: en, delta: -ji.bytes[t], job: int32(j), tensor: t})
				sj.state[t] = sAbsent
			}
		}
		s.issue(j, i, en)
		sj.pos++
		switch {
		case sj.pos < len(ji.g.Ops):
			s.computeReady(j)
		case s.m.turns:
			// The turn passes to the next job (nextTurn), unless
			// every job has ended its last iteration.
			s.active[j] = false
			if sj.iter == 0 && s.abort.ref != nil {
				s.notePeriod(sj, j)
			}
			if n := s.nextTurn(); n >= 0 {
				s.startIter(n, en)
			}
		case sj.iter < s.iters-1:
			s.startIter(j, en)
		case s.mark != nil:
			// The first job to end the marked run's last iteration:
			// the two runs part here.
			s.fork(j, en)
		default:
			s.active[j] = false
		}
	}
	for j := range s.jobs {
		sj := &s.jobs[j]
		last := &sj.its[s.iters-1]
		sj.first, sj.lastEnd = last.first, last.lastEnd
	}
	s.merge()
}

// simMark is a run of fewer iterations that runMarked finishes on the way.
type simMark struct {
	iters  int // the long run's
	atMark func(*simResult)
}

// runMarked simulates iters iterations as run does and, in the same pass,
// the run of mark iterations (0 < mark < iters) whose result atMark
// receives (its slices are valid only during the call). Both runs are the
// same event for event until the first job ends its mark-th iteration: in
// the short run it stops there, in the long one it starts its next. The
// simulator runs the common part once, keeps its state at that point,
// finishes the short run (the other jobs end their mark-th iterations
// without it), hands its result to atMark, restores the state and goes on
// with the long run. Each result equals that of its own run.
func (s *simulator) runMarked(plans [][]Action, mark, iters int, atMark func(*simResult)) *simResult {
	if mark <= 0 || mark >= iters || s.abort.peak != 0 || s.abort.ref != nil {
		panic("tensile: runMarked needs 0 < mark < iters and no abort")
	}
	if s.m.turns {
		// Jobs taking turns part later than the first job's mark-th
		// iteration (it waits for the others' turns in both runs): the
		// two runs are made one after the other.
		if s.run(plans, mark); s.res.err != nil {
			return &s.res
		}
		atMark(&s.res)
		return s.run(plans, iters)
	}
	if !s.begin(plans, mark, iters) {
		return &s.res
	}
	s.mark = &simMark{iters: iters, atMark: atMark}
	s.loop()
	s.mark = nil
	return &s.res
}

// simSnap is the state of a run that the end of a marked run changes.
type simSnap struct {
	jobs                    []simJob
	state                   [][]uint8
	avail, outEnd           [][]float64
	cur                     []iterTimes // each job's iteration in progress (deep copies)
	ready                   []float64
	active                  []bool
	inputEv                 []simEvent
	compute, h2dEv, d2hEv   int
	h2d, d2h                int
	err                     error
	cFree, h2dFree, d2hFree float64
	cStart                  float64
	// tail holds the compute events from tailFrom on at the fork: those
	// at or after cStart, which the short run's frees of recomputed
	// tensors may move (freeRecomputed keeps the stream in time order).
	tail     []simEvent
	tailFrom int
}

// fork parts a marked run (see runMarked) where job j has ended the
// marked run's last iteration at en: it finishes the short run, reports
// it, restores the state and starts job j's next iteration.
func (s *simulator) fork(j int, en float64) {
	mk := s.mark
	s.mark = nil
	sn := &s.snap
	n := len(s.jobs)
	sn.jobs = append(sn.jobs[:0], s.jobs...)
	sn.state, sn.avail, sn.outEnd, sn.cur = grow(sn.state, n), grow(sn.avail, n), grow(sn.outEnd, n), grow(sn.cur, n)
	for k := range s.jobs {
		sj := &s.jobs[k]
		sn.state[k] = append(sn.state[k][:0], sj.state...)
		sn.avail[k] = append(sn.avail[k][:0], sj.avail...)
		sn.outEnd[k] = append(sn.outEnd[k][:0], sj.outEnd...)
		it, c := &sj.its[sj.iter], &sn.cur[k]
		c.start = append(c.start[:0], it.start...)
		c.end = append(c.end[:0], it.end...)
		c.recStart = append(c.recStart[:0], it.recStart...)
		c.base, c.first, c.lastEnd = it.base, it.first, it.lastEnd
	}
	sn.ready = append(sn.ready[:0], s.ready...)
	sn.active = append(sn.active[:0], s.active...)
	sn.inputEv = append(sn.inputEv[:0], s.inputEv...)
	sn.compute, sn.h2dEv, sn.d2hEv = len(s.compute), len(s.h2dEv), len(s.d2hEv)
	sn.tailFrom = len(s.compute)
	for sn.tailFrom > 0 && s.compute[sn.tailFrom-1].t >= s.cStart {
		sn.tailFrom--
	}
	sn.tail = append(sn.tail[:0], s.compute[sn.tailFrom:]...)
	sn.h2d, sn.d2h, sn.err = len(s.res.h2d), len(s.res.d2h), s.res.err
	sn.cFree, sn.h2dFree, sn.d2hFree, sn.cStart = s.cFree, s.h2dFree, s.d2hFree, s.cStart

	// The short run: job j stops, the others end their marked iterations.
	s.active[j] = false
	s.loop()
	mk.atMark(&s.res)

	// Back to the fork, as the long run.
	for k := range s.jobs {
		sj := &s.jobs[k]
		saved := &sn.jobs[k]
		for x := saved.iter + 1; x < s.iters; x++ {
			it := &sj.its[x]
			it.reset()
		}
		it, c := &sj.its[saved.iter], &sn.cur[k]
		copy(it.start, c.start)
		copy(it.end, c.end)
		copy(it.recStart, c.recStart)
		it.base, it.first, it.lastEnd = c.base, c.first, c.lastEnd
		*sj = *saved
		copy(sj.state, sn.state[k])
		copy(sj.avail, sn.avail[k])
		copy(sj.outEnd, sn.outEnd[k])
		// Nothing is measured before the long run's last iteration.
		sj.t0, sj.stall, sj.recSecs = 0, 0, 0
		last := &sj.its[mk.iters-1]
		sj.start, sj.end, sj.recStart = last.start, last.end, last.recStart
	}
	copy(s.ready, sn.ready)
	copy(s.active, sn.active)
	s.inputEv = append(s.inputEv[:0], sn.inputEv...)
	s.compute, s.h2dEv, s.d2hEv = append(s.compute[:sn.tailFrom], sn.tail...), s.h2dEv[:sn.h2dEv], s.d2hEv[:sn.d2hEv]
	s.cFree, s.h2dFree, s.d2hFree, s.cStart = sn.cFree, sn.h2dFree, sn.d2hFree, sn.cStart
	res := &s.res
	*res = simResult{jobs: res.jobs, h2d: res.h2d[:sn.h2d], d2h: res.d2h[:sn.d2h], events: res.events[:0], firstJobPeak: res.firstJobPeak[:0], err: sn.err}
	s.iters = mk.iters
	s.t0, s.t0Set = 0, false
	s.startIter(j, en)
}

// grow returns x with length n (its elements kept, for reuse).
func grow[T any](x []T, n int) []T {
	if cap(x) < n {
		x = append(x[:cap(x)], make([]T, n-cap(x))...)
	}
	return x[:n]
}

// noteFirst sets job j's slowAt when the start of the run it is timed
// over (simAbort) is known: below it tooSlow cannot hold (the margin is far
// above rounding), so it is only evaluated above.
func (s *simulator) noteFirst(sj *simJob, j int) {
	ref := s.abort.ref[j]
	if ref <= 0 || s.turnPeriods() {
		return
	}
	switch {
	case s.abort.wholeRun && sj.iter == 0:
		sj.slowAt = sj.its[0].first + s.abort.maxSlow*ref*float64(s.iters)*(1-1e-6)
	case !s.abort.wholeRun && sj.iter == s.iters-1:
		sj.slowAt = sj.its[sj.iter].first + s.abort.maxSlow*ref*(1-1e-6)
	}
}

// tooSlow reports whether job j, with an op ending at en, is already
// slower than the abort limit allows (see simAbort).
func (s *simulator) tooSlow(sj *simJob, j int, en float64) bool {
	ref := s.abort.ref[j]
	if ref <= 0 {
		return false
	}
	if s.turnPeriods() {
		// A job's time is its period from the end of its first
		// iteration (iterSeconds); its last iteration ends at en or later.
		return sj.iter >= 1 && (en-sj.its[0].lastEnd)/float64(s.iters-1)/ref > s.abort.maxSlow
	}
	if s.abort.wholeRun {
		return (en-sj.its[0].first)/float64(s.iters)/ref > s.abort.maxSlow
	}
	return sj.iter == s.iters-1 && (en-sj.its[sj.iter].first)/ref > s.abort.maxSlow
}

// turnPeriods reports whether the run's jobs are timed by their periods
// (jobs taking turns over more than one iteration, iterSeconds).
func (s *simulator) turnPeriods() bool { return s.m.turns && s.iters > 1 }

// notePeriod sets job j's slowAt when it has ended its first iteration, for
// jobs timed by their periods (turnPeriods): below it tooSlow cannot hold.
func (s *simulator) notePeriod(sj *simJob, j int) {
	if ref := s.abort.ref[j]; ref > 0 && s.turnPeriods() {
		sj.slowAt = sj.its[0].lastEnd + s.abort.maxSlow*ref*float64(s.iters-1)*(1-1e-6)
	}
}

// nextTurn returns the job whose turn comes next, as the executor's
// nextTurn does; -1 when every job has ended its last iteration.
func (s *simulator) nextTurn() int {
	return nextTurn(len(s.jobs), func(j int) (float64, bool) {
		sj := &s.jobs[j]
		return turnKey(sj.info.turnKeys, sj.iter+1), sj.iter < s.iters-1
	})
}

// startIter begins job j's next iteration at time t, as the executor's
// startIteration does.
func (s *simulator) startIter(j int, t float64) {
	sj := &s.jobs[j]
	ji := sj.info
	sj.iter++
	sj.pos, sj.recPos = 0, 0
	sj.prevEnd = t
	sj.iterBase = t + ji.hostIter
	sj.its[sj.iter].base = t
	if sj.iter == s.iters-1 {
		sj.t0 = t
		if !s.t0Set {
			s.t0Set, s.t0 = true, t
		}
	}
	// Inputs arrive when the host's per-iteration work ends.
	for _, t32 := range ji.inputs {
		switch sj.state[t32] {
		case sDevice:
		case sSwapOut:
			if s.res.err == nil {
				s.res.err = fmt.Errorf("job %q: input tensor %d is being swapped out when the next batch arrives", ji.name, t32)
			}
		default:
			s.inputEv = append(s.inputEv, simEvent{t: sj.iterBase, delta: ji.bytes[t32], job: int32(j), tensor: t32})
			sj.state[t32] = sDevice
		}
		sj.avail[t32] = sj.iterBase
	}
	s.issue(j, -1, t)
	s.active[j] = len(ji.g.Ops) > 0
	if s.active[j] {
		s.computeReady(j)
	}
}

// computeReady sets the ready time of job j's next compute item, as the
// executor does.
func (s *simulator) computeReady(j int) {
	sj := &s.jobs[j]
	ji := sj.info
	base := sj.prevEnd
	if l := sj.iterBase + float64(sj.pos)*ji.hostKernel; l > base {
		base = l
	}
	data := 0.0
	var inputs []int
	if sj.recPos < int(sj.recOff[sj.pos+1]) {
		inputs = ji.g.Ops[sj.rec[sj.recPos].producer].Inputs
	} else {
		inputs = ji.g.Ops[sj.pos].Inputs
		for _, t := range sj.syncAt[sj.syncOff[sj.pos]:sj.syncOff[sj.pos+1]] {
			if (sj.state[t] == sSwapOut || sj.state[t] == sHost) && sj.outEnd[t] > data {
				data = sj.outEnd[t]
			}
		}
	}
	for _, t := range inputs {
		if sj.state[t] == sDevice {
			data = max(data, sj.avail[t])
		}
	}
	sj.base, sj.data = base, data
	sj.ready = max(base, data)
	s.ready[j] = sj.ready
}

// issue applies job j's actions issued after op i (-1: start) at time t.
func (s *simulator) issue(j, i int, t float64) {
	sj := &s.jobs[j]
	ji := sj.info
	res := &s.res
	for k := sj.actOff[i+1]; k < sj.actOff[i+2]; k++ {
		a := &sj.acts[k]
		ti := a.Tensor
		b := ji.bytes[ti]
		switch a.Kind {
		case Drop:
			if sj.state[ti] != sDevice {
				continue
			}
			s.compute = append(s.compute, simEvent{t: t, delta: -b, job: int32(j), tensor: int32(ti)})
			sj.state[ti] = sAbsent
		case SwapOut:
			if sj.state[ti] != sDevice {
				continue
			}
			ready := max(t, sj.avail[ti])
			st := max(ready, s.d2hFree)
			en := st + s.m.p.D2HSeconds(b)
			s.d2hFree = en
			if !s.peaksOnly {
				res.d2h = append(res.d2h, copySpan{issue: ready, start: st, end: en, job: int32(j), tensor: int32(ti)})
			}
			s.d2hEv = append(s.d2hEv, simEvent{t: en, delta: -b, job: int32(j), tensor: int32(ti)})
			sj.state[ti] = sSwapOut
			sj.outEnd[ti] = en
		case SwapIn:
			if sj.state[ti] == sDevice {
				continue
			}
			if sj.state[ti] == sAbsent {
				if res.err == nil {
					res.err = fmt.Errorf("job %q: swap-in of tensor %d (%s) after op %d: no host copy", ji.name, ti, ji.g.Tensors[ti].Name, i)
				}
				continue
			}
			ready := t
			if sj.state[ti] == sSwapOut && sj.outEnd[ti] > ready {
				ready = sj.outEnd[ti]
			}
			st := max(ready, s.h2dFree)
			en := st + s.m.p.H2DSeconds(b)
			s.h2dFree = en
			if !s.peaksOnly {
				res.h2d = append(res.h2d, copySpan{issue: ready, start: st, end: en, job: int32(j), tensor: int32(ti)})
			}
			s.h2dEv = append(s.h2dEv, simEvent{t: st, delta: b, job: int32(j), tensor: int32(ti)})
			sj.state[ti] = sDevice
			sj.avail[ti] = en
		}
	}
}

// merge orders all memory events (frees first at equal times) and finds
// the peaks as Execute measures them: the device's over the window from the
// earliest start of a job's last iteration, each job's over its own last
// iteration, and both over the whole run. Every stream is in time order.
func (s *simulator) merge() {
	res := &s.res
	slices.SortStableFunc(s.inputEv, func(a, b simEvent) int { return cmp.Compare(a.t, b.t) })
	streams := [5][]simEvent{s.startEv, s.inputEv, s.compute, s.h2dEv, s.d2hEv}
	var pos [5]int
	ev := res.events[:0]
	n := 0 // events merged so far (len(ev) when they are kept)
	var use, all int64
	t0 := s.t0
	seen := false
	res.peak, res.peakIdx, res.peakTime = 0, -1, t0
	havePeak := false
	note := func(lvl int64, idx int, t float64) {
		if !havePeak || lvl > res.peak {
			havePeak = true
			res.peak, res.peakIdx, res.peakTime = lvl, idx, t
		}
	}
	// Each stream's head: its time and whether it is an allocation
	// (frees first at equal times); +Inf when the stream is done. An
	// empty tensor's event changes no level and does not count as an
	// allocation: a free of 0 B taken for one would hold the frees behind
	// it in its stream until after other streams' allocations at the same
	// time, which the executor applies after all of that time's frees.
	var headT [5]float64
	var headAlloc [5]bool
	head := func(k int) {
		if pos[k] < len(streams[k]) {
			e := &streams[k][pos[k]]
			headT[k], headAlloc[k] = e.t, e.delta > 0
		} else {
			headT[k], headAlloc[k] = math.Inf(1), true
		}
	}
	total := 0
	for k := range streams {
		head(k)
		total += len(streams[k])
	}
	if !s.peaksOnly && cap(ev) < total {
		// With room to spare: the greedy's trials add a few events each,
		// and an exact fit would be allocated again on nearly every run.
		ev = make([]simEvent, 0, total+total/4)
	}
	// Streams are ordered by their heads' (time, allocation after free,
	// stream index); the first stream gives events while its head stays
	// before every other stream's.
	before := func(a, b int) bool {
		if headT[a] != headT[b] {
			return headT[a] < headT[b]
		}
		if headAlloc[a] != headAlloc[b] {
			return !headAlloc[a]
		}
		return a < b
	}
	best, rival := -1, -1
	for {
		if best < 0 || pos[best] >= len(streams[best]) || !before(best, rival) {
			best = 0
			for k := 1; k < len(streams); k++ {
				if before(k, best) {
					best = k
				}
			}
			if math.IsInf(headT[best], 1) {
				break
			}
			rival = -1
			for k := range streams {
				if k != best && (rival < 0 || before(k, rival)) {
					rival = k
				}
			}
		}
		e := streams[best][pos[best]]
		pos[best]++
		head(best)
		sj := &s.jobs[e.job]
		if !seen && e.t > t0 {
			seen = true
			note(use, n-1, t0)
		}
		if !sj.peakSeen && e.t > sj.t0 {
			sj.peakSeen = true
			if sj.use > sj.peak || sj.peakIdx < 0 {
				sj.peak, sj.peakIdx, sj.peakT = sj.use, n-1, sj.t0
			}
		}
		if !s.peaksOnly {
			ev = append(ev, e)
		}
		n++
		use += e.delta
		sj.use += e.delta
		if use > all {
			all = use
			res.allIdx, res.allTime = n-1, e.t
			if s.abort.peak > 0 && all > s.abort.peak {
				res.events = ev
				if res.err == nil {
					res.err = errAborted
				}
				return
			}
		}
		if sj.use > sj.allPeak {
			sj.allPeak = sj.use
		}
		if e.t >= sj.t0 && (sj.use > sj.peak || sj.peakIdx < 0) {
			sj.peak, sj.peakIdx, sj.peakT = sj.use, n-1, e.t
		}
		if e.t >= t0 {
			note(use, n-1, e.t)
		}
	}
	if !seen {
		note(use, n-1, t0)
	}
	res.events = ev
	res.firstPeak = all
	res.t0 = t0
	first, last := math.Inf(1), math.Inf(-1)
	for j := range s.jobs {
		sj := &s.jobs[j]
		if !sj.peakSeen && sj.use > sj.peak {
			sj.peak, sj.peakIdx, sj.peakT = sj.use, n-1, sj.t0
		}
		res.firstJobPeak = append(res.firstJobPeak, sj.allPeak)
		if len(sj.info.g.Ops) == 0 {
			continue
		}
		first = min(first, sj.first)
		last = max(last, sj.lastEnd)
	}
	if last > first {
		res.makespan = last - first
	}
}

// steady simulates what Execute measures: simIterations iterations back to
// back, the last one measured; firstPeak and firstJobPeak cover them all.
func (s *simulator) steady(plans [][]Action) (*simResult, error) {
	return s.steadyN(plans, simIterations)
}

// steadyN is steady with iters iterations (simIterations when iters <= 0).
func (s *simulator) steadyN(plans [][]Action, iters int) (*simResult, error) {
	if iters <= 0 {
		iters = simIterations
	}
	r := s.run(plans, iters)
	return r, r.err
}

// residentAtPeak replays the events up to the peak and returns each job's
// resident flags.
func (m *model) residentAtPeak(r *simResult, out [][]bool) [][]bool {
	return m.residentAt(r, r.peakIdx, out)
}

// residentAt replays the events up to index idx and returns each job's
// resident flags.
func (m *model) residentAt(r *simResult, idx int, out [][]bool) [][]bool {
	if len(out) != len(m.jobs) {
		out = make([][]bool, len(m.jobs))
	}
	for j, ji := range m.jobs {
		if len(out[j]) != len(ji.bytes) {
			out[j] = make([]bool, len(ji.bytes))
		} else {
			clear(out[j])
		}
	}
	for k := 0; k <= idx && k < len(r.events); k++ {
		e := &r.events[k]
		out[e.job][e.tensor] = e.delta > 0
	}
	return out
}

// lastStarted returns, for job j, the last op that started at or before t (-1: none).
func (sj *simJob) lastStarted(t float64) int {
	n := len(sj.start)
	k := sort.Search(n, func(i int) bool { return sj.start[i] > t })
	return k - 1
}

func (m *model) report(r *simResult) *PeakReport {
	rep := &PeakReport{Bytes: r.peak, RunPeakBytes: r.firstPeak, Time: r.peakTime - r.t0, Job: -1, Op: -1, Seconds: r.makespan}
	res := m.residentAtPeak(r, nil)
	if r.peakIdx >= 0 {
		rep.Job = int(r.events[r.peakIdx].job)
	}
	for j, sj := range r.jobs {
		ji := sj.info
		last := sj.lastStarted(r.peakTime)
		rep.LastOp = append(rep.LastOp, last)
		if j == rep.Job {
			rep.Op = last
		}
		rep.JobPeaks = append(rep.JobPeaks, sj.peak)
		rep.JobSeconds = append(rep.JobSeconds, sj.lastEnd-sj.first)
		rep.StallSeconds = append(rep.StallSeconds, sj.stall)
		rep.RecomputeSeconds = append(rep.RecomputeSeconds, sj.recSecs)
		for t, in := range res[j] {
			if !in {
				continue
			}
			rt := ResidentTensor{TensorRef: TensorRef{Job: j, Tensor: t}, Bytes: ji.bytes[t], LastAccess: -1, NextAccess: -1}
			for _, a := range ji.accesses(t) {
				if int(a) <= last {
					rt.LastAccess = int(a)
				} else {
					rt.NextAccess = int(a)
					break
				}
			}
			rep.Resident = append(rep.Resident, rt)
		}
	}
	sort.SliceStable(rep.Resident, func(a, b int) bool { return rep.Resident[a].Bytes > rep.Resident[b].Bytes })
	return rep
}
