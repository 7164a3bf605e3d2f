package main

import (
	"strings"
	"testing"

	"github.com/gpusched/gpusched/actors"
)

// The demo's progress line says why a live job has no progress yet: queued
// for a GPU, or admitted and waiting for its GPU's memory plan (before, both
// read "0%", like a job that runs slowly).
func TestDemoProgressSaysWhyAJobWaits(t *testing.T) {
	waiting := &actors.JobRecord{State: actors.StatePending, Total: 100}
	if got := demoProgress(waiting); got != "queued" {
		t.Errorf("pending job: %q, want queued", got)
	}
	// A running job's reason while its GPU plans it is set by the job
	// actor; WaitsForPlan recognises it (see TestRunningJobSaysItWaitsForItsPlan).
	running := &actors.JobRecord{State: actors.StateRunning, GPU: "n/gpu0", Total: 100, Iteration: 37}
	if got := demoProgress(running); got != "37%" {
		t.Errorf("running job at 37 of 100: %q, want 37%%", got)
	}
	running.Reason, running.Iteration = "some other reason", 0
	if got := demoProgress(running); got != "0%" {
		t.Errorf("running job with an unrelated reason: %q, want 0%%", got)
	}
}

// The demo's closing "events:" line counts each event type in words, in a
// fixed order, not as a Go map literal ("map[completed:15 placed:33 ...]").
func TestDemoEventCountsAreWords(t *testing.T) {
	got := demoEventCounts(map[string]int64{"placed": 33, "completed": 15, "requeued": 2})
	want := "15 completed, 33 placed, 2 requeued"
	if got != want {
		t.Fatalf("demoEventCounts = %q, want %q", got, want)
	}
	if got := demoEventCounts(nil); got != "none" {
		t.Fatalf("demoEventCounts(nil) = %q, want %q", got, "none")
	}
}

// A completed, failed or requeued line has no trailing space when the event
// has no reason, and a colon between the state and its reason.
func TestDemoStateLine(t *testing.T) {
	if got, want := demoStateLine("completed", ""), "completed"; got != want {
		t.Errorf("demoStateLine(completed, \"\") = %q, want %q", got, want)
	}
	if got, want := demoStateLine("requeued", "starved on node-1/gpu0"), "requeued: starved on node-1/gpu0"; got != want {
		t.Errorf("demoStateLine(requeued, ...) = %q, want %q", got, want)
	}
}

// demo --file names the flag when the file is missing, as plan --jobs does
// (it printed only "open nope.yaml: no such file or directory"), and says
// that the default, examples/demo.yaml, is read from the current directory.
func TestDemoFileErrorNamesFlag(t *testing.T) {
	_, _, err := runCoordinator(t, "demo", "--file", "nope.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "--file: ") || !strings.Contains(err.Error(), "nope.yaml") || !strings.Contains(err.Error(), "repository root") {
		t.Fatalf("demo --file nope.yaml: error %v, want one naming --file and the path", err)
	}
}
