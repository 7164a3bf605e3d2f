package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Actors is the process's actor system with its protoactor remote endpoint.
//
// A process runs exactly one, for its whole life: protoactor's remote.Start
// sets grpc's process-wide logger, which the grpc goroutines of a running
// remote read without synchronisation, so starting a second remote in a
// process (or restarting one) is a data race. The coordinator and the nodes
// of an in-process cluster (the demo, the actors tests) therefore share one
// system and one host:port: each keeps its own actors under its own names,
// and actors of the same process reach each other by PID as they would
// across processes. Separate processes (coordinator serve, node) each have
// their own.
type Actors struct {
	System *actor.ActorSystem
	Remote *remote.Remote
}

var process struct {
	mu      sync.Mutex
	actors  *Actors
	bind    string // host:port listened on, when other than the address
	tls     bool   // the actor port speaks mutual TLS (WithTLS)
	stopped bool
}

// ActorOption configures the process's actor system at its first start.
type ActorOption func(*actorOptions)

type actorOptions struct {
	tls *tls.Config
}

// WithTLS runs the actor port with mutual TLS: the remote's gRPC server
// requires and verifies a client certificate (cfg.ClientAuth, ClientCAs)
// and it dials peers with cfg's certificate, verifying theirs against
// cfg.RootCAs by the host of the address it dials (their advertised actor
// address: their certificate's SANs must hold that IP or name). cfg is
// what LoadTLS returns; nil leaves the port plaintext. It applies to the
// first start only: a later call that shares the running system must ask
// for TLS if and only if that system has it.
func WithTLS(cfg *tls.Config) ActorOption {
	return func(o *actorOptions) { o.tls = cfg }
}

// remoteTLSOptions are the protoactor remote options for mutual TLS with
// cfg. protoactor's default dial options are grpc.WithInsecure(), which
// WithDialOptions replaces.
func remoteTLSOptions(cfg *tls.Config) []remote.ConfigOption {
	return []remote.ConfigOption{
		remote.WithServerOptions(grpc.Creds(credentials.NewTLS(cfg))),
		remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cfg))),
	}
}

// ProcessActors returns the process's actor system, starting it and its
// remote endpoint on listen (host:port; port 0 picks a free one) at the
// first call. Later calls share the running system when listen names its
// address or the same host with port 0, and fail otherwise. Library logs go
// to the first caller's log (nil: discarded).
func ProcessActors(listen string, log *slog.Logger, opts ...ActorOption) (*Actors, error) {
	return ProcessActorsAdvertised(listen, "", log, opts...)
}

// ProcessActorsAdvertised is ProcessActors with the host other processes
// are told to reach this system at: advertise (an IP address, "" for the
// listen address itself) with the listened port. It lets the system listen
// on every interface (":7600", "0.0.0.0:7600"), whose address no peer can
// dial, and still be reached. With port 0 the free port is chosen before
// the remote starts, since the advertised address must carry it.
func ProcessActorsAdvertised(listen, advertise string, log *slog.Logger, options ...ActorOption) (*Actors, error) {
	var o actorOptions
	for _, opt := range options {
		opt(&o)
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("actor remote: bad listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("actor remote: bad port in %q", listen)
	}
	process.mu.Lock()
	defer process.mu.Unlock()
	if a := process.actors; a != nil {
		addr := a.Address()
		runHost, _, _ := net.SplitHostPort(addr)
		told := host // the host this call wants told to peers
		if advertise != "" {
			told = advertise
		}
		if (advertise == "" || advertise == runHost) && (listen == addr || listen == process.bind || (port == 0 && told == runHost)) {
			if want := o.tls != nil; want != process.tls {
				return nil, fmt.Errorf("actor remote: this process's actor system on %s runs %s; it cannot be shared by a caller that asks for %s (a process starts its remote once)",
					addr, TLSWord(process.tls), TLSWord(want))
			}
			return a, nil
		}
		return nil, fmt.Errorf("actor remote: this process's actor system already listens on %s (one per process); "+
			"listen on it, or on %s:0 to share it, instead of %s", addr, runHost, listen)
	}
	if process.stopped {
		return nil, errors.New("actor remote: this process's actor system has been shut down (a process starts its remote once)")
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var opts []remote.ConfigOption
	if o.tls != nil {
		opts = append(opts, remoteTLSOptions(o.tls)...)
	}
	if advertise != "" {
		if port == 0 {
			l, err := net.Listen("tcp", listen)
			if err != nil {
				return nil, &ListenError{What: "actor remote", Addr: listen, Err: err}
			}
			port = l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
		}
		opts = append(opts, remote.WithAdvertisedHost(net.JoinHostPort(advertise, strconv.Itoa(port))))
	}
	a, err := startActors(host, port, log, opts...)
	if err != nil {
		return nil, &ListenError{What: "actor remote", Addr: listen, Err: err}
	}
	process.actors, process.bind, process.tls = a, "", o.tls != nil
	if advertise != "" {
		process.bind = net.JoinHostPort(host, strconv.Itoa(port))
	}
	return a, nil
}

func startActors(host string, port int, log *slog.Logger, opts ...remote.ConfigOption) (a *Actors, err error) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return log.With("lib", "protoactor")
	}))
	if strings.Contains(host, ":") {
		// protoactor joins host and port with a colon, no brackets: an IPv6
		// host ("::", "::1") would give ":::7600", which cannot be listened on.
		host = "[" + host + "]"
	}
	r := remote.NewRemote(sys, remote.Configure(host, port, opts...))
	defer func() {
		// remote.Start panics when it cannot listen.
		if p := recover(); p != nil {
			sys.Shutdown()
			a, err = nil, fmt.Errorf("%v", p)
		}
	}()
	r.Start()
	return &Actors{System: sys, Remote: r}, nil
}

// ListenError is a well-formed address that could not be listened on (it
// is not this machine's, or its port is taken), as opposed to a malformed
// one or a failure after listening.
type ListenError struct {
	What string // "gossip", "actor remote"
	Addr string
	Err  error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("%s: cannot listen on %s: %v", e.What, e.Addr, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// Address is the remote address other processes use to reach this system.
func (a *Actors) Address() string { return a.System.Address() }

// Shutdown stops remoting and the actor system for the rest of the
// process's life (ProcessActors fails afterwards). Call it only when the
// process is done with actors, e.g. just before a command exits.
func (a *Actors) Shutdown() {
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.actors != a {
		return
	}
	process.actors, process.bind, process.tls, process.stopped = nil, "", false, true
	a.Remote.Shutdown(false)
	a.System.Shutdown()
}

// TLSWord says whether an actor port runs mutual TLS, for messages:
// "with TLS" or "without TLS".
func TLSWord(on bool) string {
	if on {
		return "with TLS"
	}
	return "without TLS"
}

// CheckTLSPeer checks that the actor port at addr (host:port) accepts this
// process's mutual TLS (cfg, from LoadTLS): it verifies the peer's
// certificate against cfg.RootCAs for addr's host, presents cfg's
// certificate, and waits for the peer's first bytes. Under TLS 1.3 the
// server checks the client's certificate only after the client's side of
// the handshake is done, so its refusal (an alert such as "unknown
// certificate authority" or "certificate required") arrives with the first
// read; a gRPC server that accepted sends its HTTP/2 settings at once.
func CheckTLSPeer(addr string, cfg *tls.Config, timeout time.Duration) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	c := cfg.Clone()
	c.ServerName = host
	c.NextProtos = []string{"h2"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, c)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("TLS handshake done but no answer within %s (is %s a gpusched actor port?)", timeout, addr)
		}
		return err
	}
	return nil
}
