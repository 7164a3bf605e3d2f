// Package workload describes deep-learning jobs: the tensor-op graph of one
// iteration, job specs, the model zoo (in workload/zoo) and trace import/export.
//
// A Graph is the unit every other package reasons about: placement predicts its
// peak memory, tensorsched plans and executes it, and the FIKIT dispatcher
// orders its kernels. Graphs are plain data; every method here is pure.
package workload

import (
	"fmt"
	"slices"
	"strings"
)

// TensorKind classifies a tensor by its role in training or inference.
type TensorKind uint8

// Tensor kinds. Params and OptimizerState persist across iterations; Input is
// loaded from the host at the start of each iteration; the rest are produced by
// ops and freed after their last use.
const (
	Param TensorKind = iota
	Input
	Activation
	Gradient
	OptimizerState
	Workspace
	numTensorKinds
)

var tensorKindNames = [...]string{"param", "input", "activation", "gradient", "optimizer_state", "workspace"}

// String returns the kind's name as traces write it, e.g. "activation".
func (k TensorKind) String() string {
	if int(k) < len(tensorKindNames) {
		return tensorKindNames[k]
	}
	return fmt.Sprintf("TensorKind(%d)", k)
}

// ParseTensorKind parses the names String returns.
func ParseTensorKind(s string) (TensorKind, error) {
	for i, n := range tensorKindNames {
		if n == s {
			return TensorKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown tensor kind %q (allowed: %s)", s, strings.Join(tensorKindNames[:], ", "))
}

// MarshalText implements encoding.TextMarshaler.
func (k TensorKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *TensorKind) UnmarshalText(b []byte) error {
	v, err := ParseTensorKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// Persistent reports whether tensors of this kind live across iterations
// (they exist before the first op and are never freed by the executor).
func (k TensorKind) Persistent() bool { return k == Param || k == OptimizerState }

// Phase is the part of an iteration an op belongs to.
type Phase uint8

// Phases of a training iteration. Inference graphs have only Forward ops.
const (
	Forward Phase = iota
	Backward
	Optimizer
)

var phaseNames = [...]string{"forward", "backward", "optimizer"}

// String returns the phase's name as traces write it, e.g. "backward".
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", p)
}

// ParsePhase parses the names String returns.
func ParsePhase(s string) (Phase, error) {
	for i, n := range phaseNames {
		if n == s {
			return Phase(i), nil
		}
	}
	return 0, fmt.Errorf("unknown phase %q (allowed: %s)", s, strings.Join(phaseNames[:], ", "))
}

// MarshalText implements encoding.TextMarshaler.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Phase) UnmarshalText(b []byte) error {
	v, err := ParsePhase(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// JobKind says whether a graph is a training or an inference iteration.
type JobKind string

// Job kinds.
const (
	Train JobKind = "train"
	Infer JobKind = "infer"
)

// Tensor is one buffer in device memory. IDs are dense: Graph.Tensors[i].ID == i.
type Tensor struct {
	ID    int        `json:"id"`
	Name  string     `json:"name"`
	Bytes int64      `json:"bytes"`
	Kind  TensorKind `json:"kind"`
	Shape []int      `json:"shape,omitempty"`
	DType string     `json:"dtype,omitempty"` // fp32 (default), tf32, bf16, fp16, int64, ...
}

// Op is one kernel launch. IDs are dense and ops are listed in execution
// order: Graph.Ops[i].ID == i. An op that updates a tensor in place (the
// optimizer writing a parameter) lists it in both Inputs and Outputs.
type Op struct {
	ID      int    `json:"id"`
	Name    string `json:"name"`
	Kind    string `json:"kind"` // kernel kind: conv2d, matmul, relu, adam, ...
	Inputs  []int  `json:"inputs"`
	Outputs []int  `json:"outputs"`
	// FLOPs is the floating-point work of the kernel.
	FLOPs float64 `json:"flops"`
	// MemBytes is the device-memory traffic of the kernel (reads + writes).
	MemBytes float64 `json:"bytes_moved"`
	// MeasuredSeconds, when positive, overrides the cost model's prediction.
	MeasuredSeconds float64 `json:"measured_seconds,omitempty"`
	Phase           Phase   `json:"phase"`
	// DType is the compute precision (fp32 by default).
	DType string `json:"dtype,omitempty"`
	// Launch is the launch configuration (grid/block or an equivalent
	// description); part of the kernel's identity for FIKIT.
	Launch string `json:"launch,omitempty"`
}

// MatrixKind reports whether an op kind is a matrix product — a
// convolution or a (batched) matrix multiply, forward or backward — whose
// time the cost model charges to the matrix units.
func MatrixKind(kind string) bool {
	return strings.HasPrefix(kind, "conv") || strings.HasPrefix(kind, "matmul") || strings.HasPrefix(kind, "batched_matmul")
}

// Graph is the tensor-op graph of one iteration of a job.
type Graph struct {
	Model string  `json:"model"`
	Kind  JobKind `json:"kind"`
	Batch int     `json:"batch"`
	// HostSecondsPerIteration is host-side time before each iteration
	// (data loading, request pre/post-processing) during which the GPU idles
	// unless another job fills it.
	HostSecondsPerIteration float64 `json:"host_seconds_per_iteration,omitempty"`
	// HostSecondsPerKernel is host-side launch time between consecutive kernels.
	HostSecondsPerKernel float64  `json:"host_seconds_per_kernel,omitempty"`
	Tensors              []Tensor `json:"tensors"`
	Ops                  []Op     `json:"ops"`
}

// ParamCount is the number of parameter elements (sum over Param tensors of
// the product of their shapes; Bytes/4 when a shape is absent).
func (g *Graph) ParamCount() int64 {
	var n int64
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if t.Kind != Param {
			continue
		}
		if len(t.Shape) == 0 {
			n += t.Bytes / int64(DTypeSize(t.DType))
			continue
		}
		e := int64(1)
		for _, d := range t.Shape {
			e *= int64(d)
		}
		n += e
	}
	return n
}

// BytesOfKind sums the bytes of all tensors of kind k.
func (g *Graph) BytesOfKind(k TensorKind) int64 {
	var n int64
	for i := range g.Tensors {
		if g.Tensors[i].Kind == k {
			n += g.Tensors[i].Bytes
		}
	}
	return n
}

// PersistentBytes is the memory held across iterations (params and optimizer state).
func (g *Graph) PersistentBytes() int64 {
	return g.BytesOfKind(Param) + g.BytesOfKind(OptimizerState)
}

// OpFloor is the least device memory any plan can run the graph in: the
// largest set of tensors one op touches at once (its inputs and outputs,
// a tensor updated in place counted once), which must all be resident
// while it runs whatever else is swapped out or recomputed. It returns
// those bytes and the op (-1 for a graph without ops). Swapping and
// recomputing whole tensors cannot go below it, so 1 − floor/vanilla peak
// bounds the memory saving ratio of every tensor-granular plan.
func (g *Graph) OpFloor() (bytes int64, op int) {
	op = -1
	seen := make(map[int]struct{}, 8)
	for i := range g.Ops {
		clear(seen)
		var n int64
		for _, ts := range [2][]int{g.Ops[i].Inputs, g.Ops[i].Outputs} {
			for _, t := range ts {
				if _, dup := seen[t]; dup || t < 0 || t >= len(g.Tensors) {
					continue
				}
				seen[t] = struct{}{}
				n += g.Tensors[t].Bytes
			}
		}
		if n > bytes || op < 0 {
			bytes, op = n, i
		}
	}
	return bytes, op
}

// DTypeSize returns the element size in bytes of a dtype name ("" means fp32).
func DTypeSize(dtype string) int {
	switch dtype {
	case "", "fp32", "tf32", "int32":
		return 4
	case "fp16", "bf16":
		return 2
	case "int64", "fp64":
		return 8
	case "int8", "uint8", "bool":
		return 1
	}
	return 4
}

// Lifetime is where a tensor is first produced and last used, as op indices.
// For tensors that exist before the iteration (params, optimizer state,
// inputs) Def is -1. LastUse is -1 for a tensor no op touches.
type Lifetime struct {
	Def     int
	LastUse int
}

// Lifetimes computes, for every tensor, its defining op and last use
// (read or write). Persistent tensors still get their last use recorded;
// callers decide whether to free them.
func (g *Graph) Lifetimes() []Lifetime {
	lt := make([]Lifetime, len(g.Tensors))
	for i := range lt {
		lt[i] = Lifetime{Def: -1, LastUse: -1}
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		for _, t := range op.Inputs {
			if t >= 0 && t < len(lt) {
				lt[t].LastUse = i
			}
		}
		for _, t := range op.Outputs {
			if t < 0 || t >= len(lt) {
				continue
			}
			if lt[t].Def < 0 && !g.Tensors[t].Kind.Persistent() && g.Tensors[t].Kind != Input {
				lt[t].Def = i
			}
			lt[t].LastUse = i
		}
	}
	return lt
}

// Clone returns a deep copy of g. Nil and empty slices stay as they are:
// a scalar's empty shape differs from an absent one (see the trace format).
func (g *Graph) Clone() *Graph {
	c := *g
	c.Tensors = slices.Clone(g.Tensors)
	for i := range c.Tensors {
		c.Tensors[i].Shape = slices.Clone(c.Tensors[i].Shape)
	}
	c.Ops = slices.Clone(g.Ops)
	for i := range c.Ops {
		c.Ops[i].Inputs = slices.Clone(c.Ops[i].Inputs)
		c.Ops[i].Outputs = slices.Clone(c.Ops[i].Outputs)
	}
	return &c
}
