package tensorsched

import (
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/workload"
)

// checkKeep validates a Keep action against a graph whose tensors are
// produced by def and last read by last: an activation or gradient kept
// until an op after its last use.
func checkKeep(g *workload.Graph, def, last []int32, a *Action) error {
	k := g.Tensors[a.Tensor].Kind
	if k.Persistent() || k == workload.Input || def[a.Tensor] < 0 {
		return fmt.Errorf("only a tensor an op produces can be kept (tensor %s is %s)", g.Tensors[a.Tensor].Name, k)
	}
	if a.After <= int(last[a.Tensor]) || a.After >= len(g.Ops) {
		return fmt.Errorf("after = %d must be an op after the tensor's last use (op %d) and before %d", a.After, last[a.Tensor], len(g.Ops))
	}
	return nil
}

// keptFrees returns the free tables (tensors freed at the end of op i:
// at[off[i]:off[i+1]]) of freeOff/freeAt with every tensor of keeps moved
// from its last use to the latest op a Keep of it names, and last with the
// same change. keeps must be valid (checkKeep).
func keptFrees(freeOff, freeAt, last []int32, keeps []Action) (off, at, kept []int32) {
	until := map[int32]int32{}
	for _, a := range keeps {
		if u, ok := until[int32(a.Tensor)]; !ok || int32(a.After) > u {
			until[int32(a.Tensor)] = int32(a.After)
		}
	}
	ts := make([]int32, 0, len(until))
	for t := range until {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	no := len(freeOff) - 1
	off = make([]int32, no+1)
	for i := 0; i < no; i++ {
		for _, t := range freeAt[freeOff[i]:freeOff[i+1]] {
			if _, ok := until[t]; !ok {
				off[i+1]++
			}
		}
	}
	for _, t := range ts {
		off[until[t]+1]++
	}
	for i := 0; i < no; i++ {
		off[i+1] += off[i]
	}
	at = make([]int32, off[no])
	fill := slices.Clone(off[:no])
	for i := 0; i < no; i++ {
		for _, t := range freeAt[freeOff[i]:freeOff[i+1]] {
			if _, ok := until[t]; !ok {
				at[fill[i]] = t
				fill[i]++
			}
		}
	}
	kept = slices.Clone(last)
	for _, t := range ts {
		u := until[t]
		at[fill[u]] = t
		fill[u]++
		kept[t] = u
	}
	return off, at, kept
}

// concatKeeps calls f for every input t of a forward concatenation in g
// that the graph frees before the concatenation's output (last: the last
// uses), with that output's last use: kept until then, the inputs let a
// plan drop the output, a copy of them, and rebuild it by re-running the
// concatenation wherever it is read again.
func concatKeeps(g *workload.Graph, last []int32, f func(t, until int32)) {
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind != "concat" || op.Phase != workload.Forward || len(op.Outputs) != 1 {
			continue
		}
		o := op.Outputs[0]
		for _, t := range op.Inputs {
			k := g.Tensors[t].Kind
			if k.Persistent() || k == workload.Input || last[t] >= last[o] {
				continue
			}
			f(int32(t), last[o])
		}
	}
}

// hasConcatKeeps reports whether g has concatenation inputs that
// initKeeps would keep.
func hasConcatKeeps(g *workload.Graph) bool {
	if g == nil {
		return false
	}
	last := make([]int32, len(g.Tensors))
	for t, l := range g.Lifetimes() {
		last[t] = int32(l.LastUse)
	}
	found := false
	concatKeeps(g, last, func(int32, int32) { found = true })
	return found
}

// initKeeps keeps every concatenation input the graph frees before the
// concatenation's output until that output's last use (Keep actions), so
// that dropping the output and re-running the concatenation before its
// later reads is a recompute of a memory-bound copy from resident sources
// (the memory-efficient DenseNet: the dense layers' growing concatenations
// are rebuilt from the layers' small outputs). pruneKeeps removes what no
// recompute ends up reading.
func (pl *planner) initKeeps() {
	pl.noKeeps()
	for j, ji := range pl.m.jobs {
		k := pl.keep[j]
		concatKeeps(ji.g, ji.last, func(t, until int32) { k[t] = max(k[t], until) })
	}
}

// pruneKeeps shortens every keep to the last recompute that reads its
// tensor past its last use (pl.pinned), removing those none reads.
// Keeps take no time, so the plan runs as fast and its memory can only
// fall.
func (pl *planner) pruneKeeps() {
	pl.rWins = -1
	any := false
	for j, k := range pl.keep {
		last := pl.m.jobs[j].last
		for t, x := range k {
			if x < 0 {
				continue
			}
			need := int32(-1)
			for _, p := range pl.pinned[j][t] {
				if p > last[t] && p > need {
					need = p
				}
			}
			k[t] = need
			any = any || need >= 0
		}
	}
	if !any {
		pl.keep = nil
	}
}

// keepRatio bounds what a recompute keeps: the sources it keeps past
// their last use hold at most 1/keepRatio of the bytes it frees (a
// weight gradient rebuilt from the layer's input and output gradient:
// VGG16's first fully connected layer, 392 MiB from 1.8 MiB).
const keepRatio = 8

// noKeeps allocates the planner's keep table with nothing kept.
func (pl *planner) noKeeps() {
	pl.rWins = -1
	pl.keep = make([][]int32, len(pl.m.jobs))
	for j, ji := range pl.m.jobs {
		k := make([]int32, len(ji.bytes))
		for t := range k {
			k[t] = -1
		}
		pl.keep[j] = k
	}
}

// keepable reports whether tensor t of job j, which the graph frees
// before op x, can be kept on the device until op x for a recompute to
// read: an activation or gradient produced before x, resident after its
// last use (no window keeps it off there).
func (pl *planner) keepable(j int, t, x int32) bool {
	ji := pl.m.jobs[j]
	if ji.persistent[t] || ji.g.Tensors[t].Kind == workload.Input || ji.def[t] < 0 || ji.def[t] >= x || ji.last[t] >= x {
		return false
	}
	return !pl.offBefore(j, t, ji.last[t]+1)
}
