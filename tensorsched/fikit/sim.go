package fikit

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// Mode is how the GPU shares its compute engine between jobs.
type Mode string

// Modes; the package documentation describes each.
const (
	Share     Mode = "share"
	Streams   Mode = "streams"
	Exclusive Mode = "exclusive"
	FIKIT     Mode = "fikit"
)

// Modes lists every mode, in the order benchmarks report them.
var Modes = []Mode{Share, Streams, Exclusive, FIKIT}

// ParseMode parses a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown mode %q (allowed: %s)", s, strings.Join(names, ", "))
}

// DefaultSlice is the time slice of Share mode when Options.Slice is unset.
const DefaultSlice = 2e-3

// MinSlice is the shortest time slice Share mode accepts (1 µs). Shorter
// slices make a long kernel take billions of steps, and one below the
// clock's resolution would never advance it.
const MinSlice = 1e-6

// Job is one job on the GPU. Graph.Kind selects inference (requests) or
// training (iterations); the package documentation describes both.
type Job struct {
	Name     string
	Graph    *workload.Graph
	Priority int // 0..MaxPriority; higher is more important

	// Inference: Requests requests (0: len(Arrivals)), arriving at the
	// times in Arrivals (seconds, non-decreasing) or, without a list, as a
	// Poisson process of Rate requests per second from time 0 (seeded);
	// with neither, back to back (a closed loop: each request is sent
	// when the last is answered, and its latency counts from then).
	// HostPre and HostPost are the host
	// pre- and post-processing time of one request.
	Requests          int
	Rate              float64
	Arrivals          []float64
	HostPre, HostPost float64

	// Training: Iterations iterations, each preceded by HostPerIteration
	// of host time (0: Graph.HostSecondsPerIteration).
	Iterations       int
	HostPerIteration float64

	// HostPerKernel is the host time to launch one kernel, for both kinds
	// (0: Graph.HostSecondsPerKernel).
	HostPerKernel float64
}

// Options configure Simulate.
type Options struct {
	Mode    Mode
	Profile gpu.Profile
	// Seed seeds arrivals and every random factor below.
	Seed uint64
	// Jitter is the relative standard deviation of each kernel launch's
	// duration (normal, truncated at ±3σ); HostJitter the same for host
	// times. ModelError is the relative standard deviation of a fixed
	// per-kernel-id factor between the cost model and the device, which
	// only measurement can learn. All are clamped to [0, 0.3].
	Jitter, HostJitter, ModelError float64
	// Slice is Share mode's time slice (<= 0: DefaultSlice); SwitchCost is
	// the idle time of a context switch between jobs in Share mode.
	Slice, SwitchCost float64
	// Margin is the dispatcher's allowed overrun (see Dispatcher.Margin).
	Margin float64
	// MeasureUnits is FIKIT's measurement phase: low priority waits until
	// the highest-priority job has completed this many requests or
	// iterations (estimates keep updating afterwards).
	MeasureUnits int
	// Alpha is the profiler's moving-average weight (<= 0 or > 1: 0.2).
	Alpha float64
	// ReadyAt, when set, delays a kernel until its inputs are resident: it
	// gets the job index, the request/iteration, the op index and the time
	// the kernel would otherwise be ready, and returns the time it may
	// launch (earlier values are ignored). It is called once per kernel,
	// in time order: for the first kernel of a request or iteration once
	// that has started, for the others when the kernel before has ended.
	// The device actor plugs its memory plan in here.
	ReadyAt func(job, unit, op int, t float64) float64
	// Timeline keeps every kernel span in Result.Timeline.
	Timeline bool
}

// DefaultOptions are the settings the benchmark starts from: FIKIT on p,
// 3% kernel jitter, 5% host jitter, 10% cost-model error, a 2 ms slice, a
// dispatch margin of 5% and a measurement phase of 3 units.
func DefaultOptions(p gpu.Profile) Options {
	return Options{Mode: FIKIT, Profile: p, Jitter: 0.03, HostJitter: 0.05, ModelError: 0.1,
		Slice: DefaultSlice, Margin: 0.05, MeasureUnits: 3, Alpha: 0.2}
}

