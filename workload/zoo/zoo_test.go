package zoo

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/workload"
)

func build(t testing.TB, model string, kind workload.JobKind, batch int, opt Options) *workload.Graph {
	t.Helper()
	g, err := Build(model, kind, batch, opt)
	if err != nil {
		t.Fatalf("Build(%s, %s, %d, %+v): %v", model, kind, batch, opt, err)
	}
	return g
}

func TestParamCounts(t *testing.T) {
	tests := []struct {
		model string
		want  int64 // published figure
		exact bool  // whether our layer shapes should reproduce it exactly
	}{
		{"vgg16", 138_357_544, true},
		{"resnet50", 25_557_032, true},
		{"inception-v3", 23_834_568, true},
		{"inception-v4", 42_679_816, true}, // timm inception_v4 (1000 classes)
		{"densenet121", 7_978_856, true},
		{"bert-base", 109_482_240, false}, // BertModel with pooler; we add a 1,538-parameter classifier
		{"gpt2-small", 124_439_808, true},
		{"mlp", 784*1024 + 1024 + 1024*1024 + 1024 + 1024*10 + 10, true},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		seen[tc.model] = true
		for _, kind := range []workload.JobKind{workload.Train, workload.Infer} {
			g := build(t, tc.model, kind, 1, Options{})
			got := g.ParamCount()
			rel := math.Abs(float64(got-tc.want)) / float64(tc.want)
			t.Logf("%-13s %-5s params %11d published %11d (%+.4f%%)", tc.model, kind, got, tc.want, 100*float64(got-tc.want)/float64(tc.want))
			if rel > 0.005 {
				t.Errorf("%s %s: %d params, want %d within 0.5%%", tc.model, kind, got, tc.want)
			}
			if tc.exact && got != tc.want {
				t.Errorf("%s %s: %d params, want exactly %d", tc.model, kind, got, tc.want)
			}
		}
	}
	for _, m := range Models() {
		if !seen[m] {
			t.Errorf("model %s has no parameter-count test", m)
		}
	}
	if g := build(t, "bert-base", workload.Infer, 1, Options{}); g.ParamCount() != 109_482_240+768*2+2 {
		t.Errorf("bert-base: %d params, want BertModel 109,482,240 + classifier 1,538", g.ParamCount())
	}
}

func TestModelsAndCanonical(t *testing.T) {
	want := []string{"bert-base", "densenet121", "gpt2-small", "inception-v3", "inception-v4", "mlp", "resnet50", "vgg16"}
	if got := Models(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Models() = %v, want %v", got, want)
	}
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"vgg16", "vgg16", true},
		{"VGG-16", "vgg16", true},
		{"resnet-50", "resnet50", true},
		{"ResNet50", "resnet50", true},
		{"inception_v3", "inception-v3", true},
		{"InceptionV3", "inception-v3", true},
		{"inception3", "inception-v3", true},
		{"inception_v4", "inception-v4", true},
		{"inceptionv4", "inception-v4", true},
		{"inception4", "inception-v4", true},
		{"densenet-121", "densenet121", true},
		{"bert", "bert-base", true},
		{"BERT_BASE", "bert-base", true},
		{"gpt2", "gpt2-small", true},
		{"GPT-2", "gpt2-small", true},
		{" mlp ", "mlp", true},
		{"resnet", "", false},
		{"", "", false},
		{"inception", "", false},
	}
	for _, tc := range tests {
		got, ok := Canonical(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Canonical(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		model string
		kind  workload.JobKind
		batch int
		opt   Options
		want  []string // substrings of the error
	}{
		{"alexnet", workload.Train, 8, Options{}, []string{`unknown model "alexnet"`, "resnet50", "gpt2-small", "vgg16"}},
		{"resnet50", workload.Train, 0, Options{}, []string{"batch size must be at least 1", "got 0"}},
		{"resnet50", workload.Infer, -3, Options{}, []string{"batch size", "-3"}},
		{"resnet50", "serve", 8, Options{}, []string{"unknown job kind", "train", "infer"}},
		{"bert", workload.Train, 8, Options{Seq: 513}, []string{"bert-base", "513", "512"}},
		{"gpt2", workload.Train, 8, Options{Seq: 2048}, []string{"gpt2-small", "1024"}},
		{"gpt2", workload.Train, 8, Options{Seq: -1}, []string{"negative"}},
		{"mlp", workload.Train, 8, Options{DType: "fp8"}, []string{`dtype "fp8"`, "bf16"}},
		{"vgg16", workload.Train, 8, Options{ParamChunkBytes: -1}, []string{"parameter chunk size must not be negative", "0 keeps weights whole"}},
		{"vgg16", workload.Train, 8, Options{ParamChunkBytes: 64 << 10}, []string{"parameter chunk size 65536 bytes is below one row of classifier.0.weight", "100352 bytes", "give at least that"}},
		{"vgg16", workload.Train, 8, Options{ParamChunkBytes: 4 << 20, SpreadOptimizer: true}, []string{"spreading the optimizer's updates needs the fused optimizer", "FusedOptimizer"}},
	}
	for _, tc := range tests {
		g, err := Build(tc.model, tc.kind, tc.batch, tc.opt)
		if err == nil {
			t.Errorf("Build(%s, %s, %d, %+v) = %d ops, want an error", tc.model, tc.kind, tc.batch, tc.opt, len(g.Ops))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Build(%s, %s, %d, %+v) error %q does not mention %q", tc.model, tc.kind, tc.batch, tc.opt, err, w)
			}
		}
	}
}

