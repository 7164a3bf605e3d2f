package transport

import (
	"testing"
	"time"
)

// A member that itself stood still does not take its own stall for its
// peers' silence. Under load (reproduced by stopping the test process for
// 2.2 s every 3 s) the coordinator's first check after a stall found every
// peer unheard for longer than its allowance and judged a live node
// suspect before any probe could be answered; the node's GPUs went out of
// service and TestElasticReplicasSurviveJobActorRestart failed with
// "allocation [0 2]×2048: 0 orders" (its job was left out of the round).
// The checks here come every checkEvery, as watchSuspects makes them.
func TestGossipOwnStallIsNoSilence(t *testing.T) {
	g := judgeOnly()
	t0 := time.Unix(1000, 0)
	check := func(at time.Duration, names ...string) []string {
		now := t0.Add(at)
		g.resume(now)
		return g.judge(now, names)
	}
	for at := time.Duration(0); at <= 500*time.Millisecond; at += checkEvery {
		if got := check(at, "a", "b"); got[0] != "" || got[1] != "" {
			t.Fatalf("at %s: %q, want no change", at, got)
		}
	}
	// b answers at 400 ms; then the member stalls: its next check comes
	// 3 s after the last one (2.9 s late).
	g.heard["b"] = t0.Add(400 * time.Millisecond)
	if got := check(3500*time.Millisecond, "a", "b"); got[0] != "" || got[1] != "" {
		t.Fatalf("first check after the member's own 2.9 s stall: %q, want no change (its peers were not silent, it was)", got)
	}
	// The allowance (2.2 s with two peers) counts the member's running
	// time: a, last heard at 0, was unheard for 0.6 s of it by 3.5 s (the
	// 0.5 s before the stall and one check interval).
	for at := 3600 * time.Millisecond; at <= 5100*time.Millisecond; at += checkEvery {
		if got := check(at, "a", "b"); got[0] != "" || got[1] != "" {
			t.Fatalf("at %s (a unheard for %s of running time): %q, want no change", at, at-3500*time.Millisecond+600*time.Millisecond, got)
		}
	}
	if got := check(5200*time.Millisecond, "a", "b"); got[0] != EvSuspect || got[1] != "" {
		t.Fatalf("at 5.2 s (a unheard for 2.3 s of running time, b for 1.9 s): %q, want a %s, b no change", got, EvSuspect)
	}
	// A suspect peer stays suspect through a stall: only an answer
	// makes it alive again.
	if got := check(8*time.Second, "a", "b"); got[0] != "" {
		t.Fatalf("suspect a after another stall: %q, want no change", got[0])
	}
	g.heard["a"] = t0.Add(8050 * time.Millisecond)
	if got := check(8100*time.Millisecond, "a", "b"); got[0] != EvAlive {
		t.Fatalf("a answered: %q, want %s", got[0], EvAlive)
	}
	// Jitter is no stall: checks a little late give no credit.
	g2 := judgeOnly()
	g2.resume(t0)
	g2.judge(t0, []string{"a"})
	at, got := time.Duration(0), ""
	for got == "" && at < 5*time.Second {
		at += checkEvery + 150*time.Millisecond
		g2.resume(t0.Add(at))
		got = g2.judge(t0.Add(at), []string{"a"})[0]
	}
	if got != EvSuspect || at != 1250*time.Millisecond {
		t.Fatalf("a unheard with one peer, checks 150 ms late: %q at %s, want %s at the first check after 1.2 s (1.25 s)", got, at, EvSuspect)
	}
}
