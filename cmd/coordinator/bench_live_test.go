package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchLiveFlagErrors: bad flags and a file the policies would have
// nothing to decide in are refused, naming the flag, before any cluster
// starts.
func TestBenchLiveFlagErrors(t *testing.T) {
	fixed := filepath.Join(t.TempDir(), "fixed.yaml")
	if err := os.WriteFile(fixed, []byte("jobs:\n  - {name: tiny, model: mlp, kind: train, batch: 8, iterations: 20}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policies", "bound"}, `--policies: "bound" is not a policy`},
		{[]string{"--policies", ","}, "name at least one policy"},
		{[]string{"--runs", "0"}, "--runs 0"},
		{[]string{"--warmup", "-1"}, "--warmup -1"},
		{[]string{"--time-scale", "0"}, "--time-scale 0"},
		{[]string{"--elastic-interval", "0"}, "--elastic-interval 0 turns the elastic rounds off"},
		{[]string{"--limit", "0s"}, "--limit 0s"},
		{[]string{"--file", filepath.Join(t.TempDir(), "none.yaml")}, "--file"},
		{[]string{"--file", fixed}, "no elastic training job"},
	} {
		_, _, err := runCoordinator(t, append([]string{"bench", "live", "--out", t.TempDir()}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bench live %v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// The summary counts only runs in which every job completed, takes the
// median (the middle two's mean of an even count), and sets each policy
// against the best median.
func TestSummariseLive(t *testing.T) {
	runs := []LiveRun{
		{Policy: "fifo", Run: 1, AvgCompletion: 1700, Makespan: 2400, Completed: 6, Jobs: 6, Changes: 1},
		{Policy: "ones", Run: 1, AvgCompletion: 800, Makespan: 1200, Completed: 6, Jobs: 6, Changes: 5},
		{Policy: "fifo", Run: 2, AvgCompletion: 1800, Makespan: 2500, Completed: 6, Jobs: 6, Changes: 2},
		{Policy: "ones", Run: 2, AvgCompletion: 700, Makespan: 1100, Completed: 5, Jobs: 6, Changes: 9},
		{Policy: "ones", Run: 3, AvgCompletion: 900, Makespan: 1300, Completed: 6, Jobs: 6, Changes: 7},
	}
	sums := summariseLive([]string{"fifo", "ones", "tiresias"}, runs)
	if len(sums) != 3 {
		t.Fatalf("%d summaries, want 3", len(sums))
	}
	f, o, ti := sums[0], sums[1], sums[2]
	if f.Runs != 2 || f.Complete != 2 || f.MedianAvg != 1750 || f.MinAvg != 1700 || f.MaxAvg != 1800 || f.MedianMakespan != 2450 || f.MedianChanges != 1.5 {
		t.Errorf("fifo summary %+v", f)
	}
	// Run 2 of ones left a job unfinished: its 700 s is not a completion figure.
	if o.Runs != 3 || o.Complete != 2 || o.MedianAvg != 850 || o.MinAvg != 800 || o.MaxAvg != 900 || o.MedianChanges != 6 {
		t.Errorf("ones summary %+v", o)
	}
	if ti.Runs != 0 || ti.Complete != 0 || ti.MedianAvg != 0 {
		t.Errorf("tiresias summary %+v, want no runs", ti)
	}
	fl := &benchLiveFlags{file: "x.yaml", runs: 3, scale: 100, every: 60e9}
	png := filepath.Join(t.TempDir(), "live.png")
	if err := plotLive(png, fl, sums, runs); err != nil {
		t.Fatalf("plot: %v", err)
	}
	if b, err := os.ReadFile(png); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("live.png: %v, %d bytes, want a PNG", err, len(b))
	}
	tab := liveTable(fl, sums)
	for _, want := range []string{"| fifo | 2 of 2 | 1750 | 1700–1800 | 2450 | 2 | +105.9 % |", "| ones | 2 of 3 | 850 | 800–900 | 1250 | 6 | +0.0 % |", "| tiresias | 0 of 0 | –"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

// bench live runs each policy --runs times, taking turns, on a cluster of
// its own each time, and writes a row per run.
func TestBenchLiveRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four in-process clusters")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "jobs.yaml")
	// About 170 s of job time at batch 4096 on one GPU: rounds every 5 s
	// see it running (fifo gives it the four GPUs it asks for).
	spec := "jobs:\n  - {name: el, model: mlp, kind: train, batch: {min: 1024, max: 4096}, gpus: {min: 1, max: 4}, iterations: 100000}\n"
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	b, err := runWithinToFile(t, 4*time.Minute, "bench", "live", "--file", file, "--policies", "fifo,ones", "--runs", "2", "--time-scale", "100",
		"--elastic-interval", "5", "--limit", "40s", "--out", out, "--json", "--nodes", "1", "--gpus-per-node", "4", "--ones", "hold=2", "--warmup", "1")
	if err != nil {
		t.Fatalf("bench live: %v\n%s", err, b)
	}
	var rep struct {
		Nodes       int           `json:"nodes"`
		GPUsPerNode int           `json:"gpus_per_node"`
		Device      string        `json:"device"`
		ONES        string        `json:"ones"`
		Summary     []LiveSummary `json:"summary"`
		Runs        []LiveRun     `json:"runs"`
		Warmup      []LiveRun     `json:"warmup_runs"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("bench live --json: %v\n%s", err, b)
	}
	if rep.Nodes != 1 || rep.GPUsPerNode != 4 || rep.Device != "h100-80gb" || rep.ONES != "hold=2" {
		t.Errorf("report's cluster %d × %d %s, ones %q; want 1 × 4 h100-80gb, hold=2", rep.Nodes, rep.GPUsPerNode, rep.Device, rep.ONES)
	}
	var order []string
	for _, r := range rep.Runs {
		order = append(order, r.Policy)
		if r.Completed != 1 || r.Jobs != 1 || !(r.AvgCompletion > 0) || r.Makespan != r.AvgCompletion || r.Error != "" {
			t.Errorf("run %+v: want its one job completed, makespan = average completion > 0", r)
		}
		if r.Policy == "fifo" && r.Changes < 1 {
			t.Errorf("fifo run %d: %d elastic changes, want the job grown to the four GPUs it asks for (the node's four)", r.Run, r.Changes)
		}
	}
	if got := strings.Join(order, ","); got != "fifo,ones,fifo,ones" {
		t.Errorf("runs in order %s, want the policies taking turns", got)
	}
	// One warm-up run per policy, first, kept out of the measured runs.
	if len(rep.Warmup) != 2 || rep.Warmup[0].Policy != "fifo" || rep.Warmup[1].Policy != "ones" ||
		rep.Warmup[0].Run != 1 || rep.Warmup[0].Completed != 1 || rep.Runs[0].Run != 1 {
		t.Errorf("warm-up runs %+v, measured runs from %+v; want fifo's and ones's warm-up run 1, then run 1", rep.Warmup, rep.Runs[0])
	}
	if len(rep.Summary) != 2 || rep.Summary[0].Complete != 2 || rep.Summary[1].Complete != 2 {
		t.Errorf("summary %+v", rep.Summary)
	}
	csv, err := os.ReadFile(filepath.Join(out, "live.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(csv), "\n"); n != 5 {
		t.Errorf("live.csv has %d lines, want a header and 4 runs:\n%s", n, csv)
	}
	// Each row says its cluster, and the ones rows their settings.
	for _, line := range strings.Split(strings.TrimSpace(string(csv)), "\n")[1:] {
		want := ",1,4,h100-80gb,binpack,"
		if strings.HasPrefix(line, "ones,") {
			want += "hold=2"
		}
		if !strings.HasSuffix(line, want) {
			t.Errorf("live.csv row %q does not end in %q", line, want)
		}
	}
	if md, err := os.ReadFile(filepath.Join(out, "live.md")); err != nil || !strings.Contains(string(md), "| ones | 2 of 2 |") ||
		!strings.Contains(string(md), "on 1 node × 4 simulated h100-80gb") || !strings.Contains(string(md), "ones with --ones hold=2") {
		t.Errorf("live.md: %v\n%s", err, md)
	}
	if st, err := os.Stat(filepath.Join(out, "live.png")); err != nil || st.Size() == 0 {
		t.Errorf("live.png: %v", err)
	}
}

// A run that leaves jobs unfinished is reported, the others go on, and the
// command fails after writing its files.
func TestBenchLiveIncompleteRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two in-process clusters")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "jobs.yaml")
	spec := "jobs:\n  - {name: long, model: mlp, kind: train, batch: {min: 1024, max: 4096}, iterations: 100000000}\n"
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	b, err := runWithinToFile(t, 2*time.Minute, "bench", "live", "--file", file, "--policies", "ones", "--runs", "2", "--limit", "1s", "--out", out)
	if err == nil || !strings.Contains(err.Error(), "2 of 2 runs did not complete every job") {
		t.Fatalf("bench live with runs that cannot finish: error %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "| ones | 0 of 2 |") {
		t.Errorf("the table should still be printed, counting no complete run:\n%s", b)
	}
	csv, rerr := os.ReadFile(filepath.Join(out, "live.csv"))
	if rerr != nil || strings.Count(string(csv), "\n") != 3 {
		t.Errorf("live.csv (%v): want a header and both runs:\n%s", rerr, csv)
	}
}
