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
	// A float is still not an integer.
	if _, err := ParseSpec([]byte(base + "iterations: 1e3\n")); err == nil || !strings.Contains(err.Error(), "must be an integer") {
		t.Errorf("iterations: 1e3: error %v", err)
	}
}
