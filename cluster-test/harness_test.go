package clustertest

import (
	"testing"

	"github.com/gpusched/gpusched/actors"
)

// A coordinator started again after the harness's previous one exited
// takes up its store, as a restarted `coordinator serve` with the same
// --data-dir does: each start used a new data directory, so the restarted
// coordinator knew none of the jobs.
func TestHarnessCoordinatorRestartKeepsStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator process twice; run without -short")
	}
	h := New(t, Options{BinDir: binaries(t)})
	first := h.StartCoordinator()
	// No node: the job waits for placement.
	jobs := h.SubmitYAML("name: waits\nmodel: mlp\nbatch: 8\niterations: 5\n")
	h.Kill(first)
	// The ready line follows the recovery from the store.
	h.StartCoordinator()
	if r, err := h.Job(jobs[0].ID); err != nil || r.State != actors.StatePending {
		t.Fatalf("job %s after the coordinator's restart: %s, %v; want it pending", jobs[0].ID, describe(r), err)
	}
}
