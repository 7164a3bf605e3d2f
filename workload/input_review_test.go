package workload

import (
	"strings"
	"testing"
)

// An integer too large for 64 bits (YAML reads it as a float) was refused
// with "must be an integer", which it plainly is; the error says the value
// is out of range, as a large integer that fits does.
func TestHugeIntegerNamedOutOfRange(t *testing.T) {
	const base = "name: a\nmodel: mlp\nbatch: 16\n"
	for _, c := range []struct{ yaml, want string }{
		{base + "iterations: 99999999999999999999999\n", "iterations: must be 1–2147483647 (got 99999999999999999999999)"},
		{base + "iterations: 10\npriority: 99999999999999999999\n", "priority: must be 0–9, higher is more important (got 99999999999999999999)"},
		{base + "iterations: 10\npriority: -99999999999999999999\n", "priority: must be 0–9, higher is more important (got -99999999999999999999)"},
		{strings.Replace(base, "batch: 16", "batch: 99999999999999999999", 1) + "iterations: 10\n", "batch: must be ≤ 2147483647 (got 99999999999999999999)"},
		{strings.Replace(base, "batch: 16", "batch: {min: 1, max: 99999999999999999999}", 1) + "iterations: 10\n", "batch.max: must be ≤ 2147483647 (got 99999999999999999999)"},
	} {
		_, err := ParseSpec([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
	// A fraction is still not an integer, in either notation; a whole number
	// beyond 2^53 in exponent notation is out of range, not rounded.
	for _, c := range []struct{ yaml, want string }{
		{base + "iterations: 1.5e0\n", "iterations: must be an integer (got number 1.5e0)"},
		{base + "iterations: 1e-3\n", "iterations: must be an integer (got number 1e-3)"},
		{base + "iterations: 1e30\n", "iterations: must be 1–2147483647 (got 1e30)"},
		{base + "iterations: 10\npriority: -1e30\n", "priority: must be 0–9, higher is more important (got -1e30)"},
	} {
		_, err := ParseSpec([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}

// A count in exponent notation (YAML reads 1e3 as a float) is the whole
// number it names.
func TestExponentNotationCounts(t *testing.T) {
	const base = "name: a\nmodel: mlp\n"
	for _, c := range []struct {
		yaml       string
		iterations int
		batch      int
	}{
		{base + "batch: 16\niterations: 1e3\n", 1000, 16},
		{base + "batch: 1.6E+1\niterations: 2.5e4\n", 25000, 16},
		{base + "batch: 16\niterations: 1e9\n", 1000000000, 16},
	} {
		spec, err := ParseSpec([]byte(c.yaml))
		if err != nil {
			t.Errorf("%q: %v", c.yaml, err)
			continue
		}
		if spec.Iterations != c.iterations || spec.Batch != Fixed(c.batch) {
			t.Errorf("%q: got iterations %d batch %+v, want %d and %d", c.yaml, spec.Iterations, spec.Batch, c.iterations, c.batch)
		}
	}
}