// smallOpt keeps the transformer graphs small enough for quick tests.
func smallOpt(model string) Options {
	if model == "bert-base" || model == "gpt2-small" {
		return Options{Seq: 32}
	}
	return Options{}
}

func TestGraphValidity(t *testing.T) {
	for _, m := range Models() {
		for _, kind := range []workload.JobKind{workload.Train, workload.Infer} {
			for _, batch := range []int{1, 3} {
				g := build(t, m, kind, batch, smallOpt(m))
				name := m + "/" + string(kind) + "/" + string(rune('0'+batch))
				if err := g.Validate(); err != nil {
					t.Errorf("%s: Validate: %v", name, err)
				}
				checkStructure(t, name, g)
				if kind == workload.Train {
					checkTraining(t, name, g)
				} else {
					checkInference(t, name, g)
				}
			}
		}
	}
}

// checkStructure checks ids, sizes, definition before use and op fields.
func checkStructure(t *testing.T, name string, g *workload.Graph) {
	t.Helper()
	if g.Model == "" || g.Batch < 1 {
		t.Errorf("%s: model %q batch %d", name, g.Model, g.Batch)
	}
	for i, tt := range g.Tensors {
		if tt.ID != i {
			t.Fatalf("%s: tensor %d has id %d", name, i, tt.ID)
		}
		if len(tt.Shape) == 0 || tt.DType == "" {
			t.Errorf("%s: tensor %q has shape %v dtype %q", name, tt.Name, tt.Shape, tt.DType)
		}
		if want := numel(tt.Shape) * int64(workload.DTypeSize(tt.DType)); tt.Bytes != want || want <= 0 {
			t.Errorf("%s: tensor %q bytes %d, shape %v × %s = %d", name, tt.Name, tt.Bytes, tt.Shape, tt.DType, want)
		}
	}
	defined := make([]bool, len(g.Tensors))
	for i, tt := range g.Tensors {
		defined[i] = tt.Kind.Persistent() || tt.Kind == workload.Input
	}
	// No two tensors share a shape slice, so editing one cannot change another.
	shapes := make(map[*int]int, len(g.Tensors))
	for i, tt := range g.Tensors {
		if j, dup := shapes[&tt.Shape[0]]; dup {
			t.Errorf("%s: tensors %q and %q share a shape slice", name, g.Tensors[j].Name, tt.Name)
		}
		shapes[&tt.Shape[0]] = i
	}
	names := make(map[string]int, len(g.Tensors))
	for i, tt := range g.Tensors {
		if j, dup := names[tt.Name]; dup {
			t.Errorf("%s: tensors %d and %d share the name %q", name, j, i, tt.Name)
		}
		names[tt.Name] = i
	}
	for i, op := range g.Ops {
		if op.ID != i {
			t.Fatalf("%s: op %d has id %d", name, i, op.ID)
		}
		if op.Kind == "" || op.Launch == "" || op.Name == "" || op.DType == "" {
			t.Errorf("%s: op %d %q has kind %q launch %q dtype %q", name, i, op.Name, op.Kind, op.Launch, op.DType)
		}
		if op.FLOPs < 0 || op.MemBytes <= 0 || math.IsNaN(op.FLOPs) {
			t.Errorf("%s: op %q flops %v bytes %v", name, op.Name, op.FLOPs, op.MemBytes)
		}
		if len(op.Outputs) == 0 {
			t.Errorf("%s: op %q has no outputs", name, op.Name)
		}
		for _, in := range op.Inputs {
			if in < 0 || in >= len(g.Tensors) || !defined[in] {
				t.Fatalf("%s: op %d %q reads tensor %d before it is defined", name, i, op.Name, in)
			}
		}
		for _, out := range op.Outputs {
			if out < 0 || out >= len(g.Tensors) {
				t.Fatalf("%s: op %q writes missing tensor %d", name, op.Name, out)
			}
			if g.Tensors[out].Kind == workload.Input {
				t.Errorf("%s: op %q writes input %q", name, op.Name, g.Tensors[out].Name)
			}
			defined[out] = true
		}
		if op.Kind != "embedding" {
			var mem float64
			for _, x := range op.Inputs {
				mem += float64(g.Tensors[x].Bytes)
			}
			for _, x := range op.Outputs {
				mem += float64(g.Tensors[x].Bytes)
			}
			if op.MemBytes != mem {
				t.Errorf("%s: op %q bytes moved %v, inputs+outputs %v", name, op.Name, op.MemBytes, mem)
			}
		}
	}
	// Every produced non-persistent tensor is consumed, except the outputs of
	// the last forward op (logits or loss) and the scalar loss.
	lt := g.Lifetimes()
	for i, tt := range g.Tensors {
		if tt.Kind.Persistent() || lt[i].Def < 0 {
			continue
		}
		if lt[i].LastUse == lt[i].Def && tt.Name != "loss" && !isLastForward(g, lt[i].Def) {
			t.Errorf("%s: tensor %q is written by op %q and never read", name, tt.Name, g.Ops[lt[i].Def].Name)
		}
	}
}

