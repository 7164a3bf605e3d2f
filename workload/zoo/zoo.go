// Package zoo builds the tensor-op graph of one iteration of well-known deep
// learning models, for training (forward, loss, backward, one Adam update per
// parameter) or inference (forward only), at any batch size.
//
// Layer shapes follow the reference implementations (torchvision for the
// convolutional networks, the common Inception-v4 port, Hugging Face for
// BERT and GPT-2), so parameter counts match the published ones:
//
//	vgg16         138,357,544  ImageNet 224×224, 1000 classes
//	resnet50       25,557,032  ImageNet 224×224, 1000 classes
//	inception-v3   23,834,568  299×299, 1000 classes, no auxiliary head
//	inception-v4   42,679,816  299×299, 1000 classes
//	densenet121     7,978,856  ImageNet 224×224, 1000 classes
//	bert-base     109,483,778  BertModel with pooler (109,482,240) plus a 2-way classifier
//	gpt2-small    124,439,808  LM head tied to the token embedding
//	mlp             1,863,690  784-1024-1024-10 with ReLU
//
// Parameters are weights, biases and normalisation affine scales and
// shifts; batch-norm running statistics are buffers and are not modelled.
// Dropout is omitted (it is the identity at inference and adds only a mask
// per dropped tensor in training).
package zoo

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gpusched/gpusched/workload"
)

// Options tunes a model build. The zero value gives the defaults.
type Options struct {
	// Seq is the sequence length for bert-base (default 128, at most 512)
	// and gpt2-small (default 1024, at most 1024); 0 means the default.
	// Other models ignore it.
	Seq int
	// DType is the precision of parameters, activations and gradients:
	// "" or "fp32" (default), "tf32" (fp32 storage, tf32 matrix products),
	// "fp16" or "bf16". Adam moments are always fp32.
	DType string
	// ParamChunkBytes, when positive, stores each linear layer's own weight
	// larger than it as row chunks of at most this many bytes, each a
	// parameter with its own gradient and Adam moments (VGG16's 392 MiB
	// classifier.0 weight is the only such weight above 64 MiB; embeddings
	// stay whole, gpt2-small's 147 MiB wte, tied to its output layer, and
	// bert-base's 89 MiB word embeddings among them). A size below one row
	// of such a weight is an error. Plans can
	// then move one chunk's optimizer state while another updates, where a
	// whole tensor must be resident at once. 0 keeps every weight whole.
	ParamChunkBytes int64
	// FusedOptimizer runs each parameter's Adam update as soon as its
	// gradient is final (the optimizer step fused into backward) rather
	// than all of them after backward. The same updates; gradients live
	// shorter.
	FusedOptimizer bool
	// SpreadOptimizer, with FusedOptimizer, spreads the updates of a weight
	// stored in chunks (ParamChunkBytes) over the rest of backward (chunk
	// k of n right after the first op at whose end k/n of the backward
	// FLOPs from the fusion point are done), instead of running them all
	// right after the weight's gradients are final. A chunk's moments then
	// need to be on the device only around its own update. It changes
	// nothing without chunked weights; without FusedOptimizer it is an error.
	SpreadOptimizer bool
}

type model struct {
	name    string
	build   func(b *builder, opt Options)
	seq     int // default sequence length (0: not a sequence model)
	maxSeq  int
	aliases []string
}

var registry = []model{
	{name: "bert-base", build: buildBERT, seq: 128, maxSeq: 512, aliases: []string{"bert", "bert_base", "bertbase", "bert-base-uncased"}},
	{name: "densenet121", build: buildDenseNet121, aliases: []string{"densenet-121", "densenet_121"}},
	{name: "gpt2-small", build: buildGPT2, seq: 1024, maxSeq: 1024, aliases: []string{"gpt2", "gpt-2", "gpt2_small", "gpt-2-small"}},
	{name: "inception-v3", build: buildInceptionV3, aliases: []string{"inception_v3", "inceptionv3", "inception3"}},
	{name: "inception-v4", build: buildInceptionV4, aliases: []string{"inception_v4", "inceptionv4", "inception4"}},
	{name: "mlp", build: buildMLP},
	{name: "resnet50", build: buildResNet50, aliases: []string{"resnet-50", "resnet_50"}},
	{name: "vgg16", build: buildVGG16, aliases: []string{"vgg-16", "vgg_16"}},
}

// Models returns the canonical model names, sorted.
func Models() []string {
	names := make([]string, len(registry))
	for i, m := range registry {
		names[i] = m.name
	}
	sort.Strings(names)
	return names
}

func lookup(name string) (*model, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	for i := range registry {
		m := &registry[i]
		if m.name == n {
			return m, true
		}
		for _, a := range m.aliases {
			if a == n {
				return m, true
			}
		}
	}
	return nil, false
}

// Canonical resolves a model name or alias, case-insensitively, to its
// canonical name; ok is false for an unknown name.
func Canonical(name string) (string, bool) {
	m, ok := lookup(name)
	if !ok {
		return "", false
	}
	return m.name, true
}

// MaxSeq is the longest sequence length model (a name or alias) takes: 512
// for bert-base, 1024 for gpt2-small; 0 for a model without one (it ignores
// Options.Seq) or an unknown name.
func MaxSeq(name string) int {
	m, ok := lookup(name)
	if !ok {
		return 0
	}
	return m.maxSeq
}

