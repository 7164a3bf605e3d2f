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

// sortCandidates gives what selecting the first maxExamined candidates
// and sorting them under cmpCandidates gives, for candidates listed by job
// and tensor as candidates lists them, with ties of bytes and more or fewer
// than maxExamined of them.
func TestSortCandidates(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pl := &planner{}
	for trial := 0; trial < 500; trial++ {
		n := r.IntN(8 * maxExamined)
		x := make([]candidate, n)
		job, tensor := int32(0), int32(0)
		for i := range x {
			if r.IntN(50) == 0 {
				job, tensor = job+1, 0
			}
			tensor += 1 + int32(r.IntN(3))
			b := int64(r.IntN(20)) << (r.IntN(3) * 16)
			x[i] = candidate{job: job, tensor: tensor, prev: int32(r.IntN(9)), next: int32(r.IntN(9)), bytes: b}
		}
		want := slices.Clone(x)
		slices.SortFunc(want, cmpCandidates)
		want = want[:min(n, maxExamined)]
		got, ok := pl.sortCandidates(x)
		if !ok || !slices.Equal(got, want) {
			t.Fatalf("trial %d (n %d): ok %v, got %v, want %v", trial, n, ok, got, want)
		}
	}
	if _, ok := pl.sortCandidates([]candidate{{bytes: 1 << 62}, {bytes: 1}, {bytes: 2}, {bytes: 3}}); ok {
		t.Error("62-bit sizes and a 3-bit index fit in 64 bits")
	}
}
