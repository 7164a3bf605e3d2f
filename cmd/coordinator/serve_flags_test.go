package main

import (
	"strings"
	"testing"
)

// serve's and demo's --time-scale and --elastic-interval are refused with
// an error naming the flag before anything starts. A --time-scale of 0 was
// taken as 100 for the elastic loop (the nodes read 0 as real time, and
// demo ran its nodes at 1× while printing "time scale 0×"); a negative one
// or a negative --elastic-interval was refused by the elastic loop without
// naming the flag.
func TestServeDemoElasticFlagsNamed(t *testing.T) {
	// Nothing listens at this NATS URL and the spec file does not exist:
	// a value that got past the flag checks fails on those instead.
	serve := []string{"serve", "--nats-url", "nats://127.0.0.1:1", "--listen", "127.0.0.1:0", "--gossip", "127.0.0.1:0"}
	demo := []string{"demo", "--file", "no-such-spec.yaml"}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{append(serve, "--time-scale", "0"), "--time-scale"},
		{append(serve, "--time-scale", "-1"), "--time-scale"},
		{append(serve, "--elastic-interval", "-3"), "--elastic-interval"},
		{append(demo, "--time-scale", "0"), "--time-scale"},
		{append(demo, "--time-scale", "-2"), "--time-scale"},
		{append(demo, "--elastic-interval", "-3"), "--elastic-interval"},
	} {
		_, _, err := runCoordinator(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%s: error %v, want one naming %s", strings.Join(c.args, " "), err, c.flag)
		}
	}
}
