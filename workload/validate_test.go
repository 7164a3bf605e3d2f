package workload

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// smallGraph is a hand-built training iteration of y = relu(x·w) with an Adam
// step: every kind of tensor and every phase appears once.
func smallGraph() *Graph {
	return &Graph{
		Model: "tiny",
		Kind:  Train,
		Batch: 4,
		Tensors: []Tensor{
			{ID: 0, Name: "x", Bytes: 64, Kind: Input, Shape: []int{4, 4}},
			{ID: 1, Name: "fc.w", Bytes: 64, Kind: Param, Shape: []int{4, 4}},
			{ID: 2, Name: "fc.out", Bytes: 64, Kind: Activation, Shape: []int{4, 4}},
			{ID: 3, Name: "relu.out", Bytes: 64, Kind: Activation, Shape: []int{4, 4}},
			{ID: 4, Name: "relu.grad", Bytes: 64, Kind: Gradient, Shape: []int{4, 4}},
			{ID: 5, Name: "fc.w.grad", Bytes: 64, Kind: Gradient, Shape: []int{4, 4}},
			{ID: 6, Name: "fc.w.adam_m", Bytes: 64, Kind: OptimizerState, Shape: []int{4, 4}},
			{ID: 7, Name: "fc.w.adam_v", Bytes: 64, Kind: OptimizerState, Shape: []int{4, 4}},
			{ID: 8, Name: "matmul.ws", Bytes: 128, Kind: Workspace, DType: "fp32"},
		},
		Ops: []Op{
			{ID: 0, Name: "fc", Kind: "matmul", Inputs: []int{0, 1}, Outputs: []int{2, 8}, FLOPs: 128, MemBytes: 192, Phase: Forward},
			{ID: 1, Name: "relu", Kind: "relu", Inputs: []int{2}, Outputs: []int{3}, FLOPs: 16, MemBytes: 128, Phase: Forward},
			{ID: 2, Name: "relu_bwd", Kind: "relu_grad", Inputs: []int{3}, Outputs: []int{4}, FLOPs: 16, MemBytes: 128, Phase: Backward},
			{ID: 3, Name: "fc_bwd_w", Kind: "matmul", Inputs: []int{0, 4}, Outputs: []int{5}, FLOPs: 128, MemBytes: 192, Phase: Backward, MeasuredSeconds: 1e-5},
			{ID: 4, Name: "adam", Kind: "adam", Inputs: []int{1, 5, 6, 7}, Outputs: []int{1, 6, 7}, FLOPs: 160, MemBytes: 448, Phase: Optimizer, DType: "fp32", Launch: "grid=1,block=256"},
		},
	}
}

