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

// CertOptions are WriteCerts' choices beyond the directory and hosts.
type CertOptions struct {
	// KeepCAKey also writes the new CA's private key to ca-key.pem
	// (owner-only), so that certificates for more hosts can be issued
	// later with CADir. Whoever holds it can issue certificates the
	// cluster trusts: keep it off the cluster's machines.
	KeepCAKey bool
	// CADir, when set, issues the certificate from the CA in CADir
	// (ca.pem and ca-key.pem, as KeepCAKey wrote them) instead of
	// making a new CA; ca.pem and, when CADir has one, gossip.key are
	// copied into the output directory, so that it holds everything
	// one more host needs.
	CADir string
}

// CAKeyFile is the CA's private key, written only with --keep-ca-key.
const CAKeyFile = "ca-key.pem"

// WriteCerts makes a CA (or loads CADir's) and a certificate for hosts
// signed by it (see Issue), valid for CertValidity (at most until the CA
// expires), and a gossip key (or CADir's), and writes them to dir (created
// if need be) as ca.pem, cert.pem, key.pem and gossip.key, with ca-key.pem
// under KeepCAKey; the key files are readable by their owner only. Without
// KeepCAKey the CA's own key is not kept, so adding a host means running it
// again with every host and handing the new files to every process. It
// refuses to overwrite any of the files and checks everything before
// writing any.
func WriteCerts(dir string, hosts []string, opt CertOptions) (CertFiles, error) {
	files := CertFiles{CA: filepath.Join(dir, CAFile), Cert: filepath.Join(dir, CertFile), Key: filepath.Join(dir, KeyFile), GossipKey: filepath.Join(dir, GossipKeyFile)}
	if err := CheckHosts(hosts); err != nil {
		return files, err
	}
	if opt.KeepCAKey && opt.CADir != "" {
		return files, errors.New("--keep-ca-key makes a new CA and --ca uses an existing one: give one of them")
	}
	var (
		ca        *CA
		gossipKey []byte
		err       error
	)
	if opt.CADir != "" {
		if ca, err = LoadCA(opt.CADir); err != nil {
			return files, err
		}
		switch b, err := os.ReadFile(filepath.Join(opt.CADir, GossipKeyFile)); {
		case err == nil:
			gossipKey = b
		case errors.Is(err, fs.ErrNotExist):
			files.GossipKey = "" // nothing to copy
		default:
			return files, fmt.Errorf("--ca %s: %w", opt.CADir, err)
		}
	} else {
		if ca, err = NewCA("gpusched CA", CertValidity); err != nil {
			return files, err
		}
		gossipKey = []byte(NewGossipKey() + "\n")
	}
	type out struct {
		path string
		data []byte
		mode os.FileMode
	}
	var writes []out
	if opt.KeepCAKey {
		keyDER, err := x509.MarshalECPrivateKey(ca.key)
		if err != nil {
			return files, err
		}
		writes = append(writes, out{filepath.Join(dir, CAKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600})
	}
	validFor := min(CertValidity, time.Until(ca.cert.NotAfter))
	if validFor <= 0 {
		return files, fmt.Errorf("--ca %s: the CA in %s expired on %s; make a new one (certs --keep-ca-key) and hand out its files", opt.CADir, CAFile, ca.cert.NotAfter.Format(time.DateOnly))
	}
	certPEM, keyPEM, err := ca.Issue(hosts, validFor)
	if err != nil {
		return files, err
	}
	writes = append(writes, out{files.CA, ca.PEM, 0o644}, out{files.Cert, certPEM, 0o644}, out{files.Key, keyPEM, 0o600})
	if files.GossipKey != "" {
		writes = append(writes, out{files.GossipKey, gossipKey, 0o600})
	}
	for _, w := range writes {
		if _, err := os.Lstat(w.path); err == nil {
			return files, fmt.Errorf("%s exists; remove it or choose another --out directory (existing keys are never overwritten)", w.path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return files, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return files, err
	}
	for _, w := range writes {
		if err := writeNew(w.path, w.data, w.mode); err != nil {
			return files, err
		}
	}
	return files, nil
}

// LoadCA reads the CA that certs --keep-ca-key wrote to dir (ca.pem and
// ca-key.pem), checking that the certificate is a CA's and that the key is
// its key.
func LoadCA(dir string) (*CA, error) {
	fail := func(format string, a ...any) (*CA, error) {
		return nil, fmt.Errorf("--ca %s: "+format, append([]any{dir}, a...)...)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return fail("%v", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return fail("no %s there: only certs --keep-ca-key keeps the CA's key; without it, run certs again with every host", CAKeyFile)
	} else if err != nil {
		return fail("%v", err)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return fail("%s holds no PEM certificate", CAFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return fail("%s: %v", CAFile, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return fail("%s is not a CA certificate (it cannot sign others)", CAFile)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "EC PRIVATE KEY" {
		return fail("%s holds no PEM EC private key", CAKeyFile)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return fail("%s: %v", CAKeyFile, err)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return fail("%s is not the key of %s", CAKeyFile, CAFile)
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(cb)}, nil
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
