package zoo

import (
	"math"
	"slices"
	"strconv"

	"github.com/gpusched/gpusched/workload"
)

// builder records a model's forward pass as graph ops and, for training, a
// tape of backward-op descriptions that is replayed in reverse after the loss
// to produce the backward pass, followed by one Adam op per parameter.
type builder struct {
	g       *workload.Graph
	train   bool
	batch   int
	fdt     string          // storage dtype of float tensors
	mdt     string          // compute dtype of matrix products (conv, matmul)
	edt     string          // compute dtype of every other kernel
	chunk   int64           // largest linear weight kept in one tensor, bytes (0: no limit)
	fused   bool            // each Adam update right after its parameter's last backward use
	spread  bool            // with fused: a chunked weight's updates spread over the rest of backward
	chunks  map[int]chunkOf // parameters that are row chunks of a larger weight
	linears []linearWeight  // every linear layer's own weight, in build order
	// chunkTooSmall says why the chunk size cannot be met (one row of a
	// weight is larger), or "".
	chunkTooSmall string

	params []int // param tensor ids in creation order
	tape   []bop // backward descriptions, in forward order
	loss   int   // the scalar loss tensor (training only), or -1
	nacc   int   // gradient accumulations so far, to name their tensors uniquely
	slab   []int // backing store for copied shapes

	total    int64  // bytes of all tensors so far
	overflow string // the first tensor whose bytes (or the total) overflow int64
}

// bop describes one backward kernel recorded during the forward pass.
type bop struct {
	name   string
	kind   string
	reads  []int // tensor ids; a negative r means the gradient of tensor ^r
	writes []int // tensors whose gradient this kernel produces
	flops  float64
	launch string
	matrix bool // compute dtype is the matrix-product dtype
	// alias marks a kernel-free backward (a residual add): every write
	// receives the gradient read in reads[0].
	alias bool
}

// gradOf encodes "the gradient of tensor t" in bop.reads.
func gradOf(t int) int { return ^t }

func newBuilder(model string, kind workload.JobKind, batch int, dtype string) *builder {
	b := &builder{
		g:     &workload.Graph{Model: model, Kind: kind, Batch: batch},
		train: kind == workload.Train,
		batch: batch,
		fdt:   dtype,
		mdt:   dtype,
		edt:   dtype,
		loss:  -1,
	}
	if dtype == "tf32" {
		b.fdt, b.edt = "fp32", "fp32"
	}
	b.g.Tensors = make([]workload.Tensor, 0, 1024)
	b.g.Ops = make([]workload.Op, 0, 1024)
	return b
}

