package transport

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/memberlist"
	"github.com/spf13/pflag"
)

// SecurityFlags are the transport security flags of `coordinator serve`
// and `node`: mutual TLS on the actor port and the gossip key. All empty
// (the default) runs without either.
type SecurityFlags struct {
	TLSCert, TLSKey, TLSCA string
	GossipKeyFile          string
}

// AddSecurityFlags registers --tls-cert, --tls-key, --tls-ca and
// --gossip-key-file on fs.
func AddSecurityFlags(fs *pflag.FlagSet, f *SecurityFlags) {
	fs.StringVar(&f.TLSCert, "tls-cert", "", "PEM certificate of this process for mutual TLS on the actor port (with --tls-key and --tls-ca); its SANs must hold the host peers dial (the --advertise or --listen host); \"coordinator certs\" writes one")
	fs.StringVar(&f.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.TLSCA, "tls-ca", "", "PEM CA certificate(s) that peers' certificates must be signed by")
	fs.StringVar(&f.GossipKeyFile, "gossip-key-file", "", "file holding the cluster's gossip encryption key: base64 of 16, 24 or 32 random bytes, the same on every process (\"coordinator certs\" writes one)")
}

// Security is what SecurityFlags load to: the actor port's TLS
// configuration (nil: plaintext) and the gossip key (nil: none).
type Security struct {
	TLS       *tls.Config
	GossipKey []byte
}

// Load reads and checks the files the flags name (see LoadTLS and
// LoadGossipKey).
func (f SecurityFlags) Load() (Security, error) {
	var s Security
	var err error
	if s.TLS, err = LoadTLS(f.TLSCert, f.TLSKey, f.TLSCA); err != nil {
		return Security{}, err
	}
	if s.GossipKey, err = LoadGossipKey(f.GossipKeyFile); err != nil {
		return Security{}, err
	}
	return s, nil
}

// LoadTLS builds the actor port's mutual-TLS configuration from the
// --tls-cert, --tls-key and --tls-ca files: this process presents cert
// both as a server and as a client, requires and verifies every peer's
// client certificate against ca, verifies the servers it dials against ca
// (by the host it dials: the certificate's SANs must hold it), and speaks
// TLS 1.3 only. With no file named it returns nil (plaintext). A partial
// set, an unreadable or malformed file, a key that does not match its
// certificate, a CA file without a certificate, and a certificate that ca
// does not verify (or that has expired) are refused with an error naming
// the flag.
func LoadTLS(cert, key, ca string) (*tls.Config, error) {
	if cert == "" && key == "" && ca == "" {
		return nil, nil
	}
	var missing []string
	for _, f := range []struct{ name, val string }{{"--tls-cert", cert}, {"--tls-key", key}, {"--tls-ca", ca}} {
		if f.val == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s: --tls-cert, --tls-key and --tls-ca go together; give all three to turn on mutual TLS on the actor port, or none to run without it", strings.Join(missing, " and "))
	}
	certPEM, err := os.ReadFile(cert)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s: %v", cert, err)
	}
	if !hasPEM(certPEM, "CERTIFICATE") {
		return nil, fmt.Errorf("--tls-cert %s holds no PEM certificate (-----BEGIN CERTIFICATE-----); pass the certificate file (`coordinator certs` writes %s)", cert, CertFile)
	}
	keyPEM, err := os.ReadFile(key)
	if err != nil {
		return nil, fmt.Errorf("--tls-key %s: %v", key, err)
	}
	caPEM, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca %s: %v", ca, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return nil, fmt.Errorf("--tls-key %s does not match --tls-cert %s (%v); pass the key written with that certificate", key, cert, err)
		}
		return nil, fmt.Errorf("--tls-key %s: %v (pass the PEM private key of --tls-cert; `coordinator certs` writes %s)", key, err, KeyFile)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate (-----BEGIN CERTIFICATE-----); pass the CA certificate (`coordinator certs` writes %s)", ca, CAFile)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s: %v", cert, err)
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	// Peers check this certificate against the same CA: one it does not
	// verify would be refused by every peer, far from its cause.
	for _, use := range []struct {
		usage x509.ExtKeyUsage
		as    string
	}{{x509.ExtKeyUsageServerAuth, "server"}, {x509.ExtKeyUsageClientAuth, "client"}} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use.usage}}); err != nil {
			var inv x509.CertificateInvalidError
			switch {
			case errors.As(err, &inv) && inv.Reason == x509.Expired:
				return nil, fmt.Errorf("--tls-cert %s has expired or is not yet valid (valid %s to %s): %v; issue a new one", cert,
					leaf.NotBefore.Format("2006-01-02 15:04"), leaf.NotAfter.Format("2006-01-02 15:04"), err)
			case errors.As(err, &inv) && inv.Reason == x509.IncompatibleUsage:
				return nil, fmt.Errorf("--tls-cert %s cannot be used as a TLS %s certificate (its extended key usage lacks %sAuth); every process both serves and dials, so it needs serverAuth and clientAuth", cert, use.as, use.as)
			default:
				return nil, fmt.Errorf("--tls-cert %s is not signed by a CA in --tls-ca %s (%v); peers using that CA would refuse it: pass the CA that issued it, or a certificate it issued", cert, ca, err)
			}
		}
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// hasPEM reports whether b holds a PEM block of type typ.
func hasPEM(b []byte, typ string) bool {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return false
		}
		if blk.Type == typ {
			return true
		}
	}
}

// LoadGossipKey reads --gossip-key-file: base64 (standard encoding, the
// surrounding white space ignored) of a 16-, 24- or 32-byte key (AES-128,
// -192 or -256). "" returns nil (no encryption).
func LoadGossipKey(file string) ([]byte, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file %s: %v", file, err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file %s: not base64 (%v); the file holds the base64 of 16, 24 or 32 random bytes, e.g. from `head -c 32 /dev/urandom | base64` or `coordinator certs`", file, err)
	}
	if memberlist.ValidateKey(key) == nil { // the rule StartGossip applies
		return key, nil
	}
	return nil, fmt.Errorf("--gossip-key-file %s: the key is %d bytes; want 16, 24 or 32 (base64 of random bytes, e.g. from `head -c 32 /dev/urandom | base64` or `coordinator certs`)", file, len(key))
}
