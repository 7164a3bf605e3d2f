package clustertest

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/transport"
)

// restartJob runs for about 10 s of wall time alone on one simulated
// h100-80gb at time scale 100 (resnet50 b32 ≈ 28.6 ms per iteration): long
// enough to be running when its node is killed, whatever the machine's load.
const restartJob = "name: r50-restart\nmodel: resnet50\nkind: train\nbatch: 32\niterations: 36000\npriority: 1\n"

// TestClusterRestartNodeSameName kills a node process with SIGKILL and
// starts it again at once with the same name (as a supervisor would). With
// the same actor and gossip addresses the new process typically joins
// before gossip can declare the old one dead; with a new gossip port
// (--gossip port 0, the default) gossip declares the old one dead. Either
// way the coordinator must learn that the old process is gone: it reports
// n1 dead, re-queues the job that ran there from its checkpoint, and places
// it again, here on the new process, where it completes. Before instances
// were gossiped the new process at the same address passed for the old
// one: no dead event came, and the job hung as running on a device that
// had never heard of it; at a new port the new process joined only 30-40 s
// after the old one's death.
func TestClusterRestartNodeSameName(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator and restarts a node process, twice (about 35 s); run without -short")
	}
	for _, sameAddr := range []bool{true, false} {
		t.Run(map[bool]string{true: "same addresses", false: "new gossip port"}[sameAddr], func(t *testing.T) { restartNodeSameName(t, sameAddr) })
	}
}

func restartNodeSameName(t *testing.T, sameAddr bool) {
	h := New(t, Options{BinDir: binaries(t)})
	h.StartCoordinator()
	n1 := h.StartNode("n1")
	id := h.SubmitYAML(restartJob)[0].ID
	var ckpt int64
	h.WaitFor(20*time.Second, "the job started with a progress checkpoint", func() (bool, string) {
		for _, e := range h.Events(id, "") {
			switch e.Type {
			case transport.EvProgress:
				ckpt = e.Iteration
			case transport.EvCompleted, transport.EvFailed, transport.EvCancelled:
				t.Fatalf("job %s ended (%s) before the kill; make restartJob longer", id, e.Type)
			}
		}
		return ckpt > 0, "no checkpoint yet"
	})
	killed := h.Kill(n1)
	var args []string
	if !sameAddr {
		args = []string{"--gossip", net.JoinHostPort(n1.Host, "0")}
	}
	n1again := h.RestartNode(n1, args...)
	t.Logf("killed n1 (SIGKILL) at actors %s, gossip %s and started it again at actors %s, gossip %s %s later; checkpoint %d",
		n1.ActorAddr, n1.GossipAddr, n1again.ActorAddr, n1again.GossipAddr, time.Since(killed).Round(time.Millisecond), ckpt)

	dead := h.WaitEvent(transport.EvDead, 10*time.Second, "a dead event of n1's old process", func(e transport.Event) bool { return e.Node == "n1" })
	t.Logf("n1's old process reported dead %s after the kill", dead.Time.Sub(killed).Round(time.Millisecond))
	rq := h.WaitEvent(transport.EvRequeued, 10*time.Second, "a requeued event of "+id, func(e transport.Event) bool { return e.Job == id })
	if rq.Attempt != 1 || !strings.Contains(rq.Reason, "n1") || rq.Iteration < ckpt {
		t.Errorf("requeued with attempt %d, reason %q, from iteration %d; want attempt 1, a reason naming n1, from ≥ %d", rq.Attempt, rq.Reason, rq.Iteration, ckpt)
	}
	h.WaitEvent(transport.EvJoined, 10*time.Second, "n1 joined again after its old process's death", func(e transport.Event) bool { return e.Node == "n1" && e.Seq > dead.Seq })
	r := h.WaitJobState(id, actors.StateCompleted, 45*time.Second)
	if r.Node != "n1" || r.Attempt != 1 || r.Iteration != r.Total {
		t.Errorf("completed on %s, attempt %d, %d/%d iterations; want on the new n1, attempt 1, all iterations", r.Node, r.Attempt, r.Iteration, r.Total)
	}
	if n := h.WaitNodeState("n1", "alive", 10*time.Second); n.GPUs != 1 || len(n.Devices) != 1 {
		t.Errorf("n1 after the restart: %+v, want alive with its one GPU", n)
	}
	if testing.Verbose() {
		t.Logf("events:\n%s", h.EventLog())
	}
}
