package transport

import (
	"bytes"
	"strings"
	"testing"
)

// With a gossip key, members of the same key join and a member with
// another key, or none, cannot: memberlist drops what it cannot decrypt,
// and the join error points at --gossip-key-file. A bad key length is
// refused before anything listens.
func TestGossipKeySeparates(t *testing.T) {
	keyA, keyB := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 16)
	a, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", SecretKey: keyA, Meta: Meta{Name: "coord", Role: RoleCoordinator}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	for _, c := range []struct {
		what string
		key  []byte
	}{{"another key", keyB}, {"no key", nil}} {
		_, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", SecretKey: c.key, Join: []string{a.Addr()}, Meta: Meta{Name: "n-bad"}})
		if err == nil || !strings.Contains(err.Error(), "--gossip-key-file") {
			t.Errorf("joining with %s: %v; want a refusal naming --gossip-key-file", c.what, err)
		}
	}
	if n := a.NumMembers(); n != 1 {
		t.Fatalf("%d members after members with other keys tried to join, want 1", n)
	}
	b, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", SecretKey: keyA, Join: []string{a.Addr()}, Meta: Meta{Name: "n-good"}})
	if err != nil {
		t.Fatalf("joining with the same key: %v", err)
	}
	defer b.Shutdown()
	if n := b.NumMembers(); n != 2 {
		t.Fatalf("%d members after a member with the same key joined, want 2", n)
	}
	// A keyed member cannot join a cluster without a key either.
	plain, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Meta: Meta{Name: "plain"}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Shutdown()
	if _, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", SecretKey: keyA, Join: []string{plain.Addr()}, Meta: Meta{Name: "n-keyed"}}); err == nil {
		t.Error("a keyed member joined a cluster without a key")
	}
	if _, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", SecretKey: make([]byte, 10), Meta: Meta{Name: "x"}}); err == nil || !strings.Contains(err.Error(), "16, 24 or 32") {
		t.Errorf("a 10-byte key: %v; want a refusal giving the lengths", err)
	}
}
