package tensorsched

// Property-based fuzz tests of the planners on random training graphs.
//
// The generator (genGraph) builds a random but valid training iteration the
// way workload/zoo builds its models: a DAG of forward layers (linear and
// convolution layers with weights and biases, batch norm, elementwise
// activations, pooling, residual adds, concatenations, splits, weights
// shared by two layers, in-place updates of activations), a loss, the
// backward pass replayed from a tape in reverse (gradients of tensors read
// twice accumulated out of place, of shared weights in place), and one
// optimizer update per parameter (SGD, momentum or Adam, with their
// optimizer state), after the backward pass or as soon as the parameter's
// gradient is final. Tensor sizes range from empty and a few bytes to
// 256 MiB. Every choice comes from the fuzz input's bytes, then from a PCG
// stream seeded by its seed, so an input always gives the same graph.

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/internal/fuzzsrc"
	"github.com/gpusched/gpusched/workload"
)

// fuzzSource yields the generator's choices (see fuzzsrc).
type fuzzSource = fuzzsrc.Source

func newFuzzSource(seed uint64, data []byte) *fuzzSource { return fuzzsrc.New(seed, data) }

// genBop is one backward kernel recorded during the forward pass (as
// zoo's bop): reads holds tensor ids, ^t meaning the gradient of t;
// writes the tensors whose gradients it produces; alias passes the
// gradient read in reads[0] on to every write without a kernel.
type genBop struct {
	name   string
	kind   string
	reads  []int
	writes []int
	flops  float64
	alias  bool
}

// graphGen builds one random training graph.
type graphGen struct {
	src    *fuzzSource
	g      *workload.Graph
	maxLog int   // log2 of the largest tensor's element count
	params []int // in creation order
	weight []int // matrix weights, which a later layer may share
	tape   []genBop
	acts   []int // activations (and the input) a layer may read
	nacc   int
}

func (b *graphGen) tensor(name string, kind workload.TensorKind, bytes int64) int {
	id := len(b.g.Tensors)
	b.g.Tensors = append(b.g.Tensors, workload.Tensor{ID: id, Name: name + "#" + strconv.Itoa(id), Bytes: bytes, Kind: kind})
	return id
}

// size is a random tensor size: mostly near the graph's scale, sometimes
// tiny, rarely empty.
func (b *graphGen) size() int64 {
	switch r := b.src.Intn(32); {
	case r == 0:
		return 0
	case r < 5:
		return 4 * int64(1+b.src.Intn(64))
	default:
		k := b.maxLog - b.src.Intn(min(b.maxLog, 8)+1)
		return 4 * (int64(1)<<k + int64(b.src.Intn(1<<min(k, 16))))
	}
}

// op appends an op; mem is the bytes it reads and writes.
func (b *graphGen) op(name, kind string, phase workload.Phase, in, out []int, flops float64) int {
	mem := 0.0
	for _, t := range in {
		mem += float64(b.g.Tensors[t].Bytes)
	}
	for _, t := range out {
		mem += float64(b.g.Tensors[t].Bytes)
	}
	o := workload.Op{ID: len(b.g.Ops), Name: name, Kind: kind, Inputs: in, Outputs: out, FLOPs: flops, MemBytes: mem, Phase: phase}
	if b.src.Chance(1, 16) {
		o.MeasuredSeconds = float64(1+b.src.Intn(5000)) * 1e-6
	}
	if b.src.Chance(1, 8) {
		o.DType = "fp16"
	}
	b.g.Ops = append(b.g.Ops, o)
	return o.ID
}

func (b *graphGen) elems(t int) float64 { return float64(b.g.Tensors[t].Bytes) / 4 }

// pick returns an activation to read: usually the latest.
func (b *graphGen) pick() int {
	if len(b.acts) == 1 || b.src.Chance(5, 8) {
		return b.acts[len(b.acts)-1]
	}
	return b.acts[b.src.Intn(len(b.acts))]
}

func (b *graphGen) param(name string, bytes int64) int {
	p := b.tensor(name, workload.Param, bytes)
	b.params = append(b.params, p)
	return p
}

