package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/gpusched/gpusched/transport"
)

// serve refuses a partial or bad set of security files at start, naming
// the flag, before it starts NATS or listens (the NATS URL here is
// unreachable: a set that got past the checks fails on it instead).
func TestServeSecurityFlagsChecked(t *testing.T) {
	dir := t.TempDir()
	good, err := transport.WriteCerts(filepath.Join(dir, "good"), []string{"127.0.0.1"}, transport.CertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := transport.WriteCerts(filepath.Join(dir, "other"), []string{"127.0.0.1"}, transport.CertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shortKey := filepath.Join(dir, "short.key")
	if err := os.WriteFile(shortKey, []byte("c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := []string{"serve", "--nats-url", "nats://127.0.0.1:1", "--listen", "127.0.0.1:0", "--gossip", "127.0.0.1:0"}
	for _, c := range []struct {
		extra []string
		want  []string
	}{
		{[]string{"--tls-cert", good.Cert}, []string{"--tls-key", "--tls-ca", "all three"}},
		{[]string{"--tls-cert", good.Cert, "--tls-key", good.Key, "--tls-ca", filepath.Join(dir, "nope.pem")}, []string{"--tls-ca", "nope.pem"}},
		{[]string{"--tls-cert", good.Cert, "--tls-key", other.Key, "--tls-ca", good.CA}, []string{"--tls-key", "does not match"}},
		{[]string{"--tls-cert", good.Cert, "--tls-key", good.Key, "--tls-ca", good.Key}, []string{"--tls-ca", "no PEM certificate"}},
		{[]string{"--gossip-key-file", shortKey}, []string{"--gossip-key-file", "5 bytes"}},
	} {
		args := append(append([]string{}, serve...), c.extra...)
		_, _, err := runCoordinator(t, args...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want one containing %q", strings.Join(c.extra, " "), err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), "NATS") {
			t.Errorf("%s: got as far as NATS: %v", strings.Join(c.extra, " "), err)
		}
	}
}

// certs writes a CA, a certificate for --hosts and a gossip key that
// serve and node accept; without --hosts it is refused naming the flag.
func TestCertsCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "certs")
	if _, _, err := runCoordinator(t, "certs", "--out", out, "--hosts", "127.0.0.1, 10.0.0.5,node1.lab"); err != nil {
		t.Fatal(err)
	}
	f := transport.SecurityFlags{TLSCert: filepath.Join(out, transport.CertFile), TLSKey: filepath.Join(out, transport.KeyFile),
		TLSCA: filepath.Join(out, transport.CAFile), GossipKeyFile: filepath.Join(out, transport.GossipKeyFile)}
	sec, err := f.Load()
	if err != nil {
		t.Fatalf("the written files do not load: %v", err)
	}
	leaf := sec.TLS.Certificates[0].Leaf
	for _, h := range []string{"127.0.0.1", "10.0.0.5", "node1.lab"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("SAN %s: %v", h, err)
		}
	}
	if _, _, err := runCoordinator(t, "certs", "--out", out, "--hosts", "127.0.0.1"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("certs over existing files: %v, want a refusal", err)
	}
	if _, _, err := runCoordinator(t, "certs", "--out", filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "--hosts") {
		t.Errorf("certs without --hosts: %v, want an error naming --hosts", err)
	}
	// A kept CA issues a host's files later; they load as the flags'.
	caDir, hostDir := filepath.Join(t.TempDir(), "ca"), filepath.Join(t.TempDir(), "n9")
	if _, stderr, err := runCoordinator(t, "certs", "--out", caDir, "--hosts", "127.0.0.1", "--keep-ca-key"); err != nil || !strings.Contains(stderr, "certs --ca "+caDir+" --hosts HOST --out DIR") {
		t.Fatalf("certs --keep-ca-key: %v, stderr %q; want it to say how to issue a host's files", err, stderr)
	}
	_, stderr, err := runCoordinator(t, "certs", "--ca", caDir, "--hosts", "10.0.0.9", "--out", hostDir)
	if err != nil || !strings.Contains(stderr, "--gossip-key-file "+filepath.Join(hostDir, transport.GossipKeyFile)) {
		t.Fatalf("certs --ca: %v, stderr %q", err, stderr)
	}
	hf := transport.SecurityFlags{TLSCert: filepath.Join(hostDir, transport.CertFile), TLSKey: filepath.Join(hostDir, transport.KeyFile),
		TLSCA: filepath.Join(hostDir, transport.CAFile), GossipKeyFile: filepath.Join(hostDir, transport.GossipKeyFile)}
	if sec, err := hf.Load(); err != nil {
		t.Errorf("the host's files do not load: %v", err)
	} else if err := sec.TLS.Certificates[0].Leaf.VerifyHostname("10.0.0.9"); err != nil {
		t.Errorf("host SAN: %v", err)
	}
	if _, _, err := runCoordinator(t, "certs", "--ca", out, "--hosts", "10.0.0.9", "--out", filepath.Join(t.TempDir(), "y")); err == nil || !strings.Contains(err.Error(), "--keep-ca-key") {
		t.Errorf("certs --ca with a directory without the CA's key: %v, want an error naming --keep-ca-key", err)
	}
}

// The client commands pass --nats-token (or GPUSCHED_NATS_TOKEN) to NATS:
// a coordinator's embedded server started with a token refuses them
// without it, naming the flag, and answers them with it.
func TestClientNATSToken(t *testing.T) {
	e, err := transport.StartEmbedded(transport.EmbeddedOptions{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := transport.Connect(e.ClientURL(), "fake-coordinator", nats.Token("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe(transport.APIPrefix+transport.VerbList, func(m *nats.Msg) { _ = m.Respond([]byte(`{"jobs":[]}`)) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCoordinator(t, "list", "--nats-url", e.ClientURL(), "--timeout", "3s"); err == nil || !strings.Contains(err.Error(), "--nats-token") {
		t.Errorf("list without the token: %v; want an error naming --nats-token", err)
	}
	if _, _, err := runCoordinator(t, "list", "--nats-url", e.ClientURL(), "--timeout", "3s", "--nats-token", "s3cret"); err != nil {
		t.Errorf("list with the token: %v", err)
	}
}
