package transport

import (
	"testing"
	"time"
)

// An event that could not be published does not use up a sequence number:
// one that failed (here, a time JSON cannot hold) left a gap, and a
// publisher started afterwards (a restarted coordinator, continuing from
// the stream's last sequence) gave the next event a number already sent.
func TestPublishFailureKeepsSequence(t *testing.T) {
	_, nc := startNATS(t)
	sub, err := nc.SubscribeSync(AllEvents)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(Event{Type: EvSubmitted, Job: "j-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(Event{Type: EvSubmitted, Job: "j-2", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Fatal("an event with a time JSON cannot hold was published")
	}
	if _, err := p.Publish(Event{Type: EvSubmitted, Job: "j-3"}); err != nil {
		t.Fatal(err)
	}
	p2, err := NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Publish(Event{Type: EvSubmitted, Job: "j-4"}); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for i := 0; i < 3; i++ {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		e, err := ParseEvent(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, e.Seq)
	}
	if seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 {
		t.Fatalf("sequence numbers %v, want [1 2 3]: one more for every event published, across a restart", seqs)
	}
}
