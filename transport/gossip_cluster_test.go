package transport

import (
	"strings"
	"testing"
)

// Members of different clusters do not mix: a node told the wrong cluster
// cannot join (the error names both the cluster and the flag to check), and
// one of the right cluster can. Names outside the allowed set are refused.
func TestGossipClusterSeparates(t *testing.T) {
	a, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Cluster: "lab-a", Meta: Meta{Name: "coord", Role: RoleCoordinator}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	_, err = StartGossip(GossipOptions{Listen: "127.0.0.1:0", Cluster: "lab-b", Join: []string{a.Addr()}, Meta: Meta{Name: "n1"}})
	if err == nil || !strings.Contains(err.Error(), `cluster "lab-b"`) || !strings.Contains(err.Error(), "--cluster") {
		t.Fatalf("joining lab-a as a member of lab-b: %v, want a refusal naming the cluster and --cluster", err)
	}
	if n := a.NumMembers(); n != 1 {
		t.Fatalf("lab-a has %d members after a lab-b member tried to join, want 1", n)
	}
	b, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Cluster: "lab-a", Join: []string{a.Addr()}, Meta: Meta{Name: "n2"}})
	if err != nil {
		t.Fatalf("joining lab-a as a member of lab-a: %v", err)
	}
	defer b.Shutdown()
	if n := b.NumMembers(); n != 2 {
		t.Fatalf("lab-a has %d members after n2 joined, want 2", n)
	}
	for _, bad := range []string{"lab a", "lab/a", strings.Repeat("x", 65), "ü"} {
		if _, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Cluster: bad, Meta: Meta{Name: "x"}}); err == nil || !strings.Contains(err.Error(), "cluster name") {
			t.Errorf("cluster %q: %v, want a refusal", bad, err)
		}
	}
}
