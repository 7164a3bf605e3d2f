package main

import (
	"strings"
	"testing"
	"time"
)

// status JOB says why a running job makes no progress. A low-priority job
// beside a higher-priority one with no idle gaps is starved by the kernel
// dispatcher (its iteration time is 0 until the plan changes); status
// printed only "progress: 0/300000 iterations", as for a job that had just
// started, so on a live cluster it looked hung.
func TestStatusSaysJobIsStarved(t *testing.T) {
	url := fakeCoordinator(t, map[string]string{
		"status": `{"id": "j-10", "seq": 10, "spec": {"name": "long-c", "model": "vgg16", "kind": "train", "batch": {"min": 64, "max": 64}, "tolerance": 0.1},
			"state": "running", "gpu": "n1/gpu0", "iteration": 0, "total": 300000, "peak_bytes": 6177992064, "budget": 6177992064, "plan_version": 16}`,
	})
	b, err := runWithinToFile(t, 20*time.Second, "status", "j-10", "--nats-url", url, "--timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "starved") {
		t.Fatalf("status of a starved job does not say so:\n%s", b)
	}
}

// status without a job lists each GPU's jobs in words: "jobs j-1, j-2" or
// "no jobs", not the Go slices "jobs [j-1 j-2]" and "jobs []".
func TestStatusSummaryJobsInWords(t *testing.T) {
	url := fakeCoordinator(t, map[string]string{
		"status": `{"jobs": {"running": 2}, "nodes": [], "gpus": [
			{"id": "n1/gpu0", "node": "n1", "device_type": "h100-80gb", "capacity": 85524414464, "reserved": 1000000000, "jobs": ["j-1", "j-2"]},
			{"id": "n1/gpu1", "node": "n1", "device_type": "h100-80gb", "capacity": 85524414464, "reserved": 0, "jobs": []}]}`,
	})
	b, err := runWithinToFile(t, 20*time.Second, "status", "--nats-url", url, "--timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	if strings.Contains(out, "[") || !strings.Contains(out, "jobs j-1, j-2") || !strings.Contains(out, "no jobs") {
		t.Fatalf("status summary should list jobs in words:\n%s", out)
	}
}
