package tensorsched

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// Peak analysis and the planner's timing model.
//
// The planner predicts what Execute will measure by simulating the jobs'
// steady-state iteration with the executor's rules (see the model comment in
// exec.go): the shared compute engine runs the earliest-ready op (ties to
// the lower job index); an op waits for its inputs' swap-ins; recomputes run
// on the compute engine before the op that needs them; swaps queue in issue
// order on the shared H2D and D2H engines; outputs are allocated when an op
// starts, tensors freed when their last use ends; at equal times frees come
// before allocations. The steady state differs from a first iteration in two
// ways, both modelled: params and optimizer state swapped out across the
// iteration boundary start on the host, and swap-outs issued at the end of
// the previous iteration may still occupy the D2H engine (and their device
// memory) when the next iteration starts.

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
	// Time is when it is reached, seconds from the iteration's start.
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
}

// model is the planner's view of the jobs on one GPU.
type model struct {
	p    gpu.Profile
	jobs []*jobInfo
	sim  simulator
}

func newModel(jobs []Job, p gpu.Profile) (*model, error) {
	m := &model{p: p, jobs: make([]*jobInfo, len(jobs))}
	for j := range jobs {
		ji, err := newJobInfo(p, &jobs[j], j)
		if err != nil {
			return nil, err
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
	// recompute runs before op i: rec[recOff[i]:recOff[i+1]].
	recOff     []int32
	rec        []recItem
	recTensors []int32
	recBuf     []Action
	bucket     []int32

	state  []uint8
	avail  []float64
	outEnd []float64
	wrap   []bool // tensor starts the steady-state iteration off the device

	start, end []float64
	// recStart[i] is when the first recompute before op i started (-1: none).
	recStart []float64
	pos      int
	recPos   int
	prevEnd  float64
	base     float64
	data     float64
	ready    float64
	first    float64
	lastEnd  float64
	stall    float64
	recSecs  float64
	use      int64
	peak     int64
	// peakIdx and peakT locate the job's own peak in the merged events.
	peakIdx int
	peakT   float64
}

// simResult is the outcome of one simulated iteration. Slices are owned by
// the simulator and valid until its next run.
type simResult struct {
	peak     int64
	peakIdx  int
	peakTime float64
	events   []simEvent
	jobs     []*simJob
	h2d, d2h []copySpan
	makespan float64
	err      error
	// firstPeak and firstJobPeak are the device's and each job's peak in
	// the first iteration, when params and optimizer state swapped across
	// iterations are still on the device (set by steady).
	firstPeak    int64
	firstJobPeak []int64
}

// simCarry is what the previous iteration leaves behind.
type simCarry struct {
	d2hFree, h2dFree float64
	pending          []simEvent // device frees of swap-outs still in flight
}

type simulator struct {
	m       *model
	jobs    []simJob
	ready   []float64
	active  []bool
	compute []simEvent
	h2dEv   []simEvent
	d2hEv   []simEvent
	startEv []simEvent
	res     simResult
	c       simCarry
	// peaks of the first iteration of the last steady run
	firstPeak    int64
	firstJobPeak []int64
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
		sj.wrap = make([]bool, nt)
		sj.start = make([]float64, no)
		sj.end = make([]float64, no)
		sj.recStart = make([]float64, no)
		sj.actOff = make([]int32, no+2)
		sj.recOff = make([]int32, no+1)
	}
}

// index builds job j's per-op action tables, ordered as the executor orders
// them: by issuing op, then drops, swap-outs, swap-ins, stable otherwise.
func (sj *simJob) index(plan []Action) error {
	ji := sj.info
	no, nt := len(ji.g.Ops), len(ji.g.Tensors)
	for i := range sj.actOff {
		sj.actOff[i] = 0
	}
	for i := range sj.recOff {
		sj.recOff[i] = 0
	}
	sj.acts = sj.acts[:0]
	sj.rec = sj.rec[:0]
	sj.recTensors = sj.recTensors[:0]
	sj.recBuf = sj.recBuf[:0]
	// Count per (After, rank) bucket: rank 0 drops, 1 swap-outs, 2 swap-ins.
	nb := 3 * (no + 1)
	if cap(sj.bucket) < nb+1 {
		sj.bucket = make([]int32, nb+1)
	}
	bucket := sj.bucket[:nb+1]
	clear(bucket)
	nacts := 0
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
			bucket[3*(a.After+1)+actRank(a.Kind)+1]++
			nacts++
		case Recompute:
			if a.Before < 0 || a.Before >= no || ji.def[a.Tensor] < 0 || int(ji.def[a.Tensor]) >= a.Before {
				return fmt.Errorf("job %q: action %d (recompute of tensor %d before op %d): no producing op before it", ji.name, ai, a.Tensor, a.Before)
			}
			sj.recBuf = append(sj.recBuf, *a)
		default:
			return fmt.Errorf("job %q: action %d: unknown kind %d", ji.name, ai, a.Kind)
		}
	}
	for i := 1; i <= nb; i++ {
		bucket[i] += bucket[i-1]
	}
	if cap(sj.acts) < nacts {
		sj.acts = make([]Action, nacts)
	}
	sj.acts = sj.acts[:nacts]
	for ai := range plan {
		a := &plan[ai]
		if a.Kind == Recompute {
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
	// Steady state: a tensor whose last action in op order leaves it off the
	// device starts the iteration off the device (on the host).
	for t := range sj.wrap {
		sj.wrap[t] = false
	}
	for _, a := range sj.acts { // sorted by After, then drops, swap-outs, swap-ins
		if !ji.persistent[a.Tensor] {
			continue
		}
		switch a.Kind {
		case SwapOut, Drop:
			sj.wrap[a.Tensor] = true
		case SwapIn:
			sj.wrap[a.Tensor] = false
		}
	}
	return nil
}

// run simulates one steady-state iteration of every job with the given
// plans (indexed by job) and the previous iteration's carry.
func (s *simulator) run(plans [][]Action, carry *simCarry, first bool) *simResult {
	res := &s.res
	*res = simResult{jobs: res.jobs[:0], h2d: res.h2d[:0], d2h: res.d2h[:0], events: res.events[:0], firstJobPeak: res.firstJobPeak}
	s.compute = s.compute[:0]
	s.h2dEv = s.h2dEv[:0]
	s.d2hEv = s.d2hEv[:0]
	s.startEv = s.startEv[:0]
	var h2dFree, d2hFree, cFree float64
	if carry != nil {
		h2dFree, d2hFree = carry.h2dFree, carry.d2hFree
		if d2hFree > 0 {
			res.d2h = append(res.d2h, copySpan{issue: -1, start: 0, end: d2hFree, job: -1, tensor: -1})
		}
		if h2dFree > 0 {
			res.h2d = append(res.h2d, copySpan{issue: -1, start: 0, end: h2dFree, job: -1, tensor: -1})
		}
	}
	for j := range s.jobs {
		sj := &s.jobs[j]
		res.jobs = append(res.jobs, sj)
		var plan []Action
		if j < len(plans) {
			plan = plans[j]
		}
		if err := sj.index(plan); err != nil {
			res.err = err
			return res
		}
		ji := sj.info
		for t := range sj.state {
			sj.state[t] = sAbsent
			sj.avail[t] = 0
		}
		sj.use, sj.peak, sj.stall, sj.recSecs = 0, 0, 0, 0
		sj.peakIdx, sj.peakT = -1, 0
		for _, t := range ji.persList {
			if sj.wrap[t] && !first {
				sj.state[t] = sHost
				continue
			}
			sj.state[t] = sDevice
			s.startEv = append(s.startEv, simEvent{t: 0, delta: ji.bytes[t], job: int32(j), tensor: t})
		}
		for _, t := range ji.inputs {
			sj.state[t] = sDevice
			sj.avail[t] = ji.hostIter
			s.startEv = append(s.startEv, simEvent{t: ji.hostIter, delta: ji.bytes[t], job: int32(j), tensor: t})
		}
		for i := range sj.recStart {
			sj.recStart[i] = -1
		}
		sj.pos, sj.recPos = 0, 0
		sj.prevEnd, sj.lastEnd, sj.first = 0, 0, 0
	}
	if carry != nil {
		for _, ev := range carry.pending {
			sj := &s.jobs[ev.job]
			if sj.state[ev.tensor] != sHost {
				continue
			}
			sj.state[ev.tensor] = sSwapOut
			sj.outEnd[ev.tensor] = ev.t
			s.startEv = append(s.startEv, simEvent{t: 0, delta: ev.delta, job: ev.job, tensor: ev.tensor})
			s.d2hEv = append(s.d2hEv, simEvent{t: ev.t, delta: -ev.delta, job: ev.job, tensor: ev.tensor})
		}
		slices.SortStableFunc(s.d2hEv, func(a, b simEvent) int { return cmp.Compare(a.t, b.t) })
	}
	slices.SortStableFunc(s.startEv, func(a, b simEvent) int { return cmp.Compare(a.t, b.t) })
	// After = -1 actions at the iteration start.
	for j := range s.jobs {
		s.issue(j, -1, 0, &h2dFree, &d2hFree)
		s.active[j] = len(s.jobs[j].info.g.Ops) > 0
		if s.active[j] {
			s.computeReady(j)
		}
	}
	for {
		j := pickEarliest(s.ready, s.active)
		if j < 0 {
			break
		}
		sj := &s.jobs[j]
		ji := sj.info
		if sj.recPos < int(sj.recOff[sj.pos+1]) {
			it := sj.rec[sj.recPos]
			sj.recPos++
			need := false
			for _, t := range sj.recTensors[it.from:it.to] {
				if sj.state[t] != sDevice {
					need = true
				}
			}
			if need {
				p := int(it.producer)
				st := math.Max(sj.ready, cFree)
				en := st + ji.dur[p]
				cFree = en
				if sj.data > sj.base {
					sj.stall += sj.data - sj.base
				}
				for _, t := range ji.g.Ops[p].Inputs {
					if sj.state[t] != sDevice && res.err == nil {
						res.err = fmt.Errorf("job %q: recompute of op %d before op %d needs tensor %d (%s), which is not resident", ji.name, p, sj.pos, t, ji.g.Tensors[t].Name)
					}
				}
				for _, t := range sj.recTensors[it.from:it.to] {
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
				if sj.recStart[sj.pos] < 0 {
					sj.recStart[sj.pos] = st
				}
				sj.recSecs += ji.dur[p]
				sj.prevEnd = en
			}
			s.computeReady(j)
			continue
		}
		i := sj.pos
		op := &ji.g.Ops[i]
		st := math.Max(sj.ready, cFree)
		en := st + ji.dur[i]
		cFree = en
		if sj.data > sj.base {
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
			sj.first = st
		}
		sj.start[i], sj.end[i] = st, en
		sj.lastEnd = en
		sj.prevEnd = en
		for _, t := range ji.freeAt[ji.freeOff[i]:ji.freeOff[i+1]] {
			if sj.state[t] == sDevice {
				s.compute = append(s.compute, simEvent{t: en, delta: -ji.bytes[t], job: int32(j), tensor: t})
				sj.state[t] = sAbsent
			}
		}
		s.issue(j, i, en, &h2dFree, &d2hFree)
		sj.pos++
		if sj.pos < len(ji.g.Ops) {
			s.computeReady(j)
		} else {
			s.active[j] = false
		}
	}
	s.merge()
	return res
}

// computeReady sets the ready time of job j's next compute item, as the
// executor does.
func (s *simulator) computeReady(j int) {
	sj := &s.jobs[j]
	ji := sj.info
	base := sj.prevEnd
	if l := ji.hostIter + float64(sj.pos)*ji.hostKernel; l > base {
		base = l
	}
	var inputs []int
	if sj.recPos < int(sj.recOff[sj.pos+1]) {
		inputs = ji.g.Ops[sj.rec[sj.recPos].producer].Inputs
	} else {
		inputs = ji.g.Ops[sj.pos].Inputs
	}
	data := 0.0
	for _, t := range inputs {
		if sj.state[t] == sDevice && sj.avail[t] > data {
			data = sj.avail[t]
		}
	}
	sj.base, sj.data = base, data
	sj.ready = math.Max(base, data)
	s.ready[j] = sj.ready
}

// issue applies job j's actions issued after op i (-1: start) at time t.
func (s *simulator) issue(j, i int, t float64, h2dFree, d2hFree *float64) {
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
			ready := math.Max(t, sj.avail[ti])
			st := math.Max(ready, *d2hFree)
			en := st + s.m.p.D2HSeconds(b)
			*d2hFree = en
			res.d2h = append(res.d2h, copySpan{issue: ready, start: st, end: en, job: int32(j), tensor: int32(ti)})
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
			st := math.Max(ready, *h2dFree)
			en := st + s.m.p.H2DSeconds(b)
			*h2dFree = en
			res.h2d = append(res.h2d, copySpan{issue: ready, start: st, end: en, job: int32(j), tensor: int32(ti)})
			s.h2dEv = append(s.h2dEv, simEvent{t: st, delta: b, job: int32(j), tensor: int32(ti)})
			sj.state[ti] = sDevice
			sj.avail[ti] = en
		}
	}
}

