package tensorsched

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// budgetKey identifies a MinBudget question: the graph (by model, kind,
// batch and a fingerprint of its shape, which covers sequence length and
// dtype), the device and the tolerance.
type budgetKey struct {
	model     string
	kind      workload.JobKind
	batch     int
	graph     uint64
	device    string
	deviceFP  uint64
	tolerance float64
}

type budgetEntry struct {
	once sync.Once
	// answered is set once min, peak and err hold the answer (answeredAt
	// reads it without waiting for a planning in progress).
	answered  atomic.Bool
	min, peak int64
	err       error
}

// budgetCache holds MinBudget's answers, the least recently used
// forgotten beyond its size, so a long-running coordinator asked about many
// models, batches and devices keeps a bounded cache.
type budgetCache struct {
	mu sync.Mutex // makes a lookup and the add of a missing entry one step
	c  *lru.Cache[budgetKey, *budgetEntry]
}

// budgetCacheSize bounds MinBudget's cache: an entry is about 150 bytes, so
// the bound is a few MiB, far above what the zoo's models, their batch
// sizes, the profiles and the tolerance levels ask for together.
const budgetCacheSize = 1 << 14

var minBudgets = newBudgetCache(budgetCacheSize)

func newBudgetCache(size int) *budgetCache {
	c, err := lru.New[budgetKey, *budgetEntry](size)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &budgetCache{c: c}
}

// entry is key's entry, added (empty, to be answered once) if missing.
func (b *budgetCache) entry(key budgetKey) *budgetEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.c.Get(key)
	if !ok {
		e = &budgetEntry{}
		b.c.Add(key, e)
	}
	return e
}

// graphFingerprint hashes what determines a plan: every tensor's size and
// kind, every op's inputs, outputs, work, measured time, dtype, kind and
// phase (the planner reads both: an optimizer op's outputs are never
// recomputed, a forward concat's inputs may be kept), and host times.
func graphFingerprint(g *workload.Graph) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	put := func(v uint64) {
		for i := range buf {
			buf[i] = byte(v >> (8 * i))
		}
		h.Write(buf[:])
	}
	put(math.Float64bits(g.HostSecondsPerIteration))
	put(math.Float64bits(g.HostSecondsPerKernel))
	put(uint64(len(g.Tensors))<<32 | uint64(len(g.Ops)))
	for i := range g.Tensors {
		put(uint64(g.Tensors[i].Bytes)<<8 | uint64(g.Tensors[i].Kind))
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		put(uint64(len(op.Inputs))<<32 | uint64(len(op.Outputs)))
		for _, t := range op.Inputs {
			put(uint64(t))
		}
		for _, t := range op.Outputs {
			put(uint64(t))
		}
		put(math.Float64bits(op.FLOPs))
		put(math.Float64bits(op.MemBytes))
		put(math.Float64bits(op.MeasuredSeconds))
		put(uint64(len(op.DType))<<32 | uint64(len(op.Kind)))
		h.Write([]byte(op.DType))
		h.Write([]byte(op.Kind))
		put(uint64(op.Phase))
	}
	return h.Sum64()
}

func profileFingerprint(p gpu.Profile) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	put := func(v float64) {
		b := math.Float64bits(v)
		for i := range buf {
			buf[i] = byte(b >> (8 * i))
		}
		h.Write(buf[:])
	}
	put(float64(p.MemoryBytes))
	// Every precision the profile names (a profile file may name any, and
	// ops in that precision use its peak), in a fixed order.
	for _, k := range slices.Sorted(maps.Keys(p.PeakFLOPS)) {
		put(float64(len(k)))
		h.Write([]byte(k))
		put(p.PeakFLOPS[k])
	}
	put(p.MemBandwidth)
	put(p.H2DBandwidth)
	put(p.D2HBandwidth)
	put(p.LaunchOverhead)
	put(p.MatrixOpOverhead)
	put(p.CopyLatency)
	put(p.ComputeEfficiency)
	put(p.MemoryEfficiency)
	return h.Sum64()
}

