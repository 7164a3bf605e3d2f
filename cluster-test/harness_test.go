package clustertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A node name the cluster cannot carry is refused at start, naming --name:
// the coordinator's node events go to gpusched.events.node.<name> and its
// record to the store key node.<name>, so a name with a space or a NATS
// wildcard was accepted and then every event of that node was lost
// ("nats: invalid subject") and its record never stored.
func TestNodeNameRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; run without -short")
	}
	node := filepath.Join(binaries(t), "node")
	for _, name := range []string{"a b", "n*", "n>", "a/b", "a:b", "", ".a", "a.", "a..b"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		// Nothing listens at the join address: a name that got past the
		// checks fails on the join instead.
		cmd := exec.CommandContext(ctx, node, "--name", name, "--join", "127.0.0.1:1")
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "--name") {
			t.Errorf("node --name %q: %v, want an error naming --name:\n%s", name, err, out)
		}
	}
}

// Stop sends SIGTERM, as its documentation and TestClusterKillNode say (a
// process manager stops a node with it): it sent SIGINT, so no test
// stopped a process with SIGTERM.
func TestHarnessStopSendsSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; run without -short")
	}
	h := New(t, Options{BinDir: binaries(t)})
	// A stand-in for a node that says which signal stopped it.
	script := `trap 'echo TERM; exit 0' TERM; trap 'echo INT; exit 0' INT
echo "node x ready: 1 × h100-80gb, actors 127.0.0.1:1, gossip 127.0.0.1:2" >&2
while :; do sleep 0.05; done`
	p, _ := h.start("x", "127.0.0.1", "/bin/sh", nodeReady, "-c", script)
	h.Stop(p)
	b, err := os.ReadFile(filepath.Join(p.Dir, "stdout.log"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "TERM" {
		t.Fatalf("Stop sent %q, want TERM", got)
	}
}
