// Package zooapps gives the cluster simulator application profiles for the
// model zoo (workload/zoo), which has no measured step times or validation
// runs, from the cost model.
//
// Speed. A micro-step of a job with r GPUs over n nodes at per-GPU batch l
// takes compute(l) + sync(n, r) seconds, nothing overlapped:
//
//   - compute(l) is the device cost model's time of one training iteration
//     of the zoo graph at batch l (gpu.Profile.GraphSeconds: the sum of the
//     predicted op times, no memory scheduling), cached per (model, batch);
//     a fractional l is interpolated between its neighbours;
//   - sync(n, r) is a ring all-reduce of the parameter gradients:
//     2·(r−1)/r · bytes / bandwidth, where bytes are the parameters' bytes
//     (a gradient has its parameter's dtype) and bandwidth is the slowest
//     link of the ring: Network.IntraNode when n = 1, Network.InterNode
//     otherwise (or Network.IntraNode when that is slower and some node
//     holds more than one of the r GPUs). One GPU does not synchronise.
//
// Progress. The large-batch model of arXiv 1812.06162 with a constant
// gradient noise scale Bnoise per model (placement.NewSyntheticApp): a job
// completes after Recipe.Epochs passes over Recipe.DatasetSize samples at
// the base batch B0; at global batch B it needs (Bnoise+B)/(Bnoise+B0)
// times as many samples, in B0/B·(Bnoise+B)/(Bnoise+B0) times as many
// iterations.
//
// Memory. The per-GPU batch is at most the recipe's MaxBatch and at most
// the largest that fits the device's memory, by Config.Memory:
//
//   - Tensile (the default): the largest whose TENSILE minimum budget
//     (tensorsched.MinBudget at Config.Tolerance: the least memory at which
//     a plan adds at most that fraction of extra iteration time) fits, as
//     the live runtime's memory oracle bounds it. A batch whose vanilla
//     peak fits needs no plan; above the largest such batch the job runs
//     under a plan, and its compute time is charged the plan's extra time
//     bounded from above: on a grid of batches between the two bounds, the
//     least tolerance level (0, 1%, 2%, 5%, 10%, ...) at which the minimum
//     budget fits, each batch taking the value of the grid batch at or
//     above it (ExtraTime).
//   - Vanilla: the largest whose vanilla peak (tensorsched.AnalyzePeak
//     without a plan) fits.
//
// Both searches assume the memory grows with the batch. TENSILE's greedy
// planner is not exactly monotone in it (its budget at one batch may be a
// little below that at the batch before), so the bound is a batch that fits
// with the next one failing, found by interpolation between bracketing
// batches.
package zooapps

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// Network holds the bandwidths of the all-reduce model, bytes/s.
type Network struct {
	// IntraNode is the per-direction bandwidth of the link between two GPUs
	// of one node.
	IntraNode float64
	// InterNode is the per-direction bandwidth of the link between two
	// nodes (one ring edge crosses it per node).
	InterNode float64
}

// DefaultNetwork is placement's default all-reduce links (the live
// runtime's too).
var DefaultNetwork = Network{IntraNode: placement.DefaultIntraNodeBandwidth, InterNode: placement.DefaultInterNodeBandwidth}

// Recipe is how a zoo model is trained in a simulated job.
type Recipe struct {
	// Dataset names the data set (documentation only).
	Dataset string
	// DatasetSize is the number of samples in one epoch.
	DatasetSize int
	// Epochs at the base batch after which a job completes.
	Epochs int
	// BaseBatch is the global batch B0 in whose iterations progress is
	// counted: the model's usual batch on one GPU.
	BaseBatch int
	// MaxBatch is the largest global batch (0: 32·BaseBatch, the range of
	// the measured applications' validated batches).
	MaxBatch int
	// NoiseScale is Bnoise in samples (0: DefaultNoiseRatio·BaseBatch).
	NoiseScale float64
}

// DefaultNoiseRatio is the default Bnoise/B0. The measured applications'
// gradient statistics (shared/data/pollux, validation at their smallest
// batch) give a median over epochs of B0·var/sqr / B0 between 38 and 69 for
// bert, cifar10, imagenet and yolov3 (ncf and deepspeech2 are far larger);
// 50 is in that range.
const DefaultNoiseRatio = 50