// matmul is a linear or convolution layer: y = x·W (+ bias), or with a
// weight shared with an earlier layer.
func (b *graphGen) matmul(kind string) int {
	x := b.pick()
	var w int
	if len(b.weight) > 0 && b.src.Chance(1, 5) {
		w = b.weight[b.src.Intn(len(b.weight))]
	} else {
		w = b.param(kind+".w", b.size())
		b.weight = append(b.weight, w)
	}
	in := []int{x, w}
	bias := -1
	if b.src.Chance(1, 2) {
		bias = b.param(kind+".b", 4*int64(1+b.src.Intn(512)))
		in = append(in, bias)
	}
	y := b.tensor(kind, workload.Activation, b.size())
	flops := 2 * b.elems(y) * float64(int(1)<<b.src.Intn(12))
	b.op(kind, kind, workload.Forward, in, []int{y}, flops)
	b.tape = append(b.tape,
		genBop{name: kind + ".bwd_data", kind: kind + "_bwd_data", reads: []int{^y, w}, writes: []int{x}, flops: flops},
		genBop{name: kind + ".bwd_weight", kind: kind + "_bwd_weight", reads: []int{^y, x}, writes: []int{w}, flops: flops})
	if bias >= 0 {
		b.tape = append(b.tape, genBop{name: kind + ".bwd_bias", kind: "bias_grad", reads: []int{^y}, writes: []int{bias}, flops: b.elems(y)})
	}
	return y
}

// layer appends one random forward layer and returns its output.
func (b *graphGen) layer() int {
	switch b.src.Intn(12) {
	case 0:
		return b.matmul("matmul")
	case 1:
		return b.matmul("conv2d")
	case 2, 3: // relu, tanh (backward reads the output), gelu (the input)
		x := b.pick()
		kind := [...]string{"relu", "tanh", "gelu"}[b.src.Intn(3)]
		y := b.tensor(kind, workload.Activation, b.g.Tensors[x].Bytes)
		b.op(kind, kind, workload.Forward, []int{x}, []int{y}, b.elems(y))
		saved := y
		if kind == "gelu" {
			saved = x
		}
		b.tape = append(b.tape, genBop{name: kind + ".bwd", kind: kind + "_bwd", reads: []int{^y, saved}, writes: []int{x}, flops: b.elems(y)})
		return y
	case 4: // batch norm: a backward kernel with three gradients
		x := b.pick()
		c := 4 * int64(1+b.src.Intn(256))
		gamma, beta := b.param("bn.gamma", c), b.param("bn.beta", c)
		y := b.tensor("bn", workload.Activation, b.g.Tensors[x].Bytes)
		b.op("bn", "batchnorm", workload.Forward, []int{x, gamma, beta}, []int{y}, 6*b.elems(y))
		b.tape = append(b.tape, genBop{name: "bn.bwd", kind: "batchnorm_bwd", reads: []int{^y, x, gamma}, writes: []int{x, gamma, beta}, flops: 10 * b.elems(y)})
		return y
	case 5: // max or average pooling
		x := b.pick()
		y := b.tensor("pool", workload.Activation, b.g.Tensors[x].Bytes/int64(1+b.src.Intn(4)))
		if b.src.Chance(1, 2) {
			b.op("maxpool", "maxpool", workload.Forward, []int{x}, []int{y}, b.elems(x))
			b.tape = append(b.tape, genBop{name: "maxpool.bwd", kind: "maxpool_bwd", reads: []int{^y, x, y}, writes: []int{x}, flops: b.elems(x)})
		} else {
			b.op("avgpool", "avgpool", workload.Forward, []int{x}, []int{y}, b.elems(x))
			b.tape = append(b.tape, genBop{name: "avgpool.bwd", kind: "avgpool_bwd", reads: []int{^y}, writes: []int{x}, flops: b.elems(x)})
		}
		return y
	case 6, 7: // residual add of two or three activations
		xs := []int{b.pick(), b.acts[b.src.Intn(len(b.acts))]}
		if b.src.Chance(1, 3) {
			xs = append(xs, b.acts[b.src.Intn(len(b.acts))])
		}
		xs = distinct(xs)
		y := b.tensor("add", workload.Activation, b.g.Tensors[xs[0]].Bytes)
		b.op("add", "add", workload.Forward, xs, []int{y}, b.elems(y))
		b.tape = append(b.tape, genBop{name: "add.bwd", alias: true, reads: []int{^y}, writes: xs})
		return y
	case 8: // concatenation; its backward splits the gradient
		xs := []int{b.acts[b.src.Intn(len(b.acts))], b.pick()}
		if b.src.Chance(1, 3) {
			xs = append(xs, b.acts[b.src.Intn(len(b.acts))])
		}
		xs = distinct(xs)
		var bytes int64
		for _, x := range xs {
			bytes += b.g.Tensors[x].Bytes
		}
		y := b.tensor("concat", workload.Activation, bytes)
		b.op("concat", "concat", workload.Forward, xs, []int{y}, 0)
		b.tape = append(b.tape, genBop{name: "concat.bwd", kind: "split", reads: []int{^y}, writes: xs})
		return y
	case 9: // split into two outputs; its backward concatenates
		x := b.pick()
		half := b.g.Tensors[x].Bytes / 2
		y0 := b.tensor("split.0", workload.Activation, half)
		y1 := b.tensor("split.1", workload.Activation, half)
		b.op("split", "split", workload.Forward, []int{x}, []int{y0, y1}, 0)
		b.tape = append(b.tape, genBop{name: "split.bwd", kind: "concat", reads: []int{^y0, ^y1}, writes: []int{x}})
		b.acts = append(b.acts, y0)
		return y1
	case 10: // an in-place update of an activation (dropout_, relu_)
		x := b.acts[len(b.acts)-1]
		if b.g.Tensors[x].Kind == workload.Input {
			return b.matmul("matmul")
		}
		b.op("inplace", "relu_", workload.Forward, []int{x}, []int{x}, b.elems(x))
		return -1
	default: // a layer whose output only a later layer may read
		return b.matmul("conv2d")
	}
}

