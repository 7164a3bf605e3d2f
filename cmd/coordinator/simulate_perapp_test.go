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

// simulate says where the cluster's GPU-hours went — in its text output,
// its JSON (gpu_time) and sim.md, the same figures in each, adding up to
// GPUs × makespan; the bound, which shares no cluster, says nothing of it.
func TestSimulateGPUTime(t *testing.T) {
	w := writeWorkload(t, "mlp-0,0,mlp,2,128", "mlp-1,0,mlp,2,128", "gpt-0,30,gpt2-small,1,8")
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"simulate", "--workload", w, "--policy", "fifo", "--gpus", "2", "--gpus-per-node", "2"}
	text, _, err := runCoordinator(t, append(args, "--out", out)...)
	if err != nil {
		t.Fatal(err)
	}
	js, _, err := runCoordinator(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	// Its own struct: the key names are what a reader of --json relies on.
	var r struct {
		GPUs     int     `json:"gpus"`
		Makespan float64 `json:"makespan_s"`
		Util     float64 `json:"avg_utilisation"`
		GPUTime  struct {
			Training    float64 `json:"training_gpu_h"`
			Restarting  float64 `json:"restarting_gpu_h"`
			IdleWaiting float64 `json:"idle_waiting_gpu_h"`
			IdleNone    float64 `json:"idle_none_waiting_gpu_h"`
		} `json:"gpu_time"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	g := r.GPUTime
	total := float64(r.GPUs) * r.Makespan / 3600
	// fifo runs the two mlp jobs one after the other on both GPUs, so the
	// second waits: some GPU time is idle with a job waiting (the rest of
	// the interval in which the first completes).
	if sum := g.Training + g.Restarting + g.IdleWaiting + g.IdleNone; sum < total*(1-1e-9) || sum > total*(1+1e-9) {
		t.Errorf("gpu_time %+v adds up to %v GPU-hours, not %v (2 GPUs × %v s)", g, sum, total, r.Makespan)
	}
	if g.Training <= 0 || g.Restarting <= 0 || g.IdleWaiting <= 0 {
		t.Errorf("gpu_time %+v: want training, (re)starting and idle with a job waiting", g)
	}
	if held := (g.Training + g.Restarting) / total; held < r.Util*(1-1e-9) || held > r.Util*(1+1e-9) {
		t.Errorf("training and restarting are %v of the GPU time; utilisation %v", held, r.Util)
	}
	pct := func(x float64) string { return regexp.QuoteMeta(fmt.Sprintf("%.1f%%", 100*x/total)) }
	line := fmt.Sprintf(`GPU time: %s training, %s \(re\)starting, %s idle with jobs waiting, %s idle with none waiting \(GPU-hours %.1f / %.1f / %.1f / %.1f\)`,
		pct(g.Training), pct(g.Restarting), pct(g.IdleWaiting), pct(g.IdleNone), g.Training, g.Restarting, g.IdleWaiting, g.IdleNone)
	if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(text) {
		t.Errorf("text output has no line %s:\n%s", line, text)
	}
	md, err := os.ReadFile(filepath.Join(out, "sim.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\| GPU time \| ` + strings.TrimPrefix(line, "GPU time: ") + ` \|$`).Match(md) {
		t.Errorf("sim.md has no GPU time row %s:\n%s", line, md)
	}

	bout := filepath.Join(t.TempDir(), "bound")
	bound, _, err := runCoordinator(t, "simulate", "--workload", w, "--policy", "bound", "--out", bout)
	if err != nil {
		t.Fatal(err)
	}
	bmd, err := os.ReadFile(filepath.Join(bout, "sim.md"))
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"text": bound, "sim.md": string(bmd)} {
		if strings.Contains(s, "GPU time") || strings.Contains(s, "GPU utilisation") {
			t.Errorf("the bound's %s reports GPU time or utilisation it never computes:\n%s", what, s)
		}
	}
}
