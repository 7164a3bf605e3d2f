package transport

import (
	"testing"
	"time"
)

// waitMember returns the first event of type typ for member name, failing
// the test when none comes within d; seen collects every event read
// meanwhile, in order.
func waitMember(t *testing.T, events <-chan MemberEvent, name, typ string, d time.Duration, seen *[]MemberEvent) MemberEvent {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-events:
			*seen = append(*seen, e)
			if e.Meta.Name == name && e.Type == typ {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event for %s within %s; events: %+v", typ, name, d, *seen)
		}
	}
}

// restartCluster is a coordinator, a node n2 and the node n1 about to be
// restarted, each a gossip member on 127.0.0.1, with n1's join seen by both.
type restartCluster struct {
	coordEv, peerEv chan MemberEvent
	coord           *Gossip
	meta            Meta
	n1              *Gossip
	joined          MemberEvent // n1's join as the coordinator reported it
}

func startRestartCluster(t *testing.T) restartCluster {
	t.Helper()
	r := restartCluster{coordEv: make(chan MemberEvent, 64), peerEv: make(chan MemberEvent, 64),
		meta: Meta{Name: "n1", Role: RoleNode, Address: "127.0.0.1:1234", GPUs: 4, DeviceType: "h100-80gb"}}
	var err error
	r.coord, err = StartGossip(GossipOptions{Listen: "127.0.0.1:0", Meta: Meta{Name: "coord", Role: RoleCoordinator},
		OnEvent: func(e MemberEvent) { r.coordEv <- e }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.coord.Shutdown)
	c, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Join: []string{r.coord.Addr()}, Meta: Meta{Name: "n2", Role: RoleNode},
		OnEvent: func(e MemberEvent) { r.peerEv <- e }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	if r.n1, err = StartGossip(GossipOptions{Listen: "127.0.0.1:0", Join: []string{r.coord.Addr()}, Meta: r.meta}); err != nil {
		t.Fatal(err)
	}
	var seen []MemberEvent
	r.joined = waitMember(t, r.coordEv, "n1", EvJoined, 5*time.Second, &seen)
	waitMember(t, r.peerEv, "n1", EvJoined, 5*time.Second, &seen)
	return r
}

// expectRestartReported waits until both the coordinator and n2 report n1's
// old process, at oldAddr, dead with its own metadata, and only then the
// new process joined at newAddr with new metadata.
func (r restartCluster) expectRestartReported(t *testing.T, oldAddr, newAddr string) {
	t.Helper()
	for who, events := range map[string]chan MemberEvent{"coordinator": r.coordEv, "n2": r.peerEv} {
		var seen []MemberEvent
		d := waitMember(t, events, "n1", EvDead, 5*time.Second, &seen)
		if d.Meta != r.joined.Meta || d.Addr != oldAddr {
			t.Fatalf("%s: dead event %+v, want the old process's metadata %+v at %s", who, d, r.joined.Meta, oldAddr)
		}
		for _, e := range seen {
			// Only n1's: another member's join (n2's, which can reach the
			// coordinator after n1's) says nothing about the restart.
			if e.Type == EvJoined && e.Meta.Name == "n1" {
				t.Fatalf("%s: %+v before the old process was reported dead", who, e)
			}
		}
		j2 := waitMember(t, events, "n1", EvJoined, 5*time.Second, &seen)
		if j2.Meta == r.joined.Meta || j2.Addr != newAddr {
			t.Fatalf("%s: joined event %+v after the restart: want the new process's metadata (not %+v) at %s", who, j2, r.joined.Meta, newAddr)
		}
	}
}

// expectNoMoreOfN1 fails the test if, within 3 s, either member reports n1
// dead, joined or left again.
func (r restartCluster) expectNoMoreOfN1(t *testing.T) {
	t.Helper()
	quiet := time.After(3 * time.Second)
	for {
		var e MemberEvent
		select {
		case e = <-r.coordEv:
		case e = <-r.peerEv:
		case <-quiet:
			return
		}
		if e.Meta.Name == "n1" && (e.Type == EvDead || e.Type == EvJoined || e.Type == EvLeft) {
			t.Fatalf("after the restart was reported: %+v", e)
		}
	}
}

// A node process that crashes and is started again at once under the same
// name and gossip address, before the cluster declares it dead, was not
// noticed: the new process answered the probes meant for the old one and
// memberlist took its alive message (a higher incarnation, as it refutes
// the old one's) as an update of the same member, which was ignored. The
// coordinator never learnt that the old process, and the jobs it ran, were
// gone. Now each process gossips its own instance, and a member whose
// instance changes is reported dead (with the old process's metadata) and
// then joined (with the new one's).
func TestGossipRestartSameAddress(t *testing.T) {
	// Both the coordinator and another node (which hears of the restart
	// by gossip too, and may relay the old process's state) report it.
	r := startRestartCluster(t)
	addr := r.n1.Addr()
	r.n1.Shutdown() // a crash: no leave notice
	// The same process again (same metadata, same gossip address), as a
	// supervisor restarting it at once would start it.
	b2, err := StartGossip(GossipOptions{Listen: addr, Join: []string{r.coord.Addr()}, Meta: r.meta})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Shutdown()
	r.expectRestartReported(t, addr, addr)
	// Nothing more about n1's membership: the new process is neither
	// declared dead nor joined again.
	r.expectNoMoreOfN1(t)
}

// A node restarted under the same name at another gossip address (its
// --gossip port is 0, the default) is no update of the old member:
// memberlist refuses the new address while the old member lives, and
// declares the old one dead when its probes go unanswered. The old
// process is reported dead, with its own metadata, within the usual time,
// and the new one is not reported joined before that. The new one was
// then taken only once memberlist dropped the dead name (30 s) and a
// push-pull brought the new address (up to 10 s more): its GPUs were out of
// service for 30-40 s. Now a peer that saw the new process's conflicting
// address contacts it as soon as the old one is declared dead, and the
// new one joins within moments, on the coordinator and on another node.
func TestGossipRestartNewAddress(t *testing.T) {
	r := startRestartCluster(t)
	addr := r.n1.Addr()
	r.n1.Shutdown()
	b2, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Join: []string{r.coord.Addr()}, Meta: r.meta})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Shutdown()
	r.expectRestartReported(t, addr, b2.Addr())
	// The new process stays: a peer's late news of the old one (its
	// suspicion or death, at the old incarnation) does not take it out
	// for good. Until the new process's refutation has gone round (a
	// gossip round, longer on a loaded machine) another peer's own
	// declaration of the old one's death can report the new one dead, and
	// it joins again at once (see Gossip.gone); on two busy cores this
	// failed a CI run twice, so that transient is allowed here.
	r.expectN1Stays(t, b2.Addr())
}

