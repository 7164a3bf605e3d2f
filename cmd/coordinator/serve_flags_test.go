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

// serve's --listen and --gossip on every interface need --advertise, the
// address nodes are told; the error names the flag and the fix. Before,
// ":7600" was accepted and advertised as "[::]:7600". A bad --advertise is
// refused naming it.
func TestServeUnspecifiedHostNeedsAdvertise(t *testing.T) {
	// Nothing listens at this NATS URL: an address that got past the
	// checks fails on it instead (rather than serving until a signal).
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", ":7600", "--gossip", "127.0.0.1:0"}, `--listen ":7600" listens on every interface`},
		{[]string{"--listen", "127.0.0.1:0", "--gossip", "0.0.0.0:7946"}, "--advertise 10.0.0.5"},
		{[]string{"--listen", ":7600", "--gossip", ":7946", "--advertise", "node1"}, `bad --advertise "node1"`},
	} {
		args := append([]string{"serve", "--nats-url", "nats://127.0.0.1:1"}, c.args...)
		_, _, err := runCoordinator(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", strings.Join(args, " "), err, c.want)
		}
	}
}