// distinct drops repeated tensors from xs, keeping the first of each.
func distinct(xs []int) []int {
	var out []int
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// backward replays the tape in reverse, as zoo's builder does, and returns
// the ops' gradient of every forward tensor (-1: none).
func (b *graphGen) backward(loss int) []int {
	nfwd := len(b.g.Tensors)
	grad := make([]int, nfwd)
	for i := range grad {
		grad[i] = -1
	}
	gl := b.tensor("loss.grad", workload.Gradient, 4)
	b.op("loss.grad_seed", "fill", workload.Backward, nil, []int{gl}, 1)
	grad[loss] = gl
	contribute := func(w, g int) {
		if grad[w] < 0 {
			grad[w] = g
			return
		}
		b.nacc++
		s := b.tensor("grad.sum", workload.Gradient, b.g.Tensors[w].Bytes)
		b.op("grad_accum", "add", workload.Backward, []int{grad[w], g}, []int{s}, b.elems(s))
		grad[w] = s
	}
	for i := len(b.tape) - 1; i >= 0; i-- {
		o := &b.tape[i]
		ok := true
		for _, r := range o.reads {
			if r < 0 && grad[^r] < 0 {
				ok = false
			}
		}
		if !ok {
			continue // does not reach the loss
		}
		if o.alias {
			for _, w := range o.writes {
				if b.g.Tensors[w].Kind != workload.Input {
					contribute(w, grad[^o.reads[0]])
				}
			}
			continue
		}
		var in, out, partial []int
		for _, r := range o.reads {
			if r < 0 {
				r = grad[^r]
			}
			in = append(in, r)
		}
		for _, w := range o.writes {
			t := &b.g.Tensors[w]
			switch {
			case t.Kind == workload.Input:
			case grad[w] < 0:
				grad[w] = b.tensor(t.Name+".grad", workload.Gradient, t.Bytes)
				out = append(out, grad[w])
			case t.Kind == workload.Param: // a shared weight: accumulate in place
				in = append(in, grad[w])
				out = append(out, grad[w])
			default:
				g := b.tensor(t.Name+".grad.partial", workload.Gradient, t.Bytes)
				out = append(out, g)
				partial = append(partial, w, g)
			}
		}
		if len(out) == 0 {
			continue
		}
		b.op(o.name, o.kind, workload.Backward, in, out, o.flops)
		for j := 0; j < len(partial); j += 2 {
			contribute(partial[j], partial[j+1])
		}
	}
	return grad
}

// genGraph builds a random training graph from src.
func genGraph(src *fuzzSource) *workload.Graph {
	b := &graphGen{src: src, g: &workload.Graph{Model: "fuzz", Kind: workload.Train, Batch: 1 + src.Intn(64)}}
	b.maxLog = [...]int{4, 10, 16, 20, 22, 24, 26}[src.Intn(7)]
	if src.Chance(1, 4) {
		b.g.HostSecondsPerIteration = float64(src.Intn(2000)) * 1e-6
	}
	if src.Chance(1, 4) {
		b.g.HostSecondsPerKernel = float64(src.Intn(20)) * 1e-6
	}
	x := b.tensor("input", workload.Input, b.size())
	b.acts = []int{x}
	layers := 1 + src.Intn(20)
	for range layers {
		if y := b.layer(); y >= 0 {
			b.acts = append(b.acts, y)
		}
	}
	// Most branches reach the loss: the activations no layer reads are
	// summed (or concatenated) into the logits.
	read := map[int]bool{}
	for i := range b.g.Ops {
		for _, t := range b.g.Ops[i].Inputs {
			read[t] = true
		}
	}
	var open []int
	for _, a := range b.acts[1:] {
		if !read[a] && !slices.Contains(open, a) {
			open = append(open, a)
		}
	}
	logits := b.acts[len(b.acts)-1]
	if len(open) > 1 && src.Chance(3, 4) {
		kind := [...]string{"add", "concat"}[src.Intn(2)]
		var bytes int64
		for _, a := range open {
			bytes = max(bytes, b.g.Tensors[a].Bytes)
			if kind == "concat" {
				bytes += b.g.Tensors[a].Bytes
			}
		}
		logits = b.tensor(kind, workload.Activation, bytes)
		b.op(kind, kind, workload.Forward, open, []int{logits}, b.elems(logits))
		if kind == "add" {
			b.tape = append(b.tape, genBop{name: "add.bwd", alias: true, reads: []int{^logits}, writes: open})
		} else {
			b.tape = append(b.tape, genBop{name: "concat.bwd", kind: "split", reads: []int{^logits}, writes: open})
		}
	}
	if logits == x {
		logits = b.matmul("matmul")
	}
	labels := b.tensor("labels", workload.Input, 4*int64(1+src.Intn(64)))
	loss := b.tensor("loss", workload.Activation, 4)
	b.op("loss", "nll_loss", workload.Forward, []int{logits, labels}, []int{loss}, b.elems(logits))
	b.tape = append(b.tape, genBop{name: "loss.bwd", kind: "nll_loss_bwd", reads: []int{^loss, labels}, writes: []int{logits}, flops: b.elems(logits)})
	nfwd := len(b.g.Ops)
	grad := b.backward(loss)

	// The optimizer: one update per parameter with a gradient, after the
	// backward pass or (interleaved) right after the op that last writes
	// its gradient.
	state := src.Intn(3) // SGD, momentum, Adam
	interleave := src.Chance(1, 4)
	type update struct{ p, g int }
	var ups []update
	for _, p := range b.params {
		if grad[p] >= 0 {
			ups = append(ups, update{p, grad[p]})
		}
	}
	bwd := b.g.Ops[nfwd:]
	b.g.Ops = b.g.Ops[:nfwd:nfwd]
	emit := func(u update) {
		in, out := []int{u.p, u.g}, []int{u.p}
		for k := range state {
			m := b.tensor(b.g.Tensors[u.p].Name+".state"+strconv.Itoa(k), workload.OptimizerState, b.g.Tensors[u.p].Bytes)
			in, out = append(in, m), append(out, m)
		}
		kind := [...]string{"sgd", "momentum", "adam"}[state]
		b.g.Ops = append(b.g.Ops, workload.Op{ID: len(b.g.Ops), Name: kind, Kind: kind, Inputs: in, Outputs: out,
			FLOPs: 12 * b.elems(u.p), MemBytes: float64(len(in)+len(out)) * float64(b.g.Tensors[u.p].Bytes), Phase: workload.Optimizer})
	}
	lastWrite := map[int]int{} // gradient → index in bwd of its last writer
	for i := range bwd {
		for _, t := range bwd[i].Outputs {
			lastWrite[t] = i
		}
	}
	for i := range bwd {
		op := bwd[i]
		op.ID = len(b.g.Ops)
		b.g.Ops = append(b.g.Ops, op)
		if interleave {
			for _, u := range ups {
				if lastWrite[u.g] == i {
					emit(u)
				}
			}
		}
	}
	if !interleave {
		for _, u := range ups {
			emit(u)
		}
	}
	return b.g
}

// describe summarises g for failure messages.
func describe(g *workload.Graph) string {
	var n [3]int
	for i := range g.Ops {
		n[g.Ops[i].Phase]++
	}
	return fmt.Sprintf("graph: %d tensors, %d ops (%d forward, %d backward, %d optimizer), %s persistent, host %.6fs + %.6fs/kernel",
		len(g.Tensors), len(g.Ops), n[0], n[1], n[2], gpu.FormatBytes(g.PersistentBytes()), g.HostSecondsPerIteration, g.HostSecondsPerKernel)
}

// fuzzProfile picks one of the two devices of the evaluation.
func fuzzProfile(src *fuzzSource) gpu.Profile {
	return gpu.MustProfile([...]string{"rtx2080ti-11gb", "h100-80gb"}[src.Intn(2)])
}

// runChecked executes jobs on a device like p with unbounded memory (the
// planner does not know the capacity; budgets are the jobs'), with the
// correctness checker.
func runChecked(p gpu.Profile, jobs []Job) (*Result, error) {
	return Execute(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), jobs, ExecOptions{Check: true})
}

