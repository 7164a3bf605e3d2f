package placement

import (
	"fmt"
	"math"
	"math/big"
	"sort"

	"github.com/gpusched/gpusched/gpu"
)

// BudgetAsk is one job's request for memory on a GPU: at least Min (its
// minimum budget at its tolerance), at most Max (its vanilla peak: more
// would be unused).
type BudgetAsk struct {
	ID       string
	Min, Max int64
	Priority int
}

// Arbitrate divides a GPU's capacity among its jobs: every job gets its
// minimum, then the rest goes to higher-priority jobs first and, within a
// priority, in proportion to how far each is from its maximum, never above
// it. The budgets sum to at most capacity. It fails, naming the shortfall,
// when the minimums alone exceed capacity. The result is deterministic,
// does not depend on the order of asks (jobs are told apart by ID), and is
// indexed like asks.
func Arbitrate(capacity int64, asks []BudgetAsk) ([]int64, error) {
	out := make([]int64, len(asks))
	var sum int64
	for i, a := range asks {
		if a.Min < 0 || a.Max < a.Min {
			return nil, fmt.Errorf("job %s: bad budget range [%d, %d]", a.ID, a.Min, a.Max)
		}
		out[i] = a.Min
		if a.Min > math.MaxInt64-sum {
			return nil, fmt.Errorf("minimum budgets need more than %s, capacity is %s", gpu.FormatBytes(math.MaxInt64), gpu.FormatBytes(capacity))
		}
		sum += a.Min
	}
	if sum > capacity {
		return nil, fmt.Errorf("minimum budgets need %s, capacity is %s", gpu.FormatBytes(sum), gpu.FormatBytes(capacity))
	}
	rest := capacity - sum
	// Group by priority, highest first; within a priority by ID, so the
	// bytes left over by rounding go to the same jobs whatever the order
	// of asks.
	idx := make([]int, len(asks))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := &asks[idx[a]], &asks[idx[b]]
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		return x.ID < y.ID
	})
	for start := 0; start < len(idx) && rest > 0; {
		end := start
		for end < len(idx) && asks[idx[end]].Priority == asks[idx[start]].Priority {
			end++
		}
		tier := idx[start:end]
		// The tier's headroom, exactly: byte counts near the int64 limit
		// would wrap an int64 sum.
		want := new(big.Int)
		for _, i := range tier {
			want.Add(want, big.NewInt(asks[i].Max-asks[i].Min))
		}
		if want.Cmp(big.NewInt(rest)) <= 0 {
			for _, i := range tier {
				out[i] = asks[i].Max
			}
			rest -= want.Int64()
		} else {
			// Proportional share of what is left, rounded down exactly (a
			// float64 share could round up past rest); rounding leftovers
			// go to the first jobs of the tier (by ID).
			given := int64(0)
			var g big.Int
			for _, i := range tier {
				head := asks[i].Max - asks[i].Min
				// rest < want, so g < head.
				g.Mul(big.NewInt(rest), big.NewInt(head))
				g.Quo(&g, want)
				out[i] += g.Int64()
				given += g.Int64()
			}
			left := rest - given
			for _, i := range tier {
				if left <= 0 {
					break
				}
				room := asks[i].Max - out[i]
				g := min(room, left)
				out[i] += g
				left -= g
			}
			rest = 0
		}
		start = end
	}
	return out, nil
}