func isLastForward(g *workload.Graph, op int) bool {
	return op+1 == len(g.Ops) || g.Ops[op+1].Phase != workload.Forward
}

func checkInference(t *testing.T, name string, g *workload.Graph) {
	t.Helper()
	for _, op := range g.Ops {
		if op.Phase != workload.Forward {
			t.Fatalf("%s: %s op %q in an inference graph", name, op.Phase, op.Name)
		}
	}
	for _, k := range []workload.TensorKind{workload.Gradient, workload.OptimizerState} {
		if n := g.BytesOfKind(k); n != 0 {
			t.Errorf("%s: %d bytes of %s in an inference graph", name, n, k)
		}
	}
	for _, tt := range g.Tensors {
		if tt.Name == "labels" {
			t.Errorf("%s: inference graph loads labels", name)
		}
	}
}

// checkTraining checks phase order, that every parameter has exactly one
// gradient produced in backward and exactly one Adam update, that every
// gradient belongs to a parameter or a forward tensor, and that the inputs of
// matrix products are kept for backward.
func checkTraining(t *testing.T, name string, g *workload.Graph) {
	t.Helper()
	byName := make(map[string]int, len(g.Tensors))
	for i, tt := range g.Tensors {
		byName[tt.Name] = i
	}
	phase := workload.Forward
	var nFwd, nBwd, nOpt, nFwdWithParams int
	for _, op := range g.Ops {
		if op.Phase < phase {
			t.Fatalf("%s: %s op %q after %s ops", name, op.Phase, op.Name, phase)
		}
		phase = op.Phase
		switch op.Phase {
		case workload.Forward:
			nFwd++
			for _, in := range op.Inputs {
				if g.Tensors[in].Kind == workload.Param {
					nFwdWithParams++
					break
				}
			}
		case workload.Backward:
			nBwd++
		case workload.Optimizer:
			nOpt++
		}
	}
	if nBwd < nFwdWithParams || nBwd > 4*nFwd {
		t.Errorf("%s: %d backward ops for %d forward ops (%d with params)", name, nBwd, nFwd, nFwdWithParams)
	}

	// Writers of each gradient tensor, and Adam ops per parameter.
	writers := make([][]int, len(g.Tensors))
	adams := make([]int, len(g.Tensors))
	for i, op := range g.Ops {
		if op.Phase == workload.Backward {
			for _, out := range op.Outputs {
				if g.Tensors[out].Kind != workload.Gradient {
					t.Errorf("%s: backward op %q writes %s tensor %q", name, op.Name, g.Tensors[out].Kind, g.Tensors[out].Name)
				}
				writers[out] = append(writers[out], i)
			}
		}
		if op.Kind == "adam" {
			if len(op.Inputs) != 4 || len(op.Outputs) != 3 {
				t.Fatalf("%s: adam op %q has inputs %v outputs %v", name, op.Name, op.Inputs, op.Outputs)
			}
			p, gr, m, v := op.Inputs[0], op.Inputs[1], op.Inputs[2], op.Inputs[3]
			if !reflect.DeepEqual(op.Outputs, []int{p, m, v}) {
				t.Errorf("%s: adam op %q outputs %v, want [%d %d %d]", name, op.Name, op.Outputs, p, m, v)
			}
			pt := g.Tensors[p]
			if pt.Kind != workload.Param || g.Tensors[gr].Name != pt.Name+".grad" ||
				g.Tensors[m].Kind != workload.OptimizerState || g.Tensors[v].Kind != workload.OptimizerState ||
				numel(g.Tensors[m].Shape) != numel(pt.Shape) || numel(g.Tensors[v].Shape) != numel(pt.Shape) {
				t.Errorf("%s: adam op %q reads %q %q %q %q", name, op.Name, pt.Name, g.Tensors[gr].Name, g.Tensors[m].Name, g.Tensors[v].Name)
			}
			adams[p]++
		}
	}
	var nParams int
	for i, tt := range g.Tensors {
		switch tt.Kind {
		case workload.Param:
			nParams++
			gid, ok := byName[tt.Name+".grad"]
			if !ok {
				t.Errorf("%s: param %q has no gradient", name, tt.Name)
				continue
			}
			gt := g.Tensors[gid]
			if gt.Kind != workload.Gradient || !reflect.DeepEqual(gt.Shape, tt.Shape) || len(writers[gid]) == 0 {
				t.Errorf("%s: gradient of %q: kind %s shape %v (param %v), %d writers", name, tt.Name, gt.Kind, gt.Shape, tt.Shape, len(writers[gid]))
			}
			if adams[i] != 1 {
				t.Errorf("%s: param %q has %d adam ops, want 1", name, tt.Name, adams[i])
			}
		case workload.Gradient:
			base, _, _ := strings.Cut(tt.Name, "#")
			for _, suf := range []string{".grad.partial", ".grad.sum", ".grad"} {
				if strings.HasSuffix(base, suf) {
					base = strings.TrimSuffix(base, suf)
					break
				}
			}
			src, ok := byName[base]
			if !ok || (g.Tensors[src].Kind != workload.Param && g.Tensors[src].Kind != workload.Activation) {
				t.Errorf("%s: gradient %q belongs to no param or activation", name, tt.Name)
				continue
			}
			if len(writers[i]) == 0 {
				t.Errorf("%s: gradient %q is not written in backward", name, tt.Name)
			}
			if g.Tensors[src].Kind == workload.Param && tt.Name != g.Tensors[src].Name+".grad" {
				t.Errorf("%s: param %q has an extra gradient tensor %q", name, g.Tensors[src].Name, tt.Name)
			}
			if numel(tt.Shape) != numel(g.Tensors[src].Shape) {
				t.Errorf("%s: gradient %q shape %v, tensor shape %v", name, tt.Name, tt.Shape, g.Tensors[src].Shape)
			}
		case workload.OptimizerState:
			if !strings.HasSuffix(tt.Name, ".adam_m") && !strings.HasSuffix(tt.Name, ".adam_v") {
				t.Errorf("%s: optimizer state %q", name, tt.Name)
			}
		}
	}
	if nOpt != nParams {
		t.Errorf("%s: %d optimizer ops for %d params", name, nOpt, nParams)
	}
	if got, want := g.BytesOfKind(workload.OptimizerState), 2*4*g.ParamCount(); got != want {
		t.Errorf("%s: optimizer state %d bytes, want %d (two fp32 moments)", name, got, want)
	}

	// Activations read by matrix products and normalisations are saved for
	// backward: their last use is a backward op.
	lt := g.Lifetimes()
	for _, op := range g.Ops {
		if op.Phase != workload.Forward {
			break
		}
		switch op.Kind {
		case "conv2d", "matmul", "batched_matmul", "batchnorm", "layernorm", "maxpool":
		default:
			continue
		}
		for _, in := range op.Inputs {
			if g.Tensors[in].Kind != workload.Activation {
				continue
			}
			if last := lt[in].LastUse; g.Ops[last].Phase != workload.Backward {
				t.Errorf("%s: %q, read by %s %q, is last used by %s op %q", name, g.Tensors[in].Name, op.Kind, op.Name, g.Ops[last].Phase, g.Ops[last].Name)
			}
		}
	}
}

