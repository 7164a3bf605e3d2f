package actors

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpusched/gpusched/transport"
)

// checkAddr checks the host:port address given by flag (--listen, --gossip,
// --metrics) before anything is started.
func checkAddr(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad %s %q: want host:port, e.g. 127.0.0.1:0 (port 0 picks a free port)", flag, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("bad %s %q: the port must be a number 0..65535 (0 picks a free port)", flag, addr)
	}
	return nil
}

// unspecifiedHost reports whether host, of a listen address, stands for
// every interface of the machine: "", 0.0.0.0 or ::.
func unspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// checkAdvertise checks --advertise: an IP address of this machine that
// peers can reach ("" when not given).
func checkAdvertise(advertise string) error {
	if advertise == "" {
		return nil
	}
	ip := net.ParseIP(advertise)
	if ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("bad --advertise %q: want the IP address peers reach this machine at, without a port, e.g. --advertise 10.0.0.5", advertise)
	}
	return nil
}

// checkAdvertised refuses a --listen or --gossip address on every interface
// (":7600", "0.0.0.0:7600", "[::]:7600") without --advertise. Both addresses
// are not only listened on but also told to peers (the actor address in
// gossip metadata and in every PID, the gossip address to other members and
// to a restarted coordinator), and a peer cannot dial "[::]:7600". Binding
// every interface is fine once --advertise names the address to tell. The
// address is not guessed from the hostname or the interfaces: a GPU host has
// several (InfiniBand, container bridges), and a wrong guess fails later and
// quietly, on another machine.
func checkAdvertised(flag, addr, advertise string) error {
	host, port, _ := net.SplitHostPort(addr)
	if advertise != "" || !unspecifiedHost(host) {
		return nil
	}
	return fmt.Errorf("%s %q listens on every interface, but this address is also told to peers, which cannot reach it: "+
		"add --advertise with this machine's IP address that peers reach (e.g. --advertise 10.0.0.5), or listen on that address (%s %s)",
		flag, addr, flag, net.JoinHostPort("10.0.0.5", port))
}

// listenError names the flag of an address that could not be listened on,
// with what to do about the common causes.
func listenError(flag, addr string, err error) error {
	msg := err.Error()
	hint := ""
	switch {
	case errors.Is(err, syscall.EADDRINUSE) || strings.Contains(msg, "address already in use"):
		hint = " (the port is taken: is another node or coordinator using it? choose a free port, or 0 for any)"
	case errors.Is(err, syscall.EADDRNOTAVAIL) || strings.Contains(msg, "cannot assign requested address"):
		hint = " (not an address of this machine: use one of its own, e.g. 127.0.0.1, or 0.0.0.0 for all)"
	}
	return fmt.Errorf("%s %s: %w%s", flag, addr, err, hint)
}

// checkAddrs checks a process's --listen, --gossip and --metrics addresses
// (metrics "": none served), its --advertise host ("": none given) and its
// --cluster name ("": the default).
func checkAddrs(listen, gossip, metrics, advertise, cluster string) error {
	if cluster != "" {
		if err := transport.CheckClusterName(cluster); err != nil {
			return fmt.Errorf("--cluster: %w", err)
		}
	}
	if err := checkAddr("--listen", listen); err != nil {
		return err
	}
	if err := checkAddr("--gossip", gossip); err != nil {
		return err
	}
	if err := checkAdvertise(advertise); err != nil {
		return err
	}
	if err := checkAdvertised("--listen", listen, advertise); err != nil {
		return err
	}
	if err := checkAdvertised("--gossip", gossip, advertise); err != nil {
		return err
	}
	if metrics != "" {
		return checkAddr("--metrics", metrics)
	}
	return nil
}

// checkGossipBind listens on the gossip address over TCP and UDP, as
// memberlist will, and lets go at once, so that a well-formed address that
// cannot be used (its port taken, or not this machine's) is refused naming
// --gossip before anything is started: the coordinator starts NATS and its
// actor before gossip, which needs the actor's address. Port 0 checks only
// the host (memberlist picks a port free for both).
func checkGossipBind(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return listenError("--gossip", addr, err)
	}
	defer l.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return listenError("--gossip", addr, err)
	}
	return pc.Close()
}

// gossipError names --gossip in a gossip start's error when its address
// could not be listened on (a failed join is about --join instead).
func gossipError(addr string, err error) error {
	var le *transport.ListenError
	if errors.As(err, &le) {
		return listenError("--gossip", addr, err)
	}
	return err
}
