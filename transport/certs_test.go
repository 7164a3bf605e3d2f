package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The certificate WriteCerts issues verifies against its CA for both
// server and client use, carries every --hosts entry as a SAN (IPs as IP
// SANs, names as DNS SANs), is ECDSA P-256 and valid for about a year; the
// key file matches it and the gossip key decodes to 32 bytes.
func TestWriteCerts(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteCerts(dir, []string{"127.0.0.1", "10.0.0.5", "node-1.lab", "::1"}, CertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	caPEM := mustRead(t, files.CA)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", files.CA)
	}
	leaf := leafOf(t, files)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("certificate does not verify against the CA for usage %v: %v", usage, err)
		}
	}
	for _, h := range []string{"127.0.0.1", "10.0.0.5", "node-1.lab", "::1"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("SAN %s: %v", h, err)
		}
	}
	if err := leaf.VerifyHostname("10.0.0.6"); err == nil {
		t.Error("the certificate is valid for 10.0.0.6, which --hosts did not name")
	}
	if !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("10.0.0.5")) }) || !slices.Contains(leaf.DNSNames, "node-1.lab") {
		t.Errorf("IP SANs %v, DNS SANs %v", leaf.IPAddresses, leaf.DNSNames)
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", leaf.PublicKey)
	}
	if d := leaf.NotAfter.Sub(time.Now()); d < 364*24*time.Hour || d > 367*24*time.Hour {
		t.Errorf("certificate valid for %s more, want about a year", d)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(mustRead(t, files.GossipKey))))
	if err != nil || len(key) != 32 {
		t.Errorf("gossip key: %d bytes, %v; want 32 base64-encoded bytes", len(key), err)
	}
	// The private keys are readable by their owner only.
	for _, f := range []string{files.Key, files.GossipKey} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, st.Mode().Perm(), err)
		}
	}
	// The CA's own key is not written: whoever holds the output could
	// otherwise issue certificates the cluster trusts.
	for _, name := range []string{"ca-key.pem", "ca.key"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was written", name)
		}
	}
	if b, _ := pem.Decode(caPEM); b == nil || b.Type != "CERTIFICATE" {
		t.Errorf("%s is not a PEM certificate", files.CA)
	}
}

// Two runs make two CAs: a certificate of one does not verify against the
// other (the cluster test's node with a foreign CA relies on it). Existing
// files are not overwritten, and bad --hosts are refused naming the flag.
func TestWriteCertsRefusals(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	fa, err := WriteCerts(a, []string{"127.0.0.1"}, CertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := WriteCerts(b, []string{"127.0.0.1"}, CertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, fa.CA))
	pair, err := tls.LoadX509KeyPair(fb.Cert, fb.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Error("a certificate of the second CA verifies against the first")
	}
	if _, err := WriteCerts(a, []string{"127.0.0.1"}, CertOptions{}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("writing over existing files: %v, want a refusal", err)
	}
	for _, hosts := range [][]string{nil, {""}, {"127.0.0.1", " "}, {"a b"}, {"10.0.0.1:7600"}} {
		if _, err := WriteCerts(t.TempDir(), hosts, CertOptions{}); err == nil || !strings.Contains(err.Error(), "--hosts") {
			t.Errorf("hosts %q: %v, want a refusal naming --hosts", hosts, err)
		}
	}
}

