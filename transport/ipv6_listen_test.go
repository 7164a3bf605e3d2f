package transport

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/remote"
)

// An IPv6 listen host ("[::]:7600" with --advertise, or "[::1]:0") starts
// the actor remote: protoactor joins host and port without brackets, and
// ":::7600" could not be listened on ("too many colons in address").
func TestActorRemoteListensOnIPv6Host(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		host, advertise, want string
	}{
		{"::1", "", "[::1]:"},
		{"::", "127.0.0.1", "127.0.0.1:"},
	} {
		var opts []remote.ConfigOption
		port := 0
		if c.advertise != "" {
			l, err := net.Listen("tcp", net.JoinHostPort(c.host, "0"))
			if err != nil {
				t.Fatal(err)
			}
			port = l.Addr().(*net.TCPAddr).Port
			l.Close()
			opts = append(opts, remote.WithAdvertisedHost(net.JoinHostPort(c.advertise, strconv.Itoa(port))))
		}
		a, err := startActors(c.host, port, log, opts...)
		if err != nil {
			t.Errorf("listen host %s: %v", c.host, err)
			continue
		}
		if addr := a.Address(); !strings.HasPrefix(addr, c.want) {
			t.Errorf("listen host %s: address %s, want %s…", c.host, addr, c.want)
		}
		a.Remote.Shutdown(false)
		a.System.Shutdown()
	}
}