// Recipes are the default recipes by canonical zoo name. The ImageNet
// classifiers use the 90-epoch schedule of the measured imagenet
// application; bert-base (2-way classifier head) fine-tunes on QQP for 3
// epochs; gpt2-small fine-tunes on WikiText-103 cut into 1024-token
// sequences for 3 epochs; the mlp trains on MNIST for 20 epochs.
var Recipes = map[string]Recipe{
	"vgg16":        {Dataset: "ImageNet-1k", DatasetSize: 1281167, Epochs: 90, BaseBatch: 64},
	"resnet50":     {Dataset: "ImageNet-1k", DatasetSize: 1281167, Epochs: 90, BaseBatch: 128},
	"inception-v3": {Dataset: "ImageNet-1k", DatasetSize: 1281167, Epochs: 90, BaseBatch: 64},
	"inception-v4": {Dataset: "ImageNet-1k", DatasetSize: 1281167, Epochs: 90, BaseBatch: 64},
	"densenet121":  {Dataset: "ImageNet-1k", DatasetSize: 1281167, Epochs: 90, BaseBatch: 64},
	"bert-base":    {Dataset: "QQP", DatasetSize: 363846, Epochs: 3, BaseBatch: 32},
	"gpt2-small":   {Dataset: "WikiText-103 (1024-token sequences)", DatasetSize: 100807, Epochs: 3, BaseBatch: 8},
	"mlp":          {Dataset: "MNIST", DatasetSize: 60000, Epochs: 20, BaseBatch: 128},
}

// Config configures a Builder.
type Config struct {
	// Device is the GPU every replica runs on (required).
	Device gpu.Profile
	// Network: zero fields take DefaultNetwork's.
	Network Network
	// Recipes override the default Recipes per canonical model name.
	Recipes map[string]Recipe
	// Options are the zoo build options (dtype, sequence length).
	Options zoo.Options
	// Memory is what bounds the per-GPU batch: Tensile ("", the default)
	// or Vanilla.
	Memory MemoryModel
	// Tolerance is, with Tensile, the extra iteration time a TENSILE plan
	// may add, as a fraction of the vanilla time (0.1 = 10%; the live
	// runtime's default is workload.DefaultTolerance). Zero allows only
	// plans that add no time.
	Tolerance float64
}

// MemoryModel names how a zoo application's per-GPU batch is bounded by
// device memory.
type MemoryModel string

const (
	// Tensile bounds the per-GPU batch by TENSILE's minimum budget at the
	// tolerance: memory scheduling (swapping, recomputation) widens the
	// batches a job may run at.
	Tensile MemoryModel = "tensile"
	// Vanilla bounds it by the peak without memory scheduling.
	Vanilla MemoryModel = "vanilla"
)

// MemoryModels are the valid Config.Memory values.
var MemoryModels = []MemoryModel{Tensile, Vanilla}

// Builder builds synthetic applications for zoo models on one device and
// caches the cost model's answers. It is safe for concurrent use.
type Builder struct {
	cfg Config

	mu      sync.Mutex
	compute map[modelBatch]float64
	peak    map[modelBatch]int64
	grad    map[string]int64
	apps    map[string]*placement.App
	vmax    map[string]int // vanilla per-GPU batch bound by model
	tmax    map[string]int // TENSILE per-GPU batch bound by model
}

type modelBatch struct {
	model string
	batch int
}