// Span is one stretch of a kernel on the engine. In Share mode a preempted
// kernel has several spans.
type Span struct {
	Job   int     `json:"job"`
	Unit  int     `json:"unit"`
	Op    int     `json:"op"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// JobResult is what one job experienced.
type JobResult struct {
	Name     string `json:"name"`
	Priority int    `json:"priority"`
	// JCT is the job's completion time: from time 0 to its last request
	// or iteration being done.
	JCT float64 `json:"jct_s"`
	// Latencies are per request (inference only), in arrival order.
	Latencies []float64 `json:"-"`
	// P50, P99 and Mean summarise Latencies (nearest rank).
	P50  float64 `json:"p50_s"`
	P99  float64 `json:"p99_s"`
	Mean float64 `json:"mean_s"`
	// Busy is the job's kernel time; Delay the total time its kernels
	// waited between being ready and starting.
	Busy    float64 `json:"busy_s"`
	Delay   float64 `json:"delay_s"`
	Kernels int     `json:"kernels"`
	// Preemptions counts kernels cut by a slice end (Share mode).
	Preemptions int `json:"preemptions"`
}

// Result is the outcome of one simulation.
type Result struct {
	Mode     Mode        `json:"mode"`
	Jobs     []JobResult `json:"jobs"`
	Makespan float64     `json:"makespan_s"`
	// HPIdle is the high-priority jobs' idle time (package documentation)
	// and LPFill the low-priority kernel time inside it; GapFill is their
	// ratio (0 when there is no idle time or no low priority).
	HPIdle  float64 `json:"hp_idle_s"`
	LPFill  float64 `json:"lp_fill_s"`
	GapFill float64 `json:"gap_fill"`
	// DurErr and GapErr score the profiler's duration and gap predictions
	// that rested on a measurement (see Profiler).
	DurErr ErrorStats `json:"duration_error"`
	GapErr ErrorStats `json:"gap_error"`
	// Timeline holds every span when Options.Timeline is set.
	Timeline []Span `json:"timeline,omitempty"`
}

type opInfo struct {
	id    uint64
	base  float64 // device time before jitter: cost model × model error
	prior float64 // the cost model's prediction
	est   *Estimate
}

type pendingObs struct {
	est  *Estimate
	slot int
	v    float64
	at   float64
}

type jobState struct {
	idx      int
	job      *Job
	prio     int
	infer    bool
	ops      []opInfo
	units    int
	arrivals []float64
	closed   bool    // back-to-back requests: each is sent when the last is answered
	pre      float64 // per request (HostPre) or per iteration (data loading)
	post     float64
	hpk      float64
	gapEst   []*Estimate
	preEst   *Estimate
	postEst  *Estimate
	waitEst  *Estimate
	waits    *Residual

	unit, k    int
	unitStart  float64 // start of the current unit
	host       float64 // host issue time of kernel k
	ready      float64 // ready time of kernel k
	lastEnd    float64 // end of this job's previous kernel
	lastDone   float64 // when the previous unit was done
	deferred   bool    // the unit has not started: ready is not known yet
	done       bool    // no kernels left (may still be post-processing)
	finish     float64
	unitsDone  int
	measuredAt float64 // end of the measurement phase
	susp       float64 // Share: remaining time of a preempted kernel
	cur        float64 // actual duration of the kernel in progress
	started    bool
	firstStart float64
	pending    []pendingObs

	lat                []float64
	busy, delay        float64
	kernels, preempted int
}

type sim struct {
	o     Options
	jobs  []*jobState
	prof  *Profiler
	disp  Dispatcher
	cands []Candidate
	spans []Span
}

// Simulate runs jobs together on one GPU in virtual time under o.Mode and
// reports what each job experienced. It is deterministic for a given
// Options.Seed.
func Simulate(jobs []Job, o Options) (*Result, error) {
	s, err := newSim(jobs, o)
	if err != nil {
		return nil, err
	}
	if s.o.Mode == Share {
		err = s.runShare()
	} else {
		err = s.runQueued()
	}
	if err != nil {
		return nil, err
	}
	return s.result(), nil
}

func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

func newSim(jobs []Job, o Options) (*sim, error) {
	if o.Mode == "" {
		o.Mode = FIKIT
	}
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return nil, err
	}
	if err := o.Profile.Validate(); err != nil {
		return nil, fmt.Errorf("fikit: %w", err)
	}
	if len(jobs) == 0 {
		return nil, errors.New("fikit: no jobs to simulate")
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"Jitter", o.Jitter}, {"HostJitter", o.HostJitter}, {"ModelError", o.ModelError}, {"Slice", o.Slice}, {"Alpha", o.Alpha}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return nil, fmt.Errorf("fikit: Options.%s is %v; set a finite number", f.name, f.v)
		}
	}
	o.Jitter = clamp(o.Jitter, 0, 0.3)
	o.HostJitter = clamp(o.HostJitter, 0, 0.3)
	o.ModelError = clamp(o.ModelError, 0, 0.3)
	if o.Slice <= 0 {
		o.Slice = DefaultSlice
	}
	if o.Slice < MinSlice {
		return nil, fmt.Errorf("fikit: Options.Slice %g s is shorter than the %g s minimum; set 0 for the %g s default or at least %g s", o.Slice, MinSlice, DefaultSlice, MinSlice)
	}
	if !workload.FiniteNonNeg(o.SwitchCost) || !workload.FiniteNonNeg(o.Margin) || o.MeasureUnits < 0 {
		return nil, fmt.Errorf("fikit: Options.SwitchCost (%v), Margin (%v) and MeasureUnits (%d) must be finite and >= 0", o.SwitchCost, o.Margin, o.MeasureUnits)
	}
	s := &sim{o: o, prof: NewProfiler(o.Alpha), disp: Dispatcher{Margin: o.Margin}}
	var errs []error
	for i := range jobs {
		js, err := s.newJob(i, &jobs[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.jobs = append(s.jobs, js)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, js := range s.jobs {
		s.startUnit(js, 0, 0)
	}
	return s, nil
}

func (s *sim) newJob(i int, j *Job) (*jobState, error) {
	name := j.Name
	if name == "" {
		name = fmt.Sprintf("job %d", i)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("fikit: %s: %s", name, fmt.Sprintf(format, a...))
	}
	if j.Graph == nil || len(j.Graph.Ops) == 0 {
		return nil, bad("graph is missing or has no ops")
	}
	if j.Priority < 0 || j.Priority > MaxPriority {
		return nil, bad("priority %d out of range 0..%d", j.Priority, MaxPriority)
	}
	if k := j.Graph.Kind; k != workload.Train && k != workload.Infer {
		return nil, bad("graph kind %q is unknown; set %q or %q", k, workload.Train, workload.Infer)
	}
	js := &jobState{idx: i, job: j, prio: j.Priority, infer: j.Graph.Kind == workload.Infer}
	js.hpk = j.HostPerKernel
	if js.hpk == 0 {
		js.hpk = j.Graph.HostSecondsPerKernel
	}
	if js.infer {
		js.units = j.Requests
		if js.units == 0 {
			js.units = len(j.Arrivals)
		}
		if js.units <= 0 {
			return nil, bad("inference job needs Requests > 0 or a list of Arrivals")
		}
		switch {
		case len(j.Arrivals) > 0:
			if len(j.Arrivals) < js.units {
				return nil, bad("%d requests but only %d arrival times", js.units, len(j.Arrivals))
			}
			for r, a := range j.Arrivals[:js.units] {
				if !workload.FiniteNonNeg(a) || (r > 0 && a < j.Arrivals[r-1]) {
					return nil, bad("arrival times must be >= 0 and non-decreasing (request %d at %g)", r, a)
				}
			}
			js.arrivals = j.Arrivals[:js.units]
		case math.IsNaN(j.Rate) || math.IsInf(j.Rate, 0):
			return nil, bad("rate %v: must be a finite number of requests per second (0: back to back)", j.Rate)
		case j.Rate > 0:
			rng := rand.New(rand.NewPCG(s.o.Seed, uint64(i)+0x5eed))
			js.arrivals = make([]float64, js.units)
			t := 0.0
			for r := range js.arrivals {
				t += rng.ExpFloat64() / j.Rate
				js.arrivals[r] = t
			}
		case j.Rate < 0:
			return nil, bad("rate must be >= 0")
		default:
			// Back to back: a closed loop, request r is sent when r−1 is
			// answered (its latency counts from then, see complete).
			js.arrivals = make([]float64, js.units)
			js.closed = true
		}
		js.pre, js.post = j.HostPre, j.HostPost
	} else {
		js.units = j.Iterations
		if js.units <= 0 {
			return nil, bad("training job needs Iterations > 0")
		}
		js.pre = j.HostPerIteration
		if js.pre == 0 {
			js.pre = j.Graph.HostSecondsPerIteration
		}
	}
	if !workload.FiniteNonNeg(js.pre) || !workload.FiniteNonNeg(js.post) || !workload.FiniteNonNeg(js.hpk) {
		return nil, bad("host times must be finite and >= 0 (pre %v, post %v, per kernel %v)", js.pre, js.post, js.hpk)
	}
	g := j.Graph
	js.ops = make([]opInfo, len(g.Ops))
	for k := range g.Ops {
		op := &g.Ops[k]
		for _, f := range []struct {
			name string
			v    float64
		}{{"flops", op.FLOPs}, {"bytes_moved", op.MemBytes}, {"measured_seconds", op.MeasuredSeconds}} {
			if !workload.FiniteNonNeg(f.v) {
				return nil, bad("op %d %q: %s must be a finite number >= 0 (got %v)", k, op.Name, f.name, f.v)
			}
		}
		id := KernelID(op, g)
		prior := s.o.Profile.OpSeconds(op)
		f := 1 + s.o.ModelError*hnorm(s.o.Seed, tagModel, id, 0, 0)
		js.ops[k] = opInfo{id: id, prior: prior, base: prior * math.Max(f, 0.01), est: s.prof.Kernel(id)}
	}
	js.gapEst = make([]*Estimate, len(g.Ops)-1)
	for k := range js.gapEst {
		js.gapEst[k] = s.prof.Gap(i, k)
	}
	js.preEst, js.postEst, js.waitEst = s.prof.Gap(i, SlotPre), s.prof.Gap(i, SlotPost), s.prof.Gap(i, SlotWait)
	js.waits = s.prof.Wait(i)
	js.measuredAt = math.Inf(1)
	if s.o.MeasureUnits == 0 {
		js.measuredAt = 0
	}
	return js, nil
}

// Random factors are hashed from (seed, tag, a, b, c), not drawn from a
// stream, so they do not depend on the order in which a mode runs kernels.
const (
	tagModel uint64 = iota + 1
	tagKernel
	tagHost
)

func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hnorm is a standard normal variate truncated at ±3, hashed from its key.
func hnorm(seed, tag, a, b, c uint64) float64 {
	h := mix(seed ^ mix(tag^mix(a^mix(b^mix(c)))))
	u1 := (float64(h>>11) + 0.5) / (1 << 53)
	h2 := mix(h ^ 0x6a09e667f3bcc909)
	u2 := float64(h2>>11) / (1 << 53)
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	return clamp(z, -3, 3)
}

func (s *sim) kernelFactor(js *jobState) float64 {
	if s.o.Jitter == 0 {
		return 1
	}
	return 1 + s.o.Jitter*hnorm(s.o.Seed, tagKernel, uint64(js.idx), uint64(js.unit), uint64(js.k))
}

// hostTime jitters host time d; what distinguishes the host phases of one
// kernel position (launch, pre, post).
func (s *sim) hostTime(js *jobState, d float64, what uint64) float64 {
	if s.o.HostJitter == 0 || d == 0 {
		return d
	}
	z := hnorm(s.o.Seed, tagHost, uint64(js.idx), uint64(js.unit), uint64(js.k)<<2|what)
	return d * (1 + s.o.HostJitter*z)
}

func (s *sim) readyAt(js *jobState, t float64) float64 {
	if s.o.ReadyAt != nil {
		if r := s.o.ReadyAt(js.idx, js.unit, js.k, t); r > t {
			return r
		}
	}
	return t
}

func (js *jobState) push(est *Estimate, slot int, v, at float64) {
	js.pending = append(js.pending, pendingObs{est: est, slot: slot, v: v, at: at})
}

// flush applies the measurements that have happened by time t: the
// profiler only learns a gap once it is over.
func (s *sim) flush(t float64) {
	for _, js := range s.jobs {
		n := 0
		for _, p := range js.pending {
			if p.at <= t {
				if p.slot == SlotWait {
					js.waits.Observe(p.v)
				}
				s.prof.observeGap(p.est, p.slot, p.v)
				continue
			}
			js.pending[n] = p
			n++
		}
		js.pending = js.pending[:n]
	}
}

// startUnit begins request/iteration u of js at time now, the previous one
// (if any) having been done at js.lastDone. ReadyAt is asked about the
// unit's first kernel only once the unit has started (startDue): its hook
// may book shared resources (the device's copy engines) from the time it is
// called, and a unit that starts later, after a wait or post-processing,
// must not hold them ahead of what other jobs issue meanwhile.
func (s *sim) startUnit(js *jobState, u int, now float64) {
	js.unit, js.k = u, 0
	start := js.lastDone
	if js.infer && js.arrivals[u] > start {
		start = js.arrivals[u]
		if u > 0 {
			js.push(js.waitEst, SlotWait, start-js.lastDone, start)
		}
	}
	js.unitStart = start
	js.host = start + s.hostTime(js, js.pre, 1)
	js.ready, js.deferred = math.Inf(1), true
	if s.o.ReadyAt == nil || start <= now {
		s.resolveStart(js)
	}
}

// resolveStart works out when the first kernel of js's unit, which has
// started, is ready.
func (s *sim) resolveStart(js *jobState) {
	js.deferred = false
	js.ready = s.readyAt(js, js.host)
	js.push(js.preEst, SlotPre, js.ready-js.unitStart, js.ready)
}

// startDue resolves the first kernel of every unit that has started by t.
func (s *sim) startDue(t float64) {
	for _, js := range s.jobs {
		if js.deferred && js.unitStart <= t {
			s.resolveStart(js)
		}
	}
}

// launch starts js's next kernel at t and returns its actual duration.
func (s *sim) launch(js *jobState, t float64) float64 {
	if !js.started {
		js.started, js.firstStart = true, t
	}
	js.delay += t - js.ready
	js.cur = js.ops[js.k].base * math.Max(s.kernelFactor(js), 0.01)
	return js.cur
}

// complete finishes js's current kernel at e and works out when its next
// kernel will be ready.
func (s *sim) complete(js *jobState, e float64) {
	s.startDue(e) // ReadyAt calls in time order
	op := &js.ops[js.k]
	s.prof.ObserveDuration(op.est, js.cur)
	js.kernels++
	js.busy += js.cur
	js.lastEnd = e
	if js.k+1 < len(js.ops) {
		js.k++
		js.host += s.hostTime(js, js.hpk, 0)
		js.ready = s.readyAt(js, math.Max(js.host, e))
		js.push(js.gapEst[js.k-1], js.k-1, js.ready-e, js.ready)
		return
	}
	done := e
	if js.infer {
		done += s.hostTime(js, js.post, 2)
		js.push(js.postEst, SlotPost, done-e, done)
		sent := js.arrivals[js.unit]
		if js.closed {
			sent = js.unitStart
		}
		js.lat = append(js.lat, done-sent)
	}
	js.lastDone = done
	js.unitsDone++
	if js.unitsDone == s.o.MeasureUnits {
		js.measuredAt = done
	}
	if js.unitsDone == js.units {
		js.done, js.finish = true, done
		if js.measuredAt > done {
			js.measuredAt = done
		}
		return
	}
	s.startUnit(js, js.unit+1, e)
}

func (js *jobState) active(t float64) bool { return !js.done || t < js.finish }

func (s *sim) anyKernels() bool {
	for _, js := range s.jobs {
		if !js.done {
			return true
		}
	}
	return false
}

// nextEvent is the earliest time after t at which anything a decision
// depends on changes: a kernel becomes ready, a measurement lands, a host
// phase of some job begins or ends, a wait for a request outlasts a measured
// one.
func (s *sim) nextEvent(t float64) float64 {
	next := math.Inf(1)
	after := func(x float64) {
		if x > t && x < next {
			next = x
		}
	}
	for _, js := range s.jobs {
		if js.done {
			after(js.finish)
			continue
		}
		after(js.ready)
		after(js.unitStart)
		after(js.lastDone)
		if js.infer && js.k == 0 && t >= js.lastDone && t < js.unitStart {
			// Waiting for a request: once the wait outlasts a measured
			// one, the expected rest of it (Residual.After) may grow.
			for _, w := range js.waits.buf[:js.waits.n] {
				after(math.Nextafter(js.lastDone+w, math.Inf(1)))
			}
		}
		for _, p := range js.pending {
			after(p.at)
		}
	}
	return next
}

func (s *sim) span(js *jobState, a, b float64) {
	s.spans = append(s.spans, Span{Job: js.idx, Unit: js.unit, Op: js.k, Start: a, End: b})
}

// runQueued runs the non-preemptive modes: Streams, Exclusive and FIKIT.
func (s *sim) runQueued() error {
	t := 0.0
	for s.anyKernels() {
		s.flush(t)
		s.startDue(t)
		s.cands = s.cands[:0]
		for _, js := range s.jobs {
			if !js.done && js.ready <= t {
				s.cands = append(s.cands, Candidate{Job: js.idx, Priority: js.prio,
					Pred: js.ops[js.k].est.Or(js.ops[js.k].prior), Ready: js.ready})
			}
		}
		if pick := s.pick(t); pick >= 0 {
			js := s.jobs[pick]
			end := t + s.launch(js, t)
			s.span(js, t, end)
			t = end
			s.complete(js, end)
			continue
		}
		next := s.nextEvent(t)
		if math.IsInf(next, 1) {
			return fmt.Errorf("fikit: %s mode stalled at t=%.6fs with kernels left", s.o.Mode, t)
		}
		t = next
	}
	return nil
}

// topPriority is the highest priority among jobs active at t.
func (s *sim) topPriority(t float64) int {
	top := -1
	for _, js := range s.jobs {
		if js.active(t) && js.prio > top {
			top = js.prio
		}
	}
	return top
}

func fifo(c []Candidate, minPrio int) int {
	best := -1
	for i := range c {
		if c[i].Priority >= minPrio && (best < 0 || c[i].Ready < c[best].Ready) {
			best = i
		}
	}
	return best
}

// pick returns the job whose kernel launches at t, or -1.
func (s *sim) pick(t float64) int {
	if len(s.cands) == 0 {
		return -1
	}
	var i int
	switch s.o.Mode {
	case Streams:
		i = fifo(s.cands, 0)
	case Exclusive:
		i = fifo(s.cands, s.topPriority(t))
	default:
		top := s.topPriority(t)
		i = s.disp.Decide(s.cands, Top{Priority: top, Remaining: s.topRemaining(t, top)})
	}
	if i < 0 {
		return -1
	}
	return s.cands[i].Job
}

// topRemaining is the predicted idle time left, at t, before a job at
// priority top has a kernel ready, from what the profiler has measured and
// what has happened by t. Unmeasured gaps count as 0, and so does the
// measurement phase: low priority must wait.
func (s *sim) topRemaining(t float64, top int) float64 {
	rem := math.Inf(1)
	for _, js := range s.jobs {
		if js.prio != top || !js.active(t) {
			continue
		}
		if t < js.measuredAt {
			return 0
		}
		if !js.done && js.ready <= t {
			continue // a candidate: Decide launches it
		}
		if r := s.prof.Remaining(s.gapState(js, t)); r < rem {
			rem = r
		}
	}
	if math.IsInf(rem, 1) {
		return 0
	}
	return rem
}

// gapState is where js is at t, as far as anyone could know at t.
func (s *sim) gapState(js *jobState, t float64) GapState {
	g := GapState{Job: js.idx}
	switch {
	case js.done: // last request's post-processing
		g.Phase, g.Elapsed, g.Final = PostProcessing, t-js.lastEnd, true
	case js.k > 0:
		g.Phase, g.After, g.Elapsed = BetweenKernels, js.k-1, t-js.lastEnd
	case js.unit > 0 && t < js.lastDone:
		g.Phase, g.Elapsed = PostProcessing, t-js.lastEnd
		g.Queued = js.arrivals == nil || js.arrivals[js.unit] <= t
	case t < js.unitStart:
		g.Phase, g.Elapsed = WaitingForRequest, t-js.lastDone
	default:
		g.Phase, g.Elapsed = PreProcessing, t-js.unitStart
	}
	return g
}

func (s *sim) hasWork(js *jobState, t float64) bool {
	return !js.done && (js.susp > 0 || js.ready <= t)
}

func (s *sim) otherWork(j int, t float64) bool {
	for _, js := range s.jobs {
		if js.idx != j && s.hasWork(js, t) {
			return true
		}
	}
	return false
}

// runShare runs Share mode: time slices, round robin between jobs with
// work, a job without a ready kernel yields at once, and a kernel cut by
// its slice's end resumes in its job's next slice.
func (s *sim) runShare() error {
	t, owner, sliceEnd := 0.0, -1, 0.0
	n := len(s.jobs)
	for s.anyKernels() {
		s.flush(t)
		s.startDue(t)
		j := -1
		if owner >= 0 && t < sliceEnd && s.hasWork(s.jobs[owner], t) {
			j = owner
		} else {
			for d := 1; d <= n; d++ {
				i := ((owner+d)%n + n) % n
				if s.hasWork(s.jobs[i], t) {
					j = i
					break
				}
			}
			if j < 0 {
				next := s.nextEvent(t)
				if math.IsInf(next, 1) {
					return fmt.Errorf("fikit: share mode stalled at t=%.6fs with kernels left", t)
				}
				t, sliceEnd = next, next
				continue
			}
			if j != owner {
				if owner >= 0 {
					t += s.o.SwitchCost
				}
				owner = j
			}
			sliceEnd = s.sliceAfter(t)
		}
		js := s.jobs[j]
		var rem float64
		if js.susp > 0 {
			rem, js.susp = js.susp, 0
		} else {
			rem = s.launch(js, t)
		}
		end := t + rem
		for s.startDue(sliceEnd); end > sliceEnd && !s.otherWork(j, sliceEnd); s.startDue(sliceEnd) {
			sliceEnd = s.sliceAfter(sliceEnd)
		}
		if end <= sliceEnd {
			s.span(js, t, end)
			t = end
			s.complete(js, end)
			continue
		}
		s.span(js, t, sliceEnd)
		js.susp = end - sliceEnd
		js.preempted++
		t = sliceEnd
	}
	return nil
}

// sliceAfter is the end of a slice that starts at t: t + Slice, or the
// next representable time where Slice is below the clock's resolution at t
// (far from time 0), so that a slice always moves time forward.
func (s *sim) sliceAfter(t float64) float64 {
	if e := t + s.o.Slice; e > t {
		return e
	}
	return math.Nextafter(t, math.Inf(1))
}

func (s *sim) result() *Result {
	r := &Result{Mode: s.o.Mode, DurErr: s.prof.DurErr, GapErr: s.prof.GapErr}
	hp := -1
	for _, js := range s.jobs {
		hp = max(hp, js.prio)
	}
	winStart, winEnd := math.Inf(1), 0.0
	for _, js := range s.jobs {
		jr := JobResult{Name: js.job.Name, Priority: js.prio, JCT: js.finish, Latencies: js.lat,
			Busy: js.busy, Delay: js.delay, Kernels: js.kernels, Preemptions: js.preempted}
		if len(js.lat) > 0 {
			sorted := append([]float64(nil), js.lat...)
			sort.Float64s(sorted)
			jr.P50, jr.P99 = Percentile(sorted, 0.50), Percentile(sorted, 0.99)
			var sum float64
			for _, l := range sorted {
				sum += l
			}
			jr.Mean = sum / float64(len(sorted))
		}
		r.Jobs = append(r.Jobs, jr)
		r.Makespan = math.Max(r.Makespan, js.finish)
		if js.prio == hp && js.started {
			winStart = math.Min(winStart, js.firstStart)
			winEnd = math.Max(winEnd, js.finish)
		}
	}
	var hpBusy float64
	for _, sp := range s.spans {
		if s.jobs[sp.Job].prio == hp {
			hpBusy += sp.End - sp.Start
		} else if a, b := math.Max(sp.Start, winStart), math.Min(sp.End, winEnd); b > a {
			r.LPFill += b - a
		}
	}
	if winEnd > winStart {
		r.HPIdle = math.Max(0, winEnd-winStart-hpBusy)
	}
	if r.HPIdle > 0 {
		r.GapFill = math.Min(1, r.LPFill/r.HPIdle)
	}
	if s.o.Timeline {
		r.Timeline = s.spans
	}
	return r
}

// Percentile is the nearest-rank p-quantile (0 < p <= 1) of sorted values;
// 0 for none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