// MinBudget answers placement's question: the smallest memory budget at
// which TENSILE's planned extra time for g on device p stays within
// tolerance (EOR ≤ tolerance), and g's vanilla peak. A plan's budget is the
// peak of the least-peak plan within a tolerance (target b), or of its
// first iteration when that is higher (params and optimizer state swapped
// across iterations are still resident then, and budgets hold in every
// iteration).
//
// The greedy planner is not monotone in the tolerance (a looser one can
// lead it down a path that ends higher), but placement relies on a looser
// tolerance never needing more memory. So MinBudget plans at the levels
// of budgetLevels up to tolerance and returns the least of their budgets:
// a plan within a lower level is within tolerance too. A tolerance between
// two levels is answered by the levels below it.
//
// Answers are cached per level by model, kind, batch, a fingerprint of the
// graph (sequence length, dtype) and the device; MinBudget is safe for
// concurrent use, and concurrent callers with the same question share one
// planning run per level.
func MinBudget(g *workload.Graph, p gpu.Profile, tolerance float64) (min, vanillaPeak int64, err error) {
	if math.IsNaN(tolerance) {
		return 0, 0, fmt.Errorf("tolerance is NaN: give the extra time allowed as a number ≥ 0 (0.1 for 10%%)")
	}
	if tolerance < 0 {
		tolerance = 0
	}
	gfp, pfp := graphFingerprint(g), profileFingerprint(p)
	min = -1
	for _, level := range budgetLevels {
		if level > tolerance+1e-12 {
			break
		}
		m, v, lerr := minBudgetAt(g, p, gfp, pfp, level)
		if lerr != nil {
			if err == nil {
				err = lerr
			}
			continue
		}
		vanillaPeak = v
		if min < 0 || m < min {
			min = m
		}
	}
	if min >= 0 {
		err = nil
	} else {
		min = 0
	}
	return min, vanillaPeak, err
}

// budgetLevels are the tolerances MinBudget plans at (ascending).
var budgetLevels = []float64{0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2}

// minBudgetAt is the cached budget of the plan at one tolerance level.
func minBudgetAt(g *workload.Graph, p gpu.Profile, gfp, pfp uint64, tolerance float64) (min, vanillaPeak int64, err error) {
	e := minBudgets.entry(budgetKeyOf(g, p, gfp, pfp, tolerance))
	e.once.Do(func() {
		_, st, err := PlanTensile(g, p, Target{Tolerance: tolerance})
		e.min, e.peak, e.err = max(st.PeakBytes, st.FirstIterationPeakBytes), st.VanillaPeakBytes, err
		e.answered.Store(true)
	})
	return e.min, e.peak, e.err
}

// budgetKeyOf is MinBudget's cache key for g on p at one tolerance level.
func budgetKeyOf(g *workload.Graph, p gpu.Profile, gfp, pfp uint64, tolerance float64) budgetKey {
	return budgetKey{
		model: g.Model, kind: g.Kind, batch: g.Batch, graph: gfp,
		device: p.Name, deviceFP: pfp, tolerance: tolerance,
	}
}

// answeredAt is minBudgetAt's answer when the cache already holds it
// (ok false otherwise): it never plans.
func answeredAt(g *workload.Graph, p gpu.Profile, gfp, pfp uint64, tolerance float64) (min int64, ok bool) {
	minBudgets.mu.Lock()
	e, found := minBudgets.c.Peek(budgetKeyOf(g, p, gfp, pfp, tolerance))
	minBudgets.mu.Unlock()
	if !found || !e.answered.Load() || e.err != nil {
		return 0, false
	}
	return e.min, true
}

// ResetMinBudgetCache empties MinBudget's cache (tests and benchmarks).
func ResetMinBudgetCache() {
	minBudgets.mu.Lock()
	minBudgets.c.Purge()
	minBudgets.mu.Unlock()
}
