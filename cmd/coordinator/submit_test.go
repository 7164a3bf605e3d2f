package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/transport"
)

// An elastic change names the batch and the GPUs before and after; the
// device's own budget revision (no batch, no GPUs) keeps its short form.
func TestFormatResized(t *testing.T) {
	e := transport.Event{Job: "j1", Type: transport.EvResized, Batch: 128, OldBatch: 64,
		GPUIDs: []string{"n1/gpu0", "n2/gpu0"}, OldGPUIDs: []string{"n1/gpu0"}, Budget: 2 << 30, OldBudget: 1 << 30, Reason: "ones: 2×64"}
	got := formatProgress(e, "train")
	for _, want := range []string{"batch 64 → 128, GPUs n1/gpu0 → n1/gpu0, n2/gpu0; budget", "(ones: 2×64)"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	// Only what changed gets an arrow.
	e.OldGPUIDs = e.GPUIDs
	if got := formatProgress(e, "train"); !strings.Contains(got, "batch 64 → 128 on n1/gpu0, n2/gpu0; budget") {
		t.Errorf("batch-only change formatted as %q", got)
	}
	e.OldGPUIDs, e.OldBatch = []string{"n1/gpu0"}, 128
	if got := formatProgress(e, "train"); !strings.Contains(got, "batch 128, GPUs n1/gpu0 → n1/gpu0, n2/gpu0; budget") {
		t.Errorf("GPU-only change formatted as %q", got)
	}
	// The same batch in micro-steps is a change too.
	e.OldGPUIDs, e.Accum = e.GPUIDs, 3
	if got := formatProgress(e, "train"); !strings.Contains(got, "batch 128 → 128 in 4 micro-steps on n1/gpu0, n2/gpu0; budget") {
		t.Errorf("change into micro-steps formatted as %q", got)
	}
	e = transport.Event{Job: "j1", Type: transport.EvResized, Budget: 2 << 30, OldBudget: 1 << 30, Reason: "job j2 joined"}
	if got := formatProgress(e, "train"); strings.Contains(got, "GPUs") || !strings.Contains(got, "(job j2 joined)") {
		t.Errorf("budget revision formatted as %q", got)
	}
}

// submit checks the spec file before it dials NATS, as the coordinator
// would: a typo in a field is reported with its path and the fix even when
// no coordinator runs, instead of "cannot reach NATS".
func TestSubmitChecksSpecBeforeConnecting(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(f, []byte("name: a\nmodel: resnet51\nbatch_size: 16\niterations: 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCoordinator(t, "submit", f, "--nats-url", "nats://127.0.0.1:1", "--timeout", "1s")
	for _, w := range []string{"bad.yaml", `unknown field "batch_size"`, `did you mean "batch"?`, `did you mean "resnet50"?`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("submit of a bad spec: error %v, want it to contain %q", err, w)
		}
	}
}

// submit and cancel without their argument say which argument and where to
// get one, not cobra's "accepts 1 arg(s), received 0".
func TestMissingArgumentNamed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"submit"}, []string{"submit needs FILE", "job spec", "examples/demo.yaml"}},
		{[]string{"submit", "a.yaml", "b.yaml"}, []string{"submit takes one FILE", "got 2"}},
		{[]string{"cancel"}, []string{"cancel needs JOB", "coordinator list"}},
	} {
		_, _, err := runCoordinator(t, c.args...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %v, want it to contain %q", c.args, err, w)
			}
		}
	}
}

// A command that takes only flags says so, naming the stray argument and
// --help, instead of cobra's `unknown command "resnet50" for "coordinator
// plan"` (as if resnet50 were meant as a subcommand).
func TestStrayArgumentNamed(t *testing.T) {
	for _, args := range [][]string{{"plan", "resnet50"}, {"simulate", "workload-1.csv"}, {"list", "j-1"}, {"bench", "memory", "x"}} {
		_, _, err := runCoordinator(t, args...)
		name := args[len(args)-2]
		for _, w := range []string{name + " takes no arguments, only flags", `"` + args[len(args)-1] + `"`, "--help"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %v, want it to contain %q", args, err, w)
			}
		}
	}
}

// watch names an elastic change's GPUs once: formatProgress already gives
// them for a resized event, so watch's own "[gpus a → b]" is only for the
// events that lack them (a refused change).
func TestWatchJobLineGPUsOnce(t *testing.T) {
	e := transport.Event{Job: "j-2", Name: "r", Type: transport.EvResized, Batch: 161, OldBatch: 256,
		GPUIDs: []string{"n1/gpu0"}, OldGPUIDs: []string{"n1/gpu0"}, Budget: 1 << 30, OldBudget: 1 << 30, Reason: "ones: 1×161"}
	if got := watchJobLine(e); strings.Count(got, "n1/gpu0") != 1 || !strings.Contains(got, "batch 256 → 161 on n1/gpu0;") || strings.Contains(got, "[") {
		t.Errorf("resized: %q, want the unchanged GPUs named once, after the batch change", got)
	}
	e.Type = transport.EvResizeRefused
	if got := watchJobLine(e); !strings.Contains(got, "[batch 256 → 161 on n1/gpu0]") {
		t.Errorf("resize refused: %q, want the ordered change named", got)
	}
}