// New checks cfg and returns a Builder.
func New(cfg Config) (*Builder, error) {
	if err := cfg.Device.Validate(); err != nil {
		return nil, fmt.Errorf("zoo applications: %w", err)
	}
	switch cfg.Memory {
	case "":
		cfg.Memory = Tensile
	case Tensile, Vanilla:
	default:
		return nil, fmt.Errorf("zoo applications: field Memory: unknown memory model %q (want %s or %s)", cfg.Memory, Tensile, Vanilla)
	}
	if !(cfg.Tolerance >= 0) || math.IsInf(cfg.Tolerance, 0) {
		return nil, fmt.Errorf("zoo applications: field Tolerance: %v must be a finite fraction ≥ 0 (0.1 for 10%%)", cfg.Tolerance)
	}
	if cfg.Network.IntraNode == 0 {
		cfg.Network.IntraNode = DefaultNetwork.IntraNode
	}
	if cfg.Network.InterNode == 0 {
		cfg.Network.InterNode = DefaultNetwork.InterNode
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"Network.IntraNode", cfg.Network.IntraNode}, {"Network.InterNode", cfg.Network.InterNode}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return nil, fmt.Errorf("zoo applications: field %s: %v must be a finite bandwidth > 0 bytes/s", f.name, f.v)
		}
	}
	rs := make(map[string]Recipe, len(Recipes))
	for k, v := range Recipes {
		rs[k] = v
	}
	for k, v := range cfg.Recipes {
		c, ok := zoo.Canonical(k)
		if !ok {
			return nil, fmt.Errorf("zoo applications: field Recipes: unknown model %q (zoo models: %s)", k, strings.Join(zoo.Models(), ", "))
		}
		rs[c] = v
	}
	for _, k := range sortedKeys(rs) {
		r := rs[k]
		if r.MaxBatch == 0 {
			r.MaxBatch = 32 * r.BaseBatch
		}
		if r.NoiseScale == 0 {
			r.NoiseScale = DefaultNoiseRatio * float64(r.BaseBatch)
		}
		rs[k] = r
		if err := r.check(k); err != nil {
			return nil, err
		}
	}
	cfg.Recipes = rs
	return &Builder{cfg: cfg, compute: map[modelBatch]float64{}, peak: map[modelBatch]int64{},
		grad: map[string]int64{}, apps: map[string]*placement.App{}, vmax: map[string]int{}, tmax: map[string]int{}}, nil
}

func (r Recipe) check(model string) error {
	var errs []error
	bad := func(field, why string) {
		errs = append(errs, fmt.Errorf("zoo applications: recipe %s: field %s: %s", model, field, why))
	}
	if r.DatasetSize < 1 {
		bad("DatasetSize", fmt.Sprintf("%d must be ≥ 1 sample", r.DatasetSize))
	}
	if r.Epochs < 1 {
		bad("Epochs", fmt.Sprintf("%d must be ≥ 1", r.Epochs))
	}
	if r.BaseBatch < 1 {
		bad("BaseBatch", fmt.Sprintf("%d must be ≥ 1", r.BaseBatch))
	}
	if r.MaxBatch < r.BaseBatch {
		bad("MaxBatch", fmt.Sprintf("%d must be ≥ BaseBatch (%d), or 0 for 32·BaseBatch", r.MaxBatch, r.BaseBatch))
	}
	if !(r.NoiseScale > 0) || math.IsInf(r.NoiseScale, 0) {
		bad("NoiseScale", fmt.Sprintf("%v must be a finite number of samples > 0, or 0 for %d·BaseBatch", r.NoiseScale, DefaultNoiseRatio))
	}
	return errors.Join(errs...)
}

// Device is the profile the builder predicts on.
func (b *Builder) Device() gpu.Profile { return b.cfg.Device }

// Network is the all-reduce model's bandwidths (defaults filled in).
func (b *Builder) Network() Network { return b.cfg.Network }

// Memory is the memory model bounding the per-GPU batch, and TENSILE's
// tolerance.
func (b *Builder) Memory() (MemoryModel, float64) { return b.cfg.Memory, b.cfg.Tolerance }

// Recipe returns the recipe of a zoo model (defaults filled in).
func (b *Builder) Recipe(model string) (Recipe, error) {
	c, err := canonical(model)
	if err != nil {
		return Recipe{}, err
	}
	return b.cfg.Recipes[c], nil
}

func canonical(model string) (string, error) {
	c, ok := zoo.Canonical(model)
	if !ok {
		return "", fmt.Errorf("unknown zoo model %q (zoo models: %s)", model, strings.Join(zoo.Models(), ", "))
	}
	return c, nil
}

