package placement

import (
	"fmt"
	"sort"

	"github.com/gpusched/gpusched/gpu"
)

// HighPriority is the lowest priority (on the 0–9 scale, higher is more
// important) that counts as high priority for co-location: two jobs at or
// above it share a GPU only when both fit at their vanilla peaks, so neither
// pays memory-scheduling overhead because of the other.
const HighPriority = 5

// FitJob is a job already placed on a GPU, as placement sees it.
type FitJob struct {
	ID string
	// Min is the job's minimum budget (MinBudget at its tolerance); the
	// GPU reserves it. Vanilla is its peak without memory scheduling.
	Min, Vanilla int64
	Priority     int
}

// FitGPU is one GPU in placement's view of the cluster.
type FitGPU struct {
	ID         string // unique, e.g. "node-1/gpu0"
	Node       string
	DeviceType string
	Capacity   int64
	Jobs       []FitJob
	// Down GPUs (their node is suspect, dead or gone) take no new jobs.
	Down bool
}

// Reserved is the sum of the minimum budgets of the GPU's jobs.
func (g *FitGPU) Reserved() int64 {
	var s int64
	for i := range g.Jobs {
		s += g.Jobs[i].Min
	}
	return s
}

// Free is the budget not yet reserved by a job's minimum.
func (g *FitGPU) Free() int64 { return g.Capacity - g.Reserved() }

func (g *FitGPU) vanillaSum() int64 {
	var s int64
	for i := range g.Jobs {
		s += g.Jobs[i].Vanilla
	}
	return s
}

func (g *FitGPU) hasHighPriority() bool {
	for i := range g.Jobs {
		if g.Jobs[i].Priority >= HighPriority {
			return true
		}
	}
	return false
}

// Demand is a job's predicted memory demand on one device type.
type Demand struct {
	Min, Vanilla int64
}

// Strategy is how Fit chooses among the GPUs of a tier that have room for
// a job (the tiers, vanilla room before squeezing, and the priority rule
// hold under both).
type Strategy string

const (
	// BinPack (the default) picks the GPU with the least room left, then
	// the fewest jobs: jobs gather on few GPUs and the large holes stay
	// for large jobs. Co-located jobs share the GPU's compute.
	BinPack Strategy = "binpack"
	// Spread picks the GPU with the fewest jobs, then the most room left:
	// a job shares a GPU's compute only when every GPU with room runs
	// one, at the price of holes too small for a large job later.
	Spread Strategy = "spread"
)

// Strategies lists the placement strategies.
var Strategies = []Strategy{BinPack, Spread}

// ParseStrategy reads a strategy name ("" is BinPack).
func ParseStrategy(s string) (Strategy, error) {
	switch Strategy(s) {
	case "", BinPack:
		return BinPack, nil
	case Spread:
		return Spread, nil
	}
	return "", fmt.Errorf("unknown placement strategy %q (want %s or %s)", s, BinPack, Spread)
}

// FitRequest asks where a job should run.
type FitRequest struct {
	ID       string
	Priority int
	// Strategy picks among the GPUs with room ("": BinPack).
	Strategy Strategy
	// Tolerance is the extra iteration time the job accepts (for messages).
	Tolerance float64
	// Demand applies to every device type unless PerType names the GPU's type.
	Demand  Demand
	PerType map[string]Demand
}

func (r *FitRequest) demand(deviceType string) Demand {
	if d, ok := r.PerType[deviceType]; ok {
		return d
	}
	return r.Demand
}

// FitDecision is placement's answer.
type FitDecision struct {
	OK bool
	// Index is the chosen GPU's index in the slice given to Fit; ID its ID.
	Index int
	ID    string
	// Leftover is the GPU's free budget after reserving the job's minimum.
	Leftover int64
	// Reason says why the job waits, when !OK.
	Reason string
}