// Build returns the graph of one iteration of model: a training iteration
// for kind workload.Train, a forward pass for workload.Infer.
func Build(name string, kind workload.JobKind, batch int, opt Options) (*workload.Graph, error) {
	m, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown model %q (known models: %s)", name, strings.Join(Models(), ", "))
	}
	b, err := buildModel(m, kind, batch, opt)
	if err != nil {
		return nil, err
	}
	return b.g, nil
}

// buildModel is Build once the model is known; it returns the builder, which
// also knows the model's linear weights.
func buildModel(m *model, kind workload.JobKind, batch int, opt Options) (*builder, error) {
	if kind != workload.Train && kind != workload.Infer {
		return nil, fmt.Errorf("model %s: unknown job kind %q (allowed: %s, %s)", m.name, kind, workload.Train, workload.Infer)
	}
	if batch < 1 {
		return nil, fmt.Errorf("model %s: batch size must be at least 1 (got %d)", m.name, batch)
	}
	switch opt.DType {
	case "":
		opt.DType = "fp32"
	case "fp32", "tf32", "fp16", "bf16":
	default:
		return nil, fmt.Errorf("model %s: unsupported dtype %q (allowed: fp32, tf32, fp16, bf16)", m.name, opt.DType)
	}
	if opt.Seq < 0 {
		return nil, fmt.Errorf("model %s: sequence length must not be negative (got %d)", m.name, opt.Seq)
	}
	if opt.ParamChunkBytes < 0 {
		return nil, fmt.Errorf("model %s: parameter chunk size must not be negative (got %d bytes; 0 keeps weights whole)", m.name, opt.ParamChunkBytes)
	}
	if opt.SpreadOptimizer && !opt.FusedOptimizer {
		return nil, fmt.Errorf("model %s: spreading the optimizer's updates needs the fused optimizer (set FusedOptimizer too, or leave SpreadOptimizer off)", m.name)
	}
	if m.seq > 0 {
		if opt.Seq == 0 {
			opt.Seq = m.seq
		}
		if opt.Seq > m.maxSeq {
			return nil, fmt.Errorf("model %s: sequence length %d exceeds the model's %d positions", m.name, opt.Seq, m.maxSeq)
		}
	}
	b := newBuilder(m.name, kind, batch, opt.DType)
	b.chunk = opt.ParamChunkBytes
	b.fused = opt.FusedOptimizer
	b.spread = opt.SpreadOptimizer
	m.build(b, opt)
	if b.chunkTooSmall != "" {
		return nil, fmt.Errorf("model %s: %s", m.name, b.chunkTooSmall)
	}
	if b.overflow == "" {
		b.finish() // backward and the optimizer, for training
	}
	if b.overflow != "" {
		return nil, fmt.Errorf("model %s: batch size %d is too large: the bytes of tensor %q (or of all tensors together) overflow a 64-bit count (job specs allow at most %d)",
			m.name, batch, b.overflow, workload.MaxBatch)
	}
	return b, nil
}

// WithOptimizer returns o with the optimizer order a job spec names: ""
// (every update after backward), "fused" or "spread" (see
// workload.SpecOptimizers; the spec's validation refuses other names, and
// they are treated as "").
func WithOptimizer(o Options, order string) Options {
	o.FusedOptimizer = order == "fused" || order == "spread"
	o.SpreadOptimizer = order == "spread"
	return o
}

// CheckParamChunk reports whether model, at precision dtype ("" for
// fp32), can store its large linear weights in chunks of at most bytes:
// nil, or why not (a size below one row of a weight it would split, as
// Build says it). Each model and precision is built once; the answers come
// from its weights' shapes, so a coordinator checks many jobs quickly.
func CheckParamChunk(model, dtype string, bytes int64) error {
	ws, err := linearWeights(model, dtype)
	if err != nil {
		return err
	}
	if msg := chunkTooSmall(ws, bytes); msg != "" {
		return errors.New(msg)
	}
	return nil
}

var linearCache sync.Map // model|dtype -> []linearWeight

// linearWeights lists a model's linear weights at a precision, from one
// build (cached).
func linearWeights(model, dtype string) ([]linearWeight, error) {
	m, ok := lookup(model)
	if !ok {
		return nil, fmt.Errorf("unknown model %q (known models: %s)", model, strings.Join(Models(), ", "))
	}
	key := m.name + "|" + dtype
	if ws, ok := linearCache.Load(key); ok {
		return ws.([]linearWeight), nil
	}
	b, err := buildModel(m, workload.Train, 1, Options{DType: dtype})
	if err != nil {
		return nil, err
	}
	linearCache.Store(key, b.linears)
	return b.linears, nil
}

// classify ends an image classifier: a linear layer to classes on features
// x ([batch, features] or a flattened map), and in training the
// cross-entropy loss against the labels.
func (b *builder) classify(name string, x, classes int, labels int, flatten bool) {
	logits := b.linear(name, x, classes, true, flatten)
	if b.train {
		b.crossEntropy(logits, labels)
	}
}

// imageInputs creates the image batch and, for training, the labels.
func (b *builder) imageInputs(size int) (images, labels int) {
	images = b.input("images", b.fdt, b.batch, 3, size, size)
	labels = -1
	if b.train {
		labels = b.input("labels", "int64", b.batch)
	}
	return images, labels
}