// closeTo reports whether a and b agree to a relative 1e-9.
func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// withinTolerance reports whether t is at most (1+tol) times ref (to 1e-9).
func withinTolerance(t, ref, tol float64) bool { return t <= ref*(1+tol)*(1+1e-9) }

// statsNoClock is st without its planning wall time (the only figure
// that may differ between two plans of the same input).
func statsNoClock(st PlanStats) PlanStats {
	st.Planning = 0
	return st
}

func jointNoClock(st JointStats) JointStats {
	st.Planning = 0
	st.Jobs = append([]PlanStats(nil), st.Jobs...)
	for i := range st.Jobs {
		st.Jobs[i].Planning = 0
	}
	return st
}

// checkPlanTensile plans g for target tg and checks PlanTensile's
// promises (see FuzzPlanTensileRandomGraph).
func checkPlanTensile(t *testing.T, g *workload.Graph, p gpu.Profile, tg Target, van *Result) {
	t.Helper()
	what := fmt.Sprintf("%s on %s, target %+v (vanilla peak %d)", describe(g), p.Name, tg, van.PeakBytes)
	plan, st, err := PlanTensile(g, p, tg)
	switch {
	case err == nil:
	case tg.Budget > 0 && errors.Is(err, ErrBudget):
	default:
		t.Fatalf("%s: PlanTensile: %v", what, err)
	}
	if plan == nil {
		t.Fatalf("%s: no plan (error %v)", what, err)
	}
	// Determinism: the same input gives the same plan and figures.
	plan2, st2, err2 := PlanTensile(g, p, tg)
	if !reflect.DeepEqual(plan, plan2) || statsNoClock(st) != statsNoClock(st2) || fmt.Sprint(err) != fmt.Sprint(err2) {
		t.Fatalf("%s: two plans differ:\n%+v\n%+v\nerrors %v / %v", what, statsNoClock(st), statsNoClock(st2), err, err2)
	}
	job := Job{Name: "fuzz", Graph: g, Plan: plan}
	if err == nil && tg.Budget > 0 {
		job.Budget = tg.Budget // the executor enforces it over the whole run
	}
	res, xerr := runChecked(p, []Job{job})
	if xerr != nil {
		t.Fatalf("%s: executing the plan (%d actions, %+v, planner error %v): %v", what, len(plan.Actions), statsNoClock(st), err, xerr)
	}
	jr := res.Jobs[0]
	// The prediction is exact.
	if st.VanillaPeakBytes != van.PeakBytes || !closeTo(st.VanillaSeconds, van.Seconds) {
		t.Errorf("%s: vanilla predicted %d B %.9fs, executor %d B %.9fs", what, st.VanillaPeakBytes, st.VanillaSeconds, van.PeakBytes, van.Seconds)
	}
	if st.PeakBytes != res.PeakBytes || max(st.PeakBytes, st.FirstIterationPeakBytes) != jr.RunPeakBytes {
		t.Errorf("%s: predicted peak %d (first iteration %d), executor %d (whole run %d)", what, st.PeakBytes, st.FirstIterationPeakBytes, res.PeakBytes, jr.RunPeakBytes)
	}
	secs := res.Seconds
	if st.WaitsOnCopies {
		secs = jr.IterationSeconds
	}
	if !closeTo(st.Seconds, secs) {
		t.Errorf("%s: predicted %.9fs, executor %.9fs", what, st.Seconds, secs)
	}
	if tg.Budget > 0 {
		runPeak := jr.RunPeakBytes
		if err == nil && runPeak > tg.Budget {
			t.Errorf("%s: the plan fits, says the planner, but peaks at %d", what, runPeak)
		}
		if err != nil && runPeak <= tg.Budget {
			t.Errorf("%s: ErrBudget, but the plan peaks at %d over the whole run: %v", what, runPeak, err)
		}
	}
	if err == nil && tg.Tolerance > 0 || tg.Budget == 0 {
		// Within the time tolerance (a budget's cap), as measured.
		if !withinTolerance(jr.IterationSeconds, van.Jobs[0].IterationSeconds, tg.Tolerance) || !withinTolerance(res.Seconds, van.Seconds, tg.Tolerance) {
			t.Errorf("%s: iteration %.9fs (makespan %.9fs), vanilla %.9fs (%.9fs): EOR %.6f over %.6f", what,
				jr.IterationSeconds, res.Seconds, van.Jobs[0].IterationSeconds, van.Seconds, jr.IterationSeconds/van.Jobs[0].IterationSeconds-1, tg.Tolerance)
		}
	}
	// The least peak within a tolerance is the steady iteration's; the
	// whole run's too when the plan starts on the host what it swaps
	// across iterations (the default). With ResidentStart the first
	// iteration holds them all beside what the plan keeps or brings back
	// early, and may peak above vanilla (by a 128 B keep on one input).
	if tg.Budget == 0 && (res.PeakBytes > van.PeakBytes || !tg.ResidentStart && jr.RunPeakBytes > van.Jobs[0].RunPeakBytes) {
		t.Errorf("%s: the least-peak plan peaks at %d (whole run %d), vanilla %d (%d)", what, res.PeakBytes, jr.RunPeakBytes, van.PeakBytes, van.Jobs[0].RunPeakBytes)
	}
	// No plan goes below the op floor (Graph.OpFloor).
	if fl, op := g.OpFloor(); res.PeakBytes < fl {
		t.Errorf("%s: the plan peaks at %d, below the op floor %d (op %d)", what, res.PeakBytes, fl, op)
	}
}

