package main

import (
	"strings"
	"testing"
)

// submit --wait fails when a job it waits for has already failed by the
// time it asks for the jobs' states: it exited 0, as a failure was counted
// only from the events it saw, not from the state the coordinator reported.
func TestSubmitWaitAlreadyFailed(t *testing.T) {
	url := fakeCoordinator(t, map[string]string{
		"submit": `{"jobs": [{"id": "j-1", "name": "resnet50-train"}]}`,
		"status": `{"id": "j-1", "seq": 1, "spec": {"name": "resnet50-train"}, "state": "failed", "reason": "no GPU fits"}`,
	})
	_, _, err := runCoordinator(t, "submit", "../../examples/train-resnet50.yaml", "--wait", "--nats-url", url, "--timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), "did not complete") {
		t.Fatalf("submit --wait of a job that already failed: error %v, want one saying it did not complete", err)
	}
}
