package actors

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/transport"
)

// TestCoordinatorLogRedactsNATSURL: an external --nats-url may carry the
// server's credentials (nats://token@host, nats://user:pass@host); the
// coordinator's "started" log line names it without them.
func TestCoordinatorLogRedactsNATSURL(t *testing.T) {
	e, err := transport.StartEmbedded(transport.EmbeddedOptions{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Token: "t0pS3cretTok"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	var buf lockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	url := "nats://t0pS3cretTok@" + strings.TrimPrefix(e.ClientURL(), "nats://")
	co, err := StartCoordinator(CoordinatorConfig{NATSURL: url, Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	co.Stop()
	out := buf.String()
	if !strings.Contains(out, "coordinator started") {
		t.Fatalf("no \"coordinator started\" line in the log:\n%s", out)
	}
	if strings.Contains(out, "t0pS3cretTok") {
		t.Errorf("the coordinator's log shows the NATS token from --nats-url:\n%s", out)
	}
}
