package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/placement"
)

// auditWorkload writes the first n jobs of the measured workload-1 to a
// temporary file (skipping when the data is absent).
func auditWorkload(t *testing.T, n int) string {
	t.Helper()
	d, err := placement.FindDataDir(".")
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile(filepath.Join(d, "workloads", "workload-1.csv"))
	if err != nil {
		t.Skip(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	p := filepath.Join(t.TempDir(), "w.csv")
	if err := os.WriteFile(p, []byte(strings.Join(lines[:n+1], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wallFields matches the two wall-clock fields of the JSON, the only ones
// that may differ between runs of one seed.
var wallFields = regexp.MustCompile(`"(wall_s|policy_wall_s)": [0-9.e+-]+`)

// TestAuditSimulateSameSeedSameJSON: for each policy, the same seed gives
// the same --json output byte for byte apart from the wall-clock fields,
// with the fields the README promises; and --out writes sim.md (the
// figures of the JSON), sim.csv (one row per job) and sim-<policy>.png.
func TestAuditSimulateSameSeedSameJSON(t *testing.T) {
	w := auditWorkload(t, 24)
	for _, pol := range []string{"fifo", "tiresias", "ones"} {
		var outs []string
		for k := 0; k < 2; k++ {
			out, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", pol, "--seed", "1", "--json", "--timeline")
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, wallFields.ReplaceAllString(out, `"$1": 0`))
		}
		if outs[0] != outs[1] {
			t.Fatalf("%s: two runs of seed 1 differ:\n%s\n---\n%s", pol, outs[0], outs[1])
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(outs[0]), &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "jobs", "avg_utilisation", "per_job", "timeline"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: --json lacks %q", pol, k)
			}
		}
		if n, _ := m["jobs"].(float64); n != 24 {
			t.Errorf("%s: jobs = %v, want 24", pol, m["jobs"])
		}
		dir := filepath.Join(t.TempDir(), "out")
		if _, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", pol, "--seed", "1", "--out", dir); err != nil {
			t.Fatal(err)
		}
		md, err := os.ReadFile(filepath.Join(dir, "sim.md"))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("| average JCT (s) | %.0f |", m["avg_jct_s"]); !strings.Contains(string(md), want) {
			t.Errorf("%s: sim.md lacks %q:\n%s", pol, want, md)
		}
		if rows := readCSV(t, filepath.Join(dir, "sim.csv")); len(rows) != 25 || rows[0][0] != "name" || rows[0][5] != "jct_s" {
			t.Errorf("%s: sim.csv: %d rows (want a header and 24), header %v", pol, len(rows), rows[0])
		}
		png, err := os.ReadFile(filepath.Join(dir, "sim-"+pol+".png"))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("%s: sim-%s.png: %v, not a PNG", pol, pol, err)
		}
	}
}

// TestAuditSimulateClusterShape: --gpus must be a positive multiple of
// --gpus-per-node; the error says so and names both values.
func TestAuditSimulateClusterShape(t *testing.T) {
	w := auditWorkload(t, 2)
	for _, c := range [][2]string{{"6", "4"}, {"4", "8"}, {"0", "4"}, {"8", "0"}, {"-4", "4"}} {
		_, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", "fifo", "--gpus", c[0], "--gpus-per-node", c[1])
		if err == nil || !strings.Contains(err.Error(), "--gpus ("+c[0]+") must be a positive multiple of --gpus-per-node ("+c[1]+")") {
			t.Errorf("--gpus %s --gpus-per-node %s: error %v", c[0], c[1], err)
		}
	}
}