func TestActivationMemoryLinearInBatch(t *testing.T) {
	for _, m := range Models() {
		for _, kind := range []workload.JobKind{workload.Train, workload.Infer} {
			opt := smallOpt(m)
			var act, grad, param [3]int64
			for i, batch := range []int{1, 2, 4} {
				g := build(t, m, kind, batch, opt)
				act[i] = g.BytesOfKind(workload.Activation) + g.BytesOfKind(workload.Input)
				// Weight gradients do not depend on the batch.
				grad[i] = g.BytesOfKind(workload.Gradient)
				if kind == workload.Train {
					grad[i] -= g.BytesOfKind(workload.Param)
				}
				param[i] = g.PersistentBytes()
			}
			// bytes(b) = per*b + const, with a constant of at most a few
			// scalars (the loss and its gradient).
			for _, c := range []struct {
				what string
				v    [3]int64
			}{{"activation+input", act}, {"gradient", grad}} {
				per := c.v[1] - c.v[0]
				if c.v[2]-c.v[1] != 2*per {
					t.Errorf("%s %s: %s bytes %v are not linear in batch 1, 2, 4", m, kind, c.what, c.v)
				}
				if k := c.v[0] - per; k < 0 || k > 64 {
					t.Errorf("%s %s: %s bytes %v have a batch-independent part of %d bytes", m, kind, c.what, c.v, k)
				}
			}
			if act[0] <= 0 || (kind == workload.Train && grad[0] <= 0) {
				t.Errorf("%s %s: no activation or gradient memory: %v %v", m, kind, act, grad)
			}
			if param[0] != param[1] || param[1] != param[2] {
				t.Errorf("%s %s: persistent bytes change with batch: %v", m, kind, param)
			}
		}
	}
}

func TestAttentionQuadraticInSequence(t *testing.T) {
	for _, m := range []string{"bert-base", "gpt2-small"} {
		var scores [2]int64
		for i, seq := range []int{64, 128} {
			g := build(t, m, workload.Train, 2, Options{Seq: seq})
			for _, tt := range g.Tensors {
				if tt.Kind == workload.Activation && strings.HasSuffix(tt.Name, ".scores") {
					scores[i] += tt.Bytes
					if want := []int{2, 12, seq, seq}; !reflect.DeepEqual(tt.Shape, want) {
						t.Fatalf("%s: %q shape %v, want %v", m, tt.Name, tt.Shape, want)
					}
				}
			}
		}
		if scores[0] != 12*2*12*64*64*4 || scores[1] != 4*scores[0] {
			t.Errorf("%s: attention score bytes %v at seq 64 and 128, want %d and 4×", m, scores, 12*2*12*64*64*4)
		}
	}
	// The defaults: 128 for BERT, 1024 for GPT-2.
	for _, c := range []struct {
		m   string
		seq int
	}{{"bert-base", 128}, {"gpt2-small", 1024}} {
		g := build(t, c.m, workload.Infer, 1, Options{})
		if s := g.Tensors[0].Shape; s[1] != c.seq {
			t.Errorf("%s: default input shape %v, want sequence %d", c.m, s, c.seq)
		}
	}
}

