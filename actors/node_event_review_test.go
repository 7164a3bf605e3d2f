package actors

import (
	"testing"
	"time"

	"github.com/gpusched/gpusched/transport"
)

// A suspect node that answers again is published as alive. The coordinator
// put it back in service but published nothing, so `watch` (and anything
// following gpusched.events.node.<name>) showed "node n1 suspect" as its
// last word on a node that was running jobs again: a peer leaving can make
// gossip suspect a live node for a moment.
func TestSuspectNodeRecoveryIsPublished(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 100)
	meta := transport.Meta{Name: "n1", Role: transport.RoleNode}
	for _, typ := range []string{transport.EvSuspect, "alive"} {
		tc.co.System().Root.Send(tc.co.pid, &memberEv{ev: transport.MemberEvent{Type: typ, Meta: meta}})
	}
	tc.waitFor(10*time.Second, "a suspect event of n1", func() bool { return nodeEvent(tc, "n1", transport.EvSuspect) > 0 })
	tc.waitFor(10*time.Second, "an alive event of n1 after its suspect event", func() bool {
		return nodeEvent(tc, "n1", "alive") > nodeEvent(tc, "n1", transport.EvSuspect)
	})
	// Only a node that was suspect is published as alive again.
	tc.co.System().Root.Send(tc.co.pid, &memberEv{ev: transport.MemberEvent{Type: "alive", Meta: meta}})
	tc.co.System().Root.Send(tc.co.pid, &memberEv{ev: transport.MemberEvent{Type: transport.EvSuspect, Meta: meta}})
	tc.waitFor(10*time.Second, "the second suspect event", func() bool {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		n := 0
		for _, e := range tc.events {
			if e.Node == "n1" && e.Job == "" && e.Type == transport.EvSuspect {
				n++
			}
		}
		return n == 2
	})
	tc.mu.Lock()
	defer tc.mu.Unlock()
	alive := 0
	for _, e := range tc.events {
		if e.Node == "n1" && e.Job == "" && e.Type == "alive" {
			alive++
		}
	}
	if alive != 1 {
		t.Fatalf("%d alive events, want 1 (one per recovery from suspect)", alive)
	}
}

// nodeEvent returns the sequence number of node's last event of type typ
// (0: none).
func nodeEvent(tc *testCluster, node, typ string) uint64 {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var seq uint64
	for _, e := range tc.events {
		if e.Node == node && e.Job == "" && e.Type == typ {
			seq = e.Seq
		}
	}
	return seq
}