// checkBaselines runs every baseline's plan of g with the checker.
func checkBaselines(t *testing.T, g *workload.Graph, p gpu.Profile) {
	t.Helper()
	for _, name := range BaselineNames() {
		b, err := LookupBaseline(name)
		if err != nil {
			t.Fatal(err)
		}
		plan := b(g, p)
		res, err := runChecked(p, []Job{{Name: name, Graph: g, Plan: plan}})
		if err != nil {
			t.Errorf("%s on %s: baseline %s (%d actions): %v", describe(g), p.Name, name, len(plan.Actions), err)
			continue
		}
		if fl, op := g.OpFloor(); res.PeakBytes < fl {
			t.Errorf("%s on %s: baseline %s peaks at %d, below the op floor %d (op %d)", describe(g), p.Name, name, res.PeakBytes, fl, op)
		}
	}
}

// FuzzPlanTensileRandomGraph plans a random training graph (genGraph) on
// an RTX 2080 Ti or an H100 for a random target: a time tolerance in
// [0, 1], or a budget between 30 % and 110 % of the vanilla peak (with a
// time cap in [0, 1] a third of the time); either may start everything
// resident. For every input:
//   - the graph validates, and runs vanilla with the checker;
//   - PlanTensile neither panics nor fails, but for ErrBudget under a
//     budget, which still returns the best plan;
//   - planning twice gives the same plan and figures;
//   - the plan runs on the executor with the correctness checker, which
//     measures exactly the predicted peaks and time;
//   - under a budget, a plan without ErrBudget runs within it (the
//     executor enforcing it over the whole run), and ErrBudget comes only
//     when the plan does not fit; within the time cap when one is set;
//   - under a tolerance, the measured extra time is within it and the
//     peak is at most vanilla's (the whole run's too, but with
//     ResidentStart, where the first iteration is not what is minimised);
//   - every baseline's plan runs with the checker;
//   - no plan, tensile's or a baseline's, peaks below the op floor
//     (Graph.OpFloor).
func FuzzPlanTensileRandomGraph(f *testing.F) {
	for _, s := range []struct {
		seed uint64
		data []byte
	}{
		{1, nil},
		{2, []byte{3, 6, 10}},
		{3, []byte{0, 4, 12}},
		{4, []byte{6, 1, 13, 9, 9, 9}},
		{5, []byte{5, 0, 8, 8, 10, 10}},
		{6, []byte{2, 2, 7}},
		// Inputs that found bugs: a recompute re-running batch norm's
		// backward kernel after the optimizer updated gamma (35), a
		// convolution after its weight's update (239), Capuchin
		// recomputing activations updated in place (22).
		{22, nil},
		{35, nil},
		{239, nil},
		// The planner's simulator taking the free of an empty tensor at
		// an iteration's end for an allocation, so the next iteration's
		// input arrived before the frees behind it (predicted peak above
		// the executor's).
		{347, []byte("0A110Z000")},
	} {
		f.Add(s.seed, s.data)
	}
	f.Fuzz(fuzzPlanTensile)
}

