package tensorsched

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// PolicyTensile is the Plan.Policy of plans made by PlanTensile and PlanJobs.
const PolicyTensile = "tensile"

// Target is what a TENSILE plan must achieve.
type Target struct {
	// Budget, when positive, is the memory the planned jobs may use
	// together: the planner stops as soon as the predicted peak fits, adding
	// as little time as it can (target a).
	Budget int64
	// Tolerance is the extra iteration time the plan may add, relative to
	// vanilla execution (EOR = time/vanilla − 1 ≤ Tolerance). With Budget 0
	// the planner finds the least peak within it (target b). With a Budget
	// it caps the extra time: the planner fails rather than exceed it
	// (0 means no cap).
	Tolerance float64
	// ResidentStart keeps every parameter and optimizer state tensor on
	// the device from t = 0. By default (false) the plan starts on the
	// host those it swaps out after their last access and back in during
	// the next iteration (see the StartOnHost action): the first iteration
	// then holds no more of them than the later ones, so the run's peak
	// (what budgets and reservations cover) falls to the steady state's
	// where the first iteration set it.
	ResidentStart bool
	// NoTurns keeps joint mode from choosing plans that take turns by
	// iterations (Job.Turns): for jobs that must not wait for a whole
	// iteration of a neighbour (a latency-bound one beside training).
	NoTurns bool
}

// ErrBudget is returned (wrapped) when no plan found fits the budget; the
// best plan found is still returned.
var ErrBudget = errors.New("cannot fit the memory budget")

// PlanStats describes a plan as the planner predicts it will run.
type PlanStats struct {
	// PeakBytes and Seconds are the predicted peak and iteration time
	// (makespan for several jobs) with the plan.
	PeakBytes int64   `json:"peak_bytes"`
	Seconds   float64 `json:"seconds"`
	// FirstIterationPeakBytes is the predicted peak of the first iteration,
	// when params and optimizer state swapped across iterations are still
	// resident: a budget must cover it too.
	FirstIterationPeakBytes int64 `json:"first_iteration_peak_bytes"`
	// VanillaPeakBytes and VanillaSeconds are the same without a plan.
	VanillaPeakBytes int64   `json:"vanilla_peak_bytes"`
	VanillaSeconds   float64 `json:"vanilla_seconds"`
	// MSR = 1 − PeakBytes/VanillaPeakBytes; EOR = Seconds/VanillaSeconds − 1.
	MSR float64 `json:"msr"`
	EOR float64 `json:"eor"`
	// SwappedBytes is the bytes swapped out per iteration; RecomputedOps the
	// ops re-run per iteration.
	SwappedBytes  int64 `json:"swapped_bytes"`
	RecomputedOps int   `json:"recomputed_ops"`
	// Swaps and Recomputes count the planned swap and recompute windows.
	Swaps      int `json:"swaps"`
	Recomputes int `json:"recomputes"`
	// StartOnHost counts the parameter and optimizer state tensors the
	// plan starts on the host (StartOnHost actions).
	StartOnHost int `json:"start_on_host"`
	// Keeps counts the tensors the plan keeps on the device past their
	// last use for recomputes to read (Keep actions).
	Keeps int `json:"keeps"`
	// Steps is the number of greedy steps taken (for a plan that waits on
	// copies, the executor runs of its local search).
	Steps int `json:"steps"`
	// WaitsOnCopies marks the waiting fallback (planStalling), for a budget
	// the greedy misses even with its late moves: built from vdnn-all's
	// plan, where ops wait for swaps. (The greedy's own plans may make ops
	// wait too, see lateMoves; they do not set it.)
	WaitsOnCopies bool `json:"waits_on_copies,omitempty"`
	// Planning is the wall-clock time spent planning.
	Planning time.Duration `json:"planning_ns"`
}

// PlanTensile plans swaps and recomputation for one job's graph on device p
// (op times from the cost model: the cold-start plan).
func PlanTensile(g *workload.Graph, p gpu.Profile, t Target) (*Plan, PlanStats, error) {
	return PlanTensileJob(Job{Graph: g}, p, t)
}

// PlanTensileJob is PlanTensile for a Job, honouring its Seconds (measured
// op times) when set. The job's Plan and Budget are ignored.
func PlanTensileJob(job Job, p gpu.Profile, t Target) (*Plan, PlanStats, error) {
	job.Plan = nil
	plans, st, err := planTogether([]Job{job}, p, t, true)
	if plans == nil {
		return nil, st, err
	}
	return plans[0], st, err
}

// window is a gap between two accesses of a tensor during which the plan
// keeps it off the device.
type window struct {
	job, tensor int32
	// prev and next are the accesses bounding the gap; next <= prev means
	// the gap wraps into the next iteration (params and optimizer state).
	prev, next int32
	swap       bool
	// out is the op after which the tensor is swapped out or dropped; in
	// the op after which it is swapped in (-1: iteration start). Unused
	// for recompute windows.
	out, in int32
	// sync, when above 0, makes op sync-1 wait for the swap-out to end
	// (see lateMoves; buildPlans writes it as the SwapOut's Before).
	sync int32
	// temps are tensors recomputed before next only to recompute this one,
	// dropped again after it.
	temps []int32
	// pins are the tensors that must be resident before op next.
	pins []int32
	// advance lists swap windows of the recompute's sources that must
	// bring their tensor back earlier, before op next (a source swapped out
	// across the recompute point); undo holds what adding it changed.
	advance []advanceIn
	undo    []undoIn
	// retime lists recompute windows of the recompute's sources that must
	// bring their tensor back earlier, before op next, and keep it (a
	// source dropped across the recompute point, recomputed once rather
	// than also as a temp); unretime holds what adding it changed.
	retime   []retimeRec
	unretime []undoRec
	// keeps lists sources of the recompute freed before op next that the
	// plan keeps on the device until op next (Keep actions): small
	// tensors that let it rebuild a much larger one; unkeep holds what
	// adding it changed.
	keeps  []int32
	unkeep []undoKeep
}

// undoKeep restores the keep of tensor to until.
type undoKeep struct {
	tensor, until int32
}

// retimeRec moves the recompute of the recompute window of tensor (with
// previous access prev) to before op next.
type retimeRec struct {
	tensor, prev, next int32
}

// undoRec restores window win's recompute point.
type undoRec struct {
	win, next int32
}

// advanceIn moves the swap-in of the swap window of tensor (with previous
// access prev) to after op in.
type advanceIn struct {
	tensor, prev, in int32
}

// undoIn restores window win's swap-in op.
type undoIn struct {
	win, in int32
}

func (w *window) wraps() bool { return w.next <= w.prev }

// offBefore reports whether the window keeps its tensor off the device just
// before op x runs (after op x-1's actions).
func (w *window) offBefore(x int32) bool {
	if w.swap {
		if w.wraps() {
			return x > w.out || x <= w.in
		}
		return w.out < x && x <= w.in
	}
	// Recompute: dropped after out, brought back just before next (in
	// producer order, so a recompute before the same op sees it resident).
	return w.out < x && x < w.next
}

// planner is TENSILE's greedy loop over a model.
type planner struct {
	m      *model
	target Target
	wins   []window
	// byTensor[j][t]: indices into wins.
	byTensor [][][]int32
	// byTemp[j][t]: indices into wins of the recompute windows of job j
	// that rebuild tensor t as a temporary (t in their temps).
	byTemp [][][]int32
	// pinned[j][t]: ops before which tensor t must be resident.
	pinned [][][]int32
	bad    map[badKey]bool
	plans  [][]Action
	res    [][]bool
	// sims double-buffers the simulation: sims[cur] holds the accepted
	// state's result r while a trial runs on the other.
	sims [2]simulator
	cur  int
	// scratch copies of the engines' spans while a batch is placed.
	d2hBuf, h2dBuf []copySpan
	// sumBuf is packedFit's scratch; candBuf holds the step's candidates
	// (candidates reuses it every step).
	sumBuf  []float64
	candBuf []candidate
	// dearBuf and orderBuf are swapOrder's scratch space (its result is
	// valid until its next call).
	dearBuf  []dearCand
	orderBuf []candidate
	// ix holds the D2H summaries of rEngines (0) and localEngines (1).
	ix [2]spanIndex
	// chain is recomputeCost's scratch space.
	chain recomputeChain
	// keyBuf and sortBuf serve sortCandidates.
	keyBuf  []uint64
	sortBuf []candidate
	r       *simResult
	// rWins is how many windows pl.r is the complete simulation of, when
	// it is that of the windows as they stand but for windows added after
	// them (-1: it may not be). Windows added and removed again leave it
	// so (truncate restores what they changed); removing one of those
	// windows or changing the keeps does not. simulate returns pl.r rather
	// than simulate the same plans again.
	rWins int
	steps int
	// The peak being cut: event index, time, and job (-1: the device's).
	fIdx int
	tp   float64
	fJob int
	// jobBudget is each job's own budget (0: none).
	jobBudget []int64
	// ref is each job's vanilla iteration seconds, the reference of the
	// time tolerance (set by run from the vanilla simulation when empty).
	ref []float64
	// vanPeak and vanSecs are the vanilla figures of a warm start.
	vanPeak int64
	vanSecs float64
	// iters is how many iterations each simulation runs (simIterations
	// unless set).
	iters int
	// maxSteps caps the greedy steps (0: by graph size).
	maxSteps int
	// goalDiv sets how much a step frees at the device's peak: 1/goalDiv
	// of it (smaller steps choose more finely; the greedy's path differs).
	goalDiv int64
	// group[j], when set, is the first job that job j is a copy of (same
	// graph, op times and budget): every window added for one copy is
	// added for all of them, so copies run identical plans. Identical plans
	// keep co-located copies in a fixed phase (each does the same work per
	// iteration); different plans would let stalls move their phases over
	// the iterations. groupSize[j] is how many copies job j has.
	group, groupSize []int
	// wholeRun makes the peak to cut (target b) the device's high-water
	// mark over the whole simulated run rather than the measured window's:
	// co-located jobs reserve what they need in every iteration.
	wholeRun bool
	// dearFirst gives the copy engines' idle time to the tensors dearest
	// to recompute first (see swapOrder) rather than to the largest.
	dearFirst bool
	// retime lets a recompute move up the later recompute of a dropped
	// source and keep it (see retimeSource) rather than rebuild it as a
	// temporary.
	retime bool
	// keepResident keeps every parameter and optimizer state tensor on
	// the device from t = 0 (no StartOnHost actions; see startsOnHost):
	// the target's ResidentStart set.
	keepResident bool
	// keepSources lets a recompute keep small sources the graph frees
	// before it (see keepable and keepRatio).
	keepSources bool
	// packOut lets a swap-out queue on the D2H engine behind the planned
	// copies and push them back, as long as everything it pushes still
	// ends before the peak (see packedFit).
	packOut bool
	// trials is how many swaps the exchange search tries to turn into
	// recomputes (exchangeTrials unless set).
	trials int
	// late lets the greedy, when nothing else cuts the peak, make ops
	// wait for copies (lateMoves; see lateFinish).
	late bool
	// keep[j][t] is the op until which tensor t of job j stays on the
	// device past its last use (a Keep action; -1: none); nil when the
	// plan keeps nothing (see initKeeps).
	keep [][]int32
}

type badKey struct {
	job, tensor, prev int32
	swap              bool
}

func newPlanner(m *model, t Target) *planner {
	pl := &planner{m: m, target: t, bad: map[badKey]bool{}, goalDiv: 64, keepResident: t.ResidentStart, rWins: -1}
	pl.byTensor = make([][][]int32, len(m.jobs))
	pl.byTemp = make([][][]int32, len(m.jobs))
	pl.pinned = make([][][]int32, len(m.jobs))
	pl.plans = make([][]Action, len(m.jobs))
	for j, ji := range m.jobs {
		pl.byTensor[j] = make([][]int32, len(ji.bytes))
		pl.byTemp[j] = make([][]int32, len(ji.bytes))
		pl.pinned[j] = make([][]int32, len(ji.bytes))
	}
	pl.sims[0].init(m)
	pl.sims[1].init(m)
	return pl
}

