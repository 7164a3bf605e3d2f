package clustertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/transport"
)

// The package's tests share one build of the binaries (in a directory
// removed after the run) unless GPUSCHED_BIN_DIR names prebuilt ones.
var (
	buildDir  string
	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binaries returns a directory holding coordinator and node binaries.
func binaries(t *testing.T) string {
	t.Helper()
	if d := os.Getenv(BinDirEnv); d != "" {
		return d
	}
	buildOnce.Do(func() {
		start := time.Now()
		if buildDir, buildErr = os.MkdirTemp("", "gpusched-cluster-test-"); buildErr != nil {
			return
		}
		if _, _, buildErr = BuildBinaries(buildDir); buildErr == nil {
			t.Logf("built coordinator and node in %s", time.Since(start).Round(time.Millisecond))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

// killJobs share one simulated h100-80gb at time scale 100 for about 10 s
// of wall time each (ResNet-50 and MLP training, half the GPU each): long
// enough to kill their node mid-run even on a loaded machine, short enough
// to finish on the survivor well within the deadline.
const killJobs = `jobs:
  - {name: r50-kill, model: resnet50, kind: train, batch: 32, iterations: 18000, priority: 3}
  - {name: mlp-kill, model: mlp, kind: train, batch: 64, iterations: 250000, priority: 1}
`

// TestClusterKillNode runs a coordinator and two node processes, kills the
// node running the jobs with SIGKILL, and checks that gossip declares it
// dead, `coordinator nodes` shows it dead, its jobs are requeued from their
// last checkpoint and complete on the other node.
func TestClusterKillNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator and two node processes (about 20 s); run without -short")
	}
	begin := time.Now()
	h := New(t, Options{BinDir: binaries(t)})
	h.StartCoordinator()
	procs := map[string]*Process{"n1": h.StartNode("n1"), "n2": h.StartNode("n2")}
	t.Logf("coordinator NATS %s, actors %s, gossip %s; n1 on %s, n2 on %s (cluster up in %s)", h.NATSURL, h.ActorAddr, h.GossipAddr,
		procs["n1"].Host, procs["n2"].Host, time.Since(begin).Round(time.Millisecond))

	jobs := h.SubmitYAML(killJobs)
	if len(jobs) != 2 {
		t.Fatalf("submitted %v, want 2 jobs", jobs)
	}
	// Each job runs and has a checkpoint before the kill.
	recs := map[string]actors.JobRecord{}
	h.WaitFor(20*time.Second, "both jobs running with a checkpoint", func() (bool, string) {
		var l actors.ListReply
		if err := h.CLIJSON(&l, "list"); err != nil {
			return false, err.Error()
		}
		var st []string
		for _, r := range l.Jobs {
			recs[r.ID] = *r
			st = append(st, r.ID+": "+describe(*r))
		}
		for _, j := range jobs {
			if r := recs[j.ID]; r.State != actors.StateRunning || r.Iteration == 0 {
				return false, strings.Join(st, "; ")
			}
		}
		return true, ""
	})
	victim := recs[jobs[0].ID].Node
	survivor := map[string]string{"n1": "n2", "n2": "n1"}[victim]
	if survivor == "" {
		t.Fatalf("job %s runs on node %q, not n1 or n2", jobs[0].ID, victim)
	}
	var lost, kept []string
	for _, j := range jobs {
		if recs[j.ID].Node == victim {
			lost = append(lost, j.ID)
		} else {
			kept = append(kept, j.ID)
		}
	}

	killed := h.Kill(procs[victim])
	t.Logf("killed %s (SIGKILL) running %v; checkpoints %v", victim, lost, checkpoints(recs, lost))

	dead := h.WaitEvent(transport.EvDead, 10*time.Second, "a dead event of "+victim, func(e transport.Event) bool { return e.Node == victim })
	t.Logf("gossip declared %s dead %s after the kill", victim, dead.Time.Sub(killed).Round(time.Millisecond))
	h.WaitNodeState(victim, "dead", 10*time.Second)

	for _, id := range lost {
		rq := h.WaitEvent(transport.EvRequeued, 10*time.Second, "a requeued event of "+id, func(e transport.Event) bool { return e.Job == id })
		if rq.Attempt != 1 || !strings.Contains(rq.Reason, victim) || rq.Iteration < recs[id].Iteration {
			t.Errorf("job %s requeued with attempt %d, reason %q, from iteration %d; want attempt 1, a reason naming %s, from ≥ %d",
				id, rq.Attempt, rq.Reason, rq.Iteration, victim, recs[id].Iteration)
		}
	}
	for _, id := range lost {
		r := h.WaitJobState(id, actors.StateCompleted, 45*time.Second)
		if r.Node != survivor || r.Attempt != 1 || r.Iteration != r.Total {
			t.Errorf("job %s completed on %s, attempt %d, %d/%d iterations; want on %s, attempt 1, all iterations", id, r.Node, r.Attempt, r.Iteration, r.Total, survivor)
		}
		placed := h.Events(id, transport.EvPlaced)
		if len(placed) != 2 || placed[1].Node != survivor {
			t.Errorf("job %s placed events %+v; want one on %s and one on %s", id, placed, victim, survivor)
		}
	}
	for _, id := range kept {
		r := h.WaitJobState(id, actors.StateCompleted, 45*time.Second)
		if r.Attempt != 0 || len(h.Events(id, transport.EvRequeued)) != 0 {
			t.Errorf("job %s on the surviving node was requeued (attempt %d)", id, r.Attempt)
		}
	}
	if n, err := h.Node(survivor); err != nil || n.State != "alive" {
		t.Errorf("survivor %s: %+v %v", survivor, n, err)
	}
	if testing.Verbose() {
		t.Logf("events:\n%s", h.EventLog())
	}
	t.Logf("kill-node scenario took %s", time.Since(begin).Round(time.Millisecond))
}

func checkpoints(recs map[string]actors.JobRecord, ids []string) map[string]int64 {
	m := map[string]int64{}
	for _, id := range ids {
		m[id] = recs[id].Iteration
	}
	return m
}

// TestCLIUnreachable checks that every client command fails within seconds
// with an error naming the address it tried when nothing listens there,
// and that a node names the coordinator address it could not reach.
func TestCLIUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; run without -short")
	}
	dir := binaries(t)
	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte("name: a\nmodel: mlp\nbatch: 8\niterations: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const url = "nats://127.0.0.1:1"
	cases := []struct {
		name string
		bin  string
		args []string
		want string
	}{
		{"status", "coordinator", []string{"status", "--nats-url", url}, url},
		{"status-job-json", "coordinator", []string{"status", "j-1", "--nats-url", url, "--json"}, url},
		{"list", "coordinator", []string{"list", "--nats-url", url}, url},
		{"nodes", "coordinator", []string{"nodes", "--nats-url", url}, url},
		{"cancel", "coordinator", []string{"cancel", "j-1", "--nats-url", url}, url},
		{"submit", "coordinator", []string{"submit", spec, "--nats-url", url}, url},
		{"submit-wait", "coordinator", []string{"submit", spec, "--wait", "--nats-url", url}, url},
		{"watch", "coordinator", []string{"watch", "--nats-url", url}, url},
		{"node-coordinator", "node", []string{"--name", "x", "--coordinator", "127.0.0.1:1", "--join", "127.0.0.1:1"}, "127.0.0.1:1"},
		{"node-join", "node", []string{"--name", "x", "--join", "127.0.0.1:1"}, "127.0.0.1:1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			cmd := exec.CommandContext(ctx, filepath.Join(dir, c.bin), c.args...)
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			if err == nil {
				t.Fatalf("succeeded with nothing listening:\n%s", out)
			}
			if ctx.Err() != nil {
				t.Fatalf("still running after %s:\n%s", took, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("error does not name %s:\n%s", c.want, out)
			}
			if took > 5*time.Second {
				t.Errorf("took %s to fail, want < 5 s", took)
			}
		})
	}
}