// Fit places one job by predicted peak, in two tiers. First, among GPUs
// where every job, the new one included, fits at its vanilla peak (nobody
// pays memory-scheduling overhead), measuring the room left at vanilla
// peaks. Only when no GPU has that room does it squeeze: among GPUs whose
// free budget (capacity minus the minimum budgets reserved) holds the
// job's minimum, measuring the free budget left, and the device shrinks
// budgets toward their minimums. So TENSILE makes room when the cluster is
// full, and a job squeezes in only when no GPU has vanilla room.
//
// Within a tier, r.Strategy picks. BinPack (the default) takes the least
// room left (best fit), ties to the GPU with fewer jobs, then the lower
// ID: jobs that all fit at vanilla gather on one GPU. Spread takes the
// fewest jobs, ties to the most room left, then the lower ID. Decisions
// are deterministic.
//
// A high-priority job (Priority >= HighPriority) goes next to another
// high-priority job only when every job on that GPU, the new one included,
// fits at its vanilla peak.
//
// When no GPU fits, the decision says why, e.g. "needs ≥ 9.10 GiB at 10%
// tolerance; largest free is 6.00 GiB".
func Fit(gpus []FitGPU, r FitRequest) FitDecision {
	best, roomy := -1, -1
	var bestLeft, roomyLeft int64
	better := func(i int, left int64, j int, jLeft int64) bool {
		if j < 0 {
			return true
		}
		ni, nj := len(gpus[i].Jobs), len(gpus[j].Jobs)
		if r.Strategy == Spread {
			return ni < nj || ni == nj && (left > jLeft || left == jLeft && gpus[i].ID < gpus[j].ID)
		}
		return left < jLeft || left == jLeft && (ni < nj || ni == nj && gpus[i].ID < gpus[j].ID)
	}
	var largestFree int64
	var needMin int64 = -1
	up := false
	blockedByPriority := 0
	high := r.Priority >= HighPriority
	for i := range gpus {
		g := &gpus[i]
		if g.Down {
			continue
		}
		d := r.demand(g.DeviceType)
		if needMin < 0 || d.Min < needMin {
			needMin = d.Min
		}
		// A GPU can be over-reserved (free < 0): nothing is free there.
		free := g.Free()
		if free > largestFree {
			largestFree = free
		}
		up = true
		if d.Min > free {
			continue
		}
		vanillaLeft := g.Capacity - g.vanillaSum() - d.Vanilla
		if high && g.hasHighPriority() && vanillaLeft < 0 {
			blockedByPriority++
			continue
		}
		if left := free - d.Min; better(i, left, best, bestLeft) {
			best, bestLeft = i, left
		}
		if vanillaLeft >= 0 && better(i, vanillaLeft, roomy, roomyLeft) {
			roomy, roomyLeft = i, vanillaLeft
		}
	}
	if roomy >= 0 {
		g := &gpus[roomy]
		return FitDecision{OK: true, Index: roomy, ID: g.ID, Leftover: g.Free() - r.demand(g.DeviceType).Min}
	}
	if best >= 0 {
		return FitDecision{OK: true, Index: best, ID: gpus[best].ID, Leftover: bestLeft}
	}
	dec := FitDecision{Index: -1}
	switch {
	case !up:
		dec.Reason = "no GPU is available (no node has joined, or every node is down)"
	case blockedByPriority > 0:
		dec.Reason = fmt.Sprintf("needs ≥ %s at %s tolerance; %d GPU(s) with room already run a high-priority job (priority ≥ %d) and the two do not both fit at their vanilla peaks",
			gpu.FormatBytes(needMin), pct(r.Tolerance), blockedByPriority, HighPriority)
	default:
		dec.Reason = fmt.Sprintf("needs ≥ %s at %s tolerance; largest free is %s",
			gpu.FormatBytes(needMin), pct(r.Tolerance), gpu.FormatBytes(largestFree))
	}
	return dec
}

func pct(f float64) string {
	v := f * 100
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d%%", int64(v))
	}
	return fmt.Sprintf("%.1f%%", v)
}

// FitOrder sorts waiting jobs into the order placement should try them:
// higher priority first, then earlier arrival (lower seq), so a large
// high-priority job is not starved by small low-priority ones arriving later.
func FitOrder[T any](jobs []T, priority func(T) int, seq func(T) uint64) {
	sort.SliceStable(jobs, func(i, j int) bool {
		pi, pj := priority(jobs[i]), priority(jobs[j])
		if pi != pj {
			return pi > pj
		}
		return seq(jobs[i]) < seq(jobs[j])
	})
}
