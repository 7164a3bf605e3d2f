package tensorsched

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// selectFirst puts the k first elements (under a total order) first, for
// any input order, k and duplicates of the sort key.
func TestSelectFirst(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 500; trial++ {
		n := 1 + r.IntN(300)
		x := make([]candidate, n)
		for i := range x {
			x[i] = candidate{job: int32(r.IntN(3)), tensor: int32(i), bytes: int64(r.IntN(20))}
		}
		r.Shuffle(n, func(i, j int) { x[i], x[j] = x[j], x[i] })
		want := slices.Clone(x)
		slices.SortFunc(want, cmpCandidates)
		k := r.IntN(n + 1)
		selectFirst(x, k, cmpCandidates)
		got := slices.Clone(x[:k])
		slices.SortFunc(got, cmpCandidates)
		if !slices.Equal(got, want[:k]) {
			t.Fatalf("n %d k %d: first %v, want %v", n, k, got, want[:k])
		}
	}
	ints := []int{5, 1, 4, 2, 3}
	selectFirst(ints, 2, cmp.Compare[int])
	if a, b := min(ints[0], ints[1]), max(ints[0], ints[1]); a != 1 || b != 2 {
		t.Errorf("first two of 5,1,4,2,3: %v", ints[:2])
	}
}
