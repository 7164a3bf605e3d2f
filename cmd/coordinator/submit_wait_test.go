package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpusched/gpusched/transport"
)

// submit --wait redraws its progress bars in place only on a terminal.
// With standard output redirected (a log file, a pipe to tee or grep) it
// wrote the cursor-up and erase-line codes anyway, and every redraw
// repeated every job's line, so the log was full of escape sequences and
// copies. Without a terminal it now prints a job's line when its state
// changes or its bar grows, as plain text.
func TestSubmitWaitPlainWithoutTerminal(t *testing.T) {
	url := fakeCoordinatorFunc(t, map[string]func(*nats.Conn, *nats.Msg) string{
		"submit": func(nc *nats.Conn, _ *nats.Msg) string {
			// The CLI subscribed before it asked, so it sees these events.
			for i, e := range []transport.Event{
				{Type: transport.EvPlaced, Job: "j-1", GPU: "n1/gpu0", MinBudget: 1 << 30, VanillaPeak: 2 << 30},
				{Type: transport.EvStarted, Job: "j-1", GPU: "n1/gpu0", Budget: 2 << 30},
				{Type: transport.EvProgress, Job: "j-1", Iteration: 1, Total: 100, Budget: 2 << 30},
				{Type: transport.EvProgress, Job: "j-1", Iteration: 2, Total: 100, Budget: 2 << 30}, // the same bar
				{Type: transport.EvProgress, Job: "j-1", Iteration: 50, Total: 100, Budget: 2 << 30},
				{Type: transport.EvCompleted, Job: "j-1", Iteration: 100, Total: 100, Budget: 2 << 30},
			} {
				e.Seq = uint64(i + 1)
				b, _ := json.Marshal(e)
				_ = nc.Publish(transport.JobEventsPrefix+"j-1", b)
			}
			_ = nc.Flush()
			return `{"jobs": [{"id": "j-1", "name": "a"}]}`
		},
		"status": func(*nats.Conn, *nats.Msg) string {
			return `{"id": "j-1", "seq": 1, "spec": {"name": "a"}, "state": "running"}`
		},
	})
	b, err := runWithinToFile(t, 20*time.Second, "submit", "../../examples/train-resnet50.yaml", "--wait", "--nats-url", url, "--timeout", "5s")
	if err != nil {
		t.Fatalf("submit --wait: %v", err)
	}
	got := string(b)
	if strings.Contains(got, "\x1b") {
		t.Fatalf("output to a file holds terminal escape codes:\n%q", got)
	}
	var types []string
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "j-1" {
			types = append(types, f[2])
		}
	}
	if want := "placed started progress progress completed"; strings.Join(types, " ") != want {
		t.Errorf("job lines %q, want one per change: %q\n%s", strings.Join(types, " "), want, got)
	}
}
