package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// runDemoJSON runs demo --json on one job spec (YAML flow mapping) with the
// given limit, standard output going to a file; it returns what demo
// printed there and its error.
func runDemoJSON(t *testing.T, job string, limit time.Duration) ([]byte, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a coordinator and two nodes in this process")
	}
	spec := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(spec, []byte("jobs:\n  - "+job+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return runWithinToFile(t, limit+time.Minute, "demo", "--file", spec, "--time-scale", "60", "--limit", limit.String(), "--json")
}

// demo --json prints only the final report on standard output, so that it
// can be read as JSON; the progress lines go to standard error. They went
// to standard output before the report, so the output was not JSON.
func TestDemoJSONOutputIsJSON(t *testing.T) {
	b, err := runDemoJSON(t, "{name: tiny, model: mlp, kind: train, batch: 8, iterations: 20}", 30*time.Second)
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var rep DemoReport
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("demo --json: standard output is not a JSON report: %v\n%s", err, b)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("demo --json: more than one JSON report on standard output:\n%s", b)
	}
	if rep.Total != 1 || rep.States["completed"] != 1 {
		t.Errorf("demo --json: report %+v, want 1 job, completed", rep)
	}
}

// demo --json fails, as demo without it does, when not every job
// completed: it printed the report and exited 0 after giving up.
func TestDemoJSONFailsWhenJobsDidNotComplete(t *testing.T) {
	// Far longer than the limit (about 15 ms per iteration at batch 16).
	b, err := runDemoJSON(t, "{name: long, model: resnet50, kind: train, batch: 16, iterations: 10000000}", time.Second)
	if err == nil {
		t.Fatalf("demo --json --limit 1s with a job that cannot finish in time succeeded:\n%s", b)
	}
	var rep DemoReport
	if json.Unmarshal(b, &rep) != nil || rep.Total != 1 || rep.States["completed"] != 0 {
		t.Errorf("demo --json: error %v, but the report on standard output is missing or wrong:\n%s", err, b)
	}
}
