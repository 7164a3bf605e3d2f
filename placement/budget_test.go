package placement

import (
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"testing"
)

// checkArbitrate fails t unless budgets are a valid division of capacity:
// each within [Min, Max] and their sum (computed without overflow) at most
// capacity.
func checkArbitrate(t *testing.T, capacity int64, asks []BudgetAsk, got []int64) {
	t.Helper()
	if len(got) != len(asks) {
		t.Fatalf("%d budgets for %d asks", len(got), len(asks))
	}
	left := capacity
	for i, b := range got {
		if b < asks[i].Min || b > asks[i].Max {
			t.Fatalf("budget %d of job %s outside [%d, %d] (capacity %d, asks %v, budgets %v)", b, asks[i].ID, asks[i].Min, asks[i].Max, capacity, asks, got)
		}
		if b > left {
			t.Fatalf("budgets %v sum to more than capacity %d (asks %v)", got, capacity, asks)
		}
		left -= b
	}
}

// Byte counts near the int64 limit (off the network, or a corrupt demand)
// must not wrap: the sums of minimums and of headrooms overflowed, so a
// minimum of 2^63−11 bytes next to one of 20 was admitted on a 100-byte
// GPU, and jobs with huge headroom were all given their maximum. The
// proportional shares, computed in float64, rounded up past what was left.
func TestArbitrateHugeValues(t *testing.T) {
	const M = math.MaxInt64
	for _, c := range []struct {
		name   string
		cap    int64
		asks   []BudgetAsk
		refuse bool
	}{
		{"minimums overflow", 100, []BudgetAsk{{ID: "a", Min: M - 10, Max: M}, {ID: "b", Min: 20, Max: 20}}, true},
		{"minimums overflow at max capacity", M, []BudgetAsk{{ID: "a", Min: M, Max: M}, {ID: "b", Min: 1, Max: 1}}, true},
		{"headroom overflows", M, []BudgetAsk{{ID: "a", Min: 0, Max: M}, {ID: "b", Min: 0, Max: M}}, false},
		{"headroom overflows, three jobs", M - 1, []BudgetAsk{{ID: "a", Min: 0, Max: M / 2}, {ID: "b", Min: 0, Max: M/2 + 7}, {ID: "c", Min: 0, Max: 3}}, false},
		{"float rounding", 1<<62 - 1, []BudgetAsk{{ID: "a", Min: 0, Max: 3 << 60}, {ID: "b", Min: 0, Max: 3 << 60}}, false},
		{"huge minimums that fit", M, []BudgetAsk{{ID: "a", Min: M / 2, Max: M}, {ID: "b", Min: M / 2, Max: M}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Arbitrate(c.cap, c.asks)
			if c.refuse {
				if err == nil {
					t.Fatalf("capacity %d, asks %v: budgets %v, want a refusal", c.cap, c.asks, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkArbitrate(t, c.cap, c.asks, got)
		})
	}
}

// randomAsks is a seeded random set of jobs on a GPU of random capacity:
// some with no headroom (minimum = vanilla), some with no minimum, a few
// priorities, capacities from below the sum of minimums to above the sum of
// peaks.
func randomAsks(rng *rand.Rand) (int64, []BudgetAsk) {
	n := 1 + rng.Intn(7)
	asks := make([]BudgetAsk, n)
	var mins, maxs int64
	for i := range asks {
		a := BudgetAsk{ID: fmt.Sprintf("j%d", i), Priority: rng.Intn(3) * 4}
		switch rng.Intn(4) {
		case 0:
			a.Min = rng.Int63n(40 << 30)
			a.Max = a.Min
		case 1:
			a.Max = rng.Int63n(40 << 30)
		default:
			a.Min = rng.Int63n(40 << 30)
			a.Max = a.Min + rng.Int63n(40<<30)
		}
		mins += a.Min
		maxs += a.Max
		asks[i] = a
	}
	capacity := mins - (1 << 30) + rng.Int63n(maxs-mins+(2<<30))
	if rng.Intn(5) == 0 {
		capacity = mins + rng.Int63n(int64(n)+1) // rounding at byte scale
	}
	return capacity, asks
}

// Property test of Arbitrate's rules on seeded random job sets.
func TestArbitrateProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for it := 0; it < 20000; it++ {
		capacity, asks := randomAsks(rng)
		var mins, maxs int64
		for _, a := range asks {
			mins += a.Min
			maxs += a.Max
		}
		got, err := Arbitrate(capacity, asks)
		if mins > capacity {
			if err == nil {
				t.Fatalf("capacity %d below the minimums %d, asks %v: budgets %v, want a refusal", capacity, mins, asks, got)
			}
			continue
		}
		if err != nil {
			t.Fatalf("capacity %d, asks %v: %v", capacity, asks, err)
		}
		checkArbitrate(t, capacity, asks, got)
		var sum int64
		for _, b := range got {
			sum += b
		}
		if want := min(capacity, maxs); sum != want {
			t.Fatalf("capacity %d, asks %v: budgets %v sum to %d, want %d (nothing left unused while a job wants more)", capacity, asks, got, sum, want)
		}
		for i, a := range asks {
			if got[i] == a.Max {
				continue
			}
			for k, b := range asks {
				if b.Priority < a.Priority && got[k] != b.Min {
					t.Fatalf("capacity %d, asks %v: budgets %v: %s (priority %d) is short of its peak while %s (priority %d) has more than its minimum", capacity, asks, got, a.ID, a.Priority, b.ID, b.Priority)
				}
			}
		}
		// Within a tier, shares follow headroom to within the rounding
		// (at most a byte per job of the tier).
		for i, a := range asks {
			for k, b := range asks {
				if a.Priority != b.Priority || got[i] == a.Max || got[k] == b.Max {
					continue
				}
				ha, hb := a.Max-a.Min, b.Max-b.Min
				ga, gb := got[i]-a.Min, got[k]-b.Min
				// ga/ha ≈ gb/hb: |ga·hb − gb·ha| ≤ n·(ha+hb)
				l := new(big.Int).Mul(big.NewInt(ga), big.NewInt(hb))
				r := new(big.Int).Mul(big.NewInt(gb), big.NewInt(ha))
				d := new(big.Int).Abs(l.Sub(l, r))
				if d.Cmp(big.NewInt(int64(len(asks))*(ha+hb))) > 0 {
					t.Fatalf("capacity %d, asks %v: budgets %v not in proportion to headroom between %s and %s", capacity, asks, got, a.ID, b.ID)
				}
			}
		}
	}
}

// The budgets do not depend on the order the jobs are given in: the bytes
// left over by rounding went to the first jobs of the tier in input order,
// so the same jobs got other budgets when listed otherwise.
func TestArbitrateOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for it := 0; it < 5000; it++ {
		capacity, asks := randomAsks(rng)
		got, err := Arbitrate(capacity, asks)
		perm := rng.Perm(len(asks))
		shuffled := make([]BudgetAsk, len(asks))
		for i, p := range perm {
			shuffled[i] = asks[p]
		}
		got2, err2 := Arbitrate(capacity, shuffled)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("capacity %d: asks %v: %v; reordered %v: %v", capacity, asks, err, shuffled, err2)
		}
		for i, p := range perm {
			if err == nil && got2[i] != got[p] {
				t.Fatalf("capacity %d: asks %v get %v; reordered %v they get %v (job %s: %d, then %d)", capacity, asks, got, shuffled, got2, asks[p].ID, got[p], got2[i])
			}
		}
	}
	asks := []BudgetAsk{{ID: "a", Max: 10}, {ID: "b", Max: 10}, {ID: "c", Max: 10}}
	got, _ := Arbitrate(10, asks)
	rev, _ := Arbitrate(10, []BudgetAsk{asks[2], asks[1], asks[0]})
	if got[0] != rev[2] || got[2] != rev[0] {
		t.Fatalf("a, b, c get %v; c, b, a get %v", got, rev)
	}
}
