package tensorsched

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// Baseline is a memory-scheduling policy that needs no budget: a pure
// function from a graph and a device to a plan, run by the same executor as
// TENSILE's plans.
type Baseline func(g *workload.Graph, p gpu.Profile) *Plan

var baselines = map[string]Baseline{
	"none":       PlanNone,
	"vdnn-all":   PlanVDNNAll,
	"vdnn-conv":  PlanVDNNConv,
	"checkpoint": PlanCheckpoint,
	"capuchin":   PlanCapuchin,
}

// BaselineNames lists the registered baselines, sorted.
func BaselineNames() []string {
	n := make([]string, 0, len(baselines))
	for k := range baselines {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// LookupBaseline returns a baseline by name, or an error listing the known ones.
func LookupBaseline(name string) (Baseline, error) {
	if b, ok := baselines[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("unknown baseline policy %q (known: %s)", name, strings.Join(BaselineNames(), ", "))
}

// PlanNone is vanilla execution: an empty plan.
func PlanNone(*workload.Graph, gpu.Profile) *Plan { return &Plan{Policy: "none"} }

// savedTensor is a tensor produced (or loaded) for the forward pass and read
// again in the backward pass, with nothing touching it in between: the
// candidates every baseline swaps or recomputes.
type savedTensor struct {
	t        int
	lastFwd  int // last forward use
	firstBwd int // first backward use
}

// savedForBackward lists the saved tensors of g in order of their last
// forward use (then tensor id).
func savedForBackward(g *workload.Graph) []savedTensor {
	n := len(g.Tensors)
	lastFwd := make([]int, n)
	lastAny := make([]int, n)
	firstBwd := make([]int, n)
	for i := range lastFwd {
		lastFwd[i], lastAny[i], firstBwd[i] = -1, -1, -1
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Phase == workload.Backward {
			for _, t := range op.Inputs {
				if firstBwd[t] < 0 && lastFwd[t] >= 0 && lastAny[t] == lastFwd[t] {
					firstBwd[t] = i
				}
			}
		}
		for _, ts := range [2][]int{op.Inputs, op.Outputs} {
			for _, t := range ts {
				if op.Phase == workload.Forward && firstBwd[t] < 0 {
					lastFwd[t] = i
				}
				lastAny[t] = i
			}
		}
	}
	var out []savedTensor
	for t := range g.Tensors {
		k := g.Tensors[t].Kind
		if k.Persistent() || firstBwd[t] < 0 || firstBwd[t] <= lastFwd[t]+1 || g.Tensors[t].Bytes == 0 {
			continue
		}
		out = append(out, savedTensor{t: t, lastFwd: lastFwd[t], firstBwd: firstBwd[t]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].lastFwd != out[j].lastFwd {
			return out[i].lastFwd < out[j].lastFwd
		}
		return out[i].t < out[j].t
	})
	return out
}

// PlanVDNNAll is vDNN (MICRO'16) with every layer offloaded:
// each saved activation (and the input batch) is swapped out after its last
// forward use and prefetched during backward one layer ahead: its swap-in is
// issued when the backward pass reaches the previous point (in backward
// order) at which a saved tensor is needed.
func PlanVDNNAll(g *workload.Graph, _ gpu.Profile) *Plan {
	return vdnn("vdnn-all", g, func(*workload.Graph, savedTensor) bool { return true })
}

// PlanVDNNConv is vDNN's conv policy: only the inputs of convolutions are
// offloaded.
func PlanVDNNConv(g *workload.Graph, _ gpu.Profile) *Plan {
	convIn := make([]bool, len(g.Tensors))
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Phase == workload.Forward && strings.HasPrefix(op.Kind, "conv") {
			for _, t := range op.Inputs {
				if g.Tensors[t].Kind != workload.Param {
					convIn[t] = true
				}
			}
		}
	}
	return vdnn("vdnn-conv", g, func(_ *workload.Graph, s savedTensor) bool { return convIn[s.t] })
}

func vdnn(name string, g *workload.Graph, keep func(*workload.Graph, savedTensor) bool) *Plan {
	plan := &Plan{Policy: name}
	var sel []savedTensor
	for _, s := range savedForBackward(g) {
		if keep(g, s) {
			sel = append(sel, s)
		}
	}
	// Distinct first-backward points, in backward (execution) order.
	points := make([]int, 0, len(sel))
	for _, s := range sel {
		points = append(points, s.firstBwd)
	}
	sort.Ints(points)
	points = compactInts(points)
	for _, s := range sel {
		k := sort.SearchInts(points, s.firstBwd)
		after := s.firstBwd - 1
		if k > 0 {
			after = points[k-1] - 1
		}
		after = max(after, s.lastFwd)
		plan.Actions = append(plan.Actions,
			Action{Kind: SwapOut, Tensor: s.t, After: s.lastFwd, Before: s.lastFwd + 1},
			Action{Kind: SwapIn, Tensor: s.t, After: after, Before: s.firstBwd})
	}
	return plan
}

func compactInts(a []int) []int {
	out := a[:0]
	for i, v := range a {
		if i == 0 || v != a[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// recomputer builds Drop/Recompute actions, making sure every recompute's
// inputs are resident when it runs: a missing input that is itself produced
// in this iteration is recomputed first (before the same op); when the
// graph no longer needs it, the executor frees it after the last recompute
// that reads it.
type recomputer struct {
	g       *workload.Graph
	lt      []workload.Lifetime
	lastFwd []int
	dropped []bool          // dropped after the forward pass, recomputed before first[t]
	swapped []bool          // swapped out after the forward pass, back by first[t]
	first   []int           // first backward use of a dropped or swapped tensor
	at      map[[2]int]bool // (tensor, before): recomputed before that op
	relied  [][]int         // ops before which a planned recompute reads the tensor
	acts    []Action
	budget  int // recursion guard
}

func newRecomputer(g *workload.Graph) *recomputer {
	n := len(g.Tensors)
	r := &recomputer{g: g, lt: g.Lifetimes(), lastFwd: make([]int, n), dropped: make([]bool, n),
		swapped: make([]bool, n), first: make([]int, n), at: map[[2]int]bool{}, relied: make([][]int, n)}
	for i := range r.first {
		r.first[i], r.lastFwd[i] = -1, -1
	}
	return r
}

// mark records that s will leave the device after its last forward use,
// by a drop or (swap) a swap-out.
func (r *recomputer) mark(s savedTensor, swap bool) {
	r.dropped[s.t], r.swapped[s.t] = !swap, swap
	r.first[s.t], r.lastFwd[s.t] = s.firstBwd, s.lastFwd
}

func (r *recomputer) unmark(t int) {
	r.dropped[t], r.swapped[t], r.first[t] = false, false, -1
}

// conflicts reports whether a planned recompute relies on s being resident
// while it would be away.
func (r *recomputer) conflicts(s savedTensor) bool {
	for _, b := range r.relied[s.t] {
		if b > s.lastFwd && b < s.firstBwd {
			return true
		}
	}
	return false
}

// resident reports whether tensor x is on the device when op b starts.
func (r *recomputer) resident(x, b int) bool {
	if r.g.Tensors[x].Kind.Persistent() {
		return true
	}
	if r.at[[2]int{x, b}] {
		return true
	}
	if r.lt[x].LastUse < b {
		return false
	}
	if r.dropped[x] || r.swapped[x] {
		return b <= r.lastFwd[x] || (r.first[x] >= 0 && r.first[x] <= b)
	}
	return true
}

// ensure plans whatever is needed for x to be resident at op b; it returns
// false when that is impossible.
func (r *recomputer) ensure(x, b int, planned *[]Action) bool {
	if r.resident(x, b) {
		r.relied[x] = append(r.relied[x], b)
		return true
	}
	def := r.lt[x].Def
	if r.swapped[x] || def < 0 || def >= b || r.budget <= 0 || !rerunsIn(r.g, def, b) {
		return false
	}
	r.budget--
	for _, in := range r.g.Ops[def].Inputs {
		if !r.ensure(in, b, planned) {
			return false
		}
	}
	// A temporary the graph no longer reads (last use before b) needs no
	// drop: the executor frees it when the last recompute reading it ends.
	*planned = append(*planned, Action{Kind: Recompute, Tensor: x, After: -1, Before: b})
	r.at[[2]int{x, b}] = true
	return true
}

// rerunsIn is rerunsSame for op q of g re-run just before op b, the writes
// found by scanning g's ops.
func rerunsIn(g *workload.Graph, q, b int) bool {
	return rerunsSame(&g.Ops[q], int32(q), int32(b), func(t, from, to int32) bool {
		for i := from; i < to; i++ {
			if slices.Contains(g.Ops[i].Outputs, int(t)) {
				return true
			}
		}
		return false
	})
}

// drop plans dropping saved tensor s (already marked) after its last
// forward use and recomputing it before its first backward use; on failure
// it unmarks s and plans nothing.
func (r *recomputer) drop(s savedTensor) bool {
	r.budget = 64
	var planned []Action
	def := r.lt[s.t].Def
	ok := def >= 0 && rerunsIn(r.g, def, s.firstBwd)
	if ok {
		for _, in := range r.g.Ops[def].Inputs {
			if !r.ensure(in, s.firstBwd, &planned) {
				ok = false
				break
			}
		}
	}
	if !ok {
		r.unmark(s.t)
		for _, a := range planned {
			if a.Kind == Recompute {
				delete(r.at, [2]int{a.Tensor, a.Before})
			}
		}
		return false
	}
	r.acts = append(r.acts, Action{Kind: Drop, Tensor: s.t, After: s.lastFwd, Before: -1})
	r.acts = append(r.acts, planned...)
	r.acts = append(r.acts, Action{Kind: Recompute, Tensor: s.t, After: -1, Before: s.firstBwd})
	r.at[[2]int{s.t, s.firstBwd}] = true
	return true
}

// PlanCheckpoint is gradient checkpointing (arXiv 1604.06174) with √N
// segments. The N saved activations (tensors produced in the forward pass
// and read again in the backward pass), in the order the forward pass
// produces them, are cut into ⌈√N⌉-sized segments. Every activation of a
// segment is dropped after its last forward use, and the whole segment is
// recomputed once, in forward order, just before the backward pass first
// needs any of it — not each tensor separately, which would re-run shared
// producers again and again and bring tensors back long before their use.
// A recompute starts from what is resident: parameters, inputs, and the
// segment boundaries. A saved activation of an earlier segment that the
// recompute reads becomes a boundary (it is kept, not dropped): in a
// residual or dense network these are the block outputs and features that
// later layers read, so no recompute ever reaches back into an earlier
// segment. Forward temporaries that nothing saves (a convolution's output
// before its batch norm) are recomputed on the way and freed as soon as the
// recompute that reads them ends. The last segment is kept: the backward
// pass starts with it, so dropping it would save nothing.
func PlanCheckpoint(g *workload.Graph, _ gpu.Profile) *Plan {
	plan := &Plan{Policy: "checkpoint"}
	c := newCheckpointer(g)
	var saved []savedTensor
	for _, s := range savedForBackward(g) {
		if g.Tensors[s.t].Kind == workload.Activation && c.recomputable(s.t) {
			saved = append(saved, s)
		}
	}
	sort.SliceStable(saved, func(i, j int) bool { return c.lt[saved[i].t].Def < c.lt[saved[j].t].Def })
	n := len(saved)
	if n == 0 {
		return plan
	}
	seg := 1
	for seg*seg < n {
		seg++
	}
	var total int64
	for _, s := range saved {
		total += g.Tensors[s.t].Bytes
	}
	target := total / int64(seg)
	var segs [][]savedTensor
	from := 0
	var acc int64
	for i, s := range saved {
		acc += g.Tensors[s.t].Bytes
		if acc >= target || i == n-1 {
			segs = append(segs, saved[from:i+1])
			from, acc = i+1, 0
		}
	}
	segs = segs[:len(segs)-1] // the last segment is kept
	for _, sg := range segs {
		for _, s := range sg {
			c.dropped[s.t] = true
		}
	}
	// Later segments first: the boundaries they need are then kept before
	// the earlier segments are planned.
	for k := len(segs) - 1; k >= 0; k-- {
		plan.Actions = append(plan.Actions, c.segment(segs[k])...)
	}
	return plan
}

// checkpointer plans the segments of PlanCheckpoint.
type checkpointer struct {
	g       *workload.Graph
	lt      []workload.Lifetime
	writers []int
	dropped []bool
}

func newCheckpointer(g *workload.Graph) *checkpointer {
	c := &checkpointer{g: g, lt: g.Lifetimes(), writers: make([]int, len(g.Tensors)), dropped: make([]bool, len(g.Tensors))}
	for i := range g.Ops {
		for _, t := range g.Ops[i].Outputs {
			c.writers[t]++
		}
	}
	return c
}

// recomputable reports whether t can be brought back by re-running its
// producer: a forward op, the only writer of t, that updates nothing in
// place.
func (c *checkpointer) recomputable(t int) bool {
	d := c.lt[t].Def
	if d < 0 || c.writers[t] != 1 || c.g.Ops[d].Phase != workload.Forward {
		return false
	}
	for _, o := range c.g.Ops[d].Outputs {
		if c.g.Tensors[o].Kind.Persistent() || c.writers[o] != 1 {
			return false
		}
		for _, in := range c.g.Ops[d].Inputs {
			if in == o {
				return false
			}
		}
	}
	return true
}

// resident reports whether x is on the device when op b starts, given the
// drops planned so far.
func (c *checkpointer) resident(x, b int) bool {
	k := c.g.Tensors[x].Kind
	if k.Persistent() {
		return true
	}
	if c.lt[x].LastUse < b {
		return false
	}
	if k == workload.Input {
		return true
	}
	return c.lt[x].Def >= 0 && c.lt[x].Def < b && !c.dropped[x]
}

// segment plans one segment: drops of its members and, before the first
// backward use of any of them, the recomputes that bring them back. Members
// that cannot be recomputed from resident tensors are kept.
func (c *checkpointer) segment(sg []savedTensor) []Action {
	for {
		var members []savedTensor
		for _, s := range sg {
			if c.dropped[s.t] {
				members = append(members, s)
			}
		}
		if len(members) == 0 {
			return nil
		}
		b := members[0].firstBwd
		for _, s := range members {
			b = min(b, s.firstBwd)
		}
		need, bad := c.closure(members, b)
		if bad >= 0 {
			c.dropped[bad] = false // keep it and plan the rest again
			continue
		}
		var acts []Action
		for _, s := range members {
			acts = append(acts, Action{Kind: Drop, Tensor: s.t, After: s.lastFwd, Before: -1})
		}
		for _, t := range need {
			acts = append(acts, Action{Kind: Recompute, Tensor: t, After: -1, Before: b})
		}
		return acts
	}
}

// closure lists every tensor to recompute before op b so that the members
// come back: the members and the temporaries their producers read that are
// not resident. Each producer must still find its inputs as it read them
// (rerunsIn). A dropped activation of an earlier segment read on the way
// becomes a boundary (kept). It returns a member to keep instead when some
// tensor can be neither found resident nor recomputed.
func (c *checkpointer) closure(members []savedTensor, b int) (need []int, bad int) {
	in := map[int]bool{}
	member := map[int]bool{}
	for _, s := range members {
		member[s.t] = true
	}
	var visit func(t, root, depth int) int
	visit = func(t, root, depth int) int {
		if in[t] {
			return -1
		}
		in[t] = true
		need = append(need, t)
		if !rerunsIn(c.g, c.lt[t].Def, b) {
			return root // its producer's inputs changed since it ran
		}
		for _, x := range c.g.Ops[c.lt[t].Def].Inputs {
			if in[x] || c.resident(x, b) {
				continue
			}
			if member[x] {
				if r := visit(x, x, 0); r >= 0 {
					return r
				}
				continue
			}
			if c.dropped[x] && c.lt[x].LastUse >= b {
				c.dropped[x] = false // an earlier segment's activation: a boundary
				continue
			}
			if depth >= 64 || !c.recomputable(x) {
				return root
			}
			if r := visit(x, root, depth+1); r >= 0 {
				return r
			}
		}
		return -1
	}
	for _, s := range members {
		if r := visit(s.t, s.t, 0); r >= 0 {
			return nil, r
		}
	}
	sort.Slice(need, func(i, j int) bool { return c.lt[need[i]].Def < c.lt[need[j]].Def })
	return need, -1
}

// PlanCapuchin reimplements the idea of Capuchin (ASPLOS'20):
// measure one vanilla iteration's access pattern, then for every saved
// activation decide from its forward-to-backward gap. Tensors are taken
// largest first; a swap is chosen when the swap-out and the swap-in both
// fit on the copy engines' timelines (reserved as they are chosen) with the
// swap-in ending before the first backward use, so it costs no time; when
// it does not fit, recomputation is chosen if the producing op takes less
// time than the swap would stall (and its inputs will be resident);
// otherwise the tensor stays. Swap-ins are issued as late as the measured
// timeline allows (Capuchin's in-trigger prefetch).
func PlanCapuchin(g *workload.Graph, p gpu.Profile) *Plan {
	plan := &Plan{Policy: "capuchin"}
	saved := savedForBackward(g)
	if len(saved) == 0 {
		return plan
	}
	res, err := Execute(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), []Job{{Graph: g}}, ExecOptions{Iterations: 1})
	if err != nil {
		return plan
	}
	start, end := res.Jobs[0].OpStart, res.Jobs[0].OpEnd
	sort.SliceStable(saved, func(i, j int) bool {
		return g.Tensors[saved[i].t].Bytes > g.Tensors[saved[j].t].Bytes
	})
	var d2h, h2d intervals
	r := newRecomputer(g)
	var swaps []Action
	for _, s := range saved {
		bytes := g.Tensors[s.t].Bytes
		out, in := p.D2HSeconds(bytes), p.H2DSeconds(bytes)
		issue := end[s.lastFwd]
		deadline := start[s.firstBwd]
		os := d2h.earliest(issue, out)
		oe := os + out
		is, fits := h2d.latest(oe, deadline, in)
		if r.conflicts(s) {
			continue
		}
		if fits {
			d2h.add(os, oe)
			h2d.add(is, is+in)
			// Issue the swap-in at the end of the latest op that ends by is.
			after := s.lastFwd
			for a := s.firstBwd - 1; a > s.lastFwd; a-- {
				if end[a] <= is {
					after = a
					break
				}
			}
			swaps = append(swaps,
				Action{Kind: SwapOut, Tensor: s.t, After: s.lastFwd, Before: -1},
				Action{Kind: SwapIn, Tensor: s.t, After: after, Before: s.firstBwd})
			r.mark(s, true)
			continue
		}
		stall := oe + in - deadline
		if stall < in {
			stall = in
		}
		def := r.lt[s.t].Def
		if def >= 0 && end[def]-start[def] < stall {
			r.mark(s, false)
			r.drop(s)
		}
	}
	plan.Actions = append(swaps, r.acts...)
	return plan
}

func withUnboundedMemory(p gpu.Profile) gpu.Profile {
	p.MemoryBytes = 1 << 62
	return p
}

// intervals is a sorted list of busy [start, end) intervals on one engine.
type intervals [][2]float64

// earliest is the first start >= t at which dur fits.
func (iv intervals) earliest(t, dur float64) float64 {
	for _, b := range iv {
		if t+dur <= b[0] {
			return t
		}
		if b[1] > t {
			t = b[1]
		}
	}
	return t
}

// latest is the last start >= lo at which dur fits ending by hi.
func (iv intervals) latest(lo, hi, dur float64) (float64, bool) {
	s := hi - dur
	for k := len(iv) - 1; k >= 0; k-- {
		b := iv[k]
		if b[0] >= s+dur {
			continue
		}
		if b[1] <= s {
			break
		}
		s = b[0] - dur
	}
	return s, s >= lo
}

func (iv *intervals) add(s, e float64) {
	k := sort.Search(len(*iv), func(i int) bool { return (*iv)[i][0] >= s })
	*iv = append(*iv, [2]float64{})
	copy((*iv)[k+1:], (*iv)[k:])
	(*iv)[k] = [2]float64{s, e}
}
