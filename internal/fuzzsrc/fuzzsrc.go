// Package fuzzsrc turns a fuzz input into a generator's choices, for the
// property-based fuzz tests that build random inputs (random training
// graphs for the memory planners, random job sets for the kernel
// scheduler): the input's bytes are used first, so the fuzz engine's
// mutations steer the early choices, then a PCG stream seeded by the
// input's seed and length, so an input always gives the same choices.
package fuzzsrc

import "math/rand/v2"

// Source yields choices from a fuzz input.
type Source struct {
	data []byte
	rng  *rand.Rand
}

// New returns the choices of the fuzz input (seed, data).
func New(seed uint64, data []byte) *Source {
	return &Source{data: data, rng: rand.New(rand.NewPCG(seed, uint64(len(data))))}
}

// Byte is the next choice byte.
func (s *Source) Byte() byte {
	if len(s.data) > 0 {
		b := s.data[0]
		s.data = s.data[1:]
		return b
	}
	return byte(s.rng.Uint32())
}

// Intn is a choice in [0, n) (n ≤ 65536): one byte for n ≤ 256, two above.
func (s *Source) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	if n <= 256 {
		return int(s.Byte()) % n
	}
	return (int(s.Byte())<<8 | int(s.Byte())) % n
}

// Chance is true with probability num/den.
func (s *Source) Chance(num, den int) bool { return s.Intn(den) < num }

// Unit is a choice in [0, 1], both ends included.
func (s *Source) Unit() float64 { return float64(s.Byte()) / 255 }