// merge orders all memory events (frees first at equal times) and finds the
// peak. Every stream is already in time order.
func (s *simulator) merge() {
	res := &s.res
	streams := [4][]simEvent{s.startEv, s.compute, s.h2dEv, s.d2hEv}
	var pos [4]int
	ev := res.events[:0]
	var use int64
	res.peak, res.peakIdx = math.MinInt64, -1
	for {
		best := -1
		for k := range streams {
			if pos[k] >= len(streams[k]) {
				continue
			}
			if best < 0 {
				best = k
				continue
			}
			a, b := &streams[k][pos[k]], &streams[best][pos[best]]
			if a.t < b.t || (a.t == b.t && a.delta < 0 && b.delta >= 0) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		e := streams[best][pos[best]]
		pos[best]++
		ev = append(ev, e)
		use += e.delta
		sj := &s.jobs[e.job]
		sj.use += e.delta
		if sj.use > sj.peak {
			sj.peak, sj.peakIdx, sj.peakT = sj.use, len(ev)-1, e.t
		}
		if use > res.peak {
			res.peak, res.peakIdx, res.peakTime = use, len(ev)-1, e.t
		}
	}
	if res.peakIdx < 0 {
		res.peak = 0
	}
	res.events = ev
	first, last := math.Inf(1), math.Inf(-1)
	for j := range s.jobs {
		sj := &s.jobs[j]
		if len(sj.info.g.Ops) == 0 {
			continue
		}
		first = math.Min(first, sj.first)
		last = math.Max(last, sj.lastEnd)
	}
	if last > first {
		res.makespan = last - first
	}
}

// carry computes what this iteration leaves to the next one.
func (s *simulator) carry(res *simResult, c *simCarry) {
	c.pending = c.pending[:0]
	c.d2hFree, c.h2dFree = 0, 0
	end := math.Inf(1)
	for j := range s.jobs {
		if len(s.jobs[j].info.g.Ops) > 0 {
			end = math.Min(end, s.jobs[j].lastEnd)
		}
	}
	if math.IsInf(end, 1) {
		return
	}
	if n := len(res.d2h); n > 0 && res.d2h[n-1].end > end {
		c.d2hFree = res.d2h[n-1].end - end
	}
	if n := len(res.h2d); n > 0 && res.h2d[n-1].end > end {
		c.h2dFree = res.h2d[n-1].end - end
	}
	for _, sp := range res.d2h {
		if sp.job < 0 {
			continue
		}
		sj := &s.jobs[sp.job]
		if !sj.wrap[sp.tensor] {
			continue
		}
		if d := sp.end - sj.lastEnd; d > 0 {
			c.pending = append(c.pending, simEvent{t: d, delta: sj.info.bytes[sp.tensor], job: sp.job, tensor: sp.tensor})
		}
	}
}

// steady simulates the steady-state iteration the executor measures: a
// first iteration (every param and optimizer state on the device, as the
// executor starts) to find what it leaves behind, then the next one with
// it. The first iteration's peaks are kept in firstPeak and firstJobPeak:
// budgets hold in every iteration, not only the measured one.
func (s *simulator) steady(plans [][]Action) (*simResult, error) {
	r := s.run(plans, nil, true)
	if r.err != nil {
		return r, r.err
	}
	s.firstPeak = r.peak
	s.firstJobPeak = s.firstJobPeak[:0]
	for _, sj := range r.jobs {
		s.firstJobPeak = append(s.firstJobPeak, sj.peak)
	}
	s.carry(r, &s.c)
	r = s.run(plans, &s.c, false)
	r.firstPeak, r.firstJobPeak = s.firstPeak, s.firstJobPeak
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
	rep := &PeakReport{Bytes: r.peak, Time: r.peakTime, Job: -1, Op: -1, Seconds: r.makespan}
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