// expectN1Stays fails the test if, over 3 s, either member reports n1's
// old process again, or reports the new one (at newAddr) dead or left
// without it joining again within 5 s.
func (r restartCluster) expectN1Stays(t *testing.T, newAddr string) {
	t.Helper()
	down := map[string]time.Time{} // member -> when it last reported n1's new process gone
	quiet := time.After(3 * time.Second)
	check := func(who string, e MemberEvent) {
		if e.Meta.Name != "n1" {
			return
		}
		if e.Meta == r.joined.Meta || e.Addr != newAddr {
			t.Fatalf("%s: %+v after the restart was reported: news of the old process", who, e)
		}
		switch e.Type {
		case EvDead, EvLeft:
			t.Logf("%s: the new process reported %s (a peer's late news of the old one), waiting for it to join again", who, e.Type)
			down[who] = time.Now()
		case EvJoined:
			delete(down, who)
		}
	}
	for len(down) > 0 || quiet != nil {
		// 5 s from the earliest report still standing, not from the
		// latest event (a stream of other events would put it off).
		var deadline <-chan time.Time
		if len(down) > 0 {
			first := time.Time{}
			for _, at := range down {
				if first.IsZero() || at.Before(first) {
					first = at
				}
			}
			deadline = time.After(time.Until(first.Add(5 * time.Second)))
		}
		select {
		case e := <-r.coordEv:
			check("coordinator", e)
		case e := <-r.peerEv:
			check("n2", e)
		case <-quiet:
			quiet = nil
		case <-deadline:
			t.Fatalf("the new process of n1 was reported gone and did not join again within 5 s: %v", down)
		}
	}
}

// Only a change between two known instances is a restart: metadata
// without one (an older version's, or unreadable) is of an unknown
// instance, and the same instance is the same process.
func TestRestartedNeedsBothInstances(t *testing.T) {
	for _, c := range []struct {
		old, now string
		want     bool
	}{
		{`{"name":"n1","instance":"a"}`, `{"name":"n1","instance":"b"}`, true},
		{`{"name":"n1","instance":"a"}`, `{"name":"n1","instance":"a","gpus":2}`, false},
		{`{"name":"n1"}`, `{"name":"n1","instance":"b"}`, false},
		{`{"name":"n1","instance":"a"}`, `{"name":"n1"}`, false},
		{`{"name":"n1","instance":"a"}`, `garbage`, false},
		{``, `{"name":"n1","instance":"b"}`, false},
	} {
		if got := restarted([]byte(c.old), []byte(c.now)); got != c.want {
			t.Errorf("restarted(%s, %s) = %v, want %v", c.old, c.now, got, c.want)
		}
	}
}
