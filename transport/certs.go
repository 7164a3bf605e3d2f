package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CertValidity is how long the certificates `coordinator certs` writes are
// valid.
const CertValidity = 365 * 24 * time.Hour

// CertFiles are the files WriteCerts writes: the CA certificate (no key:
// see WriteCerts), a certificate and key signed by it for both server and
// client use, and a gossip key.
type CertFiles struct {
	CA, Cert, Key, GossipKey string
}

// Names of the files in WriteCerts' directory.
const (
	CAFile        = "ca.pem"
	CertFile      = "cert.pem"
	KeyFile       = "key.pem"
	GossipKeyFile = "gossip.key"
)

// CA is a certificate authority held in memory.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded (what --tls-ca reads).
	PEM []byte
}

// NewCA makes a self-signed ECDSA P-256 CA valid for validFor.
func NewCA(name string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"gpusched"}},
		NotBefore:             now.Add(-time.Hour), // some clock skew between machines
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue makes an ECDSA P-256 key and a certificate for it signed by ca,
// valid for validFor, usable as both a TLS server and client certificate,
// with hosts as its SANs (IP addresses as IP SANs, the rest as DNS names):
// peers verify a process's certificate against the host of the address
// they dial, i.e. the advertised actor address. hosts are checked as
// CheckHosts does.
func (ca *CA) Issue(hosts []string, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	if err := CheckHosts(hosts); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{"gpusched"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// CheckHosts checks certs' --hosts entries: at least one, each an IP
// address or a DNS name (no port, no spaces).
func CheckHosts(hosts []string) error {
	if len(hosts) == 0 {
		return errors.New("--hosts: give at least one IP address or DNS name the processes are reached at (their --advertise or --listen host), e.g. --hosts 127.0.0.1,10.0.0.5")
	}
	for _, h := range hosts {
		if net.ParseIP(h) != nil {
			continue
		}
		if !validDNSName(h) {
			return fmt.Errorf("--hosts: %q is not an IP address or DNS name (comma-separated, no ports or spaces), e.g. --hosts 127.0.0.1,10.0.0.5,node1.lab", h)
		}
	}
	return nil
}

func validDNSName(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// NewGossipKey returns a random 32-byte gossip key, base64-encoded (what
// --gossip-key-file holds).
func NewGossipKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return base64.StdEncoding.EncodeToString(b[:])
}

// WriteCerts makes a new CA and a certificate for hosts signed by it (see
// Issue), valid for CertValidity, and a gossip key, and writes them to dir
// (created if need be) as ca.pem, cert.pem, key.pem and gossip.key; the key
// files are readable by their owner only. The CA's own key is not kept:
// whoever held it could issue certificates the cluster trusts, so adding a
// host means running it again with every host and handing the new files to
// every process. It refuses to overwrite any of the files.
func WriteCerts(dir string, hosts []string) (CertFiles, error) {
	files := CertFiles{CA: filepath.Join(dir, CAFile), Cert: filepath.Join(dir, CertFile), Key: filepath.Join(dir, KeyFile), GossipKey: filepath.Join(dir, GossipKeyFile)}
	if err := CheckHosts(hosts); err != nil {
		return files, err
	}
	for _, f := range []string{files.CA, files.Cert, files.Key, files.GossipKey} {
		if _, err := os.Lstat(f); err == nil {
			return files, fmt.Errorf("%s exists; remove it or choose another --out directory (existing keys are never overwritten)", f)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return files, err
		}
	}
	ca, err := NewCA("gpusched CA", CertValidity)
	if err != nil {
		return files, err
	}
	certPEM, keyPEM, err := ca.Issue(hosts, CertValidity)
	if err != nil {
		return files, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return files, err
	}
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{files.CA, ca.PEM, 0o644},
		{files.Cert, certPEM, 0o644},
		{files.Key, keyPEM, 0o600},
		{files.GossipKey, []byte(NewGossipKey() + "\n"), 0o600},
	} {
		if err := writeNew(w.path, w.data, w.mode); err != nil {
			return files, err
		}
	}
	return files, nil
}

// writeNew writes a file that must not exist yet, with mode perm.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
