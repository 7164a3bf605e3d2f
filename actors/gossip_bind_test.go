package actors

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
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

// TestUnspecifiedHostNeedsAdvertise: --listen and --gossip are told to
// peers (in gossip metadata, PIDs and the stored node list), so an address
// on every interface (":7600", "0.0.0.0:7600", "[::]:7946"), which no peer
// can dial, is refused without --advertise, naming the flag and the fix,
// before anything starts. Before, it was accepted and the node advertised
// "[::]:7600". A bad --advertise is refused too.
func TestUnspecifiedHostNeedsAdvertise(t *testing.T) {
	cases := []struct{ listen, gossip, advertise, want string }{
		{":0", "127.0.0.1:0", "", `--listen ":0" listens on every interface`},
		{"0.0.0.0:7600", "127.0.0.1:0", "", `--listen "0.0.0.0:7600" listens on every interface`},
		{"127.0.0.1:0", "[::]:0", "", `--gossip "[::]:0" listens on every interface`},
		{"127.0.0.1:0", ":7946", "", `add --advertise with this machine's IP address that peers reach (e.g. --advertise 10.0.0.5), or listen on that address (--gossip 10.0.0.5:7946)`},
		{"127.0.0.1:0", ":0", "foo", `bad --advertise "foo": want the IP address peers reach this machine at, without a port`},
		{"127.0.0.1:0", ":0", "10.0.0.5:80", `bad --advertise "10.0.0.5:80"`},
		{":0", ":0", "0.0.0.0", `bad --advertise "0.0.0.0"`},
	}
	for _, c := range cases {
		n, err := StartNode(NodeConfig{Name: "unspecified", Listen: c.listen, Gossip: c.gossip, Advertise: c.advertise,
			GPUs: 1, Profile: gpu.MustProfile(testGPU), Log: quiet})
		if err == nil {
			n.Kill()
			t.Errorf("node --listen %s --gossip %s --advertise %q: started", c.listen, c.gossip, c.advertise)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("node --listen %s --gossip %s --advertise %q: error %q, want it to contain %q", c.listen, c.gossip, c.advertise, err, c.want)
		}
		dir := filepath.Join(t.TempDir(), "data")
		co, err := StartCoordinator(CoordinatorConfig{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: c.listen, Gossip: c.gossip,
			Advertise: c.advertise, Log: quiet})
		if err == nil {
			co.Stop()
			t.Errorf("coordinator --listen %s --gossip %s --advertise %q: started", c.listen, c.gossip, c.advertise)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("coordinator --listen %s --gossip %s --advertise %q: error %q, want it to contain %q", c.listen, c.gossip, c.advertise, err, c.want)
		}
		if _, serr := os.Stat(dir); serr == nil {
			t.Errorf("coordinator --listen %s --gossip %s: NATS was being started before the address was refused", c.listen, c.gossip)
		}
	}
}

// TestAdvertiseTellsPeersItsHost: with --advertise, a node listening on
// every interface tells peers the advertised host with its ports.
func TestAdvertiseTellsPeersItsHost(t *testing.T) {
	n, err := StartNode(NodeConfig{Name: "advertised", Listen: ":0", Gossip: ":0", Advertise: "127.0.0.1",
		GPUs: 1, Profile: gpu.MustProfile(testGPU), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	for what, addr := range map[string]string{"gossip": n.GossipAddr(), "actor": n.Address()} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" || port == "0" {
			t.Errorf("%s address %q, want 127.0.0.1 with the port listened on", what, addr)
		}
	}
}

// A node told another cluster's name cannot join (the error says to check
// --cluster) and the coordinator's GPUs stay as they were; a bad name is
// refused naming --cluster before anything starts.
func TestNodeOfAnotherClusterRefused(t *testing.T) {
	tc := startCluster(t, 1, 1, "h100-80gb", 100)
	n, err := StartNode(NodeConfig{Name: "stranger", Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0", Join: []string{tc.co.GossipAddr()},
		Cluster: tc.clusterName() + "-other", GPUs: 2, Profile: gpu.MustProfile("h100-80gb"), TimeScale: 100, Log: quiet})
	if err == nil {
		n.Leave()
		t.Fatal("a node of another cluster joined")
	}
	if !strings.Contains(err.Error(), "--cluster") {
		t.Errorf("error %v does not say to check --cluster", err)
	}
	if g, _ := tc.co.GPUs(); len(g) != 1 {
		t.Errorf("coordinator has %d GPUs after the stranger's attempt, want 1", len(g))
	}
	if _, err := StartCoordinator(CoordinatorConfig{DataDir: t.TempDir(), NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0",
		Gossip: "127.0.0.1:0", Cluster: "lab a", Log: quiet}); err == nil || !strings.Contains(err.Error(), "--cluster") {
		t.Errorf("cluster name with a space: %v, want an error naming --cluster", err)
	}
}
