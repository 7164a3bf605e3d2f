package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// simulate shows the per-application breakdown in its text output, its
// JSON (per_app) and sim.md: two mlp jobs and one gpt2-small job, each
// application once, with the job counts; the bound shows no restarts
// column.
func TestSimulatePerApplication(t *testing.T) {
	w := writeWorkload(t, "mlp-0,0,mlp,1,128", "mlp-1,60,mlp,1,128", "gpt-0,0,gpt2-small,1,8")
	out := filepath.Join(t.TempDir(), "out")
	text, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", "fifo", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^by application \(share: what its jobs add to the average JCT\):$`,
		`(?m)^  application +jobs +avg JCT \(s\) +share \(s\) +wait \(s\) +GPU-hours +restarts$`,
		`(?m)^  mlp +2 +\d+ +\d+ +\d+ +\d+\.\d +0$`,
		`(?m)^  gpt2-small +1 +\d+ +\d+ +\d+ +\d+\.\d +0$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("text output lacks %s:\n%s", re, text)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "sim.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## By application") || !regexp.MustCompile(`(?m)^\| mlp \| 2 \| \d+ \| \d+ \| \d+ \| \d+\.\d \| 0 \|$`).Match(md) {
		t.Errorf("sim.md lacks the by-application table:\n%s", md)
	}

	js, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", "fifo", "--json")
	if err != nil {
		t.Fatal(err)
	}
	// Its own struct, not placement.AppStats: the JSON's key names are
	// what a reader of --json relies on.
	var r struct {
		Avg    float64 `json:"avg_jct_s"`
		PerApp []struct {
			App      string  `json:"app"`
			Jobs     int     `json:"jobs"`
			AvgJCT   float64 `json:"avg_jct_s"`
			Share    float64 `json:"share_of_avg_jct_s"`
			AvgWait  float64 `json:"avg_wait_s"`
			GPUHours float64 `json:"gpu_hours"`
			Restarts int     `json:"restarts"`
		} `json:"per_app"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	jobs, sum := map[string]int{}, 0.0
	for _, a := range r.PerApp {
		jobs[a.App] = a.Jobs
		sum += a.Share
		// The text row shows the JSON's figures, column by column (the
		// same run: fifo is deterministic).
		row := fmt.Sprintf(`(?m)^  %s +%d +%.0f +%.0f +%.0f +%.1f +%d$`, regexp.QuoteMeta(a.App), a.Jobs, a.AvgJCT, a.Share, a.AvgWait, a.GPUHours, a.Restarts)
		if !regexp.MustCompile(row).MatchString(text) {
			t.Errorf("text output has no row %s:\n%s", row, text)
		}
	}
	if len(r.PerApp) != 2 || jobs["mlp"] != 2 || jobs["gpt2-small"] != 1 || sum < r.Avg*(1-1e-9) || sum > r.Avg*(1+1e-9) {
		t.Errorf("per_app %+v (shares add up to %v, average %v)", r.PerApp, sum, r.Avg)
	}
	// Two mlp jobs of three: mlp's share is two thirds of its average.
	for _, a := range r.PerApp {
		if a.App == "mlp" && (a.Share < a.AvgJCT*2/3*(1-1e-9) || a.Share > a.AvgJCT*2/3*(1+1e-9)) {
			t.Errorf("mlp: share %v, average %v: want two thirds of it", a.Share, a.AvgJCT)
		}
	}

	bound, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", "bound")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^  application +jobs +avg JCT \(s\) +share \(s\)$`).MatchString(bound) || strings.Contains(bound, "restarts") {
		t.Errorf("the bound's table should have no wait, GPU-hours or restarts:\n%s", bound)
	}
}

// writeWorkload writes a workload CSV of the given rows (name, time,
// application, replicas, batch) under a temporary directory.
func writeWorkload(t *testing.T, rows ...string) string {
	t.Helper()
	w := filepath.Join(t.TempDir(), "w.csv")
	if err := os.WriteFile(w, []byte("name,time,application,num_replicas,batch_size\n"+strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}
