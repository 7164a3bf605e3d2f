package clustertest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/transport"
)

// secureJob is a short job: a few iterations of a small MLP.
const secureJob = "name: secure-mlp\nmodel: mlp\nbatch: 8\niterations: 5\n"

// writeCerts writes a CA, a certificate valid for every address the
// harness's processes use (127.0.0.1 to 127.0.0.12: the coordinator and the
// nodes' own loopback addresses, which peers dial and so verify) and a
// gossip key into a directory of the test's, with the code `coordinator
// certs` runs.
func writeCerts(t *testing.T, name string) transport.CertFiles {
	return writeCertsWith(t, name, transport.CertOptions{})
}

// writeCertsWith is writeCerts with certs' options (--keep-ca-key, --ca).
func writeCertsWith(t *testing.T, name string, opt transport.CertOptions) transport.CertFiles {
	t.Helper()
	hosts := []string{"localhost"}
	for i := 1; i <= 12; i++ {
		hosts = append(hosts, fmt.Sprintf("127.0.0.%d", i))
	}
	f, err := transport.WriteCerts(filepath.Join(t.TempDir(), name), hosts, opt)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// secureArgs are the security flags for the files of f.
func secureArgs(f transport.CertFiles) []string {
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA, "--gossip-key-file", f.GossipKey}
}

// A coordinator and a node with certificates of one CA and one gossip key:
// the node joins and a job placed on it completes, so the coordinator and
// the node reach each other's actor port over mutual TLS both ways (each
// dials the other's advertised address and verifies it against the SANs).
// The node's certificate and key are its own, issued later from the kept
// CA (certs --keep-ca-key, then certs --ca), as a host added to a running
// cluster gets them.
func TestClusterTLSJobCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator and a node process; run without -short")
	}
	certs := writeCertsWith(t, "cluster", transport.CertOptions{KeepCAKey: true})
	node := writeCertsWith(t, "n1", transport.CertOptions{CADir: filepath.Dir(certs.CA)})
	h := New(t, Options{BinDir: binaries(t)})
	h.StartCoordinator(secureArgs(certs)...)
	h.StartNode("n1", secureArgs(node)...)
	jobs := h.SubmitYAML(secureJob)
	r := h.WaitJobState(jobs[0].ID, actors.StateCompleted, 30*time.Second)
	if r.Iteration != r.Total || r.Total != 5 {
		t.Fatalf("job %s completed at %d/%d iterations, want 5/5", r.ID, r.Iteration, r.Total)
	}
}

// A node whose certificate another CA signed (its --tls-ca that CA's too)
// refuses to start: its check of the coordinator's actor port fails on the
// certificate, before it joins the gossip even though its gossip key is the
// cluster's. The coordinator does not list it and its jobs are as before.
func TestClusterTLSForeignCARefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator and a node process; run without -short")
	}
	certs, foreign := writeCerts(t, "cluster"), writeCerts(t, "foreign")
	h := New(t, Options{BinDir: binaries(t)})
	h.StartCoordinator(secureArgs(certs)...)
	jobs := h.SubmitYAML(secureJob) // no node yet: it waits
	var before actors.ListReply
	if err := h.CLIJSON(&before, "list"); err != nil {
		t.Fatal(err)
	}
	args := []string{"--tls-cert", foreign.Cert, "--tls-key", foreign.Key, "--tls-ca", foreign.CA, "--gossip-key-file", certs.GossipKey}
	stderr := h.StartNodeFails("n-foreign", args...)
	if !strings.Contains(stderr, "certificate") || !strings.Contains(stderr, "TLS") || !strings.Contains(stderr, h.ActorAddr) {
		t.Fatalf("node with a foreign CA: stderr %q; want an error naming the coordinator's address, TLS and the certificate", tail(stderr, 5))
	}
	nodes, err := h.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 0 {
		t.Fatalf("coordinator lists %d node(s) after a node with a foreign CA tried to start: %+v", len(nodes), nodes)
	}
	var after actors.ListReply
	if err := h.CLIJSON(&after, "list"); err != nil {
		t.Fatal(err)
	}
	if len(after.Jobs) != len(before.Jobs) || len(after.Jobs) != 1 || after.Jobs[0].ID != jobs[0].ID || after.Jobs[0].State != actors.StatePending {
		t.Fatalf("jobs after the refused node: %d, want the one pending job %s as before", len(after.Jobs), jobs[0].ID)
	}
}

// With --gossip-key-file on the coordinator, a node with another key, or
// none, cannot join (memberlist drops what it cannot decrypt): it exits
// with an error naming --gossip-key-file and is never listed. A node with
// the coordinator's key joins.
func TestClusterGossipKeyMismatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator and node processes; run without -short")
	}
	certs, other := writeCerts(t, "cluster"), writeCerts(t, "other")
	h := New(t, Options{BinDir: binaries(t)})
	h.StartCoordinator("--gossip-key-file", certs.GossipKey)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"n-otherkey", []string{"--gossip-key-file", other.GossipKey}},
		{"n-nokey", nil},
	} {
		stderr := h.StartNodeFails(c.name, c.args...)
		if !strings.Contains(stderr, "--gossip-key-file") {
			t.Errorf("%s: stderr %q; want an error naming --gossip-key-file", c.name, tail(stderr, 5))
		}
	}
	if nodes, err := h.Nodes(); err != nil || len(nodes) != 0 {
		t.Fatalf("nodes after joins with the wrong key: %+v, %v; want none", nodes, err)
	}
	h.StartNode("n-samekey", "--gossip-key-file", certs.GossipKey)
	nodes, err := h.Nodes()
	if err != nil || len(nodes) != 1 || nodes[0].Name != "n-samekey" {
		t.Fatalf("nodes: %+v, %v; want n-samekey only", nodes, err)
	}
}

// A coordinator given a NATS token (here through GPUSCHED_NATS_TOKEN, which
// its processes and the CLI inherit) refuses CLI commands with another
// token, naming --nats-token, and serves those with it.
func TestClusterNATSToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator process; run without -short")
	}
	t.Setenv(transport.NATSTokenEnv, "cluster-s3cret")
	h := New(t, Options{BinDir: binaries(t)})
	h.StartCoordinator()
	if _, err := h.CLI("list", "--nats-token", "wrong"); err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "--nats-token") {
		t.Fatalf("list with the wrong token: %v; want a refusal naming --nats-token", err)
	}
	if _, err := h.CLI("list"); err != nil {
		t.Fatalf("list with the token from %s: %v", transport.NATSTokenEnv, err)
	}
}
