package transport

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// An embedded server started with a token refuses clients without it, or
// with another, and the error says to pass the token; with it they connect.
func TestEmbeddedToken(t *testing.T) {
	e, err := StartEmbedded(EmbeddedOptions{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	for _, tok := range []string{"", "wrong"} {
		nc, err := Connect(e.ClientURL(), "t", nats.Token(tok))
		if err == nil {
			nc.Close()
			t.Fatalf("token %q: connected", tok)
		}
		if !strings.Contains(err.Error(), "--nats-token") || !strings.Contains(err.Error(), "GPUSCHED_NATS_TOKEN") {
			t.Errorf("token %q: %v; want an error naming --nats-token and GPUSCHED_NATS_TOKEN", tok, err)
		}
	}
	nc, err := Connect(e.ClientURL(), "t", nats.Token("s3cret"))
	if err != nil {
		t.Fatalf("the right token: %v", err)
	}
	nc.Close()
}

// TestConnectErrorRedactsURLCredentials: a --nats-url (or GPUSCHED_NATS_URL)
// may carry credentials (nats://user:pass@host, nats://token@host); Connect's
// errors, printed to stderr and logs, name the URL without them.
func TestConnectErrorRedactsURLCredentials(t *testing.T) {
	e, err := StartEmbedded(EmbeddedOptions{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	hostPort := strings.TrimPrefix(e.ClientURL(), "nats://")
	for _, c := range []struct{ url, secret string }{
		{"nats://alice:hunter2@127.0.0.1:1", "hunter2"}, // unreachable
		{"nats://wrongtoken@" + hostPort, "wrongtoken"}, // refused
		{"nats://bob:pa55word@" + hostPort, "pa55word"}, // refused
	} {
		nc, err := Connect(c.url, "t")
		if err == nil {
			nc.Close()
			t.Fatalf("%s: connected", c.url)
		}
		if strings.Contains(err.Error(), c.secret) {
			t.Errorf("Connect(%s): %v; the error shows the URL's credentials", c.url, err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("Connect(%s): %v; want the error to name the host tried", c.url, err)
		}
	}
}