// graph builds one training iteration of model at batch.
func (b *Builder) graph(model string, batch int) (*workload.Graph, error) {
	return zoo.Build(model, workload.Train, batch, b.cfg.Options)
}

// ComputeSeconds is the cost model's time of one training iteration of
// model at per-GPU batch batch on the device, without synchronisation.
func (b *Builder) ComputeSeconds(model string, batch int) (float64, error) {
	c, err := canonical(model)
	if err != nil {
		return 0, err
	}
	if batch < 1 {
		return 0, fmt.Errorf("zoo model %s: batch %d must be ≥ 1", c, batch)
	}
	k := modelBatch{c, batch}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.compute[k]; ok {
		return s, nil
	}
	g, err := b.graph(c, batch)
	if err != nil {
		return 0, err
	}
	s := b.cfg.Device.GraphSeconds(g)
	b.compute[k] = s
	if _, ok := b.grad[c]; !ok {
		b.grad[c] = g.BytesOfKind(workload.Param)
	}
	return s, nil
}

// GradientBytes is the bytes one all-reduce moves per replica: the
// parameters' bytes.
func (b *Builder) GradientBytes(model string) (int64, error) {
	c, err := canonical(model)
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	n, ok := b.grad[c]
	b.mu.Unlock()
	if ok {
		return n, nil
	}
	if _, err := b.ComputeSeconds(c, 1); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.grad[c], nil
}

// SyncSeconds is the ring all-reduce time of model's gradients over
// replicas GPUs on nodes nodes: 2·(r−1)/r · bytes / bandwidth.
func (b *Builder) SyncSeconds(model string, nodes, replicas int) (float64, error) {
	bytes, err := b.GradientBytes(model)
	if err != nil {
		return 0, err
	}
	return ringAllReduce(float64(bytes), nodes, replicas, b.cfg.Network), nil
}

// ringAllReduce is the ring all-reduce time over the slowest link the ring
// crosses (placement.RingLinkBandwidth).
func ringAllReduce(bytes float64, nodes, replicas int, nw Network) float64 {
	return placement.RingAllReduceSeconds(bytes, replicas, placement.RingLinkBandwidth(nodes, replicas, nw.IntraNode, nw.InterNode), 0)
}

// VanillaPeak is the predicted device peak of one training iteration of
// model at per-GPU batch batch without memory scheduling.
func (b *Builder) VanillaPeak(model string, batch int) (int64, error) {
	c, err := canonical(model)
	if err != nil {
		return 0, err
	}
	k := modelBatch{c, batch}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.peak[k]; ok {
		return p, nil
	}
	g, err := b.graph(c, batch)
	if err != nil {
		return 0, err
	}
	r, err := tensorsched.AnalyzePeak([]tensorsched.Job{{Name: c, Graph: g}}, b.cfg.Device)
	if err != nil {
		return 0, fmt.Errorf("zoo model %s at batch %d: peak analysis: %w", c, batch, err)
	}
	p := max(r.Bytes, r.RunPeakBytes)
	b.peak[k] = p
	return p, nil
}

// MaxLocal is the largest per-GPU batch that fits the device's memory under
// the builder's memory model (VanillaMaxLocal or TensileMaxLocal).
// It is an error when not even batch 1 fits.
func (b *Builder) MaxLocal(model string) (int, error) {
	if b.cfg.Memory == Tensile {
		return b.TensileMaxLocal(model)
	}
	m, err := b.VanillaMaxLocal(model)
	if err == nil && m == 0 {
		c, _ := canonical(model)
		p, _ := b.VanillaPeak(c, 1)
		return 0, fmt.Errorf("zoo model %s does not fit on %s even at batch 1 (vanilla peak %.1f GiB, memory %.1f GiB): choose a larger device (--device) or --memory tensile",
			c, b.cfg.Device.Name, float64(p)/(1<<30), float64(b.cfg.Device.MemoryBytes)/(1<<30))
	}
	return m, err
}

