package transport

import (
	"crypto/tls"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// twoCAs writes, in a new directory of the test's, the files of two
// unrelated CAs for 127.0.0.1: dir/good and dir/other.
func twoCAs(t *testing.T) (dir string, good, other CertFiles) {
	t.Helper()
	dir = t.TempDir()
	var err error
	if good, err = WriteCerts(filepath.Join(dir, "good"), []string{"127.0.0.1"}, CertOptions{}); err != nil {
		t.Fatal(err)
	}
	if other, err = WriteCerts(filepath.Join(dir, "other"), []string{"127.0.0.1"}, CertOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir, good, other
}

// writeFile writes data to a new file in dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The TLS flags give a mutual-TLS configuration (client certificates
// required and verified against the CA, TLS 1.3) when all three name good
// files, none when none is given, and every other combination is refused
// at start with an error naming the flag at fault and what to do.
func TestLoadTLS(t *testing.T) {
	dir, good, other := twoCAs(t)
	ca, err := NewCA("old", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expCert, expKey, err := ca.Issue([]string{"127.0.0.1"}, -2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expCertF, expKeyF, expCAF := writeFile(t, dir, "exp.pem", expCert), writeFile(t, dir, "exp-key.pem", expKey), writeFile(t, dir, "exp-ca.pem", ca.PEM)
	garbage := writeFile(t, dir, "garbage.pem", []byte("not a pem file\n"))
	missing := filepath.Join(dir, "no-such.pem")

	cfg, err := LoadTLS("", "", "")
	if err != nil || cfg != nil {
		t.Fatalf("no TLS flags: %v, %v; want no TLS and no error", cfg, err)
	}
	cfg, err = LoadTLS(good.Cert, good.Key, good.CA)
	if err != nil {
		t.Fatalf("good files: %v", err)
	}
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.MinVersion != tls.VersionTLS13 || cfg.ClientCAs == nil || cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("config: client auth %v, min version %x, client CAs %v, root CAs %v, %d certificates; want mutual TLS 1.3",
			cfg.ClientAuth, cfg.MinVersion, cfg.ClientCAs != nil, cfg.RootCAs != nil, len(cfg.Certificates))
	}

	for _, c := range []struct {
		what          string
		cert, key, ca string
		want          []string
	}{
		{"cert only", good.Cert, "", "", []string{"--tls-key", "--tls-ca", "all three"}},
		{"cert and key", good.Cert, good.Key, "", []string{"--tls-ca", "all three"}},
		{"ca only", "", "", good.CA, []string{"--tls-cert", "--tls-key", "all three"}},
		{"missing cert", missing, good.Key, good.CA, []string{"--tls-cert", missing}},
		{"missing key", good.Cert, missing, good.CA, []string{"--tls-key", missing}},
		{"missing ca", good.Cert, good.Key, missing, []string{"--tls-ca", missing}},
		{"cert not PEM", garbage, good.Key, good.CA, []string{"--tls-cert", "no PEM certificate"}},
		{"key not PEM", good.Cert, garbage, good.CA, []string{"--tls-key", garbage}},
		{"key of another cert", good.Cert, other.Key, good.CA, []string{"--tls-key", "does not match", "--tls-cert"}},
		{"ca holds no certificate", good.Cert, good.Key, good.Key, []string{"--tls-ca", "no PEM certificate"}},
		{"ca is another", good.Cert, good.Key, other.CA, []string{"--tls-cert", "--tls-ca", "not signed"}},
		{"expired cert", expCertF, expKeyF, expCAF, []string{"--tls-cert", "expired"}},
	} {
		cfg, err := LoadTLS(c.cert, c.key, c.ca)
		if err == nil {
			t.Errorf("%s: accepted (%v)", c.what, cfg != nil)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q, want it to contain %q", c.what, err, w)
			}
		}
	}
}

// --gossip-key-file holds a base64 AES key of 16, 24 or 32 bytes; anything
// else is refused naming the flag.
func TestLoadGossipKey(t *testing.T) {
	dir := t.TempDir()
	if k, err := LoadGossipKey(""); err != nil || k != nil {
		t.Fatalf("no key file: %v, %v; want no key", k, err)
	}
	for _, n := range []int{16, 24, 32} {
		raw := make([]byte, n)
		raw[0] = byte(n)
		f := writeFile(t, dir, "ok.key", []byte(base64.StdEncoding.EncodeToString(raw)+"\n"))
		k, err := LoadGossipKey(f)
		if err != nil || len(k) != n || k[0] != byte(n) {
			t.Errorf("%d-byte key: %v, %v", n, k, err)
		}
	}
	for _, c := range []struct {
		what, content string
		want          string
	}{
		{"not base64", "this is not base64!!\n", "base64"},
		{"10 bytes", base64.StdEncoding.EncodeToString(make([]byte, 10)), "10 bytes"},
		{"empty", "", "0 bytes"},
	} {
		f := writeFile(t, dir, "bad.key", []byte(c.content))
		_, err := LoadGossipKey(f)
		if err == nil || !strings.Contains(err.Error(), "--gossip-key-file") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming --gossip-key-file and saying %q", c.what, err, c.want)
		}
	}
	if _, err := LoadGossipKey(filepath.Join(dir, "missing.key")); err == nil || !strings.Contains(err.Error(), "--gossip-key-file") {
		t.Errorf("missing file: %v, want an error naming --gossip-key-file", err)
	}
}
