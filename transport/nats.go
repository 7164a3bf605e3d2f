// Package transport sets up the runtime's network plumbing: protoactor-go
// remoting, hashicorp/memberlist gossip, and NATS (an embedded nats-server
// with JetStream, or an external one) for the job store, events and the
// CLI's request/reply API.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// DefaultNATSURL is where the CLI looks for the coordinator's NATS server.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// EmbeddedOptions configure an embedded NATS server.
type EmbeddedOptions struct {
	// Listen is host:port for clients ("127.0.0.1:4222"); port 0 picks a free one.
	Listen string
	// StoreDir holds JetStream data; it survives restarts.
	StoreDir string
	// Token, when set, is the authorization token every client must give
	// (nats.Token; coordinator serve --nats-token).
	Token string
}

// NATSTokenEnv names the environment variable that --nats-token defaults to.
const NATSTokenEnv = "GPUSCHED_NATS_TOKEN"

// Embedded is a nats-server running in this process with JetStream enabled.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts nats-server with JetStream and waits until it accepts
// clients.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:4222"
	}
	host, portStr, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: bad listen address %q: %w", o.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: bad port in %q", o.Listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if o.StoreDir == "" {
		return nil, errors.New("embedded NATS: a JetStream store directory is required (--data-dir)")
	}
	opts := &server.Options{
		ServerName: "gpusched",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		// No HTTP monitoring, no cluster: a single embedded server.
		HTTPPort:      0,
		Authorization: o.Token,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(15 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not start listening on %s within 15s (is the port in use?)", o.Listen)
	}
	return &Embedded{srv: srv}, nil
}

// ClientURL is the nats:// URL clients connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Shutdown stops the server and waits for it to exit.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// Connect dials NATS with a short timeout and an error that names the
// address tried and what to do next; opts are added (e.g. nats.Token).
func Connect(url, name string, opts ...nats.Option) (*nats.Conn, error) {
	if url == "" {
		url = DefaultNATSURL
	}
	nc, err := nats.Connect(url, append([]nats.Option{
		nats.Name(name),
		nats.Timeout(3 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
	}, opts...)...)
	if errors.Is(err, nats.ErrAuthorization) {
		return nil, fmt.Errorf("NATS at %s refused this client: %v (pass the coordinator's --nats-token, or set %s)", RedactURL(url), err, NATSTokenEnv)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach NATS at %s: %v", RedactURL(url), err)
	}
	return nc, nil
}

// RedactURL returns a NATS URL (or comma-separated list of them) with the
// credentials it may carry (nats://user:pass@host, nats://token@host)
// replaced by xxxxx, for errors and log lines.
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		scheme, rest := "", p
		if j := strings.Index(p, "://"); j >= 0 {
			scheme, rest = p[:j+3], p[j+3:]
		}
		auth, tail := rest, ""
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			auth, tail = rest[:j], rest[j:]
		}
		if at := strings.LastIndex(auth, "@"); at >= 0 {
			user := "xxxxx"
			if k := strings.Index(auth[:at], ":"); k >= 0 {
				user = auth[:k] + ":xxxxx"
			}
			auth = user + auth[at:]
		}
		parts[i] = scheme + auth + tail
	}
	return strings.Join(parts, ",")
}

// ctx returns a context bounded by d for JetStream calls.
func ctx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