// fuzzPlanTensile is FuzzPlanTensileRandomGraph's check of one input.
func fuzzPlanTensile(t *testing.T, seed uint64, data []byte) {
	src := newFuzzSource(seed, data)
	g := genGraph(src)
	if err := g.Validate(); err != nil {
		t.Fatalf("the generator made an invalid graph: %v", err)
	}
	p := fuzzProfile(src)
	van, err := runChecked(p, []Job{{Name: "fuzz", Graph: g}})
	if err != nil {
		t.Fatalf("%s on %s: vanilla: %v", describe(g), p.Name, err)
	}
	var tg Target
	if src.Chance(1, 2) {
		tg.Tolerance = src.Unit()
	} else {
		tg.Budget = max(1, int64((0.3+0.8*src.Unit())*float64(van.PeakBytes)))
		if src.Chance(1, 3) {
			tg.Tolerance = src.Unit()
		}
	}
	tg.ResidentStart = src.Chance(1, 4)
	checkPlanTensile(t, g, p, tg, van)
	checkBaselines(t, g, p)
}

// FuzzPlanJobsRandomGraphs plans two or three random training graphs
// (some of them copies of one) co-located on one device with PlanJobs, in
// both modes, for a time tolerance in [0, 1]. For every input:
//   - PlanJobs neither panics nor fails in either mode;
//   - planning twice gives the same plans, offsets and figures;
//   - MeasureSeveral runs the plans with the correctness checker (joint's
//     from its start offsets) and measures the predicted EOR; joint's
//     reservation exactly;
//   - when sum-of-peaks' plans run within the tolerance co-located, joint
//     keeps every job within it too, at a mean EOR no higher than
//     sum-of-peaks' and reserving no more (its first candidate is those
//     plans started together).
func FuzzPlanJobsRandomGraphs(f *testing.F) {
	for _, s := range []struct {
		seed uint64
		data []byte
	}{
		{1, nil},
		{2, []byte{1, 4, 6}},
		{3, []byte{0, 2, 3}},
		// An input that found a bug: the free of an empty tensor taken
		// for an allocation, so joint's predicted reservation was 2 B
		// above the measured one.
		{85, []byte("0")},
	} {
		f.Add(s.seed, s.data)
	}
	f.Fuzz(fuzzPlanJobs)
}

