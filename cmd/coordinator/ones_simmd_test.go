package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sim.md records the command that reproduces the run: --ones, which
// changes the result, must be in it.
func TestSimulateMarkdownRecordsONES(t *testing.T) {
	w := writeWorkload(t, "mlp-0,0,mlp,1,128", "mlp-1,60,mlp,1,128")
	out := filepath.Join(t.TempDir(), "out")
	if _, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", "ones", "--ones", "hold=0,hysteresis=8", "--horizon", "90", "--out", out); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "sim.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), " --ones hold=0,hysteresis=8") {
		t.Errorf("sim.md's command lacks --ones hold=0,hysteresis=8:\n%s", md)
	}
	if !strings.Contains(string(md), " --horizon 1m30s") {
		t.Errorf("sim.md's command lacks --horizon 1m30s:\n%s", md)
	}
}
