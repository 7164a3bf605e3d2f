package transport

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/grpc/grpclog"

	"github.com/gpusched/gpusched/transport/internal/remote"
)

// grpc's logger is process-wide and read without synchronisation by every grpc
// goroutine, so it is set exactly once, here, before any actor system starts
// (package initialisation finishes before main or a test runs). Upstream
// protoactor-go set it on every remote.Start, which raced with the grpc
// goroutines of the other actor systems in the same process (the demo and the
// in-process tests run several); transport/internal/remote is upstream's remote
// package without that call.
func init() {
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
}

// Actors is an actor system with protoactor remoting started on a host:port.
type Actors struct {
	System *actor.ActorSystem
	Remote *remote.Remote
}

// StartActors starts an actor system and its remote endpoint on listen
// (host:port; port 0 picks a free one). Library logs go to log (nil: discarded).
func StartActors(listen string, log *slog.Logger) (a *Actors, err error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("actor remote: bad listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("actor remote: bad port in %q", listen)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return log.With("lib", "protoactor")
	}))
	r := remote.NewRemote(sys, remote.Configure(host, port))
	defer func() {
		// remote.Start panics when it cannot listen.
		if p := recover(); p != nil {
			sys.Shutdown()
			a, err = nil, fmt.Errorf("actor remote: cannot listen on %s: %v", listen, p)
		}
	}()
	r.Start()
	return &Actors{System: sys, Remote: r}, nil
}

// Address is the remote address other processes use to reach this system.
func (a *Actors) Address() string { return a.System.Address() }

// Shutdown stops remoting and the actor system.
func (a *Actors) Shutdown() {
	a.Remote.Shutdown(false)
	a.System.Shutdown()
}
