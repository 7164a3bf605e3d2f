package main

import (
	"strings"
	"testing"
)

// TestServeReadyLineRedactsNATSURL: serve's ready line names the NATS URL
// it connected to, which with an external --nats-url may carry the
// server's credentials; they are not printed.
func TestServeReadyLineRedactsNATSURL(t *testing.T) {
	for _, c := range []struct{ url, secret string }{
		{"nats://t0pS3cretTok@10.0.0.5:4222", "t0pS3cretTok"},
		{"nats://alice:hunter2@10.0.0.5:4222", "hunter2"},
	} {
		line := serveReadyLine(c.url, "127.0.0.1:7600", "127.0.0.1:7946", "", 0)
		if strings.Contains(line, c.secret) {
			t.Errorf("ready line %q shows the credentials of %s", line, c.url)
		}
		if !strings.Contains(line, "10.0.0.5:4222") || !strings.Contains(line, "actors 127.0.0.1:7600") {
			t.Errorf("ready line %q: want the NATS host and the actor address", line)
		}
	}
	if got, want := serveReadyLine("nats://127.0.0.1:4222", "a:1", "g:2", "m:3", 4),
		"coordinator ready: NATS nats://127.0.0.1:4222, actors a:1, gossip g:2, metrics http://m:3/metrics (4 unfinished job(s) recovered)"; got != want {
		t.Errorf("ready line %q, want %q", got, want)
	}
}