// buildPlans turns the windows into actions.
func (pl *planner) buildPlans() {
	for j := range pl.plans {
		pl.plans[j] = pl.plans[j][:0]
		if pl.keep == nil {
			continue
		}
		for t, x := range pl.keep[j] {
			if x >= 0 {
				pl.plans[j] = append(pl.plans[j], Action{Kind: Keep, Tensor: t, After: int(x), Before: -1})
			}
		}
	}
	for i := range pl.wins {
		w := &pl.wins[i]
		a := pl.plans[w.job]
		if w.swap {
			a = append(a, Action{Kind: SwapOut, Tensor: int(w.tensor), After: int(w.out), Before: int(w.sync) - 1},
				Action{Kind: SwapIn, Tensor: int(w.tensor), After: int(w.in), Before: int(w.next)})
			if pl.startsOnHost(w) {
				a = append(a, Action{Kind: StartOnHost, Tensor: int(w.tensor), After: -1, Before: -1})
			}
		} else {
			a = append(a, Action{Kind: Drop, Tensor: int(w.tensor), After: int(w.out), Before: -1})
			for _, t := range w.temps {
				a = append(a, Action{Kind: Recompute, Tensor: int(t), After: -1, Before: int(w.next)},
					Action{Kind: Drop, Tensor: int(t), After: int(w.next), Before: -1})
			}
			a = append(a, Action{Kind: Recompute, Tensor: int(w.tensor), After: -1, Before: int(w.next)})
		}
		pl.plans[w.job] = a
	}
}

// startsOnHost reports whether window w starts its tensor on the host: a
// parameter or optimizer state tensor swapped out after its last access
// and back in during the next iteration is off the device from the
// iteration start to its swap-in in every iteration but the first, where
// it would otherwise be resident from t = 0 and often set the run's peak.
// Its first-iteration swap-in is the window's own (issued before its
// first access, which waits for the copy), so it always exists. With
// keepResident every such tensor starts on the device instead.
func (pl *planner) startsOnHost(w *window) bool {
	return !pl.keepResident && w.swap && w.wraps() && w.in < w.next && pl.m.jobs[w.job].persistent[w.tensor]
}

// simulate re-simulates the current windows as the accepted state (or
// returns pl.r when it simulates them already; see rWins).
func (pl *planner) simulate() (*simResult, error) {
	pl.buildPlans()
	if pl.rWins == len(pl.wins) {
		return pl.r, nil
	}
	r, err := pl.sims[pl.cur].steadyN(pl.plans, pl.iters)
	pl.r = r
	pl.rWins = -1
	if err == nil {
		pl.rWins = len(pl.wins)
	}
	return r, err
}

// add appends a window and indexes it, and the same window for every copy
// of its job when the planner mirrors copies.
func (pl *planner) add(w window) {
	pl.addOne(w)
	if pl.group == nil {
		return
	}
	for k, g := range pl.group {
		if k != int(w.job) && g == pl.group[w.job] {
			c := w
			c.job = int32(k)
			pl.addOne(c)
		}
	}
}

// addOne appends one window and indexes it.
func (pl *planner) addOne(w window) {
	w.undo = nil
	for _, a := range w.advance {
		for _, wi := range pl.byTensor[w.job][a.tensor] {
			sw := &pl.wins[wi]
			if sw.swap && sw.prev == a.prev && a.in < sw.in {
				w.undo = append(w.undo, undoIn{win: wi, in: sw.in})
				sw.in = a.in
			}
		}
	}
	w.unkeep = nil
	if len(w.keeps) > 0 && pl.keep == nil {
		pl.noKeeps()
	}
	for _, t := range w.keeps {
		if old := pl.keep[w.job][t]; old < w.next {
			w.unkeep = append(w.unkeep, undoKeep{tensor: t, until: old})
			pl.keep[w.job][t] = w.next
		}
	}
	w.unretime = nil
	for _, a := range w.retime {
		for _, wi := range pl.byTensor[w.job][a.tensor] {
			rw := &pl.wins[wi]
			if !rw.swap && rw.prev == a.prev && a.next < rw.next {
				w.unretime = append(w.unretime, undoRec{win: wi, next: rw.next})
				rw.next = a.next
			}
		}
	}
	idx := int32(len(pl.wins))
	pl.wins = append(pl.wins, w)
	pl.byTensor[w.job][w.tensor] = append(pl.byTensor[w.job][w.tensor], idx)
	for _, t := range w.temps {
		pl.byTemp[w.job][t] = append(pl.byTemp[w.job][t], idx)
	}
	for _, t := range w.pins {
		pl.pinned[w.job][t] = append(pl.pinned[w.job][t], w.next)
	}
}

// truncate removes every window from index n on.
func (pl *planner) truncate(n int) {
	for i := len(pl.wins) - 1; i >= n; i-- {
		w := &pl.wins[i]
		bt := pl.byTensor[w.job][w.tensor]
		pl.byTensor[w.job][w.tensor] = bt[:len(bt)-1]
		for _, t := range w.temps {
			bt := pl.byTemp[w.job][t]
			pl.byTemp[w.job][t] = bt[:len(bt)-1]
		}
		for k := len(w.pins) - 1; k >= 0; k-- {
			p := pl.pinned[w.job][w.pins[k]]
			pl.pinned[w.job][w.pins[k]] = p[:len(p)-1]
		}
		for k := len(w.undo) - 1; k >= 0; k-- {
			pl.wins[w.undo[k].win].in = w.undo[k].in
		}
		for k := len(w.unretime) - 1; k >= 0; k-- {
			pl.wins[w.unretime[k].win].next = w.unretime[k].next
		}
		for k := len(w.unkeep) - 1; k >= 0; k-- {
			pl.keep[w.job][w.unkeep[k].tensor] = w.unkeep[k].until
		}
	}
	pl.wins = pl.wins[:n]
	if n < pl.rWins {
		pl.rWins = -1
	}
}

// offBefore reports whether the plan keeps tensor t of job j off the device
// just before op x.
func (pl *planner) offBefore(j int, t int32, x int32) bool {
	for _, wi := range pl.byTensor[j][t] {
		if pl.wins[wi].offBefore(x) {
			return true
		}
	}
	return false
}

// pinsAllow reports whether window w keeps every pin of its tensor.
func (pl *planner) pinsAllow(w *window) bool {
	for _, x := range pl.pinned[w.job][w.tensor] {
		if w.offBefore(x) {
			return false
		}
	}
	return true
}

// candidate is a tensor resident at the peak and the gap around the peak.
type candidate struct {
	job, tensor int32
	prev, next  int32
	bytes       int64
}

// candidates lists the tensors resident at the peak that could leave the
// device around it, largest first.
func (pl *planner) candidates(r *simResult) []candidate {
	pl.res = pl.m.residentAt(r, pl.fIdx, pl.res)
	tp := pl.tp
	out := pl.candBuf[:0]
	for j, sj := range r.jobs {
		if pl.fJob >= 0 && j != pl.fJob {
			continue
		}
		ji := sj.info
		v := sj.view(tp) // the job's iteration in progress at the peak
		no := len(v.end)
		if no == 0 {
			continue
		}
		// done: ops ended by the peak (frees at tp come before allocations).
		done := sort.Search(no, func(i int) bool { return v.end[i] > tp })
		busy := int32(-1) // op in progress, or about to run after a recompute in progress
		if done < no && (v.start[done] <= tp || (v.recStart[done] >= 0 && v.recStart[done] <= tp)) {
			busy = int32(done)
		}
		var recIn []int // inputs of recomputes in progress before op busy
		if busy >= 0 && v.start[busy] > tp {
			for k := sj.recOff[busy]; k < sj.recOff[busy+1]; k++ {
				recIn = append(recIn, ji.g.Ops[sj.rec[k].producer].Inputs...)
			}
		}
	tensors:
		for t, in := range pl.res[j] {
			if !in {
				continue
			}
			for _, x := range recIn {
				if x == t {
					continue tensors
				}
			}
			acc := ji.accesses(t)
			if len(acc) == 0 {
				continue
			}
			k := sort.Search(len(acc), func(i int) bool { return int(acc[i]) >= done })
			var prev, next int32
			switch {
			case k < len(acc) && acc[k] == busy:
				continue
			case k > 0 && k < len(acc):
				prev, next = acc[k-1], acc[k]
			case ji.persistent[t]:
				prev, next = acc[len(acc)-1], acc[0]
			default:
				continue
			}
			if next > prev {
				// A recompute that reads the tensor before op x (a pin) is
				// an access too: the gap is between the accesses and pins
				// around the peak.
				pinned := false
				for _, x := range pl.pinned[j][t] {
					switch {
					case x == int32(done):
						pinned = true
					case x < int32(done) && x > prev:
						prev = x
					case x > int32(done) && x < next:
						next = x
					}
				}
				if pinned || next <= prev {
					continue
				}
			}
			if pl.hasWindow(j, int32(t), prev) {
				continue
			}
			out = append(out, candidate{job: int32(j), tensor: int32(t), prev: prev, next: next, bytes: ji.bytes[t]})
		}
	}
	// Largest first; ties in the order found (job, then tensor), which
	// makes the order total, so an unstable sort gives the stable order.
	// A step examines no more than maxExamined: select those, then sort.
	pl.candBuf = out[:0]
	if sorted, ok := pl.sortCandidates(out); ok {
		return sorted
	}
	if len(out) > maxExamined {
		selectFirst(out, maxExamined, cmpCandidates)
		out = out[:maxExamined]
	}
	slices.SortFunc(out, cmpCandidates)
	return out
}

// sortCandidates returns the first maxExamined of cands (listed by job,
// then tensor) under cmpCandidates, in that order, as candidates orders
// them: it sorts one integer per candidate, its bytes (largest first) and
// then its index in cands, which is its order by job and tensor. ok is
// false when bytes and index do not fit in 64 bits.
func (pl *planner) sortCandidates(cands []candidate) (sorted []candidate, ok bool) {
	ib := bits.Len(uint(len(cands)))
	var top int64
	for i := range cands {
		if cands[i].bytes < 0 {
			return nil, false
		}
		top = max(top, cands[i].bytes)
	}
	if bits.Len64(uint64(top))+ib > 64 {
		return nil, false
	}
	// The maxExamined least keys: a max-heap of them over the keys.
	keys := pl.keyBuf[:0]
	for i := range cands {
		k := uint64(top-cands[i].bytes)<<ib | uint64(i)
		if len(keys) < maxExamined {
			keys = append(keys, k)
			for c := len(keys) - 1; c > 0 && keys[(c-1)/2] < keys[c]; c = (c - 1) / 2 {
				keys[c], keys[(c-1)/2] = keys[(c-1)/2], keys[c]
			}
			continue
		}
		if k >= keys[0] {
			continue
		}
		keys[0] = k
		for p := 0; ; {
			c := 2*p + 1
			if c >= len(keys) {
				break
			}
			if c+1 < len(keys) && keys[c+1] > keys[c] {
				c++
			}
			if keys[p] >= keys[c] {
				break
			}
			keys[p], keys[c] = keys[c], keys[p]
			p = c
		}
	}
	slices.Sort(keys)
	pl.keyBuf = keys[:0]
	sorted = pl.sortBuf[:0]
	for _, k := range keys {
		sorted = append(sorted, cands[k&(1<<ib-1)])
	}
	pl.sortBuf = sorted[:0]
	return sorted, true
}

// cmpCandidates orders candidates largest first, then by job and tensor.
func cmpCandidates(a, b candidate) int {
	if c := cmp.Compare(b.bytes, a.bytes); c != 0 {
		return c
	}
	if c := cmp.Compare(a.job, b.job); c != 0 {
		return c
	}
	return cmp.Compare(a.tensor, b.tensor)
}

// selectFirst reorders x so that x[:k] holds its k first elements under
// the total order cmp (in no particular order): quickselect.
func selectFirst[T any](x []T, k int, cmp func(a, b T) int) {
	lo, hi := 0, len(x)-1
	for lo < hi {
		// Median of three as the pivot, moved to x[hi].
		mid := lo + (hi-lo)/2
		if cmp(x[mid], x[lo]) < 0 {
			x[mid], x[lo] = x[lo], x[mid]
		}
		if cmp(x[hi], x[lo]) < 0 {
			x[hi], x[lo] = x[lo], x[hi]
		}
		if cmp(x[mid], x[hi]) < 0 {
			x[mid], x[hi] = x[hi], x[mid]
		}
		p := lo
		for i := lo; i < hi; i++ {
			if cmp(x[i], x[hi]) < 0 {
				x[i], x[p] = x[p], x[i]
				p++
			}
		}
		x[p], x[hi] = x[hi], x[p]
		switch {
		case p == k || p == k-1:
			return
		case p < k:
			lo = p + 1
		default:
			hi = p - 1
		}
	}
}

func (pl *planner) hasWindow(j int, t, prev int32) bool {
	for _, wi := range pl.byTensor[j][t] {
		if pl.wins[wi].prev == prev {
			return true
		}
	}
	return false
}

// callAt is when actions after op b of a job's iteration v are issued
// (b = -1: the iteration start).
func callAt(v *iterTimes, b int32) float64 {
	if b < 0 {
		return v.base
	}
	return v.end[b]
}

// spanAfter is the index of the first span called after time c: a copy
// called at c runs after every span before it and before every span from it.
func spanAfter(sp []copySpan, c float64) int {
	return sort.Search(len(sp), func(i int) bool { return sp[i].issue > c })
}

