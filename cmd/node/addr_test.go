package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/transport"
)

// TestMain runs the node command itself when asked to, so a test can run it
// in a process of its own (a process has one actor system: its --listen
// address is only listened on by the first start in a process).
func TestMain(m *testing.M) {
	if os.Getenv("GPUSCHED_TEST_RUN_NODE") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runNode runs the node command with args in a process of its own (see
// TestMain) and returns its combined output.
func runNode(args ...string) ([]byte, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GPUSCHED_TEST_RUN_NODE=1")
	return cmd.CombinedOutput()
}

// A --listen address the node cannot listen on (not this machine's, or its
// port taken) is refused with an error naming --listen and what to do.
// Before, it said "node n: actor remote: cannot listen on 1.2.3.4:80: ..."
func TestNodeListenErrorNamesFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct{ addr, hint string }{
		{"1.2.3.4:80", "not an address of this machine"},
		{busy.Addr().String(), "the port is taken"},
	} {
		out, err := runNode("--name", "n", "--join", "127.0.0.1:1", "--listen", c.addr, "--gossip", "127.0.0.1:0")
		if err == nil {
			t.Fatalf("--listen %s: the node started:\n%s", c.addr, out)
		}
		msg := string(out)
		if !strings.Contains(msg, "--listen "+c.addr) || !strings.Contains(msg, c.hint) {
			t.Errorf("--listen %s: output %q, want an error naming --listen %s and saying %q", c.addr, msg, c.addr, c.hint)
		}
	}
}

// --listen or --gossip on every interface without --advertise is refused
// naming the flag and the fix: both addresses are told to peers, which
// cannot dial ":7600". Before, the node started and advertised "[::]:7600".
func TestNodeUnspecifiedHostNeedsAdvertise(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", ":7600", "--gossip", "127.0.0.1:0"}, `--listen ":7600" listens on every interface`},
		{[]string{"--listen", "127.0.0.1:0", "--gossip", "0.0.0.0:7946"}, "add --advertise with this machine's IP address that peers reach"},
	} {
		args := append([]string{"--name", "n", "--join", "127.0.0.1:1"}, c.args...)
		out, err := runNode(args...)
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: err %v, output %q, want it to contain %q", strings.Join(args, " "), err, out, c.want)
		}
	}
}

// The security flags are checked before anything starts, naming the flag:
// a partial TLS set, a missing file, and a gossip key of a bad length.
func TestNodeSecurityFlagsChecked(t *testing.T) {
	dir := t.TempDir()
	good, err := transport.WriteCerts(filepath.Join(dir, "good"), []string{"127.0.0.1"}, transport.CertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	badKey := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(badKey, []byte("not base64!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--tls-key", good.Key, "--tls-ca", good.CA}, []string{"--tls-cert", "all three"}},
		{[]string{"--tls-cert", filepath.Join(dir, "nope.pem"), "--tls-key", good.Key, "--tls-ca", good.CA}, []string{"--tls-cert", "nope.pem"}},
		{[]string{"--gossip-key-file", badKey}, []string{"--gossip-key-file", "base64"}},
	} {
		// Nothing listens at the coordinator's address: flags that got
		// past the checks fail on it instead.
		args := append([]string{"--name", "n", "--coordinator", "127.0.0.1:1", "--join", "127.0.0.1:1"}, c.args...)
		out, err := runNode(args...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(string(out), w) {
				t.Errorf("%s: err %v, output %q, want it to contain %q", strings.Join(c.args, " "), err, out, w)
			}
		}
	}
}