// VanillaMaxLocal is the largest per-GPU batch, at most the recipe's
// MaxBatch, whose vanilla peak fits the device's memory (the peak grows
// with the batch: doubling, then bisection); 0 when not even batch 1 fits.
func (b *Builder) VanillaMaxLocal(model string) (int, error) {
	r, err := b.Recipe(model)
	if err != nil {
		return 0, err
	}
	c, _ := canonical(model)
	return b.memoBound(b.vmax, c, func() (int, error) { return b.vanillaMaxLocal(c, r) })
}

// memoBound returns cache[model], computing it with f (outside the lock) on
// a miss and storing it when f succeeds.
func (b *Builder) memoBound(cache map[string]int, model string, f func() (int, error)) (int, error) {
	b.mu.Lock()
	m, ok := cache[model]
	b.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := f()
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	cache[model] = m
	b.mu.Unlock()
	return m, nil
}

func (b *Builder) vanillaMaxLocal(model string, r Recipe) (int, error) {
	fits := func(batch int) (bool, error) {
		p, err := b.VanillaPeak(model, batch)
		return p <= b.cfg.Device.MemoryBytes, err
	}
	ok, err := fits(1)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, nil
	}
	lo, hi := 1, 2 // lo fits; hi is the first candidate above it
	for hi <= r.MaxBatch {
		ok, err := fits(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo, hi = hi, 2*hi
	}
	if hi > r.MaxBatch {
		if ok, err := fits(r.MaxBatch); err != nil {
			return 0, err
		} else if ok {
			return r.MaxBatch, nil
		}
		hi = r.MaxBatch
	}
	for hi-lo > 1 { // lo fits, hi does not
		mid := (lo + hi) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// MinBudget is TENSILE's minimum budget of one training iteration of model
// at per-GPU batch batch on the device at the builder's tolerance
// (tensorsched.MinBudget, which caches its answers).
func (b *Builder) MinBudget(model string, batch int) (int64, error) {
	c, err := canonical(model)
	if err != nil {
		return 0, err
	}
	g, err := b.graph(c, batch)
	if err != nil {
		return 0, err
	}
	m, _, err := tensorsched.MinBudget(g, b.cfg.Device, b.cfg.Tolerance)
	if err != nil {
		return 0, fmt.Errorf("zoo model %s at batch %d: minimum budget: %w", c, batch, err)
	}
	return m, nil
}

// TensileMaxLocal is the largest per-GPU batch, at most the recipe's
// MaxBatch, that fits the device's memory under a TENSILE plan within the
// tolerance: every batch up to VanillaMaxLocal fits without one; above it
// a batch fits when its MinBudget does. The search brackets the boundary
// between the vanilla bound (fits) and MaxBatch, and narrows it by linear
// interpolation of the budget (near-linear in the batch), checking the
// batch beside each guess, with bisection when interpolation stalls.
func (b *Builder) TensileMaxLocal(model string) (int, error) {
	r, err := b.Recipe(model)
	if err != nil {
		return 0, err
	}
	c, _ := canonical(model)
	return b.memoBound(b.tmax, c, func() (int, error) {
		vm, err := b.VanillaMaxLocal(c)
		if err != nil {
			return 0, err
		}
		return b.tensileMaxLocal(c, r, vm)
	})
}

func (b *Builder) tensileMaxLocal(model string, r Recipe, vm int) (int, error) {
	if vm >= r.MaxBatch {
		return r.MaxBatch, nil
	}
	mem := b.cfg.Device.MemoryBytes
	budget := map[int]int64{}
	probe := func(batch int) bool {
		m, err := b.MinBudget(model, batch)
		if err != nil {
			// No plan within the tolerance: the batch does not fit.
			m = math.MaxInt64
		}
		budget[batch] = m
		return m <= mem
	}
	lo := vm // fits (0: nothing fits yet)
	if lo == 0 {
		if !probe(1) {
			p, _ := b.VanillaPeak(model, 1)
			return 0, fmt.Errorf("zoo model %s does not fit on %s even at batch 1 (vanilla peak %.1f GiB, memory %.1f GiB, nor under a TENSILE plan within %.0f%% extra time): choose a larger device (--device) or a higher --tolerance",
				model, b.cfg.Device.Name, float64(p)/(1<<30), float64(mem)/(1<<30), 100*b.cfg.Tolerance)
		}
		lo = 1
	} else {
		p, err := b.VanillaPeak(model, lo)
		if err != nil {
			return 0, err
		}
		budget[lo] = p // an upper bound of its minimum budget
	}
	hi := r.MaxBatch
	if probe(hi) {
		return hi, nil
	}
	for hi-lo > 1 { // lo fits, hi does not
		g := (lo + hi) / 2
		if bl, bh := budget[lo], budget[hi]; bh != math.MaxInt64 && bh > bl {
			f := float64(mem-bl) / float64(bh-bl)
			g = lo + int(f*float64(hi-lo))
		}
		g = min(max(g, lo+1), hi-1)
		if probe(g) {
			lo = g
			if g+1 < hi && !probe(g+1) {
				hi = g + 1
			}
		} else {
			hi = g
			if g-1 > lo && probe(g-1) {
				lo = g - 1
			}
		}
	}
	return lo, nil
}

// App returns the synthetic application of a zoo model (name or alias),
// built once per builder. Its name is the model's canonical name.
func (b *Builder) App(model string) (*placement.App, error) {
	c, err := canonical(model)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	a, ok := b.apps[c]
	b.mu.Unlock()
	if ok {
		return a, nil
	}
	r := b.cfg.Recipes[c]
	maxLocal, err := b.MaxLocal(c)
	if err != nil {
		return nil, err
	}
	ov, err := b.overheads(c, maxLocal)
	if err != nil {
		return nil, err
	}
	bytes, err := b.GradientBytes(c)
	if err != nil {
		return nil, err
	}
	nw := b.cfg.Network
	step := func(nodes, replicas int, local float64) (float64, float64) {
		y := ringAllReduce(float64(bytes), nodes, replicas, nw)
		return b.computeAt(c, local, ov) + y, y
	}
	a, err = placement.NewSyntheticApp(placement.SyntheticApp{
		Name: c, BaseBatch: r.BaseBatch, MaxBatch: r.MaxBatch, MinLocal: 1, MaxLocal: maxLocal,
		NoiseScale: r.NoiseScale, DatasetSize: float64(r.DatasetSize), Epochs: r.Epochs, Step: step,
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev, ok := b.apps[c]; ok {
		return prev, nil
	}
	b.apps[c] = a
	return a, nil
}

// computeAt is ComputeSeconds at a possibly fractional batch (clamped to
// ≥ 1, linear between whole batches), times 1+ov.at(batch) at whole
// batches (the memory plan's extra time). The model is canonical and builds
// at every batch ≥ 1 (App checked it), so an error here is a bug.
func (b *Builder) computeAt(model string, local float64, ov overheads) float64 {
	at := func(batch int) float64 {
		s, err := b.ComputeSeconds(model, batch)
		if err != nil {
			panic(fmt.Sprintf("zooapps: %v", err))
		}
		return s * (1 + ov.at(batch))
	}
	local = math.Max(local, 1)
	lo := math.Floor(local)
	s0 := at(int(lo))
	if local == lo {
		return s0
	}
	return s0 + (local-lo)*(at(int(lo)+1)-s0)
}

// toleranceLevels are the tolerances ExtraTime tries, ascending (those of
// tensorsched.MinBudget's cache, so that asking at each costs one planning
// pass per batch in all).
var toleranceLevels = []float64{0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2}

// ExtraTime bounds the extra compute time, as a fraction, that a job of
// model at per-GPU batch batch pays for fitting the device under the
// builder's memory model: 0 when its vanilla peak fits (or with Vanilla);
// otherwise the least tolerance level (0, 1%, 2%, 5%, 10%, ... up to
// Config.Tolerance) at which TENSILE's minimum budget fits the device (the
// plan at that budget adds at most that level), and Config.Tolerance when
// none does.
func (b *Builder) ExtraTime(model string, batch int) (float64, error) {
	if b.cfg.Memory == Vanilla {
		return 0, nil
	}
	p, err := b.VanillaPeak(model, batch)
	if err != nil {
		return 0, err
	}
	if p <= b.cfg.Device.MemoryBytes {
		return 0, nil
	}
	c, _ := canonical(model)
	g, err := b.graph(c, batch)
	if err != nil {
		return 0, err
	}
	levels := append([]float64(nil), toleranceLevels...)
	levels = append(levels, b.cfg.Tolerance)
	sort.Float64s(levels)
	for _, l := range levels {
		if l > b.cfg.Tolerance {
			break
		}
		if m, _, err := tensorsched.MinBudget(g, b.cfg.Device, l); err == nil && m <= b.cfg.Device.MemoryBytes {
			return l, nil
		}
	}
	return b.cfg.Tolerance, nil
}

// overheads is a model's extra compute time by per-GPU batch: 0 up to
// planned (the vanilla bound); above it, the ExtraTime of the first grid
// batch at or above the batch (budgets grow with the batch, so this bounds
// the batch's own), 0 beyond the last.
type overheads struct {
	planned int
	batch   []int     // ascending grid batches above planned
	extra   []float64 // ExtraTime at each
}

func (o overheads) at(batch int) float64 {
	if batch <= o.planned {
		return 0
	}
	i := sort.SearchInts(o.batch, batch)
	if i == len(o.batch) {
		return 0
	}
	return o.extra[i]
}

// overheadGrid is the number of geometric steps of the grid between the
// vanilla and the memory bound.
const overheadGrid = 4

// overheads evaluates ExtraTime on a grid of batches between the vanilla
// bound and maxLocal: overheadGrid geometric steps ending at maxLocal.
func (b *Builder) overheads(model string, maxLocal int) (overheads, error) {
	if b.cfg.Memory == Vanilla {
		return overheads{planned: maxLocal}, nil
	}
	vm, err := b.VanillaMaxLocal(model)
	if err != nil {
		return overheads{}, err
	}
	o := overheads{planned: vm}
	if vm >= maxLocal {
		return o, nil
	}
	lo := float64(max(vm, 1))
	for k := 1; k <= overheadGrid; k++ {
		g := int(math.Ceil(lo * math.Pow(float64(maxLocal)/lo, float64(k)/overheadGrid)))
		g = min(max(g, vm+1), maxLocal)
		if n := len(o.batch); n > 0 && o.batch[n-1] >= g {
			continue
		}
		x, err := b.ExtraTime(model, g)
		if err != nil {
			return overheads{}, err
		}
		o.batch = append(o.batch, g)
		o.extra = append(o.extra, x)
	}
	return o, nil
}

// AddTo adds to apps the synthetic application of every zoo model a job of
// jobs names and apps lacks (LoadWorkload has already canonicalised the
// names), and returns the models it added, sorted.
func (b *Builder) AddTo(apps placement.Apps, jobs []placement.WorkloadJob) ([]string, error) {
	b.prebuild(apps, jobs)
	var added []string
	for _, j := range jobs {
		if _, ok := apps[j.App]; ok {
			continue
		}
		a, err := b.App(j.App)
		if err != nil {
			return nil, fmt.Errorf("job %s: application %q: %w", j.Name, j.App, err)
		}
		apps[a.Name] = a
		if a.Name != j.App {
			apps[j.App] = a
		}
		added = append(added, a.Name)
	}
	sort.Strings(added)
	return added, nil
}

// prebuild builds the applications AddTo will add concurrently, up to
// GOMAXPROCS at a time (the memory bound's planning runs take most of the
// time); errors are left for AddTo to report in job order.
func (b *Builder) prebuild(apps placement.Apps, jobs []placement.WorkloadJob) {
	seen := map[string]bool{}
	var models []string
	for _, j := range jobs {
		if _, ok := apps[j.App]; !ok && !seen[j.App] {
			seen[j.App] = true
			models = append(models, j.App)
		}
	}
	if len(models) < 2 {
		return
	}
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, m := range models {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, _ = b.App(m)
		}()
	}
	wg.Wait()
}

func sortedKeys(m map[string]Recipe) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