// earliestFit finds the earliest op a in [lo, hi] whose end can issue a copy
// of d seconds that runs in an idle gap of the engine (delaying no planned
// copy) and ends by deadline. ix, when set, summarises sp: whole blocks of
// gaps too short for the copy, none of which ends the search at the
// deadline, are skipped.
func earliestFit(sp []copySpan, ends []float64, lo, hi int32, d, deadline float64, ix *spanIndex) (a int32, start float64, ok bool) {
	if lo > hi || lo < 0 {
		return -1, 0, false
	}
	cLo := ends[lo]
	for k := spanAfter(sp, cLo); k <= len(sp); k++ {
		if ix != nil && k > 0 && k%spanBlock == 0 {
			// In such a block every gap k has sp[k].start − sp[k-1].end
			// < d, so the test below (which subtracts no less) finds it
			// too short, and sp[k-1].end + d <= deadline, so it does not
			// stop there: the search goes on after the block.
			for b := k / spanBlock; k+spanBlock <= len(sp); b++ {
				if ix.ensure(k + spanBlock); ix.gapMax[b] >= d || ix.endMax[b]+d > deadline {
					break
				}
				k += spanBlock
			}
		}
		lower, gs := cLo, 0.0
		if k > 0 {
			lower = max(lower, sp[k-1].issue)
			gs = sp[k-1].end
		}
		if gs+d > deadline {
			return -1, 0, false
		}
		if k < len(sp) && sp[k].start-max(gs, lower) < d {
			continue // too short
		}
		b := lo + int32(sort.Search(int(hi-lo+1), func(i int) bool { return ends[lo+int32(i)] >= lower }))
		if b > hi {
			return -1, 0, false
		}
		c := ends[b]
		if k < len(sp) && c >= sp[k].issue {
			continue
		}
		st := max(c, gs)
		if st+d > deadline {
			return -1, 0, false
		}
		if k < len(sp) && st+d > sp[k].start {
			continue
		}
		return b, st, true
	}
	return -1, 0, false
}

// latestFit finds the latest op b in [lo, hi] (-1: iteration start) whose
// end can issue a copy of d seconds, ready no earlier than ready, that runs
// in an idle gap of the engine and ends by deadline, starting after
// notBefore.
//
// mono tells that the spans' starts never decrease (a FIFO engine's): then
// a gap too short for the copy even if it began at ready and ran to
// sp[k].start rules out every earlier gap too, and the search stops there
// with the answer the full scan would give.
func latestFit(sp []copySpan, v *iterTimes, lo, hi int32, ready, d, deadline, notBefore float64, mono bool) (b int32, start float64, ok bool) {
	if lo > hi {
		return -2, 0, false
	}
	cHi := min(deadline-d, callAt(v, hi))
	// largest op in [lo, hi] whose call time is <= x (or < x when strict).
	largest := func(x float64, strict bool) int32 {
		n := int(hi - lo + 1)
		i := sort.Search(n, func(i int) bool {
			c := callAt(v, lo+int32(i))
			if strict {
				return c >= x
			}
			return c > x
		})
		return lo + int32(i) - 1
	}
	for k := spanAfter(sp, cHi); k >= 0; k-- {
		gs := 0.0
		if k > 0 {
			gs = sp[k-1].end
		}
		if k < len(sp) && min(sp[k].start, deadline)-max(gs, ready) < d {
			if mono && sp[k].start-ready < d {
				// Every gap before it ends by sp[k].start and begins at
				// ready or later: all too short (rounding is monotone).
				return -2, 0, false
			}
			continue // too short
		}
		var x int32
		if k < len(sp) {
			x = largest(min(sp[k].issue, math.Nextafter(cHi, math.Inf(1))), true)
		} else {
			x = largest(cHi, false)
		}
		if x < lo {
			return -2, 0, false
		}
		c := callAt(v, x)
		if k > 0 && c < sp[k-1].issue {
			continue
		}
		st := max(max(c, ready), gs)
		if st <= notBefore {
			return -2, 0, false
		}
		lim := deadline
		if k < len(sp) && sp[k].start < lim {
			lim = sp[k].start
		}
		if st+d <= lim {
			return x, st, true
		}
	}
	return -2, 0, false
}

// packedFit finds the earliest op a in [lo, hi] whose end can issue a copy
// of d seconds in FIFO order that ends by deadline and pushes the planned
// copies after it back no further than deadline: the idle gaps of an engine
// busy with copies of tensors produced one after another are often each
// shorter than a copy, but together long enough. Copies that ended after
// deadline are never pushed. buf is scratch space, kept for the next call.
// ix, when set, summarises sp: when its spans' issue times never decrease,
// the span after each op end is found by walking on from the previous
// op's (the answer of spanAfter's binary search, unique on sorted spans);
// and a test whose outcome its lengths decide (far from the tie, see
// packMargin) is made without summing the lengths in packedFit's order.
func packedFit(buf *[]float64, sp []copySpan, ends []float64, lo, hi int32, d, deadline float64, ix *spanIndex) (a int32, start float64, ok bool) {
	if lo > hi || lo < 0 {
		return -1, 0, false
	}
	// In FIFO order a copy inserted before span k, ending at e, leaves
	// span m-1 ending at max(its end, e + the lengths of spans k..m-1), and
	// ends never decrease. sum[i-k0] is the length of spans k0..i-1,
	// summed when first needed.
	k0 := spanAfter(sp, ends[lo])
	m0 := k0 + sort.Search(len(sp)-k0, func(i int) bool { return sp[k0+i].end > deadline })
	sum := (*buf)[:0]
	sorted := ix != nil && ix.sorted()

	k, prev := k0, ends[lo]
	for b := lo; b <= hi; b++ {
		c := ends[b]
		if sorted && c >= prev {
			for k < len(sp) && sp[k].issue <= c {
				k++
			}
		} else {
			k = spanAfter(sp, c)
		}
		prev = c
		st := c
		if k > 0 {
			st = max(st, sp[k-1].end)
		}
		e := st + d
		if e > deadline {
			return -1, 0, false
		}
		// m: the first span from k that ends after deadline (never pushed).
		m := max(k, m0)
		last := e
		if m > k {
			if ix != nil {
				// last = max(sp[m-1].end, x) fits iff both are at most
				// lim; x is within packMargin of y.
				lim := deadline
				if m < len(sp) {
					lim = min(lim, sp[m].start)
				}
				if sp[m-1].end > lim {
					continue
				}
				ix.ensure(m)
				y, mg := e+(ix.pre[m]-ix.pre[k]), ix.packMargin(e, lim, m)
				if y+mg < lim {
					return b, st, true
				}
				if y-mg > lim {
					continue
				}
			}
			if len(sum) == 0 {
				sum = append(sum, 0)
				for i := k0; i < m0; i++ {
					sum = append(sum, sum[len(sum)-1]+sp[i].end-sp[i].start)
				}
				*buf = sum
			}
			last = max(sp[m-1].end, e+sum[m-k0]-sum[k-k0])
		}
		if last <= deadline && (m == len(sp) || last <= sp[m].start) {
			return b, st, true
		}
	}
	return -1, 0, false
}

// insertPushed adds a copy to an engine's spans in call order and pushes
// the later copies it overlaps back, as the FIFO engine runs them.
func insertPushed(sp []copySpan, s copySpan) []copySpan {
	k := spanAfter(sp, s.issue)
	sp = insertSpan(sp, s)
	for i := k + 1; i < len(sp) && sp[i].start < sp[i-1].end; i++ {
		dt := sp[i-1].end - sp[i].start
		sp[i].start += dt
		sp[i].end += dt
	}
	return sp
}

// queueAt places a copy issued after op b on the engine in FIFO order,
// allowing it to delay later copies; it returns the start and how long the
// next planned copy is pushed back.
func queueAt(sp []copySpan, v *iterTimes, b int32, ready, d float64) (start, push float64) {
	c := callAt(v, b)
	k := spanAfter(sp, c)
	start = max(c, ready)
	if k > 0 && sp[k-1].end > start {
		start = sp[k-1].end
	}
	if k < len(sp) && start+d > sp[k].start {
		push = start + d - sp[k].start
	}
	return start, push
}

// placed is a swap window with the copies it adds.
type placed struct {
	w       window
	out, in copySpan
	cost    float64
}

// engines are the copy engines' spans a batch of swaps is placed on (the
// accepted simulation's, with the batch's copies added), with what the
// searches for idle time may use: a summary of the D2H spans (see
// spanIndex, built when first asked for after a change) and h2dMono, that
// the H2D spans' starts never decrease (see latestFit). A simulation's
// engines run their copies in FIFO order, but copies can be issued while
// what they wait for is still in flight, so orders are checked, not
// assumed.
type engines struct {
	d2h, h2d []copySpan
	h2dMono  bool
	ix       *spanIndex // scratch space for the D2H summary
	ixOK     bool       // ix summarises d2h as it stands
}

// newEngines returns engines over d2h and h2d (not copied), their D2H
// summary to be built in ix.
func newEngines(d2h, h2d []copySpan, ix *spanIndex) engines {
	e := engines{d2h: d2h, h2d: h2d, h2dMono: true, ix: ix}
	for i := 1; i < len(h2d) && e.h2dMono; i++ {
		e.h2dMono = h2d[i-1].start <= h2d[i].start
	}
	return e
}

// rEngines returns the accepted simulation's engines (not copied).
func (pl *planner) rEngines() engines { return newEngines(pl.r.d2h, pl.r.h2d, &pl.ix[0]) }

// localEngines returns a copy of the accepted simulation's engines that a
// batch of swaps is placed on (valid until the next call).
func (pl *planner) localEngines() engines {
	return newEngines(append(pl.d2hBuf[:0], pl.r.d2h...), append(pl.h2dBuf[:0], pl.r.h2d...), &pl.ix[1])
}

// d2hIndex returns the summary of the D2H spans as they stand (built
// on demand as the searches ask for it).
func (e *engines) d2hIndex() *spanIndex {
	if !e.ixOK {
		e.ix.reset(e.d2h)
		e.ixOK = true
	}
	return e.ix
}

// place adds the copies of swap pw to the engines, as insertPushed and
// insertSpan do, and updates what they know of them.
func (e *engines) place(pw *placed) {
	k := spanAfter(e.d2h, pw.out.issue)
	e.d2h = insertPushed(e.d2h, pw.out)
	if e.ixOK {
		e.ix.moved(e.d2h, k)
	}
	k = spanAfter(e.h2d, pw.in.issue)
	e.h2d = insertSpan(e.h2d, pw.in)
	if e.h2dMono {
		e.h2dMono = (k == 0 || e.h2d[k-1].start <= pw.in.start) && (k+1 == len(e.h2d) || pw.in.start <= e.h2d[k+1].start)
	}
}

// spanBlock is how many gaps spanIndex summarises together.
const spanBlock = 16

// spanIndex summarises an engine's spans for earliestFit and packedFit,
// which scan them for every candidate of a greedy step; they only use it
// to skip work whose outcome it decides, and answer as without it. It
// covers the first valid spans, extended as the searches ask (ensure),
// so that placing a copy costs only the summary of the spans from it on.
type spanIndex struct {
	sp []copySpan
	// order: 0 not yet known, 1 the spans' issue times never decrease
	// (so spanAfter's answer, unique then, can be found by walking on),
	// 2 they do somewhere.
	order uint8
	valid int
	// pre[i] is the length of spans 0..i-1 summed in order, and top[i]
	// the largest |start| or |end| among them (see packMargin).
	pre, top []float64
	// gapMax[b] and endMax[b] are, over the gaps k of block b (k in
	// [b*spanBlock, (b+1)*spanBlock), 0 < k), the longest idle gap
	// sp[k].start − sp[k-1].end and the latest sp[k-1].end; a block is
	// complete when valid >= (b+1)*spanBlock.
	gapMax, endMax []float64
}

// reset makes ix summarise sp, none of it yet.
func (ix *spanIndex) reset(sp []copySpan) {
	ix.sp, ix.order, ix.valid = sp, 0, 0
	ix.pre, ix.top = append(ix.pre[:0], 0), append(ix.top[:0], 0)
	ix.gapMax, ix.endMax = ix.gapMax[:0], ix.endMax[:0]
}

// sorted reports whether the spans' issue times never decrease.
func (ix *spanIndex) sorted() bool {
	if ix.order == 0 {
		ix.order = 1
		for i := 1; i < len(ix.sp); i++ {
			if ix.sp[i-1].issue > ix.sp[i].issue {
				ix.order = 2
				break
			}
		}
	}
	return ix.order == 1
}

