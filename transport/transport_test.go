package transport

import (
	"crypto/tls"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func startNATS(t *testing.T) (*Embedded, *nats.Conn) {
	t.Helper()
	e, err := StartEmbedded(EmbeddedOptions{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := Connect(e.ClientURL(), "test")
	if err != nil {
		e.Shutdown()
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close(); e.Shutdown() })
	return e, nc
}

func TestStoreAndEvents(t *testing.T) {
	_, nc := startNATS(t)
	s, err := OpenStore(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put("job.a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("job.b"); err != ErrNotFound {
		t.Fatalf("Get missing: %v", err)
	}
	keys, err := s.Keys("job.")
	if err != nil || len(keys) != 1 || keys[0] != "job.a" {
		t.Fatalf("keys %v %v", keys, err)
	}

	sub, err := nc.SubscribeSync(AllEvents)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := p.Publish(Event{Type: EvSubmitted, Job: "j-1"}); err != nil {
			t.Fatal(err)
		}
	}
	var last uint64
	for i := 0; i < 3; i++ {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != "gpusched.events.job.j-1" {
			t.Fatalf("subject %s", m.Subject)
		}
		e, err := ParseEvent(m.Data)
		if err != nil || e.Seq <= last || e.Type != EvSubmitted || e.Time.IsZero() {
			t.Fatalf("event %+v %v", e, err)
		}
		last = e.Seq
	}
	// A second publisher (a restarted coordinator) continues the sequence.
	p2, err := NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := p2.Publish(Event{Type: EvJoined, Node: "n1"})
	if err != nil || e.Seq != last+1 {
		t.Fatalf("seq after restart %d, want %d (%v)", e.Seq, last+1, err)
	}
}

func TestAPIGarbledAndErrors(t *testing.T) {
	_, nc := startNATS(t)
	calls := 0
	_, err := ServeAPI(nc, map[string]Handler{
		VerbStatus: func(b []byte) (any, error) {
			calls++
			var req struct{ Job string }
			if err := json.Unmarshal(b, &req); err != nil {
				return nil, err
			}
			return map[string]string{"job": req.Job}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := nc.Request(APIPrefix+VerbStatus, []byte("{not json"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Data), "not valid JSON") || calls != 0 {
		t.Fatalf("garbled reply %s (calls %d)", m.Data, calls)
	}
	var out map[string]string
	if err := Request(nc, VerbStatus, map[string]string{"job": "x"}, &out, 5*time.Second); err != nil || out["job"] != "x" {
		t.Fatalf("%v %v", out, err)
	}
	err = Request(nc, VerbList, struct{}{}, nil, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "no coordinator") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("no responders error: %v", err)
	}
}

func TestConnectNamesAddress(t *testing.T) {
	_, err := Connect("nats://127.0.0.1:1", "test")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("err %v", err)
	}
}

func TestGossipDeadWithin5s(t *testing.T) {
	events := make(chan MemberEvent, 16)
	a, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Meta: Meta{Name: "coord", Role: RoleCoordinator},
		OnEvent: func(e MemberEvent) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Join: []string{a.Addr()},
		Meta: Meta{Name: "n1", Role: RoleNode, Address: "127.0.0.1:1234", GPUs: 4, DeviceType: "h100-80gb"}})
	if err != nil {
		t.Fatal(err)
	}
	wait := func(typ string, d time.Duration) MemberEvent {
		t.Helper()
		deadline := time.After(d)
		for {
			select {
			case e := <-events:
				if e.Type == typ {
					return e
				}
			case <-deadline:
				t.Fatalf("no %s event within %s", typ, d)
			}
		}
	}
	j := wait(EvJoined, 5*time.Second)
	if j.Meta.GPUs != 4 || j.Meta.DeviceType != "h100-80gb" || j.Meta.Address != "127.0.0.1:1234" {
		t.Fatalf("meta %+v", j.Meta)
	}
	start := time.Now()
	b.Shutdown() // crash: no leave message
	// Suspected first (its probes go unanswered), then declared dead.
	s := wait(EvSuspect, 5*time.Second)
	if s.Meta.Name != "n1" {
		t.Fatalf("suspect event %+v, want n1", s)
	}
	t.Logf("suspected after %s", time.Since(start))
	wait(EvDead, 5*time.Second)
	t.Logf("dead declared after %s", time.Since(start))
}

func TestGossipLeave(t *testing.T) {
	events := make(chan MemberEvent, 16)
	a, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Meta: Meta{Name: "coord"}, OnEvent: func(e MemberEvent) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Join: []string{a.Addr()}, Meta: Meta{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Leave(2 * time.Second)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-events:
			t.Logf("event %+v", e)
			if e.Type == EvLeft {
				return
			}
		case <-deadline:
			t.Fatal("no left event")
		}
	}
}

// The process has one actor system: later calls share it when they ask for
// its address or any port on its host, and name it when they ask for another.
func TestProcessActors(t *testing.T) {
	a, err := ProcessActors("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Address(), "127.0.0.1:") || strings.HasSuffix(a.Address(), ":0") {
		t.Fatalf("address %s", a.Address())
	}
	for _, listen := range []string{"127.0.0.1:0", a.Address()} {
		if b, err := ProcessActors(listen, nil); err != nil || b != a {
			t.Fatalf("ProcessActors(%q) = %p, %v; want the running system %p", listen, b, err, a)
		}
	}
	if _, err := ProcessActors("127.0.0.2:0", nil); err == nil || !strings.Contains(err.Error(), a.Address()) {
		t.Fatalf("a second system on another host: %v; want an error naming %s", err, a.Address())
	}
	for _, bad := range []string{"256.0.0.1:x", "127.0.0.1", "127.0.0.1:70000"} {
		if _, err := ProcessActors(bad, nil); err == nil {
			t.Fatalf("bad address %q accepted", bad)
		}
	}
	// A system started without TLS is not shared with a caller that asks
	// for it: its actor port would take plaintext.
	if _, err := ProcessActorsAdvertised("127.0.0.1:0", "", nil, WithTLS(&tls.Config{})); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Fatalf("asking the running plaintext system for TLS: %v; want a refusal naming TLS", err)
	}
	// The system is never shut down here: -count=2 runs this again in the
	// same process, and a process starts its remote once.
}

// Leave after Shutdown, or a second Leave, returns an error: memberlist
// panics ("leave after shutdown") when asked to leave once shut down, so a
// node's Leave after Kill, or a second Leave, crashed the process.
func TestGossipLeaveAfterStop(t *testing.T) {
	a, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Meta: Meta{Name: "coord"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	for _, c := range []struct {
		name string
		stop func(*Gossip)
	}{
		{"shutdown then leave", func(g *Gossip) { g.Shutdown() }},
		{"leave twice", func(g *Gossip) { _ = g.Leave(2 * time.Second) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := StartGossip(GossipOptions{Listen: "127.0.0.1:0", Join: []string{a.Addr()}, Meta: Meta{Name: "n1"}})
			if err != nil {
				t.Fatal(err)
			}
			c.stop(b)
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Leave panicked: %v", r)
				}
			}()
			if err := b.Leave(2 * time.Second); err == nil || !strings.Contains(err.Error(), "stopped") {
				t.Fatalf("Leave after the member stopped: %v, want an error saying it has stopped", err)
			}
			b.Shutdown() // still harmless
		})
	}
}
