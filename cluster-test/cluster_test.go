package clustertest

import (
	"context"
	"fmt"
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

// killJobs each run for 8–10 s of wall time *alone* on one simulated
// h100-80gb at time scale 100 (resnet50 b32 ≈ 28.6 ms and b16 ≈ 15.6 ms per
// iteration), and longer while they share it. Each must be long on its own:
// the coordinator may place one job well before the other (planning the
// first resnet50 takes most of a second on a loaded 2-core machine under
// -race), and a job sized only for the shared case (an mlp at 0.14 ms per
// iteration) finished before its partner started. Nodes pace iterations by
// wall time, so a slow machine does not make the jobs shorter, only the
// harness slower to react; the survivor finishes both well within the
// 45 s deadlines below.
const killJobs = `jobs:
  - {name: r50-kill, model: resnet50, kind: train, batch: 32, iterations: 36000, priority: 3}
  - {name: r50-low-kill, model: resnet50, kind: train, batch: 16, iterations: 50000, priority: 1}
`

// TestClusterKillNode runs a coordinator and two node processes, kills the
// node running the jobs with SIGKILL, and checks that gossip declares it
// dead, `coordinator nodes` shows it dead, its jobs are requeued from their
// last checkpoint and complete on the other node. Finally it stops the other
// node with SIGTERM, which `coordinator nodes` must show as left.
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
	// Kill as soon as every job has started and the first has a progress
	// checkpoint. The trigger is the event stream, not CLI polling: on a
	// loaded machine a poll round can take seconds, long enough for the jobs
	// to finish first.
	ckpt := map[string]int64{}   // iteration of the last progress event
	where := map[string]string{} // node of the last started event
	h.WaitFor(20*time.Second, "both jobs started and a progress checkpoint", func() (bool, string) {
		var st []string
		ok := true
		for _, j := range jobs {
			for _, e := range h.Events(j.ID, "") {
				switch e.Type {
				case transport.EvStarted:
					where[j.ID] = e.Node
				case transport.EvProgress:
					ckpt[j.ID] = e.Iteration
				case transport.EvCompleted, transport.EvFailed, transport.EvCancelled:
					t.Fatalf("job %s ended (%s) before the kill; make killJobs longer", j.ID, e.Type)
				}
			}
			ok = ok && where[j.ID] != ""
			st = append(st, fmt.Sprintf("%s on %q at %d", j.ID, where[j.ID], ckpt[j.ID]))
		}
		return ok && ckpt[jobs[0].ID] > 0, strings.Join(st, ", ")
	})
	victim := where[jobs[0].ID]
	survivor := map[string]string{"n1": "n2", "n2": "n1"}[victim]
	if survivor == "" {
		t.Fatalf("job %s runs on node %q, not n1 or n2", jobs[0].ID, victim)
	}
	var lost, kept []string
	for _, j := range jobs {
		if where[j.ID] == victim {
			lost = append(lost, j.ID)
		} else {
			kept = append(kept, j.ID)
		}
	}

	killed := h.Kill(procs[victim])
	t.Logf("killed %s (SIGKILL) running %v; checkpoints %v", victim, lost, ckpt)

	dead := h.WaitEvent(transport.EvDead, 10*time.Second, "a dead event of "+victim, func(e transport.Event) bool { return e.Node == victim })
	t.Logf("gossip declared %s dead %s after the kill", victim, dead.Time.Sub(killed).Round(time.Millisecond))
	h.WaitNodeState(victim, "dead", 10*time.Second)

	for _, id := range lost {
		rq := h.WaitEvent(transport.EvRequeued, 10*time.Second, "a requeued event of "+id, func(e transport.Event) bool { return e.Job == id })
		if rq.Attempt != 1 || !strings.Contains(rq.Reason, victim) || rq.Iteration < ckpt[id] {
			t.Errorf("job %s requeued with attempt %d, reason %q, from iteration %d; want attempt 1, a reason naming %s, from ≥ %d",
				id, rq.Attempt, rq.Reason, rq.Iteration, victim, ckpt[id])
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
	// A graceful stop is told apart from a death: the node is listed as left.
	h.Stop(procs[survivor])
	h.WaitNodeState(survivor, "left", 10*time.Second)
	if testing.Verbose() {
		t.Logf("events:\n%s", h.EventLog())
	}
	t.Logf("kill-node scenario took %s", time.Since(begin).Round(time.Millisecond))
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