// moved makes ix summarise sp, which holds its spans with one inserted at
// index k, those after it possibly pushed back. Inserting a span where
// spanAfter puts it keeps sorted issue times sorted (and an inversion
// stays one); the summary of the spans before k still holds.
func (ix *spanIndex) moved(sp []copySpan, k int) {
	ix.sp = sp
	ix.valid = min(ix.valid, k) / spanBlock * spanBlock
	ix.pre, ix.top = ix.pre[:ix.valid+1], ix.top[:ix.valid+1]
	ix.gapMax, ix.endMax = ix.gapMax[:ix.valid/spanBlock], ix.endMax[:ix.valid/spanBlock]
}

// ensure extends the summary to the first i spans (at most all).
func (ix *spanIndex) ensure(i int) {
	sp := ix.sp
	for i = min(i, len(sp)); ix.valid < i; ix.valid++ {
		k := ix.valid
		s := &sp[k]
		ix.pre = append(ix.pre, ix.pre[k]+(s.end-s.start))
		ix.top = append(ix.top, max(ix.top[k], math.Abs(s.end), math.Abs(s.start)))
		b := k / spanBlock
		if k%spanBlock == 0 {
			ix.gapMax, ix.endMax = append(ix.gapMax, math.Inf(-1)), append(ix.endMax, math.Inf(-1))
		}
		if k > 0 {
			ix.gapMax[b] = max(ix.gapMax[b], s.start-sp[k-1].end)
			ix.endMax[b] = max(ix.endMax[b], sp[k-1].end)
		}
	}
}

// packMargin bounds how far apart two evaluations of e + (the length of
// spans k..m-1) can be (k <= m, the summary covering m spans), one
// summing the lengths from spans k0 <= k on in order as packedFit does,
// the other from ix.pre, both against the exact sum: each of the at most
// m additions of either rounds by at most a few units in the last place
// of the sums and span ends, the final ones of |e| and |lim|. It is taken
// several times over, so that comparing with it in floating point cannot
// decide wrong. It assumes no span is shorter than zero (every copy ends at
// its start plus bytes over bandwidth): with lengths of both signs the
// partial sums cancel and their rounding can exceed it.
func (ix *spanIndex) packMargin(e, lim float64, m int) float64 {
	const u = 0x1p-53
	return (16*float64(m+1) + 64) * u * (math.Abs(e) + math.Abs(lim) + 4*(math.Abs(ix.pre[m])+ix.top[m]))
}

// swapWindow tries to place a swap for candidate c that keeps the tensor
// off the device at the peak. The swap-out must run in an idle gap of the
// D2H engine and end before the peak. With queue false the swap-in must run
// in an idle gap of the H2D engine and end before the next access (a free
// swap); with queue true it is issued as early as possible after the peak
// in FIFO order and cost is the predicted wait of the next access plus the
// delay of the next planned copy.
func (pl *planner) swapWindow(c candidate, en *engines, queue bool) (pw placed, ok bool) {
	d2h, h2d := en.d2h, en.h2d
	r := pl.r
	tp := pl.tp
	v := r.jobs[c.job].view(tp)
	p := pl.m.p
	dOut := p.D2HSeconds(c.bytes)
	dIn := p.H2DSeconds(c.bytes)
	no := int32(len(v.end))
	wrap := c.next <= c.prev
	peakAfterLast := wrap && tp >= v.end[c.prev]
	// Swap-out: the earliest op end at or after prev with a free D2H slot.
	hi := c.next - 1
	if wrap {
		hi = no - 1
	}
	deadline := tp
	if wrap && !peakAfterLast {
		// The swap-out issued at the end of the previous iteration must end
		// before the peak: placed on this iteration's timeline, by the peak
		// shifted one iteration on. A free swap must also end before the
		// copies issued at the next iteration's start (this iteration's,
		// shifted); a queued one may delay them (the cost is measured).
		deadline = tp + v.lastEnd - v.base
		if k := sort.Search(len(d2h), func(i int) bool { return d2h[i].start >= v.base }); !queue && k < len(d2h) {
			deadline = min(deadline, v.lastEnd+d2h[k].start-v.base)
		}
	}
	out, outStart, ok := earliestFit(d2h, v.end, c.prev, hi, dOut, deadline, en.d2hIndex())
	if !ok && !wrap && pl.packOut {
		out, outStart, ok = packedFit(&pl.sumBuf, d2h, v.end, c.prev, hi, dOut, deadline, en.d2hIndex())
	}
	if !ok {
		return pw, false
	}
	outEnd := outStart + dOut
	// Swap-in: back before next, after the peak.
	lo := out
	readyMin := outEnd
	notBefore := tp
	if wrap {
		// The swap-in runs in the next iteration: placed on this one's
		// timeline, shifted back by one iteration.
		lo, readyMin = -1, v.base
		if outEnd > v.lastEnd {
			readyMin = v.base + outEnd - v.lastEnd
		}
		if peakAfterLast {
			notBefore = -1
		}
	}
	if d := int32(sort.Search(int(no), func(i int) bool { return v.end[i] > tp })) - 1; notBefore >= 0 && d > lo {
		lo = d
	}
	need := v.start[c.next]
	var in int32
	var inStart, cost float64
	if !queue {
		in, inStart, ok = latestFit(h2d, v, lo, c.next-1, readyMin, dIn, need, notBefore, en.h2dMono)
		if !ok {
			return pw, false
		}
	} else {
		in = -2
		for b := lo; b < c.next; b++ {
			st, push := queueAt(h2d, v, b, readyMin, dIn)
			if st <= notBefore {
				continue
			}
			in, inStart = b, st
			cost = max(0, st+dIn-need) + push
			break
		}
		if in < -1 || cost <= 0 {
			return pw, false
		}
	}
	pw.w = window{job: c.job, tensor: c.tensor, prev: c.prev, next: c.next, swap: true, out: out, in: in}
	if !pl.pinsAllow(&pw.w) {
		return pw, false
	}
	pw.out = copySpan{issue: v.end[out], start: outStart, end: outEnd, job: c.job, tensor: c.tensor}
	pw.in = copySpan{issue: callAt(v, in), start: inStart, end: inStart + dIn, job: c.job, tensor: c.tensor}
	pw.cost = cost
	return pw, true
}

// insertSpan adds a copy to an engine's spans in call order.
func insertSpan(sp []copySpan, s copySpan) []copySpan {
	k := spanAfter(sp, s.issue)
	sp = append(sp, copySpan{})
	copy(sp[k+1:], sp[k:])
	sp[k] = s
	return sp
}

// maxChain bounds how many ops a recompute may re-run to bring back a
// tensor whose producer's inputs are gone.
const maxChain = 4

// recomputeWindow tries to drop candidate c after its previous access and
// recompute it before its next one. cost is the compute time added.
func (pl *planner) recomputeWindow(c candidate) (w window, cost float64, ok bool) {
	cost, ok = pl.recomputeCost(c)
	if !ok {
		return w, 0, false
	}
	ch := &pl.chain
	w = window{job: c.job, tensor: c.tensor, prev: c.prev, next: c.next, out: c.prev,
		temps: owned(ch.temps), pins: owned(ch.pins), advance: owned(ch.adv), retime: owned(ch.ret), keeps: owned(ch.keeps)}
	return w, cost, true
}