func numel(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// checkedBytes is the size of a tensor of shape and dtype, and false when
// it does not fit in an int64.
func checkedBytes(shape []int, dtype string) (int64, bool) {
	n := int64(workload.DTypeSize(dtype))
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/int64(d)) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

// tensor appends a tensor and returns its id. The shape slice is owned by
// the graph afterwards. A size that overflows int64 (a huge batch) is
// recorded in b.overflow and makes Build fail.
func (b *builder) tensor(name string, kind workload.TensorKind, dtype string, shape []int) int {
	id := len(b.g.Tensors)
	bytes, ok := checkedBytes(shape, dtype)
	if ok && bytes > math.MaxInt64-b.total {
		ok = false
	}
	if !ok && b.overflow == "" {
		b.overflow = name
	}
	b.total += bytes
	b.g.Tensors = append(b.g.Tensors, workload.Tensor{
		ID:    id,
		Name:  name,
		Bytes: bytes,
		Kind:  kind,
		Shape: shape,
		DType: dtype,
	})
	return id
}

// dims returns a copy of shape carved from a shared slab, so that tensors
// never alias each other's shape slices and copying costs no allocation per
// tensor.
func (b *builder) dims(shape []int) []int {
	if len(b.slab)+len(shape) > cap(b.slab) {
		b.slab = make([]int, 0, 4096)
	}
	n := len(b.slab)
	b.slab = append(b.slab, shape...)
	return b.slab[n : n+len(shape) : n+len(shape)]
}

func (b *builder) param(name string, shape ...int) int {
	id := b.tensor(name, workload.Param, b.fdt, shape)
	b.params = append(b.params, id)
	return id
}

func (b *builder) act(name string, shape ...int) int {
	return b.tensor(name, workload.Activation, b.fdt, shape)
}

func (b *builder) input(name, dtype string, shape ...int) int {
	return b.tensor(name, workload.Input, dtype, shape)
}

func (b *builder) shape(t int) []int { return b.g.Tensors[t].Shape }

func (b *builder) bytes(t int) int64 { return b.g.Tensors[t].Bytes }

// op appends a kernel. mem < 0 means "bytes of all inputs plus all outputs".
func (b *builder) op(name, kind string, phase workload.Phase, matrix bool, in, out []int, flops, mem float64, launch string) int {
	if mem < 0 {
		mem = 0
		for _, t := range in {
			mem += float64(b.g.Tensors[t].Bytes)
		}
		for _, t := range out {
			mem += float64(b.g.Tensors[t].Bytes)
		}
	}
	dt := b.edt
	if matrix {
		dt = b.mdt
	}
	id := len(b.g.Ops)
	b.g.Ops = append(b.g.Ops, workload.Op{
		ID: id, Name: name, Kind: kind, Inputs: in, Outputs: out,
		FLOPs: flops, MemBytes: mem, Phase: phase, DType: dt, Launch: launch,
	})
	return id
}

func (b *builder) fwd(name, kind string, matrix bool, in, out []int, flops float64, launch string) {
	b.op(name, kind, workload.Forward, matrix, in, out, flops, -1, launch)
}

func (b *builder) record(o bop) {
	if b.train {
		b.tape = append(b.tape, o)
	}
}

// Launch configurations: part of a kernel's identity for the FIKIT
// dispatcher, derived from the problem shape the way common libraries tile
// it (128×128 output tiles for matrix products, 256-thread blocks with four
// elements per thread for elementwise kernels, one block per row for row
// reductions).

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func gemmLaunch(m, n, batch int64) string {
	buf := make([]byte, 0, 48)
	buf = append(buf, "gemm grid=("...)
	buf = strconv.AppendInt(buf, ceilDiv(n, 128), 10)
	buf = append(buf, ',')
	buf = strconv.AppendInt(buf, ceilDiv(m, 128), 10)
	buf = append(buf, ',')
	buf = strconv.AppendInt(buf, batch, 10)
	buf = append(buf, ") block=(256,1,1)"...)
	return string(buf)
}

func elemLaunch(n int64) string {
	g := ceilDiv(n, 1024)
	if g < 1 {
		g = 1
	}
	if g > 1<<31-1 {
		g = 1<<31 - 1
	}
	buf := make([]byte, 0, 48)
	buf = append(buf, "elementwise grid=("...)
	buf = strconv.AppendInt(buf, g, 10)
	buf = append(buf, ",1,1) block=(256,1,1)"...)
	return string(buf)
}

func rowLaunch(rows, cols int64) string {
	t := int64(32)
	for t < cols && t < 1024 {
		t *= 2
	}
	buf := make([]byte, 0, 48)
	buf = append(buf, "rows grid=("...)
	buf = strconv.AppendInt(buf, rows, 10)
	buf = append(buf, ",1,1) block=("...)
	buf = strconv.AppendInt(buf, t, 10)
	buf = append(buf, ",1,1)"...)
	return string(buf)
}

// backward replays the tape in reverse, producing gradient tensors and ops.
// Activation gradients that receive several contributions (fan-out: residual
// branches, concatenated features) are accumulated out of place, as autograd
// does; a parameter used twice (tied embeddings) accumulates in place.
// It returns, indexed by forward tensor id, the gradient of each tensor.
func (b *builder) backward() []int {
	nfwd := len(b.g.Tensors)
	grad := make([]int, nfwd)
	for i := range grad {
		grad[i] = -1
	}
	// Seed: d(loss)/d(loss) = 1.
	gl := b.tensor(b.g.Tensors[b.loss].Name+".grad", workload.Gradient, b.fdt, []int{1})
	b.op("loss.grad_seed", "fill", workload.Backward, false, nil, []int{gl}, 1, -1, elemLaunch(1))
	grad[b.loss] = gl

	for i := len(b.tape) - 1; i >= 0; i-- {
		o := &b.tape[i]
		ok := true
		for _, r := range o.reads {
			if r < 0 && grad[^r] < 0 {
				ok = false
				break
			}
		}
		if !ok {
			continue // the output does not reach the loss
		}
		if o.alias {
			g := grad[^o.reads[0]]
			for _, w := range o.writes {
				if b.g.Tensors[w].Kind == workload.Input {
					continue
				}
				b.contribute(grad, w, g)
			}
			continue
		}
		in := make([]int, 0, len(o.reads)+len(o.writes))
		for _, r := range o.reads {
			if r < 0 {
				r = grad[^r]
			}
			in = append(in, r)
		}
		out := make([]int, 0, len(o.writes))
		var partial []int // (forward tensor, partial gradient) pairs
		for _, w := range o.writes {
			t := &b.g.Tensors[w]
			if t.Kind == workload.Input {
				continue
			}
			switch {
			case grad[w] < 0:
				g := b.tensor(t.Name+".grad", workload.Gradient, b.fdt, b.dims(t.Shape))
				grad[w] = g
				out = append(out, g)
			case t.Kind == workload.Param:
				in = append(in, grad[w])
				out = append(out, grad[w])
			default:
				b.nacc++
				g := b.tensor(t.Name+".grad.partial#"+strconv.Itoa(b.nacc), workload.Gradient, b.fdt, b.dims(t.Shape))
				out = append(out, g)
				partial = append(partial, w, g)
			}
		}
		if len(out) == 0 {
			continue
		}
		b.op(o.name, o.kind, workload.Backward, o.matrix, in, out, o.flops, -1, o.launch)
		for j := 0; j < len(partial); j += 2 {
			b.contribute(grad, partial[j], partial[j+1])
		}
	}
	return grad
}

// contribute adds gradient g to tensor w's gradient: it becomes w's gradient
// if w has none yet, otherwise an add kernel sums the two into a new tensor.
func (b *builder) contribute(grad []int, w, g int) {
	if grad[w] < 0 {
		grad[w] = g
		return
	}
	t := &b.g.Tensors[w]
	n := numel(t.Shape)
	b.nacc++
	s := b.tensor(t.Name+".grad.sum#"+strconv.Itoa(b.nacc), workload.Gradient, b.fdt, b.dims(t.Shape))
	b.op(t.Name+".grad_accum#"+strconv.Itoa(b.nacc), "add", workload.Backward, false, []int{grad[w], g}, []int{s}, float64(n), -1, elemLaunch(n))
	grad[w] = s
}

// adam appends one Adam update per parameter: it reads the parameter, its
// gradient and both moments and writes the parameter and moments in place.
// The moments are kept in fp32 whatever the storage dtype, as mixed-precision
// optimizers do.
func (b *builder) adam(grads []int) {
	for _, p := range b.params {
		t := b.g.Tensors[p]
		m := b.tensor(t.Name+".adam_m", workload.OptimizerState, "fp32", b.dims(t.Shape))
		v := b.tensor(t.Name+".adam_v", workload.OptimizerState, "fp32", b.dims(t.Shape))
		n := numel(t.Shape)
		b.op(t.Name+".adam", "adam", workload.Optimizer, false,
			[]int{p, grads[p], m, v}, []int{p, m, v}, 12*float64(n), -1, elemLaunch(n))
	}
}

// chunkOf places a parameter among the row chunks of its weight: chunk k
// of n.
type chunkOf struct{ k, n int }

// finish runs backward and the optimizer for training graphs.
func (b *builder) finish() *workload.Graph {
	if b.train {
		b.adam(b.backward())
		if b.fused {
			b.fuseOptimizer()
		}
	}
	return b.g
}

// fuseOptimizer moves each Adam op to just after the last op before it that
// reads or writes its parameter or gradient: the optimizer step fused into
// backward, as a per-parameter gradient hook does it. Each update reads only
// its own parameter, gradient and moments, so the training math is the
// same; a gradient is freed as soon as its update ran.
func (b *builder) fuseOptimizer() {
	ops := b.g.Ops
	last := make(map[int]int) // tensor -> last non-Adam op touching it
	var adams []int
	for i := range ops {
		if ops[i].Kind == "adam" {
			adams = append(adams, i)
			continue
		}
		for _, t := range ops[i].Inputs {
			last[t] = i
		}
		for _, t := range ops[i].Outputs {
			last[t] = i
		}
	}
	after := make(map[int][]int) // op -> Adam ops placed right after it
	for _, a := range adams {
		at := -1
		for _, t := range ops[a].Inputs[:2] { // the parameter and its gradient
			if l, ok := last[t]; ok && l > at {
				at = l
			}
		}
		after[at] = append(after[at], a)
	}
	if b.spread {
		after = b.spreadChunks(ops, after)
	}
	out := make([]workload.Op, 0, len(ops))
	out = append(out, pick(ops, after[-1])...)
	for i := range ops {
		if ops[i].Kind == "adam" {
			continue
		}
		out = append(out, ops[i])
		out = append(out, pick(ops, after[i])...)
	}
	for i := range out {
		out[i].ID = i
	}
	b.g.Ops = out
}

// spreadChunks spreads the updates of a chunked weight, which fusion puts
// together right after the weight's gradients are final, over the rest of
// backward: chunk k of a weight's n goes right after the first op at which
// at least k/n of the FLOPs from its fusion point to the end of backward
// are done (chunk 0 stays at the fusion point; the layers' matrix products,
// which take most of backward's time, pace the updates). Each chunk's
// moments then need to be on the device only around its own update, and
// the copy engines move one chunk's moments while the next layers compute,
// where fused updates need all of a weight's moments at once, when
// activations are at their peak. A per-layer backward hook that runs the
// pending chunk updates in turn does the same in a training framework. The
// updates and the order of every other op are unchanged.
func (b *builder) spreadChunks(ops []workload.Op, after map[int][]int) map[int][]int {
	// done[i]: FLOPs of the non-Adam ops before op i; rest: those ops.
	done := make([]float64, len(ops)+1)
	var rest []int
	for i := range ops {
		done[i+1] = done[i]
		if ops[i].Kind != "adam" {
			done[i+1] += ops[i].FLOPs
			rest = append(rest, i)
		}
	}
	ats := make([]int, 0, len(after))
	for at := range after {
		ats = append(ats, at)
	}
	slices.Sort(ats)
	out := make(map[int][]int, len(after))
	for _, at := range ats {
		for _, a := range after[at] {
			c, ok := b.chunks[ops[a].Inputs[0]]
			if !ok || at < 0 {
				out[at] = append(out[at], a)
				continue
			}
			goal := done[at] + (done[len(ops)]-done[at])*float64(c.k)/float64(c.n)
			// The first op from the fusion point whose end reaches the goal.
			j, _ := slices.BinarySearchFunc(rest, goal, func(i int, g float64) int {
				if i < at || done[i+1] < g {
					return -1
				}
				return 1
			})
			if j == len(rest) {
				j--
			}
			out[rest[j]] = append(out[rest[j]], a)
		}
	}
	return out
}

func pick(ops []workload.Op, idx []int) []workload.Op {
	r := make([]workload.Op, 0, len(idx))
	for _, i := range idx {
		r = append(r, ops[i])
	}
	return r
}
