package main

import (
	"strings"
	"testing"
)

// Each bad bench kernels flag is refused with the flag named and what it
// accepts, before anything runs: out-of-range noise settings and a
// negative slice were silently clamped or replaced by the default while
// kernels.md recorded the value given, and the others were reported as
// fikit.Options fields.
func TestBenchKernelsFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--jitter", "0.5"}, []string{"--jitter", "0.5", "0.3"}},
		{[]string{"--host-jitter", "-0.1"}, []string{"--host-jitter", "0.3"}},
		{[]string{"--model-error", "NaN"}, []string{"--model-error", "0.3"}},
		{[]string{"--margin", "-1"}, []string{"--margin", "-1", ">= 0"}},
		{[]string{"--measure", "-1"}, []string{"--measure", "-1", ">= 0"}},
		{[]string{"--slice", "-1ms"}, []string{"--slice", "-1ms", "1µs"}},
		{[]string{"--slice", "100ns"}, []string{"--slice", "100ns", "1µs"}},
		{[]string{"--device", "tpu-v9"}, []string{"--device", "tpu-v9", "known:"}},
	}
	for _, c := range cases {
		_, _, err := runCoordinator(t, append([]string{"bench", "kernels", "--out", t.TempDir()}, c.args...)...)
		if err == nil {
			t.Errorf("bench kernels %v: no error", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("bench kernels %v: error %q does not mention %q", c.args, err, w)
			}
		}
	}
}
