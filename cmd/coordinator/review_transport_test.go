package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpusched/gpusched/transport"
)

// submit --wait fails when a job it waits for has already failed by the
// time it asks for the jobs' states: it exited 0, as a failure was counted
// only from the events it saw, not from the state the coordinator reported.
func TestSubmitWaitAlreadyFailed(t *testing.T) {
	url := fakeCoordinator(t, map[string]string{
		"submit": `{"jobs": [{"id": "j-1", "name": "resnet50-train"}]}`,
		"status": `{"id": "j-1", "seq": 1, "spec": {"name": "resnet50-train"}, "state": "failed", "reason": "no GPU fits"}`,
	})
	_, _, err := runCoordinator(t, "submit", "../../examples/train-resnet50.yaml", "--wait", "--nats-url", url, "--timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), "did not complete") {
		t.Fatalf("submit --wait of a job that already failed: error %v, want one saying it did not complete", err)
	}
}

// fakeCoordinatorFunc serves each verb's API subject on an embedded NATS
// server with a handler that may publish on the connection before it
// answers, and returns the server's URL.
func fakeCoordinatorFunc(t *testing.T, handlers map[string]func(nc *nats.Conn, m *nats.Msg) string) string {
	t.Helper()
	e, err := transport.StartEmbedded(transport.EmbeddedOptions{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := transport.Connect(e.ClientURL(), "fake-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	for verb, h := range handlers {
		h := h
		if _, err := nc.Subscribe(transport.APIPrefix+verb, func(m *nats.Msg) { _ = m.Respond([]byte(h(nc, m))) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return e.ClientURL()
}

// runWithin runs the coordinator CLI with args and fails the test if it
// has not returned within d (a command that waits forever).
func runWithin(t *testing.T, d time.Duration, args ...string) error {
	t.Helper()
	res := make(chan error, 1)
	go func() {
		_, _, err := runCoordinator(t, args...)
		res <- err
	}()
	select {
	case err := <-res:
		return err
	case <-time.After(d):
		t.Fatalf("coordinator %s: still running after %s", strings.Join(args, " "), d)
		return nil
	}
}

// runWithinToFile is runWithin with the command's standard output going to
// a file (not a terminal), whose content it returns.
func runWithinToFile(t *testing.T, d time.Duration, args ...string) ([]byte, error) {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	saved := os.Stdout
	os.Stdout = out
	err = runWithin(t, d, args...)
	os.Stdout = saved
	b, rerr := os.ReadFile(out.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	return b, err
}

// submit --wait follows a job whose reply carries no name: the events of
// such a job were all skipped, so its completion was never seen and the
// command waited forever.
func TestSubmitWaitJobWithoutName(t *testing.T) {
	url := fakeCoordinatorFunc(t, map[string]func(*nats.Conn, *nats.Msg) string{
		"submit": func(nc *nats.Conn, _ *nats.Msg) string {
			// The CLI subscribed before it asked, so it sees this event.
			b, _ := json.Marshal(transport.Event{Seq: 7, Type: transport.EvCompleted, Job: "j-1", Iteration: 10, Total: 10})
			_ = nc.Publish(transport.JobEventsPrefix+"j-1", b)
			_ = nc.Flush()
			return `{"jobs": [{"id": "j-1", "name": ""}]}`
		},
		"status": func(*nats.Conn, *nats.Msg) string {
			return `{"id": "j-1", "seq": 1, "state": "running"}`
		},
	})
	if err := runWithin(t, 20*time.Second, "submit", "../../examples/train-resnet50.yaml", "--wait", "--nats-url", url, "--timeout", "5s"); err != nil {
		t.Fatalf("submit --wait of a job that completed: %v", err)
	}
}

// submit --wait finishes when a job's terminal event never reaches it (sent
// while the connection was down, or dropped from a full buffer): it asked
// for the jobs' states only once, before following events, and then waited
// forever.
func TestSubmitWaitLostTerminalEvent(t *testing.T) {
	var calls atomic.Int32
	url := fakeCoordinatorFunc(t, map[string]func(*nats.Conn, *nats.Msg) string{
		"submit": func(*nats.Conn, *nats.Msg) string { return `{"jobs": [{"id": "j-1", "name": "a"}]}` },
		"status": func(*nats.Conn, *nats.Msg) string {
			if calls.Add(1) == 1 {
				return `{"id": "j-1", "seq": 1, "spec": {"name": "a"}, "state": "running"}`
			}
			return `{"id": "j-1", "seq": 1, "spec": {"name": "a"}, "state": "completed"}`
		},
	})
	if err := runWithin(t, 20*time.Second, "submit", "../../examples/train-resnet50.yaml", "--wait", "--nats-url", url, "--timeout", "5s"); err != nil {
		t.Fatalf("submit --wait of a job that completed: %v", err)
	}
}

// A --timeout that is not positive is refused as such: 0 or a negative one
// was passed on, and the request "timed out" at once with an error blaming
// the coordinator ("did not answer ... within 0s").
func TestClientTimeoutNotPositive(t *testing.T) {
	url := fakeCoordinator(t, map[string]string{
		"status": `{"id": "j-1", "seq": 1, "spec": {"name": "a"}, "state": "running"}`,
		"list":   `{"jobs": []}`,
	})
	for _, args := range [][]string{{"status", "j-1"}, {"list"}, {"cancel", "j-1"}, {"nodes"}, {"watch"}, {"submit", "../../examples/train-resnet50.yaml"}} {
		for _, d := range []string{"0", "-1s"} {
			name := strings.Join(args, " ") + " --timeout " + d
			err := runWithin(t, 20*time.Second, append(args, "--nats-url", url, "--timeout", d)...)
			if err == nil || !strings.Contains(err.Error(), "--timeout") || strings.Contains(err.Error(), "did not answer") {
				t.Errorf("%s: error %v, want one naming --timeout", name, err)
			}
		}
	}
}
