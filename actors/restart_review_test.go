package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/transport"
)

// A node that crashes and is started again at once under the same name
// (as a supervisor would restart it). At the same gossip address, before
// gossip could declare it dead, its job was believed to run on the new
// process, whose devices had never heard of it, and hung. At another
// gossip address (--gossip port 0, the default) the old process was
// declared dead, but the new one's GPU joined only 30-40 s later. Now the
// old process is reported dead in both cases, so its job is re-queued from
// its checkpoint (nothing it had done is lost), and placed again, here on
// the new process's GPU, registered afresh within seconds.
func TestNodeRestartSameNameRequeues(t *testing.T) {
	for _, sameAddr := range []bool{true, false} {
		t.Run(map[bool]string{true: "same gossip address", false: "new gossip address"}[sameAddr], func(t *testing.T) {
			tc := startCluster(t, 1, 1, testGPU, 2)
			a := tc.submit(mlpSpec("a", 1500, 0))[0].ID
			ra := tc.waitState(a, StateRunning, 20*time.Second)
			tc.waitFor(20*time.Second, "a has made progress", func() bool { return tc.job(a).Iteration > 0 })
			old := tc.nodes[0]
			gossip := old.GossipAddr()
			tc.nodes = nil
			old.Kill()
			if sameAddr {
				tc.nodeConfig = func(c *NodeConfig) { c.Gossip = gossip }
			}
			tc.addNode("n1", 1, testGPU, 2)
			dead := tc.waitEvent("", transport.EvDead, 10*time.Second, func(e transport.Event) bool { return e.Node == "n1" })
			rq := tc.waitEvent(a, transport.EvRequeued, 10*time.Second, nil)
			if rq.GPU != ra.GPU || !strings.Contains(rq.Reason, "n1 died") || rq.Attempt != 1 {
				t.Fatalf("requeued event %+v; want a requeued from %s because n1 died, attempt 1", rq, ra.GPU)
			}
			tc.waitFor(10*time.Second, "n1 joined again after its old process was reported dead", func() bool {
				for _, e := range tc.eventsOf("", transport.EvJoined) {
					if e.Node == "n1" && e.Seq > dead.Seq {
						return true
					}
				}
				return false
			})
			st := tc.waitEvent(a, transport.EvStarted, 20*time.Second, func(e transport.Event) bool { return e.Seq > rq.Seq })
			if st.Node != "n1" || st.Iteration <= 0 {
				t.Fatalf("started again %+v; want on the new n1 from its checkpoint", st)
			}
			r := tc.waitState(a, StateCompleted, 30*time.Second)
			if r.Iteration != r.Total || r.Attempt != 1 {
				t.Fatalf("completed record %+v", r)
			}
		})
	}
}
