package transport

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsRemoteEnv names the directory of certificates with which the test
// binary, run again as a child, starts a TLS actor remote (a process starts
// one remote, and this package's tests already start a plaintext one).
const tlsRemoteEnv = "GPUSCHED_TEST_TLS_REMOTE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(tlsRemoteEnv); dir != "" {
		os.Exit(runTLSRemote(dir))
	}
	os.Exit(m.Run())
}

// runTLSRemote starts the process's actor system with mutual TLS from the
// files in dir, prints its address and runs until its standard input closes.
func runTLSRemote(dir string) int {
	cfg, err := LoadTLS(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile), filepath.Join(dir, CAFile))
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	a, err := ProcessActorsAdvertised("127.0.0.1:0", "", nil, WithTLS(cfg))
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("ADDR", a.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// An actor remote started with WithTLS requires a client certificate
// signed by its CA: CheckTLSPeer (the node's start check of the
// coordinator) passes with a certificate of the same CA, and fails naming
// the certificate with one of another CA (either side's), or with none.
func TestRemoteTLSRequiresClientCert(t *testing.T) {
	dir, good, other := twoCAs(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), tlsRemoteEnv+"="+filepath.Join(dir, "good"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	var addr string
	select {
	case s := <-line:
		var ok bool
		if addr, ok = strings.CutPrefix(s, "ADDR "); !ok {
			t.Fatalf("child: %q", s)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child's TLS remote did not start within 30s")
	}

	goodCfg, err := LoadTLS(good.Cert, good.Key, good.CA)
	if err != nil {
		t.Fatal(err)
	}
	otherCfg, err := LoadTLS(other.Cert, other.Key, other.CA)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckTLSPeer(addr, goodCfg, 5*time.Second); err != nil {
		t.Fatalf("a certificate of the remote's CA: %v", err)
	}
	// The client trusts the remote's CA but presents another CA's
	// certificate, or none: the remote refuses it.
	foreignCert := goodCfg.Clone()
	foreignCert.Certificates = otherCfg.Certificates
	noCert := &tls.Config{RootCAs: goodCfg.RootCAs, MinVersion: tls.VersionTLS13}
	for _, c := range []struct {
		what string
		cfg  *tls.Config
	}{
		{"another CA on both sides", otherCfg},
		{"a client certificate of another CA", foreignCert},
		{"no client certificate", noCert},
	} {
		err := CheckTLSPeer(addr, c.cfg, 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v; want a refusal that mentions the certificate", c.what, err)
		}
	}
}