// owned returns a copy of s, nil when s is empty.
func owned[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// recomputeChain is what recomputeCost finds of a recompute window's
// chain, in scratch space the next call reuses (recomputeWindow copies
// it into the window): the tensors seen so far (a chain reads a few, so a
// list is cheaper than a map) and the window's lists.
type recomputeChain struct {
	c                        candidate
	j                        int
	ji                       *jobInfo
	keptBytes                int64
	cost                     float64
	seen, temps, pins, keeps []int32
	adv                      []advanceIn
	ret                      []retimeRec
}

// recomputeCost is recomputeWindow's cost and answer without the window
// (its lists are left in pl.chain): for callers that only rank options.
func (pl *planner) recomputeCost(c candidate) (cost float64, ok bool) {
	j := int(c.job)
	ji := pl.m.jobs[j]
	if c.next <= c.prev || !pl.recomputable(ji, c.tensor) {
		return 0, false
	}
	ch := &pl.chain
	ch.c, ch.j, ch.ji, ch.keptBytes = c, j, ji, 0
	ch.seen = append(ch.seen[:0], c.tensor)
	ch.temps, ch.pins, ch.keeps, ch.adv, ch.ret = ch.temps[:0], ch.pins[:0], ch.keeps[:0], ch.adv[:0], ch.ret[:0]
	ch.cost = ji.dur[ji.def[c.tensor]]
	if !pl.need(ch, c.tensor, 1) {
		return 0, false
	}
	w := window{job: c.job, tensor: c.tensor, prev: c.prev, next: c.next, out: c.prev}
	if !pl.pinsAllow(&w) {
		return 0, false
	}
	return ch.cost, true
}

// need reports whether re-running tensor t's producer just before the
// recompute point can rebuild it (depth: its place in the chain), adding
// to ch what that takes.
func (pl *planner) need(ch *recomputeChain, t int32, depth int) bool {
	j, ji, c := ch.j, ch.ji, &ch.c
	if q := ji.def[t]; !rerunsSame(&ji.g.Ops[q], q, c.next, ji.writtenIn) {
		return false
	}
	for _, in := range ji.g.Ops[ji.def[t]].Inputs {
		i := int32(in)
		if slices.Contains(ch.seen, i) {
			continue
		}
		ch.seen = append(ch.seen, i)
		if pl.availableBefore(j, i, c.next) {
			ch.pins = append(ch.pins, i)
			continue
		}
		if a, ok := pl.advanceSource(j, i, c.next); ok {
			// Swapped out across the recompute point: swap it back in
			// before it (a cheap recompute from an expensive source).
			ch.adv = append(ch.adv, a)
			ch.pins = append(ch.pins, i)
			continue
		}
		if pl.retime {
			if rw := pl.retimeSource(j, i, c.next); rw != nil {
				// Dropped across the recompute point and recomputed
				// later: recompute it here instead and keep it (its
				// sources must then be resident here).
				ch.ret = append(ch.ret, retimeRec{tensor: i, prev: rw.prev, next: c.next})
				ch.pins = append(ch.pins, i)
				ch.pins = append(ch.pins, rw.pins...)
				continue
			}
		}
		if b := ji.bytes[i]; pl.keepSources && pl.keepable(j, i, c.next) && (ch.keptBytes+b)*keepRatio <= c.bytes {
			// Freed before the recompute point but small: keep it.
			ch.keptBytes += b
			ch.keeps = append(ch.keeps, i)
			ch.pins = append(ch.pins, i)
			continue
		}
		if depth >= maxChain || !pl.recomputable(ji, i) || pl.swappedBefore(j, i, c.next) {
			return false
		}
		if !pl.need(ch, i, depth+1) {
			return false
		}
		ch.temps = append(ch.temps, i)
		ch.cost += ji.dur[ji.def[i]]
	}
	return true
}

// advanceSource finds the swap window that keeps tensor t of job j off the
// device before op x and an earlier swap-in for it: issued after the
// latest op whose end leaves the copy time before op x starts (on the
// timeline of the iteration at the peak), and after its swap-out.
func (pl *planner) advanceSource(j int, t int32, x int32) (advanceIn, bool) {
	ji := pl.m.jobs[j]
	if !ji.persistent[t] && (ji.last[t] < x || (ji.def[t] >= 0 && ji.def[t] >= x)) {
		return advanceIn{}, false
	}
	for _, wi := range pl.byTensor[j][t] {
		w := &pl.wins[wi]
		if !w.swap || !w.offBefore(x) {
			continue
		}
		// The earliest the swap-in may be issued: after the swap-out, or,
		// for a window across the iteration boundary (params and optimizer
		// state) that is still off at x, from the iteration start.
		lower := w.out + 1
		if w.wraps() {
			if x > w.out {
				return advanceIn{}, false // swapped out again before x
			}
			lower = -1
		}
		v := pl.r.jobs[j].view(pl.tp)
		need := v.start[x] - pl.m.p.H2DSeconds(ji.bytes[t])
		b := int32(sort.Search(int(x), func(i int) bool { return v.end[i] > need })) - 1
		if b < lower {
			b = lower
		}
		if b >= x {
			return advanceIn{}, false
		}
		return advanceIn{tensor: t, prev: w.prev, in: b}, true
	}
	return advanceIn{}, false
}

// retimeSource finds the recompute window that keeps tensor t of job j off
// the device before op x and brings it back after x, when its recompute can
// move to just before x: it moves no swap-in, every tensor it reads is
// resident then, and no other recompute rebuilds t as a temporary (and
// drops it again) in between.
func (pl *planner) retimeSource(j int, t int32, x int32) *window {
	for _, wi := range pl.byTensor[j][t] {
		w := &pl.wins[wi]
		if w.swap || !w.offBefore(x) || len(w.advance) > 0 {
			continue
		}
		for _, p := range w.pins {
			if !pl.availableBefore(j, p, x) {
				return nil
			}
		}
		for _, k := range pl.byTemp[j][t] {
			if o := &pl.wins[k]; !o.swap && o.next >= x && o.next < w.next {
				return nil
			}
		}
		return w
	}
	return nil
}

// recomputable reports whether tensor t can be brought back by re-running
// its producer: produced once, by a forward or backward op that updates no
// persistent tensor in place.
func (pl *planner) recomputable(ji *jobInfo, t int32) bool {
	if ji.persistent[t] || ji.def[t] < 0 || ji.writers[t] != 1 {
		return false
	}
	op := &ji.g.Ops[ji.def[t]]
	if op.Phase == workload.Optimizer {
		return false
	}
	for _, o := range op.Outputs {
		if ji.persistent[o] {
			return false
		}
	}
	for _, i := range op.Inputs {
		if int32(i) == t {
			return false
		}
	}
	return true
}

// rerunsSame reports whether re-running op (op q of its graph) just before
// op x writes what q wrote: no op from q up to x writes one of q's inputs
// (the optimizer updating a parameter the op reads, an in-place update of
// an activation), and none after q overwrites one of its outputs, which the
// re-run would undo. writtenIn(t, from, to) reports whether an op in
// [from, to) writes tensor t. The planner asks through its access index
// (jobInfo.writtenIn), the baselines by scanning the graph (rerunsIn).
func rerunsSame(op *workload.Op, q, x int32, writtenIn func(t, from, to int32) bool) bool {
	for _, t := range op.Inputs {
		if writtenIn(int32(t), q, x) {
			return false
		}
	}
	for _, t := range op.Outputs {
		if writtenIn(int32(t), q+1, x) {
			return false
		}
	}
	return true
}

// writtenIn reports whether an op in [from, to) writes tensor t.
func (ji *jobInfo) writtenIn(t, from, to int32) bool {
	if ji.writers[t] == 0 || ji.writers[t] == 1 && ji.def[t] >= 0 && ji.def[t] < from {
		return false
	}
	acc := ji.accesses(int(t))
	for _, i := range acc[sort.Search(len(acc), func(k int) bool { return acc[k] >= from }):] {
		if i >= to {
			break
		}
		if slices.Contains(ji.g.Ops[i].Outputs, int(t)) {
			return true
		}
	}
	return false
}

// availableBefore reports whether tensor t of job j is resident, unchanged
// since its producer ran, just before op x.
func (pl *planner) availableBefore(j int, t int32, x int32) bool {
	ji := pl.m.jobs[j]
	if !ji.persistent[t] {
		if ji.last[t] < x && (pl.keep == nil || pl.keep[j][t] < x) {
			return false // freed
		}
		if ji.def[t] >= 0 && ji.def[t] >= x {
			return false
		}
	}
	return !pl.offBefore(j, t, x)
}

func (pl *planner) swappedBefore(j int, t int32, x int32) bool {
	for _, wi := range pl.byTensor[j][t] {
		w := &pl.wins[wi]
		if w.swap && w.offBefore(x) {
			return true
		}
	}
	return false
}

// copies is how many identical windows adding one for job j adds (1 unless
// copies are mirrored): a recompute in every copy costs each of them that
// many times its time on the shared compute engine.
func (pl *planner) copies(j int32) float64 {
	if pl.groupSize == nil {
		return 1
	}
	return float64(pl.groupSize[j])
}

// setGroups makes the planner mirror windows between copies of a job.
func (pl *planner) setGroups(jobs []Job) {
	pl.group = make([]int, len(jobs))
	pl.groupSize = make([]int, len(jobs))
	for j := range jobs {
		pl.group[j] = j
		for k := 0; k < j; k++ {
			if sameJob(&jobs[k], &jobs[j]) {
				pl.group[j] = k
				break
			}
		}
		pl.groupSize[pl.group[j]]++
	}
	for j := range jobs {
		pl.groupSize[j] = pl.groupSize[pl.group[j]]
	}
}

// sameJob reports whether two jobs are copies: the same graph (by
// fingerprint), op times and budget.
func sameJob(a, b *Job) bool {
	if a.Budget != b.Budget || !slices.Equal(a.Seconds, b.Seconds) {
		return false
	}
	return a.Graph == b.Graph || graphFingerprint(a.Graph) == graphFingerprint(b.Graph)
}

// maxFailures is how many steps in a row may fail (every option they tried
// is then marked bad, so the next step tries others) before the greedy
// stops: 4 for one job; none over a whole run of several jobs, whose
// simulations cost a run of jointHorizon iterations each.
func (pl *planner) maxFailures() int {
	if pl.wholeRun {
		return 0
	}
	return 4
}

// maxExamined bounds how many of the largest candidates a step examines.
const maxExamined = 256

// option is one way to cut the peak, with its predicted time cost.
type option struct {
	c     candidate
	swap  bool
	cost  float64
	ratio float64 // bytes per second of cost
}

// acceptance is what a greedy step keeps: no more excess (peak, or
// overshoot of the budgets) than maxExcess and no job slower than maxSlow
// (see planner.slow).
type acceptance struct {
	maxExcess int64
	maxSlow   float64
}

func (pl *planner) accepts(a acceptance, r *simResult) bool {
	return pl.excess(r) <= a.maxExcess && pl.slow(r) <= a.maxSlow
}

// abortFor tells a simulation what a rejects, so that it stops as soon as
// its result is certain to be rejected: a job already slower than
// a.maxSlow, or (target b over a whole run, where the excess is the
// device's high-water mark) a device level above a.maxExcess. A stopped
// run costs a fraction of a whole one; the greedy rejects most trials.
func (pl *planner) abortFor(a acceptance) simAbort {
	ab := simAbort{wholeRun: pl.wholeRun}
	if !math.IsInf(a.maxSlow, 1) && len(pl.ref) == len(pl.m.jobs) {
		ab.ref, ab.maxSlow = pl.ref, a.maxSlow
	}
	if pl.wholeRun && !pl.budgeted() {
		ab.peak = a.maxExcess
	}
	return ab
}

// commit simulates the windows added since index n on the spare simulator
// and keeps them when a accepts the result; otherwise it removes them.
func (pl *planner) commit(n int, a acceptance) bool {
	pl.buildPlans()
	spare := 1 - pl.cur
	sim := &pl.sims[spare]
	sim.abort = pl.abortFor(a)
	r, err := sim.steadyN(pl.plans, pl.iters)
	sim.abort = simAbort{}
	if err == nil && pl.accepts(a, r) {
		pl.cur, pl.r, pl.rWins = spare, r, len(pl.wins)
		return true
	}
	pl.truncate(n)
	return false
}

// freeSwaps adds swaps that fit idle copy-engine time for the largest
// candidates, until they free goal bytes at the peak.
func (pl *planner) freeSwaps(cands []candidate, goal int64, accept acceptance) bool {
	en := pl.localEngines()
	n := len(pl.wins)
	var got int64
	var added []candidate
	order := cands
	if pl.dearFirst {
		order = pl.swapOrder(cands)
	}
	for i, c := range order {
		if i >= maxExamined {
			break
		}
		if pl.bad[badKey{c.job, c.tensor, c.prev, true}] {
			continue
		}
		pw, ok := pl.swapWindow(c, &en, false)
		if !ok {
			continue
		}
		pl.add(pw.w)
		en.place(&pw)
		added = append(added, c)
		if got += c.bytes; got >= goal {
			break
		}
	}
	pl.d2hBuf, pl.h2dBuf = en.d2h[:0], en.h2d[:0]
	if len(added) == 0 {
		return false
	}
	if pl.commit(n, accept) {
		return true
	}
	if len(added) == 1 {
		c := added[0]
		pl.bad[badKey{c.job, c.tensor, c.prev, true}] = true
		return false
	}
	// Something in the batch interfered: one at a time.
	for i, c := range added {
		if i >= 4 {
			break
		}
		re := pl.rEngines()
		pw, ok := pl.swapWindow(c, &re, false)
		if ok {
			pl.add(pw.w)
			if pl.commit(n, accept) {
				return true
			}
		}
		pl.bad[badKey{c.job, c.tensor, c.prev, true}] = true
	}
	return false
}

// swapOrder orders the candidates for free swaps: the copy engines' idle
// time is limited, so it goes first to the tensors that are the dearest to
// recompute per byte (those that cannot be recomputed first), largest
// first among equals, leaving the cheap ones (the outputs of BN, ReLU,
// adds, pooling, concatenations) to recomputation.
func (pl *planner) swapOrder(cands []candidate) []candidate {
	n := min(len(cands), maxExamined)
	ks := pl.dearBuf[:0]
	for _, c := range cands[:n] {
		if pl.bad[badKey{c.job, c.tensor, c.prev, true}] {
			continue // freeSwaps skips it
		}
		k := dearCand{c: c, dear: math.Inf(1)}
		if pl.recomputable(pl.m.jobs[c.job], c.tensor) && c.bytes > 0 {
			if cost, ok := pl.recomputeCost(c); ok {
				k.dear = cost / float64(c.bytes)
			}
		}
		ks = append(ks, k)
	}
	// Stable: candidates come largest first.
	slices.SortStableFunc(ks, func(a, b dearCand) int { return cmp.Compare(b.dear, a.dear) })
	out := pl.orderBuf[:0]
	for i := range ks {
		out = append(out, ks[i].c)
	}
	pl.dearBuf, pl.orderBuf = ks[:0], out[:0]
	return out
}

// dearCand is a candidate with its recompute seconds per byte (+Inf: not
// recomputable), as swapOrder orders them.
type dearCand struct {
	c    candidate
	dear float64
}

// costlyCuts adds the options that free the most bytes per second of added
// time (recomputes, or swaps whose swap-in makes an op wait), within the
// time left before limit, until they free goal bytes at the peak.
func (pl *planner) costlyCuts(cands []candidate, goal int64, slack float64, accept acceptance) bool {
	var opts []option
	re := pl.rEngines()
	for i, c := range cands {
		if i >= maxExamined {
			break
		}
		if !pl.bad[badKey{c.job, c.tensor, c.prev, false}] {
			if cost, ok := pl.recomputeCost(c); ok {
				cost *= pl.copies(c.job)
				opts = append(opts, option{c: c, cost: cost, ratio: float64(c.bytes) / max(cost, 1e-12)})
			}
		}
		if !pl.bad[badKey{c.job, c.tensor, c.prev, true}] {
			if pw, ok := pl.swapWindow(c, &re, true); ok {
				cost := pw.cost * pl.copies(c.job)
				opts = append(opts, option{c: c, swap: true, cost: cost, ratio: float64(c.bytes) / max(cost, 1e-12)})
			}
		}
	}
	if len(opts) == 0 {
		return false
	}
	sort.SliceStable(opts, func(a, b int) bool { return opts[a].ratio > opts[b].ratio })
	// A batch, re-validated against the windows added before it.
	n := len(pl.wins)
	var got int64
	var spent float64
	used := map[int64]bool{}
	var batch []option
	en := pl.localEngines()
	for _, o := range opts {
		key := int64(o.c.job)<<32 | int64(o.c.tensor)
		if used[key] || spent+o.cost > slack {
			continue
		}
		if o.swap {
			pw, ok := pl.swapWindow(o.c, &en, true)
			if !ok {
				continue
			}
			pl.add(pw.w)
			en.place(&pw)
		} else {
			w, _, ok := pl.recomputeWindow(o.c)
			if !ok {
				continue
			}
			pl.add(w)
		}
		used[key] = true
		batch = append(batch, o)
		spent += o.cost
		if got += o.c.bytes; got >= goal {
			break
		}
	}
	pl.d2hBuf, pl.h2dBuf = en.d2h[:0], en.h2d[:0]
	if len(batch) > 0 && pl.commit(n, accept) {
		return true
	}
	if len(batch) == 1 {
		o := batch[0]
		pl.bad[badKey{o.c.job, o.c.tensor, o.c.prev, o.swap}] = true
		return false
	}
	// One at a time, best first.
	tries := 0
	for _, o := range opts {
		if tries >= 8 {
			break
		}
		if o.cost > slack {
			continue
		}
		tries++
		var w window
		ok := false
		if o.swap {
			var pw placed
			re := pl.rEngines()
			pw, ok = pl.swapWindow(o.c, &re, true)
			w = pw.w
		} else {
			w, _, ok = pl.recomputeWindow(o.c)
		}
		if ok {
			pl.add(w)
			if pl.commit(n, accept) {
				return true
			}
		}
		pl.bad[badKey{o.c.job, o.c.tensor, o.c.prev, o.swap}] = true
	}
	return false
}

// lateMoves is the greedy's last resort at a peak that neither free nor
// costly cuts lower (the copy engines are too busy around it), while the
// time limit leaves room: moves that make an op wait for a copy instead.
//   - A swapped tensor back on the device at the peak though not needed
//     until later (its swap-in came early, behind the copies before it) is
//     swapped in when the op at the peak completes, or when the op just
//     before its next use does: that use waits for the copy.
//   - A swapped tensor still on the device at the peak because its
//     swap-out has not ended makes the op at the peak wait for the copy
//     (the job's last op, when the copy runs into the next iteration).
//   - A candidate that no swap fits is swapped out after its last access
//     with the op at the peak waiting for the copy, and back in at the
//     iteration start (across iterations) or after the peak.
//
// It keeps the first kind of move that, all of it at once, lowers the
// excess within the time limit, or failing that the first single move
// that does, largest tensor first.
func (pl *planner) lateMoves(r *simResult, cands []candidate, accept acceptance) bool {
	type move struct {
		win   int    // window to change (-1: add w)
		in    int32  // new swap-in point (when sync is 0)
		sync  int32  // new window.sync (0: a swap-in move)
		w     window // the window to add (win -1)
		bytes int64
	}
	// The kinds of move, tried in this order.
	const (
		inAfterPeak   = iota // a swap-in issued when the op at the peak completes
		syncOut              // an op waits for a swap-out still in flight
		inBeforeUse          // a swap-in issued just before the next use
		newSyncedSwap        // a new swap-out the op at the peak waits for
		kinds
	)
	pl.res = pl.m.residentAt(r, pl.fIdx, pl.res)
	moves := make([][]move, kinds)
	done := make([]int32, len(r.jobs)) // per job: the op at the peak (-1: none)
	for j, sj := range r.jobs {
		done[j] = -1
		if pl.fJob >= 0 && j != pl.fJob {
			continue
		}
		v := sj.view(pl.tp)
		no := len(v.end)
		if no == 0 {
			continue
		}
		d := int32(sort.Search(no, func(i int) bool { return v.end[i] > pl.tp }))
		if d >= int32(no) {
			continue
		}
		done[j] = d
		for t, in := range pl.res[j] {
			if !in {
				continue
			}
			b := pl.m.jobs[j].bytes[t]
			for _, wi := range pl.byTensor[j][t] {
				w := &pl.wins[wi]
				if !w.swap {
					continue
				}
				if w.sync == 0 && w.offBefore(d) {
					at := d
					if w.out >= d {
						at = int32(no) - 1
					}
					if at > w.out {
						moves[syncOut] = append(moves[syncOut], move{win: int(wi), sync: at + 1, bytes: b})
					}
					continue
				}
				if w.in >= d || w.next <= d || !w.wraps() && w.in < w.out {
					continue
				}
				delay := func(kind int, in int32) {
					c := *w
					c.in = in
					if pl.pinsAllow(&c) {
						moves[kind] = append(moves[kind], move{win: int(wi), in: in, bytes: b})
					}
				}
				delay(inAfterPeak, d)
				if w.next-1 > d {
					delay(inBeforeUse, w.next-1)
				}
			}
		}
	}
	for _, c := range cands {
		d := done[c.job]
		if d < 0 || c.prev >= d || c.bytes == 0 {
			continue
		}
		w := window{job: c.job, tensor: c.tensor, prev: c.prev, next: c.next, swap: true, out: c.prev, in: d, sync: d + 1}
		if c.next <= c.prev {
			w.in = -1
		}
		if w.in < c.next && pl.pinsAllow(&w) {
			moves[newSyncedSwap] = append(moves[newSyncedSwap], move{win: -1, w: w, bytes: c.bytes})
		}
	}
	n := len(pl.wins)
	rw := pl.rWins
	try := func(ms []move) bool {
		old := make([]window, len(ms))
		for k, m := range ms {
			if m.win < 0 {
				pl.add(m.w)
				continue
			}
			w := &pl.wins[m.win]
			old[k] = *w
			if m.sync > 0 {
				w.sync = m.sync
			} else {
				w.in = m.in
			}
		}
		pl.rWins = -1
		if pl.commit(n, accept) {
			return true
		}
		for k, m := range ms {
			if m.win >= 0 {
				pl.wins[m.win].in, pl.wins[m.win].sync = old[k].in, old[k].sync
			}
		}
		pl.rWins = rw
		return false
	}
	for _, ms := range moves {
		if len(ms) > 0 && try(ms) {
			return true
		}
	}
	for _, ms := range moves {
		if len(ms) < 2 {
			continue // tried as its batch
		}
		slices.SortStableFunc(ms, func(a, b move) int { return cmp.Compare(b.bytes, a.bytes) })
		for k := range min(len(ms), 4) {
			if try(ms[k : k+1]) {
				return true
			}
		}
	}
	return false
}

// budgeted reports whether the planner fits budgets (target a) rather
// than minimising the peak within a time tolerance (target b).
func (pl *planner) budgeted() bool {
	if pl.target.Budget > 0 {
		return true
	}
	for _, b := range pl.jobBudget {
		if b > 0 {
			return true
		}
	}
	return false
}

// excess is how far r is over the budgets (target a), or its peak (target b).
func (pl *planner) excess(r *simResult) int64 {
	if !pl.budgeted() {
		if pl.wholeRun {
			return max(r.peak, r.firstPeak)
		}
		return r.peak
	}
	var e int64
	if pk := max(r.peak, r.firstPeak); pl.target.Budget > 0 && pk > pl.target.Budget {
		e += pk - pl.target.Budget
	}
	for j, b := range pl.jobBudget {
		if pk := max(r.jobs[j].peak, r.firstJobPeak[j]); b > 0 && pk > b {
			e += pk - b
		}
	}
	return e
}

// focus picks the peak to cut in r and how many bytes to free there;
// ok is false when every budget is met.
func (pl *planner) focus(r *simResult) (goal int64, ok bool) {
	if pl.target.Budget > 0 && max(r.peak, r.firstPeak) > pl.target.Budget || !pl.budgeted() {
		pl.fIdx, pl.tp, pl.fJob = r.peakIdx, r.peakTime, -1
		if r.firstPeak > r.peak && (pl.wholeRun || pl.target.Budget > 0 && r.peak <= pl.target.Budget) {
			// The peak to cut is outside the measured window.
			pl.fIdx, pl.tp = r.allIdx, r.allTime
		}
		goal = r.peak / pl.goalDiv
		if pl.target.Budget > 0 && r.peak-pl.target.Budget < goal {
			goal = r.peak - pl.target.Budget
		}
		return goal, true
	}
	for j, b := range pl.jobBudget {
		sj := r.jobs[j]
		if b > 0 && max(sj.peak, r.firstJobPeak[j]) > b {
			pl.fIdx, pl.tp, pl.fJob = sj.peakIdx, sj.peakT, j
			goal = sj.peak / 64
			if sj.peak-b < goal {
				goal = sj.peak - b
			}
			return goal, true
		}
	}
	return 0, false
}

// setReference simulates the plan as it stands and takes its peak,
// makespan and per-job times as the vanilla figures and time references.
func (pl *planner) setReference() error {
	vr, err := pl.simulate()
	if err != nil {
		return err
	}
	pl.vanPeak, pl.vanSecs = vr.peak, vr.makespan
	pl.ref = make([]float64, len(vr.jobs))
	for j, sj := range vr.jobs {
		pl.ref[j] = pl.jobSeconds(sj)
	}
	return nil
}

// jobSeconds is the iteration time the tolerance applies to: the measured
// (last) iteration's first op start to last op end, or, over a whole run
// of several jobs, the mean iteration time of the run (see iterSeconds).
func (pl *planner) jobSeconds(sj *simJob) float64 {
	if pl.wholeRun {
		return sj.iterSeconds()
	}
	return sj.lastEnd - sj.first
}

// slow is how much slower than its reference the slowest job runs in r:
// the largest ratio of a job's iteration seconds (jobSeconds) to its
// vanilla seconds. The time tolerance bounds it by 1 + Tolerance, so every
// job's EOR stays within the tolerance; for one job it is time/vanilla
// time.
func (pl *planner) slow(r *simResult) float64 {
	w := 0.0
	for j, sj := range r.jobs {
		if pl.ref[j] > 0 {
			w = max(w, pl.jobSeconds(sj)/pl.ref[j])
		}
	}
	return w
}

// slack is the extra compute time every job can still take in r before
// slow reaches limit.
func (pl *planner) slack(r *simResult, limit float64) float64 {
	s := math.Inf(1)
	for j, sj := range r.jobs {
		if pl.ref[j] > 0 {
			s = min(s, pl.ref[j]*limit-pl.jobSeconds(sj))
		}
	}
	return s
}

// run is the greedy loop: it leaves the planner in the best state found.
func (pl *planner) run() (PlanStats, error) {
	var st PlanStats
	r, err := pl.simulate()
	if err != nil {
		return st, err
	}
	st.VanillaPeakBytes, st.VanillaSeconds = r.peak, r.makespan
	if pl.vanPeak > 0 { // warm start or keeps: the vanilla figures were taken before
		st.VanillaPeakBytes, st.VanillaSeconds = pl.vanPeak, pl.vanSecs
	}
	if len(pl.ref) != len(r.jobs) {
		pl.ref = make([]float64, len(r.jobs))
		for j, sj := range r.jobs {
			pl.ref[j] = pl.jobSeconds(sj)
		}
	}
	pl.greedy()
	return pl.finish(st)
}

// limit is the bound the time tolerance sets on slow(r).
func (pl *planner) limit() float64 {
	if pl.target.Tolerance > 0 || !pl.budgeted() {
		return 1 + pl.target.Tolerance
	}
	return math.Inf(1)
}

// greedy runs the greedy steps from the current state and leaves the
// planner in the best state found (pl.r simulated).
func (pl *planner) greedy() {
	limit := pl.limit()
	const eps = 1e-9
	r := pl.r
	bestN, bestEx, bestTime := len(pl.wins), pl.excess(r), pl.slow(r)
	stale, failures := 0, 0
	const patience = 24
	maxSteps := 64
	for _, ji := range pl.m.jobs {
		maxSteps += 2 * len(ji.g.Ops)
	}
	if pl.maxSteps > 0 {
		maxSteps = pl.maxSteps
	}
	for pl.steps = 0; pl.steps < maxSteps; pl.steps++ {
		cur := pl.r
		goal, ok := pl.focus(cur)
		if !ok {
			break
		}
		curEx, curTime := pl.excess(cur), pl.slow(cur)
		cands := pl.candidates(cur)
		free := acceptance{maxExcess: curEx, maxSlow: curTime + eps}
		within := acceptance{maxExcess: curEx, maxSlow: limit + eps}
		applied := pl.freeSwaps(cands, goal, free) || pl.costlyCuts(cands, goal, pl.slack(cur, limit), within)
		if !applied {
			// The options tried are marked bad: while time is left, try
			// the next ones before giving up on this peak, and at last
			// the moves that make ops wait for copies.
			if failures++; failures <= pl.maxFailures() {
				continue
			}
			if !pl.late || !pl.lateMoves(cur, cands, acceptance{maxExcess: curEx - 1, maxSlow: limit + eps}) {
				break
			}
		}
		failures = 0
		r := pl.r
		ex := pl.excess(r)
		if sl := pl.slow(r); ex < bestEx || (ex == bestEx && sl < bestTime) {
			if ex < bestEx {
				stale = 0
			}
			bestN, bestEx, bestTime = len(pl.wins), ex, sl
		} else if stale++; stale > patience {
			break
		}
	}
	if len(pl.wins) != bestN {
		pl.truncate(bestN)
		pl.simulate()
	}
}

// originals returns the windows as they were added (before later windows
// moved their swap-ins or recomputes), leaving the planner's state as it is.
func (pl *planner) originals() []window {
	n := len(pl.wins)
	pl.truncate(0)
	ws := slices.Clone(pl.wins[:n])
	for _, w := range ws {
		pl.addOne(w)
	}
	return ws
}

// rebuild replaces the planner's windows with ws (as originals returns
// them) and simulates them.
func (pl *planner) rebuild(ws []window) error {
	pl.truncate(0)
	for _, w := range ws {
		pl.addOne(w)
	}
	_, err := pl.simulate()
	return err
}

// referenced reports whether a window of ws other than ws[i] depends on
// ws[i]: moves its swap-in or recompute, or rebuilds its tensor as a
// temporary.
func referenced(ws []window, i int) bool {
	w := &ws[i]
	for k := range ws {
		o := &ws[k]
		if k == i || o.job != w.job {
			continue
		}
		for _, a := range o.advance {
			if w.swap && a.tensor == w.tensor && a.prev == w.prev {
				return true
			}
		}
		for _, a := range o.retime {
			if !w.swap && a.tensor == w.tensor && a.prev == w.prev {
				return true
			}
		}
		if !w.swap && slices.Contains(o.temps, w.tensor) {
			return true
		}
	}
	return false
}

// without returns ws less its element i.
func without(ws []window, i int) []window {
	return append(slices.Clone(ws[:i]), ws[i+1:]...)
}

// exchangeTrials bounds how many swaps exchange tries to turn into
// recomputes.
const exchangeTrials = 2

// exchange is a local search after the greedy (target b, one job): the
// greedy gives the copy engines' idle time before the peak to the largest
// tensors, some of them cheap to recompute, and then pays for dearer
// recomputes once the engines are full. For the swapped tensors cheapest
// to recompute per byte, it recomputes one instead, removes the recomputes
// that free the fewest bytes per second until the time is back within the
// tolerance, lets the greedy give the freed engine time to others, and
// keeps the result when its peak is lower (else restores the state).
func (pl *planner) exchange() {
	limit := pl.limit()
	if pl.budgeted() || math.IsInf(limit, 1) || len(pl.m.jobs) != 1 || pl.r == nil {
		return
	}
	ji := pl.m.jobs[0]
	// A plan's whole run (its first iteration included) must not peak
	// higher either: budgets and sum-of-peaks reserve it.
	bestEx, bestSlow, bestRun := pl.excess(pl.r), pl.slow(pl.r), max(pl.r.peak, pl.r.firstPeak)
	base := pl.originals()
	// A trial names its swap by tensor and access, not by index: a kept
	// trial replaces base, whose windows then stand elsewhere (or are
	// gone).
	type trial struct {
		tensor, prev int32
		ratio        float64
	}
	// eligible reports whether base[i] is a swap exchange may replace.
	eligible := func(base []window, i int) bool {
		w := &base[i]
		return w.swap && !w.wraps() && !referenced(base, i)
	}
	var ts []trial
	for i := range base {
		w := &base[i]
		if !eligible(base, i) {
			continue
		}
		c := candidate{job: w.job, tensor: w.tensor, prev: w.prev, next: w.next, bytes: ji.bytes[w.tensor]}
		if cost, ok := pl.recomputeCost(c); ok && c.bytes > 0 {
			ts = append(ts, trial{w.tensor, w.prev, float64(c.bytes) / max(cost, 1e-12)})
		}
	}
	slices.SortStableFunc(ts, func(a, b trial) int { return cmp.Compare(b.ratio, a.ratio) })
	if n := cmp.Or(pl.trials, exchangeTrials); len(ts) > n {
		ts = ts[:n]
	}
	// ratio is the bytes a recompute window frees per second of its cost.
	ratio := func(w *window) float64 {
		cost := ji.dur[ji.def[w.tensor]]
		for _, t := range w.temps {
			cost += ji.dur[ji.def[t]]
		}
		return float64(ji.bytes[w.tensor]) / max(cost, 1e-12)
	}
	for _, t := range ts {
		i := slices.IndexFunc(base, func(w window) bool { return w.swap && w.tensor == t.tensor && w.prev == t.prev })
		if i < 0 || !eligible(base, i) {
			continue // a kept trial took it away
		}
		sw := base[i]
		ws := without(base, i)
		if pl.rebuild(ws) != nil {
			continue
		}
		c := candidate{job: sw.job, tensor: sw.tensor, prev: sw.prev, next: sw.next, bytes: ji.bytes[sw.tensor]}
		w, _, ok := pl.recomputeWindow(c)
		if !ok {
			continue
		}
		pl.addOne(w)
		_, err := pl.simulate()
		// Back within the tolerance: drop the recomputes that free the
		// fewest bytes per second.
		for tries := 0; err == nil && pl.slow(pl.r) > limit+1e-9 && tries < 8; tries++ {
			ws = pl.originals()
			worst := -1
			for k := range ws[:len(ws)-1] {
				if ws[k].swap || referenced(ws, k) {
					continue
				}
				if worst < 0 || ratio(&ws[k]) < ratio(&ws[worst]) {
					worst = k
				}
			}
			if worst < 0 {
				break
			}
			err = pl.rebuild(without(ws, worst))
		}
		if err == nil && pl.slow(pl.r) <= limit+1e-9 {
			clear(pl.bad)
			pl.greedy()
			ex, sl, run := pl.excess(pl.r), pl.slow(pl.r), max(pl.r.peak, pl.r.firstPeak)
			if run <= bestRun && (ex < bestEx || ex == bestEx && sl < bestSlow) {
				bestEx, bestSlow, bestRun = ex, sl, run
				base = pl.originals()
				continue
			}
		}
	}
	pl.rebuild(base)
}

// finish simulates the final state and completes st with its figures.
func (pl *planner) finish(st PlanStats) (PlanStats, error) {
	r, err := pl.simulate()
	if err != nil {
		return st, err
	}
	st.PeakBytes, st.Seconds = r.peak, r.makespan
	st.FirstIterationPeakBytes = r.firstPeak
	st.Steps = pl.steps
	// Counted afresh: finish may complete stats it completed before (the
	// exchange search refines a finished plan).
	st.Swaps, st.SwappedBytes, st.Recomputes, st.StartOnHost = 0, 0, 0, 0
	for i := range pl.wins {
		w := &pl.wins[i]
		if w.swap {
			st.Swaps++
			st.SwappedBytes += pl.m.jobs[w.job].bytes[w.tensor]
			if pl.startsOnHost(w) {
				st.StartOnHost++
			}
		} else {
			st.Recomputes++
		}
	}
	st.RecomputedOps = pl.recomputedOps()
	st.Keeps = 0
	for _, k := range pl.keep {
		for _, x := range k {
			if x >= 0 {
				st.Keeps++
			}
		}
	}
	if st.VanillaPeakBytes > 0 {
		st.MSR = 1 - float64(st.PeakBytes)/float64(st.VanillaPeakBytes)
	}
	if st.VanillaSeconds > 0 {
		st.EOR = st.Seconds/st.VanillaSeconds - 1
	}
	if pk := max(st.PeakBytes, r.firstPeak); pl.target.Budget > 0 && pk > pl.target.Budget {
		note := ""
		if len(pl.m.jobs) == 1 {
			note = floorNote(pl.m.jobs[0].g, pl.target.Budget)
		}
		return st, fmt.Errorf("%w: best plan peaks at %s, budget %s (vanilla %s)%s", ErrBudget,
			gpu.FormatBytes(pk), gpu.FormatBytes(pl.target.Budget), gpu.FormatBytes(st.VanillaPeakBytes), note)
	}
	for j, b := range pl.jobBudget {
		if pk := max(r.jobs[j].peak, r.firstJobPeak[j]); b > 0 && pk > b {
			return st, fmt.Errorf("%w: job %q peaks at %s, its budget is %s", ErrBudget,
				pl.m.jobs[j].name, gpu.FormatBytes(pk), gpu.FormatBytes(b))
		}
	}
	return st, nil
}

// floorNote explains a budget below graph g's op floor (Graph.OpFloor):
// no plan of whole tensors fits it. "" when the budget is above it.
func floorNote(g *workload.Graph, budget int64) string {
	fl, op := g.OpFloor()
	if op < 0 || budget >= fl {
		return ""
	}
	return fmt.Sprintf("; no plan can fit it: op %d (%s) reads and writes %s at once, the floor of any plan that swaps or recomputes whole tensors",
		op, g.Ops[op].Name, gpu.FormatBytes(fl))
}

// recomputedOps counts distinct (before, producer) re-runs in the plans.
func (pl *planner) recomputedOps() int {
	type key struct{ job, before, prod int32 }
	seen := map[key]bool{}
	for i := range pl.wins {
		w := &pl.wins[i]
		if w.swap {
			continue
		}
		ji := pl.m.jobs[w.job]
		seen[key{w.job, w.next, ji.def[w.tensor]}] = true
		for _, t := range w.temps {
			seen[key{w.job, w.next, ji.def[t]}] = true
		}
	}
	return len(seen)
}

// planTogether plans jobs on the combined timeline (the joint mode). One
// job is planned by planSolo, with refine as planSolo's.
func planTogether(jobs []Job, p gpu.Profile, t Target, refine bool) ([]*Plan, PlanStats, error) {
	return planTogetherMemo(jobs, p, t, refine, nil)
}

// planTogetherMemo is planTogether with one job's solo plan looked up in
// memo (nil: none).
func planTogetherMemo(jobs []Job, p gpu.Profile, t Target, refine bool, memo *PlanMemo) ([]*Plan, PlanStats, error) {
	begin := time.Now()
	if len(jobs) == 1 {
		sp := memo.solo(jobs[0], p, t, refine)
		if refine && t.Budget > 0 && errors.Is(sp.err, ErrBudget) {
			// The greedy, late moves included, misses the budget: the
			// waiting fallback may meet it.
			if stall := memo.stalling(jobs[0], p, t, sp.st); stall.ok {
				sst := stall.st
				sst.Planning = time.Since(begin)
				return stall.plans, sst, nil
			}
		}
		st := sp.st
		st.Planning = time.Since(begin)
		if !sp.ok {
			return nil, st, sp.err
		}
		return sp.plans, st, sp.err
	}
	pl, st, err := planWindows(jobs, p, t, warmStart{}, simIterations)
	st.Planning = time.Since(begin)
	if pl == nil {
		return nil, st, err
	}
	return pl.output(), st, err
}

// addWarm adds the warm-start windows. When all of them together make a
// job slower than the tolerance allows (plans made for jobs alone can
// collide on the shared engines), it keeps the longest prefix of every
// job's windows (the same fraction of each, in the order they were
// planned: the cheapest first) that stays within it.
func (pl *planner) addWarm(warm []window) {
	limit := 1 + pl.target.Tolerance
	if pl.budgeted() && pl.target.Tolerance <= 0 {
		limit = math.Inf(1)
	}
	per := make([][]window, len(pl.m.jobs))
	for _, w := range warm {
		if pl.group != nil && pl.group[w.job] != int(w.job) {
			continue // add mirrors it from its group's first job
		}
		per[w.job] = append(per[w.job], w)
	}
	keep := func(f float64) bool {
		pl.truncate(0)
		for _, ws := range per {
			for _, w := range ws[:int(f*float64(len(ws)))] {
				pl.add(w)
			}
		}
		r, err := pl.simulate()
		return err == nil && pl.slow(r) <= limit+1e-9
	}
	if keep(1) {
		return
	}
	lo, hi := 0.0, 1.0
	for range 7 {
		mid := (lo + hi) / 2
		if keep(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	keep(lo)
}

// output returns the planner's plans, one per job.
func (pl *planner) output() []*Plan {
	pl.buildPlans()
	out := make([]*Plan, len(pl.plans))
	for j := range out {
		out[j] = &Plan{Policy: PolicyTensile, Actions: append([]Action(nil), pl.plans[j]...)}
	}
	return out
}

// greedyPath is a variant of the greedy: its step size (see
// planner.goalDiv), whether free swaps go to the tensors dearest to
// recompute first (see planner.dearFirst) and whether recomputes move up
// their sources' recomputes (see planner.retime).
type greedyPath struct {
	goalDiv   int64
	dearFirst bool
	retime    bool
	// keepConcat starts from concatenations' inputs kept until their
	// output's last use (see initKeeps); a graph without such inputs
	// skips the path.
	keepConcat bool
	// keepSources lets recomputes keep small freed sources (see
	// planner.keepSources).
	keepSources bool
	// noPack keeps a keepConcat path from packing swap-outs (packOut).
	noPack bool
}

// soloPaths are the variants a single job's greedy is run with; the best
// plan wins (the greedy is path dependent and planning one job is cheap).
// Giving the copy engines to the tensors dearest to recompute leaves the
// cheap ones to recomputation (Inception-v4 on an H100 at 5 %: MSR 0.35 ->
// 0.56); largest first wins when those recomputes later become impossible
// (their sources dropped too) or the tolerance is too small to pay for
// them. The dear-first path runs with the coarse step only: planning
// ResNet-50 stays well under 100 ms on two cores. Moving up recomputes
// makes chains cheaper but changes which options the greedy takes first:
// mostly better (DenseNet-121 on an RTX 2080 Ti at 16 %: 0.622 -> 0.634),
// sometimes worse (ResNet-50 there at 10 %: 0.565 -> 0.504), so the fine
// step runs without it. Graphs whose concatenations outlive their inputs
// (DenseNet; a few in Inception) add a path that keeps those inputs
// (keepConcat, see initKeeps) with 1/16 steps and the dear-first order,
// which leaves the cheap concatenations to recompute and gives the copy
// engines to the bottleneck convolutions' outputs, and that packs
// swap-outs into the D2H engine's short idle gaps (packOut). It is refined
// on its own and compared with the refined best of the others: on
// DenseNet-121 the paths end far apart (RTX 2080 Ti at 16 %: 0.63 without
// keeps, 0.70 keeping with 1/64 steps largest first, 0.77 with this path).
var soloPaths = []greedyPath{{64, false, true, false, true, false}, {256, false, false, false, true, false}, {64, true, true, false, true, false}, {16, true, true, true, false, false}}

// The single-job paths but the keeping one let recomputes keep small freed
// sources (keepSources): VGG16's first fully connected layer's weight
// gradient, rebuilt before its optimizer step from kept layer input and
// output gradients, takes RTX 2080 Ti VGG16 at 26 % from 0.284 to 0.358.
// On the keeping path it changes which options the greedy takes first and
// costs Inception-v4 there 0.719 -> 0.700, so that path runs without it.

// keepTrials is the exchange search's trials on the keepConcat paths.
const keepTrials = 4

// jointSoloPaths are the variants planSolo runs without refine: what
// PlanJobs plans each job alone with, for sum-of-peaks and joint's solo
// candidates (the joint greedy and its assertions were tuned on the first
// three), and soloPaths' keeping path, which a graph without
// concatenation inputs to keep skips (ResNet-50, VGG16, the transformers:
// their plans and planning time are unchanged). The keeping path is
// refined as planSolo refines it alone (exchange search, pruneKeeps; the
// others are not: like for like) and runs without packing swap-outs
// (noPack): a swap-out packed into the D2H engine's idle gaps of a job
// alone is pushed back past the peak when co-located jobs share the
// engine (two Inception-v3s on the H100: the co-located run outgrew the
// sum of their solo peaks that sum-of-peaks reserves).
var jointSoloPaths = []greedyPath{{64, false, false, false, false, false}, {256, false, false, false, false, false}, {64, true, false, false, false, false}, {16, true, true, true, false, true}}

// planSolo plans one job from vanilla along each of soloPaths (with
// refine; jointSoloPaths without) and keeps the plan with the least excess
// (peak, or overshoot of the budgets), then the least time; with refine
// and no budget, the exchange search then improves the winner. The
// keeping paths are refined either way, before they are compared.
func planSolo(job Job, p gpu.Profile, t Target, refine bool) (*planner, PlanStats, error) {
	paths := jointSoloPaths
	if refine {
		paths = soloPaths
	}
	type run struct {
		pl  *planner
		st  PlanStats
		err error
		// refined: the exchange search and pruneKeeps ran on it.
		refined bool
	}
	if slices.ContainsFunc(paths, func(p greedyPath) bool { return p.keepConcat }) && !hasConcatKeeps(job.Graph) {
		paths = slices.DeleteFunc(slices.Clone(paths), func(p greedyPath) bool { return p.keepConcat })
	}
	runs := make([]run, len(paths))
	// The keeping paths (refined on their own) and the others run apart,
	// so that the best of the others is refined while the keeping paths,
	// the slowest, still run.
	var others, keeping sync.WaitGroup
	for i, path := range paths {
		wg := &others
		if refine && path.keepConcat {
			wg = &keeping
		}
		wg.Add(1)
		go func() { // independent runs: plan them concurrently
			defer wg.Done()
			r := &runs[i]
			r.pl, r.st, r.err = planWindowsPath([]Job{job}, p, t, warmStart{}, simIterations, 0, path)
			if path.keepConcat && r.pl != nil {
				// The keeping paths differ most before the exchange
				// search: each is refined before the best is chosen.
				r.pl.trials = keepTrials
				r.st, r.err = r.pl.refine(r.st, r.err)
				r.refined = true
			}
		}()
	}
	// The best of the other paths is refined and then compared with the
	// refined keeping paths.
	others.Wait()
	best := -1
	for i := range runs {
		if r := &runs[i]; !(refine && paths[i].keepConcat) {
			if r.pl == nil {
				best = -1
				break
			}
			if best < 0 || better(r.pl, runs[best].pl) {
				best = i
			}
		}
	}
	if refine && best >= 0 {
		b := &runs[best]
		b.st, b.err = b.pl.refine(b.st, b.err)
	}
	keeping.Wait()
	for _, r := range runs {
		if r.pl == nil {
			return nil, r.st, r.err
		}
	}
	b := &runs[best]
	for i := range runs {
		if r := &runs[i]; r.refined && better(r.pl, b.pl) {
			b = r
		}
	}
	if refine {
		b.st, b.err = b.pl.lateFinish(b.st, b.err)
	}
	if refine && errors.Is(b.err, ErrBudget) {
		// As planWindowsPath does, but with the exchange search: the
		// least peak within the tolerance may fit the budgets where the
		// budget-first greedy stops short (MinBudget answers with it).
		tol := t.Tolerance
		if tol <= 0 {
			tol = 1
		}
		// The least peak is not monotone in the tolerance (the greedy is
		// path dependent: MLP b7168 on a V100 peaks at 113.4 MiB within
		// 15 % and 118.7 MiB within 50 %), and MinBudget answers with the
		// least over its levels up to the job's tolerance. So after the
		// tolerance itself, the levels below it are tried, the smallest
		// first: a budget MinBudget gave at any tolerance up to tol is met
		// (TestPlanBudgetMeetsMinBudget).
		alone := job
		alone.Budget = 0
		levels := []float64{tol}
		for _, l := range budgetLevels {
			if l < tol-1e-12 {
				levels = append(levels, l)
			}
		}
		// MinBudget's cache may hold a level's peak for the graph's own op
		// times: a level whose peak is over the budget is not planned
		// again (a level not cached is planned once, here).
		cached := !t.ResidentStart && len(job.Seconds) == 0
		var gfp, pfp uint64
		if cached {
			gfp, pfp = graphFingerprint(job.Graph), profileFingerprint(p)
		}
		for _, l := range levels {
			if cached {
				if m, ok := answeredAt(job.Graph, p, gfp, pfp, l); ok && m > t.Budget {
					continue
				}
			}
			if apl, ast, aerr := planSolo(alone, p, Target{Tolerance: l, ResidentStart: t.ResidentStart}, true); aerr == nil {
				apl.jobBudget = b.pl.jobBudget
				apl.target.Budget = t.Budget
				if apl.excess(apl.r) == 0 {
					return apl, ast, nil
				}
			}
		}
	}
	return b.pl, b.st, b.err
}

// lateFinish runs the greedy once more on a finished plan, now letting it
// make ops wait for copies where nothing else cuts the peak (lateMoves),
// while the time limit leaves room, and completes st again. The greedy
// keeps only moves that lower the excess, so the peak can only fall (the
// extra time may rise up to the tolerance); it
// runs after the paths are compared and refined, which they are without
// these moves (they would spend the time tolerance on stalls before the
// cheaper cuts a later step finds: H100 VGG16 at 5 % fell from MSR 0.268
// to 0.265 when the greedy made them on every path).
func (pl *planner) lateFinish(st PlanStats, err error) (PlanStats, error) {
	if pl.r == nil || err != nil && !errors.Is(err, ErrBudget) || pl.excess(pl.r) == 0 {
		return st, err
	}
	// It is the last step of planning: the late moves change windows in
	// place, without undo records, so originals and rebuild (the exchange
	// search) must not run after it.
	pl.late = true
	clear(pl.bad)
	pl.greedy()
	pl.late = false
	return pl.finish(st)
}

// refine runs the exchange search (target b) on a finished plan and
// shortens its keeps (pruneKeeps), completing st again.
func (pl *planner) refine(st PlanStats, err error) (PlanStats, error) {
	if err == nil && !pl.budgeted() {
		pl.exchange()
		st, err = pl.finish(st)
	}
	return pl.pruneFinish(st, err)
}

// pruneFinish shortens a finished plan's keeps (pruneKeeps) and
// completes st again; a plan that keeps nothing is left as it is.
func (pl *planner) pruneFinish(st PlanStats, err error) (PlanStats, error) {
	if pl.keep != nil {
		pl.pruneKeeps()
		st, err = pl.finish(st)
	}
	return st, err
}

// better reports whether planner a's final state beats b's: less excess,
// then less time.
func better(a, b *planner) bool {
	ea, eb := a.excess(a.r), b.excess(b.r)
	if ea != eb {
		return ea < eb
	}
	return a.slow(a.r) < b.slow(b.r)
}

// warmStart is a state a planner starts from: windows, and each job's
// keep table (keep[j] as planner.keep[j]; nil: job j keeps nothing, keep
// nil: no job keeps anything). Solo plans made along a keeping path keep
// concatenation inputs (initKeeps) that their windows do not name.
type warmStart struct {
	wins []window
	keep [][]int32
}

// setKeeps makes every job's keep table at least keep's (keep[j] nil:
// job j's is left as it is).
func (pl *planner) setKeeps(keep [][]int32) {
	if !slices.ContainsFunc(keep, func(k []int32) bool { return k != nil }) {
		return
	}
	if pl.keep == nil {
		pl.noKeeps()
	}
	pl.rWins = -1
	for j, k := range keep {
		for t, x := range k {
			pl.keep[j][t] = max(pl.keep[j][t], x)
		}
	}
}

// keepOf returns a copy of job j's keep table (nil: it keeps nothing).
func (pl *planner) keepOf(j int) []int32 {
	if pl.keep == nil || !slices.ContainsFunc(pl.keep[j], func(x int32) bool { return x >= 0 }) {
		return nil
	}
	return slices.Clone(pl.keep[j])
}

// planWindows runs the greedy on the combined timeline of jobs (with their
// start offsets), starting from warm (empty: vanilla); it returns the
// planner in its final state (nil on a non-budget error).
func planWindows(jobs []Job, p gpu.Profile, t Target, warm warmStart, iters int) (*planner, PlanStats, error) {
	return planWindowsSteps(jobs, p, t, warm, iters, 0)
}

// planWindowsSteps is planWindows with at most maxSteps greedy steps (0: by
// graph size).
func planWindowsSteps(jobs []Job, p gpu.Profile, t Target, warm warmStart, iters, maxSteps int) (*planner, PlanStats, error) {
	return planWindowsPath(jobs, p, t, warm, iters, maxSteps, greedyPath{goalDiv: 64})
}

// planWindowsPath is planWindowsSteps along the greedy variant path.
func planWindowsPath(jobs []Job, p gpu.Profile, t Target, warm warmStart, iters, maxSteps int, path greedyPath) (*planner, PlanStats, error) {
	if len(jobs) == 0 {
		return nil, PlanStats{}, errors.New("tensile: no jobs to plan")
	}
	vanilla := make([]Job, len(jobs))
	for j := range jobs {
		vanilla[j] = jobs[j]
		vanilla[j].Plan = nil
	}
	m, err := newModel(vanilla, p)
	if err != nil {
		return nil, PlanStats{}, err
	}
	pl := newPlanner(m, t)
	pl.jobBudget = make([]int64, len(jobs))
	for j := range jobs {
		pl.jobBudget[j] = jobs[j].Budget
	}
	pl.wholeRun = len(jobs) > 1
	pl.iters = iters
	pl.maxSteps = maxSteps
	pl.goalDiv = path.goalDiv
	pl.dearFirst = path.dearFirst
	pl.retime = path.retime
	pl.packOut = path.keepConcat && !path.noPack
	pl.keepSources = path.keepSources
	if len(jobs) > 1 {
		pl.setGroups(jobs)
	}
	if path.keepConcat {
		// The vanilla figures and time references come from the run
		// without keeps; the greedy starts from the keeps.
		if err := pl.setReference(); err != nil {
			return nil, PlanStats{}, err
		}
		pl.initKeeps()
	}
	if len(warm.wins) > 0 || warm.keep != nil {
		if err := pl.setReference(); err != nil {
			return nil, PlanStats{}, err
		}
		// The keeps first: the warm windows' recomputes read what they
		// keep.
		pl.setKeeps(warm.keep)
		pl.addWarm(warm.wins)
	}
	st, err := pl.run()
	if warm.keep != nil && pl.keep != nil {
		// Keeps that no recompute of the final windows reads (addWarm
		// may have left out some warm windows; the greedy may have
		// replaced some) hold memory for nothing.
		st, err = pl.pruneFinish(st, err)
	}
	if errors.Is(err, ErrBudget) {
		// The budget-first greedy can stop short of what the least-peak
		// greedy reaches within the tolerance: try that and keep it when it
		// fits every budget.
		tol := t.Tolerance
		if tol <= 0 {
			tol = 1
		}
		alt := newPlanner(m, Target{Tolerance: tol, ResidentStart: t.ResidentStart})
		alt.dearFirst = pl.dearFirst
		alt.retime = pl.retime
		alt.jobBudget = make([]int64, len(jobs))
		if ast, aerr := alt.run(); aerr == nil {
			alt.jobBudget = pl.jobBudget
			alt.target.Budget = t.Budget
			if alt.excess(alt.r) == 0 {
				pl, st, err = alt, ast, nil
			}
		}
	}
	if err != nil && !errors.Is(err, ErrBudget) {
		return nil, st, err
	}
	return pl, st, err
}
