package main

import (
	"regexp"
	"testing"
)

// The ready line names the metrics address when --metrics is set (the
// port of --metrics 127.0.0.1:0 showed nowhere), and the actor and gossip
// addresses still read as the cluster test harness reads them.
func TestReadyLineNamesMetrics(t *testing.T) {
	// The harness's pattern (cluster-test/harness.go, nodeReady).
	nodeReady := regexp.MustCompile(`node \S+ ready: .*actors (\S+), gossip ([^\s,]+)`)
	for _, c := range []struct{ metrics, want string }{
		{"", "node n1 ready: 2 × h100-80gb, actors 127.0.0.1:7601, gossip 127.0.0.1:7947"},
		{"127.0.0.1:9101", "node n1 ready: 2 × h100-80gb, actors 127.0.0.1:7601, gossip 127.0.0.1:7947, metrics http://127.0.0.1:9101/metrics"},
	} {
		got := readyLine("n1", 2, "h100-80gb", "127.0.0.1:7601", "127.0.0.1:7947", c.metrics)
		if got != c.want {
			t.Errorf("metrics %q: %q, want %q", c.metrics, got, c.want)
		}
		m := nodeReady.FindStringSubmatch(got)
		if m == nil || m[1] != "127.0.0.1:7601" || m[2] != "127.0.0.1:7947" {
			t.Errorf("%q read as %q; want actors 127.0.0.1:7601, gossip 127.0.0.1:7947", got, m)
		}
	}
}