// TestForwardFLOPs checks the matrix-product work of one forward pass per
// sample against the well-known figures (multiply-adds ×2).
func TestForwardFLOPs(t *testing.T) {
	tests := []struct {
		model  string
		gflops float64 // forward GFLOPs per sample
	}{
		{"vgg16", 2 * 15.47},
		{"resnet50", 2 * 4.09},
		{"inception-v3", 2 * 5.71},
		{"inception-v4", 2 * 12.30},
		{"densenet121", 2 * 2.87},
		{"mlp", 2 * 1.862e-3},
	}
	for _, tc := range tests {
		g := build(t, tc.model, workload.Infer, 2, Options{})
		var f float64
		for _, op := range g.Ops {
			if op.Kind == "conv2d" || op.Kind == "matmul" {
				f += op.FLOPs
			}
		}
		got := f / 2 / 1e9
		if math.Abs(got-tc.gflops)/tc.gflops > 0.03 {
			t.Errorf("%s: %.3f forward GFLOPs per sample, want %.3f within 3%%", tc.model, got, tc.gflops)
		}
	}
}

func TestDTypes(t *testing.T) {
	fp32 := build(t, "resnet50", workload.Train, 2, Options{})
	tests := []struct {
		dtype, storage, matrix string
		ratio                  int64 // fp32 activation bytes / these
	}{
		{"fp32", "fp32", "fp32", 1},
		{"tf32", "fp32", "tf32", 1},
		{"fp16", "fp16", "fp16", 2},
		{"bf16", "bf16", "bf16", 2},
	}
	for _, tc := range tests {
		g := build(t, "resnet50", workload.Train, 2, Options{DType: tc.dtype})
		if got := g.BytesOfKind(workload.Activation) * tc.ratio; got != fp32.BytesOfKind(workload.Activation) {
			t.Errorf("%s: activation bytes %d × %d, fp32 has %d", tc.dtype, g.BytesOfKind(workload.Activation), tc.ratio, fp32.BytesOfKind(workload.Activation))
		}
		if g.BytesOfKind(workload.OptimizerState) != fp32.BytesOfKind(workload.OptimizerState) {
			t.Errorf("%s: Adam moments are not fp32", tc.dtype)
		}
		if g.ParamCount() != fp32.ParamCount() {
			t.Errorf("%s: %d params, fp32 has %d", tc.dtype, g.ParamCount(), fp32.ParamCount())
		}
		for _, op := range g.Ops {
			want := tc.storage
			if op.Kind == "conv2d" || op.Kind == "matmul" || strings.HasPrefix(op.Kind, "conv2d_bwd") || strings.HasPrefix(op.Kind, "matmul_bwd") {
				want = tc.matrix
			}
			if op.DType != want {
				t.Fatalf("%s: op %q (%s) dtype %q, want %q", tc.dtype, op.Name, op.Kind, op.DType, want)
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, m := range Models() {
		for _, kind := range []workload.JobKind{workload.Train, workload.Infer} {
			a := build(t, m, kind, 2, smallOpt(m))
			b := build(t, m, kind, 2, smallOpt(m))
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s %s: two builds differ", m, kind)
			}
			if !reflect.DeepEqual(a, a.Clone()) {
				t.Errorf("%s %s: graph differs from its clone", m, kind)
			}
		}
	}
}

// TestTiedEmbedding checks that GPT-2's LM head reuses the token embedding:
// one parameter, one gradient accumulated by the head and the lookup.
func TestTiedEmbedding(t *testing.T) {
	g := build(t, "gpt2-small", workload.Train, 1, Options{Seq: 16})
	var wte, grad int = -1, -1
	for i, tt := range g.Tensors {
		switch tt.Name {
		case "wte.weight":
			wte = i
		case "wte.weight.grad":
			grad = i
		}
	}
	if wte < 0 || grad < 0 {
		t.Fatalf("wte %d grad %d", wte, grad)
	}
	var readers, writers []string
	for _, op := range g.Ops {
		for _, in := range op.Inputs {
			if in == wte && op.Phase == workload.Forward {
				readers = append(readers, op.Name)
			}
		}
		for _, out := range op.Outputs {
			if out == grad {
				writers = append(writers, op.Name)
			}
		}
	}
	if want := []string{"wte", "lm_head"}; !reflect.DeepEqual(readers, want) {
		t.Errorf("forward readers of wte: %v, want %v", readers, want)
	}
	if want := []string{"lm_head.bwd_weight", "wte.bwd"}; !reflect.DeepEqual(writers, want) {
		t.Errorf("writers of wte's gradient: %v, want %v", writers, want)
	}
}

func BenchmarkBuildResNet50Train(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Build("resnet50", workload.Train, 16, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHugeBatchBytesDoNotOverflow: a batch so large that a tensor's bytes
// (or the graph's total) would not fit in an int64 is refused with an error
// naming the batch, rather than returning a graph whose byte counts wrapped
// around (negative, or silently small). The largest spec batch still builds.
func TestHugeBatchBytesDoNotOverflow(t *testing.T) {
	for _, c := range []struct {
		model string
		batch int
	}{
		{"gpt2-small", 1 << 36},
		{"vgg16", 1 << 40},
		{"resnet50", 1 << 44},
		{"mlp", 1 << 62},
		{"resnet50", math.MaxInt},
	} {
		g, err := Build(c.model, workload.Train, c.batch, Options{})
		if err == nil {
			var neg int
			for _, tt := range g.Tensors {
				if tt.Bytes < 0 {
					neg++
				}
			}
			t.Errorf("Build(%s, train, %d) succeeded (%d tensors with negative bytes, validate: %v), want an error", c.model, c.batch, neg, g.Validate())
			continue
		}
		if !strings.Contains(err.Error(), "batch") {
			t.Errorf("Build(%s, train, %d): error %q does not name the batch", c.model, c.batch, err)
		}
	}
	for _, m := range Models() {
		g := build(t, m, workload.Train, workload.MaxBatch, Options{})
		if err := g.Validate(); err != nil {
			t.Errorf("%s at batch %d: %v", m, workload.MaxBatch, err)
		}
	}
}

// Chunking splits only linear weights above the chunk size, into row blocks
// no larger than it that hold every element once, each with its own
// gradient and Adam moments; the work is the same and the graph valid.
func TestParamChunks(t *testing.T) {
	for _, m := range Models() {
		whole := build(t, m, workload.Train, 4, smallOpt(m))
		opt := smallOpt(m)
		opt.ParamChunkBytes = 64 << 20
		ch := build(t, m, workload.Train, 4, opt)
		if err := ch.Validate(); err != nil {
			t.Fatalf("%s chunked: %v", m, err)
		}
		if whole.ParamCount() != ch.ParamCount() {
			t.Errorf("%s: %d parameters whole, %d chunked", m, whole.ParamCount(), ch.ParamCount())
		}
		var fw, fc float64
		for i := range whole.Ops {
			fw += whole.Ops[i].FLOPs
		}
		for i := range ch.Ops {
			fc += ch.Ops[i].FLOPs
		}
		if math.Abs(fw-fc) > 1e-9*fw {
			t.Errorf("%s: %.0f FLOPs whole, %.0f chunked", m, fw, fc)
		}
		var chunks int
		for _, x := range ch.Tensors {
			if x.Kind == workload.Param && strings.Contains(x.Name, ".weight#") {
				chunks++
				if x.Bytes > 64<<20 {
					t.Errorf("%s: chunk %s is %d bytes, above the chunk size", m, x.Name, x.Bytes)
				}
			}
		}
		if m == "vgg16" {
			// classifier.0.weight, 4096 × 25088 fp32 (392 MiB), in 7 chunks of
			// at most 653 rows; nothing else is above 64 MiB.
			if chunks != 7 || len(ch.Ops) != len(whole.Ops)+6 {
				t.Errorf("vgg16: %d chunks and %d ops (whole: %d), want 7 chunks and 6 more Adam ops", chunks, len(ch.Ops), len(whole.Ops))
			}
		} else if chunks != 0 || len(ch.Ops) != len(whole.Ops) {
			t.Errorf("%s: %d chunks, %d ops (whole %d); no weight of it is above 64 MiB", m, chunks, len(ch.Ops), len(whole.Ops))
		}
	}
}

// The fused optimizer keeps every op and the order of the others, and puts
// each Adam update after every other op that touches its parameter or
// gradient and before any later op: right after the last of them.
func TestFusedOptimizer(t *testing.T) {
	for _, m := range Models() {
		std := build(t, m, workload.Train, 2, smallOpt(m))
		opt := smallOpt(m)
		opt.FusedOptimizer = true
		fu := build(t, m, workload.Train, 2, opt)
		if err := fu.Validate(); err != nil {
			t.Fatalf("%s fused: %v", m, err)
		}
		if len(fu.Ops) != len(std.Ops) {
			t.Fatalf("%s: %d ops fused, %d standard", m, len(fu.Ops), len(std.Ops))
		}
		var a, b []string
		for i := range std.Ops {
			if std.Ops[i].Kind != "adam" {
				a = append(a, std.Ops[i].Name)
			}
		}
		last := map[int]int{}
		moved := 0
		for i := range fu.Ops {
			op := &fu.Ops[i]
			if op.ID != i {
				t.Fatalf("%s: op %d has ID %d", m, i, op.ID)
			}
			if op.Kind != "adam" {
				b = append(b, op.Name)
				for _, x := range append(append([]int{}, op.Inputs...), op.Outputs...) {
					last[x] = i
				}
				continue
			}
			want := max(last[op.Inputs[0]], last[op.Inputs[1]])
			// Only Adam ops may stand between the last use and the update.
			for j := want + 1; j < i; j++ {
				if fu.Ops[j].Kind != "adam" {
					t.Errorf("%s: %s at %d, but its parameter's last use is op %d (%s), before %s", m, op.Name, i, want, fu.Ops[want].Name, fu.Ops[j].Name)
					break
				}
			}
			if i < len(fu.Ops)-1 && fu.Ops[i+1].Kind != "adam" {
				moved++
			}
		}
		// No other op touches a parameter or its gradient after its update:
		// every read sees the value the standard order gives it.
		for i := range fu.Ops {
			if fu.Ops[i].Kind != "adam" {
				continue
			}
			p, g := fu.Ops[i].Inputs[0], fu.Ops[i].Inputs[1]
			if last[p] > i || last[g] > i {
				t.Errorf("%s: %s at %d, but op %d touches its parameter or gradient later", m, fu.Ops[i].Name, i, max(last[p], last[g]))
			}
		}
		if strings.Join(a, ",") != strings.Join(b, ",") {
			t.Errorf("%s: the order of the other ops changed", m)
		}
		if moved == 0 {
			t.Errorf("%s: no Adam update moved into backward", m)
		}
	}
}

// Spreading keeps the fused graph's ops, the order of the non-Adam ops and
// the place of every update of an unchunked parameter, and moves chunk k of
// a weight's n to right after the first op at whose end k/n of the backward
// FLOPs from the weight's fusion point are done (checked here by summing
// them afresh); no op touches a parameter or gradient after its update.
// Without chunks it changes nothing.
func TestSpreadOptimizer(t *testing.T) {
	for _, m := range Models() {
		opt := smallOpt(m)
		opt.FusedOptimizer = true
		opt.ParamChunkBytes = 2 << 20
		fu := build(t, m, workload.Train, 2, opt)
		opt.SpreadOptimizer = true
		sp := build(t, m, workload.Train, 2, opt)
		if err := sp.Validate(); err != nil {
			t.Fatalf("%s spread: %v", m, err)
		}
		if again := build(t, m, workload.Train, 2, opt); !reflect.DeepEqual(again, sp) {
			t.Fatalf("%s: two spread builds differ", m)
		}
		nonAdam := func(g *workload.Graph) (names []string, before map[string]string) {
			before = map[string]string{} // Adam op -> the non-Adam op before it
			prev := ""
			for i := range g.Ops {
				if g.Ops[i].Kind == "adam" {
					before[g.Ops[i].Name] = prev
					continue
				}
				prev = g.Ops[i].Name
				names = append(names, prev)
			}
			return names, before
		}
		fuNames, fuBefore := nonAdam(fu)
		spNames, spBefore := nonAdam(sp)
		if !reflect.DeepEqual(fuNames, spNames) || len(fuBefore) != len(spBefore) || len(fu.Ops) != len(sp.Ops) {
			t.Fatalf("%s: spreading changed the other ops or the number of updates", m)
		}
		last := map[int]int{}
		for i := range sp.Ops {
			for _, x := range append(append([]int{}, sp.Ops[i].Inputs...), sp.Ops[i].Outputs...) {
				last[x] = i
			}
		}
		index := map[string]int{}
		end := 0
		for i := range sp.Ops {
			index[sp.Ops[i].Name] = i
			if sp.Ops[i].Kind != "adam" {
				end = i
			}
		}
		count := map[string]int{} // chunked weight -> chunks
		for _, x := range sp.Tensors {
			if w, _, ok := strings.Cut(x.Name, "#"); ok && x.Kind == workload.Param {
				count[w]++
			}
		}
		moved := 0
		for i := range sp.Ops {
			op := &sp.Ops[i]
			if op.Kind != "adam" {
				continue
			}
			p, g := op.Inputs[0], op.Inputs[1]
			if last[p] > i || last[g] > i {
				t.Errorf("%s: %s at %d, but op %d touches its parameter or gradient later", m, op.Name, i, max(last[p], last[g]))
			}
			name := sp.Tensors[p].Name
			w, ks, chunked := strings.Cut(name, "#")
			if !chunked {
				if spBefore[op.Name] != fuBefore[op.Name] {
					t.Errorf("%s: %s moved from after %q to after %q, but its parameter is not a chunk", m, op.Name, fuBefore[op.Name], spBefore[op.Name])
				}
				continue
			}
			k, _ := strconv.Atoi(ks)
			from := index[fuBefore[op.Name]] // where fusion put every chunk's update
			at := index[spBefore[op.Name]]
			var done, total float64 // backward FLOPs from the fusion point up to the update, and to the end
			for j := from; j <= end; j++ {
				if sp.Ops[j].Kind == "adam" {
					continue
				}
				if j < at {
					done += sp.Ops[j].FLOPs
				}
				total += sp.Ops[j].FLOPs
			}
			goal := total * float64(k) / float64(count[w])
			tol := 1e-9 * total
			// Right after the first op whose end reaches the goal: chunk 0 at
			// the fusion point itself.
			if (k == 0 && at != from) || (k > 0 && (done >= goal-tol || done+sp.Ops[at].FLOPs < goal-tol)) {
				t.Errorf("%s: %s (chunk %d of %d) after %s: %.4g of %.4g backward FLOPs done before that op and %.4g with it, want the first op at whose end %.4g are done",
					m, op.Name, k, count[w], sp.Ops[at].Name, done, total, done+sp.Ops[at].FLOPs, goal)
			}
			if at != from {
				moved++
			}
		}
		if m == "vgg16" && (count["classifier.0.weight"] < 40 || moved < count["classifier.0.weight"]/2) {
			t.Errorf("vgg16: %d chunks of classifier.0.weight, %d updates moved", count["classifier.0.weight"], moved)
		}
		// Without chunks there is nothing to spread.
		opt.ParamChunkBytes = 0
		nochunk := build(t, m, workload.Train, 2, opt)
		opt.SpreadOptimizer = false
		if plain := build(t, m, workload.Train, 2, opt); !reflect.DeepEqual(plain, nochunk) {
			t.Errorf("%s: spreading changed a graph without chunks", m)
		}
	}
}

// The spreading rule on hand-made op lists, where the zoo's models have no
// such cases: ties (an op whose end reaches the goal exactly takes the
// update), ops without FLOPs, two weights fused at one point (each counts
// its own chunks) and one weight's chunks fused at two points (each from
// its own).
func TestSpreadChunksRule(t *testing.T) {
	type chunk struct{ k, n, param int }
	cases := []struct {
		name  string
		flops []float64       // the non-Adam ops, in order
		after map[int][]chunk // fusion point -> chunk updates there
		want  map[int][]int   // op -> params of the updates after it
	}{
		{"ties", []float64{2, 2, 2, 2}, map[int][]chunk{0: {{0, 2, 100}, {1, 2, 101}}}, map[int][]int{0: {100}, 1: {101}}},
		{"no FLOPs at the fusion point", []float64{0, 0, 3, 3}, map[int][]chunk{0: {{0, 2, 100}, {1, 2, 101}}}, map[int][]int{0: {100}, 2: {101}}},
		{"no FLOPs at all", []float64{0, 0, 0}, map[int][]chunk{0: {{0, 2, 100}, {1, 2, 101}}}, map[int][]int{0: {100, 101}}},
		{"two weights, one point", []float64{1, 1, 1, 1}, map[int][]chunk{0: {{0, 2, 100}, {1, 2, 101}, {0, 2, 200}, {1, 2, 201}}},
			map[int][]int{0: {100, 200}, 1: {101, 201}}},
		{"one weight, two points", []float64{1, 1, 1, 1}, map[int][]chunk{0: {{0, 4, 100}, {1, 4, 101}}, 2: {{2, 4, 102}, {3, 4, 103}}},
			map[int][]int{0: {100, 101}, 2: {102}, 3: {103}}},
	}
	for _, c := range cases {
		b := &builder{chunks: map[int]chunkOf{}}
		var ops []workload.Op
		for i, f := range c.flops {
			ops = append(ops, workload.Op{ID: i, Kind: "conv2d_bwd_data", FLOPs: f})
		}
		after := map[int][]int{}
		for at := 0; at < len(c.flops); at++ {
			for _, ch := range c.after[at] {
				b.chunks[ch.param] = chunkOf{k: ch.k, n: ch.n}
				after[at] = append(after[at], len(ops))
				ops = append(ops, workload.Op{ID: len(ops), Kind: "adam", Inputs: []int{ch.param}})
			}
		}
		got := map[int][]int{}
		for at, as := range b.spreadChunks(ops, after) {
			for _, a := range as {
				got[at] = append(got[at], ops[a].Inputs[0])
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: updates after ops %v, want %v", c.name, got, c.want)
		}
	}
}

// A job spec's optimizer names map to the build options, and a chunk size
// is checked against the model's rows without the model name twice.
func TestSpecGraphOptions(t *testing.T) {
	for _, c := range []struct {
		order         string
		fused, spread bool
	}{{"", false, false}, {"fused", true, false}, {"spread", true, true}} {
		o := WithOptimizer(Options{ParamChunkBytes: 1 << 20, Seq: 7}, c.order)
		if o.FusedOptimizer != c.fused || o.SpreadOptimizer != c.spread || o.ParamChunkBytes != 1<<20 || o.Seq != 7 {
			t.Errorf("WithOptimizer(%q) = %+v", c.order, o)
		}
	}
	if err := CheckParamChunk("vgg16", "", 4<<20); err != nil {
		t.Errorf("vgg16 in 4 MiB chunks: %v", err)
	}
	err := CheckParamChunk("vgg16", "", 1024)
	if err == nil || strings.Contains(err.Error(), "model vgg16") || !strings.Contains(err.Error(), "below one row of classifier.0.weight (100352 bytes)") {
		t.Errorf("vgg16 in 1 KiB chunks: %v", err)
	}
	// A row is as long as the dtype makes it: 60000 bytes holds a row of
	// classifier.0.weight in fp16 (50176 bytes), not in fp32.
	if err := CheckParamChunk("vgg16", "fp16", 60000); err != nil {
		t.Errorf("vgg16 fp16 in 60000-byte chunks: %v", err)
	}
	if err := CheckParamChunk("vgg16", "fp32", 60000); err == nil {
		t.Error("vgg16 fp32 in 60000-byte chunks: accepted")
	}
	if err := CheckParamChunk("alexnet", "", 4<<20); err == nil || !strings.Contains(err.Error(), `unknown model "alexnet"`) {
		t.Errorf("unknown model: %v", err)
	}
	// The check agrees with Build for every model, precision and a range
	// of sizes, and Build's own error is the same text.
	for _, m := range Models() {
		for _, dt := range []string{"", "fp16"} {
			for _, c := range []int64{1 << 10, 3000, 60000, 100352, 1 << 20, 4 << 20} {
				_, berr := Build(m, workload.Train, 1, Options{DType: dt, ParamChunkBytes: c})
				cerr := CheckParamChunk(m, dt, c)
				if (berr == nil) != (cerr == nil) || (berr != nil && !strings.HasSuffix(berr.Error(), cerr.Error())) {
					t.Errorf("%s %q in %d-byte chunks: Build %v, CheckParamChunk %v", m, dt, c, berr, cerr)
				}
			}
		}
	}
}