// fuzzJobs builds FuzzPlanJobsRandomGraphs' input from src: two or three
// jobs (a later one a copy of an earlier one's graph a third of the time),
// the device and the target, with desc describing the graphs.
func fuzzJobs(src *fuzzSource) (jobs []Job, p gpu.Profile, tg Target, desc string, err error) {
	jobs = make([]Job, 2+src.Intn(2))
	for j := range jobs {
		jobs[j].Name = "j" + strconv.Itoa(j)
		if j > 0 && src.Chance(1, 3) {
			jobs[j].Graph = jobs[src.Intn(j)].Graph // a copy
		} else {
			jobs[j].Graph = genGraph(src)
			if err := jobs[j].Graph.Validate(); err != nil {
				return nil, p, tg, "", fmt.Errorf("the generator made an invalid graph: %v", err)
			}
		}
		desc += "\n  " + describe(jobs[j].Graph)
	}
	p = fuzzProfile(src)
	tg = Target{Tolerance: src.Unit(), ResidentStart: src.Chance(1, 4)}
	return jobs, p, tg, desc, nil
}

// fuzzPlanJobs is FuzzPlanJobsRandomGraphs' check of one input.
func fuzzPlanJobs(t *testing.T, seed uint64, data []byte) {
	jobs, p, tg, desc, err := fuzzJobs(newFuzzSource(seed, data))
	if err != nil {
		t.Fatal(err)
	}
	what := fmt.Sprintf("%d jobs on %s, target %+v:%s", len(jobs), p.Name, tg, desc)
	measured := map[Mode]SeveralResult{}
	for _, mode := range []Mode{SumOfPeaks, Joint} {
		plans, st, err := PlanJobs(jobs, p, mode, tg)
		if err != nil {
			t.Fatalf("%s: %s: %v", what, mode, err)
		}
		plans2, st2, err2 := PlanJobs(jobs, p, mode, tg)
		if err2 != nil || !reflect.DeepEqual(plans, plans2) || !reflect.DeepEqual(jointNoClock(st), jointNoClock(st2)) {
			t.Fatalf("%s: %s: two plans differ (error %v)", what, mode, err2)
		}
		sr, err := MeasureSeveral(p, jobs, plans, &st, true)
		if err != nil {
			t.Fatalf("%s: %s: running the plans: %v", what, mode, err)
		}
		if math.Abs(sr.EOR-st.EOR) > 1e-9 {
			t.Errorf("%s: %s: measured EOR %.12f, predicted %.12f", what, mode, sr.EOR, st.EOR)
		}
		if mode == Joint && sr.ReservedBytes != st.ReservedBytes {
			t.Errorf("%s: joint: measured reservation %d, predicted %d", what, sr.ReservedBytes, st.ReservedBytes)
		}
		measured[mode] = sr
	}
	sop, jnt := measured[SumOfPeaks], measured[Joint]
	slowest := func(sr SeveralResult) float64 {
		w := math.Inf(-1)
		for _, j := range sr.Jobs {
			w = math.Max(w, j.EOR)
		}
		return w
	}
	if slowest(sop) <= tg.Tolerance+1e-9 {
		if slowest(jnt) > tg.Tolerance+1e-9 || jnt.EOR > sop.EOR+1e-9 || jnt.ReservedBytes > sop.ReservedBytes {
			t.Errorf("%s: joint reserves %d at EOR %.6f (slowest job %.6f); sum-of-peaks %d at EOR %.6f (slowest job %.6f)",
				what, jnt.ReservedBytes, jnt.EOR, slowest(jnt), sop.ReservedBytes, sop.EOR, slowest(sop))
		}
	}
}