func TestValidateAcceptsWellFormedGraph(t *testing.T) {
	g := smallGraph()
	if err := g.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	inf := smallGraph()
	inf.Kind = Infer
	inf.Ops = inf.Ops[:2]
	if err := inf.Validate(); err != nil {
		t.Fatalf("Validate inference graph: %v", err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(g *Graph)
		want   string
	}{
		{"empty model", func(g *Graph) { g.Model = "" }, "model: must name the model"},
		{"unknown kind", func(g *Graph) { g.Kind = "serve" }, `kind: must be "train" or "infer" (got "serve")`},
		{"zero batch", func(g *Graph) { g.Batch = 0 }, "batch: must be ≥ 1 (got 0)"},
		{"no ops", func(g *Graph) { g.Ops = nil }, "ops: graph has no ops"},
		{"negative host time", func(g *Graph) { g.HostSecondsPerIteration = -1 }, "host_seconds_per_iteration: negative value -1"},
		{"NaN host time", func(g *Graph) { g.HostSecondsPerKernel = math.NaN() }, "host_seconds_per_kernel: must be a finite number ≥ 0 (got NaN)"},
		{"tensor id not dense", func(g *Graph) { g.Tensors[3].ID = 9 }, `tensor 3 "relu.out": id: must equal its index 3 in tensors (got 9)`},
		{"op id not dense", func(g *Graph) { g.Ops[2].ID = 0 }, `op 2 "relu_bwd": id: must equal its index 2 in ops (got 0)`},
		{"negative size", func(g *Graph) { g.Tensors[1].Bytes = -4 }, `tensor 1 "fc.w": bytes: negative size -4`},
		{"unknown tensor kind", func(g *Graph) { g.Tensors[2].Kind = 17 }, `tensor 2 "fc.out": kind: unknown tensor kind 17`},
		{"negative dimension", func(g *Graph) { g.Tensors[2].Shape[1] = -4 }, `tensor 2 "fc.out": shape[1]: negative dimension -4`},
		{"bad utf8 name", func(g *Graph) { g.Tensors[0].Name = "\xff" }, `tensor 0 "\xff": name: not valid UTF-8`},
		{"dangling input", func(g *Graph) { g.Ops[3].Inputs[1] = 999 }, `op 3 "fc_bwd_w": inputs[1]: tensor 999 does not exist (graph has 9 tensors)`},
		{"negative input", func(g *Graph) { g.Ops[1].Inputs[0] = -1 }, `op 1 "relu": inputs[0]: tensor -1 does not exist`},
		{"dangling output", func(g *Graph) { g.Ops[0].Outputs[1] = 9 }, `op 0 "fc": outputs[1]: tensor 9 does not exist (graph has 9 tensors)`},
		{"negative flops", func(g *Graph) { g.Ops[1].FLOPs = -2 }, `op 1 "relu": flops: negative value -2`},
		{"infinite bytes moved", func(g *Graph) { g.Ops[1].MemBytes = math.Inf(1) }, `op 1 "relu": bytes_moved: must be a finite number ≥ 0 (got +Inf)`},
		{"negative measured time", func(g *Graph) { g.Ops[3].MeasuredSeconds = -1e-3 }, `op 3 "fc_bwd_w": measured_seconds: negative value -0.001`},
		{"unknown phase", func(g *Graph) { g.Ops[0].Phase = 7 }, `op 0 "fc": phase: unknown phase 7`},
		{"backward in inference", func(g *Graph) { g.Kind = Infer }, `op 2 "relu_bwd": phase: backward op in an inference graph`},
		{"use before definition", func(g *Graph) {
			g.Ops[0], g.Ops[1] = g.Ops[1], g.Ops[0]
			g.Ops[0].ID, g.Ops[1].ID = 0, 1
		}, `op 0 "relu": inputs[0]: tensor 2 "fc.out" is used before it is defined (first written by op 1)`},
		{"read by its own producer", func(g *Graph) { g.Ops[1].Inputs = []int{3} }, `op 1 "relu": inputs[0]: tensor 3 "relu.out" is used before it is defined (first written by this op)`},
		{"never written", func(g *Graph) { g.Ops[0].Outputs = []int{8} }, `op 1 "relu": inputs[0]: tensor 2 "fc.out" is read but no op writes it`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := smallGraph()
			tc.mutate(g)
			err := g.Validate()
			if err == nil {
				t.Fatalf("Validate accepted the graph; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate error:\n%v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	g := smallGraph()
	g.Batch = 0
	g.Tensors[1].Bytes = -4
	g.Ops[3].Inputs[1] = 999
	g.Ops[1].FLOPs = -1
	err := g.Validate()
	if err == nil {
		t.Fatal("Validate accepted a graph with four problems")
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("Validate error is not a joined error: %T", err)
	}
	if n := len(joined.Unwrap()); n != 4 {
		t.Fatalf("got %d problems, want 4:\n%v", n, err)
	}
}

func TestValidateCapsProblems(t *testing.T) {
	g := smallGraph()
	for i := range g.Tensors {
		g.Tensors[i].Bytes = -1
	}
	for i := range g.Ops {
		g.Ops[i].FLOPs = -1
		g.Ops[i].MemBytes = -1
		g.Ops[i].MeasuredSeconds = -1
	}
	// 9 tensors + 3×5 op fields = 24 problems.
	err := g.Validate()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("Validate error is not a joined error: %v", err)
	}
	errs := joined.Unwrap()
	if len(errs) != MaxProblems+1 {
		t.Fatalf("got %d entries, want %d listed plus a summary", len(errs), MaxProblems)
	}
	if got, want := errs[len(errs)-1].Error(), "and 4 more problems"; got != want {
		t.Fatalf("summary = %q, want %q", got, want)
	}
}

// TestCloneIsDeepAndExact: a clone equals its original field for field,
// including a scalar's empty (not absent) shape, and shares no slices.
func TestCloneIsDeepAndExact(t *testing.T) {
	g := smallGraph()
	g.Tensors = append(g.Tensors, Tensor{ID: 9, Name: "loss_scale", Bytes: 4, Kind: Param, Shape: []int{}})
	c := g.Clone()
	if !reflect.DeepEqual(g, c) {
		t.Fatalf("clone differs from the original:\n%+v\n%+v", g.Tensors[9], c.Tensors[9])
	}
	if c.Tensors[9].Shape == nil || c.Tensors[8].Shape != nil {
		t.Errorf("shapes: scalar %#v (want empty, not nil), workspace %#v (want nil)", c.Tensors[9].Shape, c.Tensors[8].Shape)
	}
	c.Tensors[0].Shape[0] = 99
	c.Ops[0].Inputs[0] = 99
	c.Ops[0].Outputs[0] = 99
	if g.Tensors[0].Shape[0] == 99 || g.Ops[0].Inputs[0] == 99 || g.Ops[0].Outputs[0] == 99 {
		t.Error("clone shares slices with the original")
	}
}