func mustRead(t *testing.T, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// leafOf parses the certificate in files.Cert.
func leafOf(t *testing.T, files CertFiles) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatalf("cert and key do not load as a pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// A CA kept with KeepCAKey issues a certificate per host later (CADir):
// the host's directory gets the same ca.pem and gossip.key, its own
// certificate (verifying against the CA, SANs only its hosts) and key, and
// nothing is written for a CA directory without the key, a key that is not
// the CA's, a certificate that is not a CA's, or both options at once.
func TestWriteCertsPerHost(t *testing.T) {
	caDir := t.TempDir()
	root, err := WriteCerts(caDir, []string{"127.0.0.1"}, CertOptions{KeepCAKey: true})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(caDir, CAKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want it written, owner-only", CAKeyFile, err, fi.Mode())
	}
	hostDir := filepath.Join(t.TempDir(), "n1")
	host, err := WriteCerts(hostDir, []string{"10.0.0.5", "n1.lab"}, CertOptions{CADir: caDir})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mustRead(t, host.CA), mustRead(t, root.CA)) || !slices.Equal(mustRead(t, host.GossipKey), mustRead(t, root.GossipKey)) {
		t.Error("the host's ca.pem or gossip.key differ from the CA directory's")
	}
	if _, err := os.Stat(filepath.Join(hostDir, CAKeyFile)); err == nil {
		t.Errorf("the CA's key was copied to the host's directory")
	}
	if fi, err := os.Stat(host.Key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v; want owner-only", host.Key, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, root.CA))
	leaf := leafOf(t, host)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("the host's certificate does not verify against the kept CA for %v: %v", usage, err)
		}
	}
	if leaf.VerifyHostname("10.0.0.5") != nil || leaf.VerifyHostname("n1.lab") != nil || leaf.VerifyHostname("127.0.0.1") == nil {
		t.Errorf("host SANs: IPs %v, names %v; want 10.0.0.5 and n1.lab only", leaf.IPAddresses, leaf.DNSNames)
	}
	if leaf.SerialNumber.Cmp(leafOf(t, root).SerialNumber) == 0 {
		t.Error("the host's certificate has the CA directory's certificate's serial")
	}

	// Refusals: each names --ca and what to do, and writes nothing.
	noKey := t.TempDir()
	if _, err := WriteCerts(noKey, []string{"127.0.0.1"}, CertOptions{}); err != nil {
		t.Fatal(err)
	}
	otherCA := t.TempDir()
	if _, err := WriteCerts(otherCA, []string{"127.0.0.1"}, CertOptions{KeepCAKey: true}); err != nil {
		t.Fatal(err)
	}
	wrongKey := t.TempDir()
	copyFile(t, root.CA, filepath.Join(wrongKey, CAFile))
	copyFile(t, filepath.Join(otherCA, CAKeyFile), filepath.Join(wrongKey, CAKeyFile))
	leafAsCA := t.TempDir()
	copyFile(t, root.Cert, filepath.Join(leafAsCA, CAFile))
	copyFile(t, root.Key, filepath.Join(leafAsCA, CAKeyFile))
	for _, c := range []struct {
		opt  CertOptions
		want string
	}{
		{CertOptions{CADir: noKey}, "only certs --keep-ca-key keeps the CA's key"},
		{CertOptions{CADir: wrongKey}, "ca-key.pem is not the key of ca.pem"},
		{CertOptions{CADir: leafAsCA}, "ca.pem is not a CA certificate"},
		{CertOptions{CADir: t.TempDir()}, "ca.pem"},
		{CertOptions{CADir: caDir, KeepCAKey: true}, "give one of them"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		_, err := WriteCerts(out, []string{"127.0.0.1"}, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.opt, err, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%+v: %s was created", c.opt, out)
		}
	}
	// Files already there: nothing is written, not even the ones missing.
	if err := os.Remove(host.Cert); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteCerts(hostDir, []string{"10.0.0.5"}, CertOptions{CADir: caDir}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("issuing over a host's files: %v, want a refusal", err)
	}
	if _, err := os.Stat(host.Cert); err == nil {
		t.Errorf("%s was written though the other files exist", host.Cert)
	}
	// A CA directory without a gossip key: the host gets none.
	noGossip := t.TempDir()
	copyFile(t, root.CA, filepath.Join(noGossip, CAFile))
	copyFile(t, filepath.Join(caDir, CAKeyFile), filepath.Join(noGossip, CAKeyFile))
	f, err := WriteCerts(filepath.Join(t.TempDir(), "g"), []string{"127.0.0.1"}, CertOptions{CADir: noGossip})
	if err != nil || f.GossipKey != "" {
		t.Errorf("CA directory without gossip.key: %v, gossip key file %q; want none written", err, f.GossipKey)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to, mustRead(t, from), 0o600); err != nil {
		t.Fatal(err)
	}
}
