package actors

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoordinatorGossipCheckedBeforeNATS: a well-formed --gossip address
// that cannot be used (its TCP or UDP port taken, or a host not of this
// machine) is refused naming --gossip before the embedded NATS server is
// started. Before, it was found only once NATS had started and the store
// was opened, after the data directory was made.
func TestCoordinatorGossipCheckedBeforeNATS(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	for _, c := range []struct{ addr, hint string }{
		{tcp.Addr().String(), "the port is taken"},
		{udp.LocalAddr().String(), "the port is taken"},
		{"1.2.3.4:7946", "not an address of this machine"},
	} {
		// The data directory is made just before NATS starts: that it is
		// not there shows nothing was started.
		dir := filepath.Join(t.TempDir(), "data")
		co, err := StartCoordinator(CoordinatorConfig{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0", Gossip: c.addr, Log: quiet})
		if err == nil {
			co.Stop()
			t.Errorf("--gossip %s: the coordinator started", c.addr)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "--gossip "+c.addr) || !strings.Contains(msg, c.hint) {
			t.Errorf("--gossip %s: error %q, want one naming --gossip %s and saying %q", c.addr, msg, c.addr, c.hint)
		}
		if _, serr := os.Stat(dir); serr == nil {
			t.Errorf("--gossip %s: the data directory was made (NATS was being started) before the address was refused", c.addr)
		}
	}
}
