package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/placement"
)

func TestParseSeeds(t *testing.T) {
	got, err := parseSeeds("3, 1-4,9")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int64{3, 1, 2, 4, 9}) {
		t.Fatalf("seeds %v, want 3 1 2 4 9", got)
	}
	// The largest seeds end the range (a loop on the seed itself wrapped
	// round and never ended).
	got, err = parseSeeds("9223372036854775806-9223372036854775807")
	if err != nil || !slices.Equal(got, []int64{math.MaxInt64 - 1, math.MaxInt64}) {
		t.Fatalf("seeds %v, %v; want the two largest", got, err)
	}
	for _, bad := range []struct{ in, want string }{
		{"", "name at least one seed"},
		{"x", `"x" is not a seed`},
		{"5-2", `"5-2" is not a range N-M with N ≤ M`},
		{"1-", `"1-" is not a range`},
		{"1-5000", "at most 1000"},
	} {
		if _, err := parseSeeds(bad.in); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--seeds %q: error %v, want one containing %q", bad.in, err, bad.want)
		}
	}
}

// TestBenchClusterFlagErrors: bad flags are refused, naming the flag,
// before anything is simulated.
func TestBenchClusterFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policies", "srtf"}, `--policies: "srtf" is not a policy`},
		{[]string{"--policies", ","}, "name at least one policy"},
		{[]string{"--policies", "fifo", "--ones", "hold=2"}, "--ones hold=2 applies to policy ones"},
		{[]string{"--policies", "ones", "--bound-start-costs"}, "--bound-start-costs applies to policy bound"},
		{[]string{"--seeds", "9-1"}, "--seeds"},
		{[]string{"--gpus", "10", "--gpus-per-node", "4"}, "positive multiple of --gpus-per-node"},
		{[]string{"--interval", "0.5"}, "--interval 500ms: at least 1s"},
		{[]string{"--workers", "-1"}, "--workers -1"},
		{[]string{"--data", t.TempDir()}, "application profiles"},
	} {
		_, _, err := runCoordinator(t, append([]string{"bench", "cluster", "--out", t.TempDir()}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bench cluster %v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// TestBenchClusterWorkload1 runs the benchmark on the measured workload 1
// and checks it against simulate and the data README's reference figures.
func TestBenchClusterWorkload1(t *testing.T) {
	data, err := placement.FindDataDir(".")
	if err != nil {
		t.Skipf("%v: the measured workloads are not here", err)
	}
	policies := "tiresias,ones,bound"
	if raceEnabled {
		policies = "tiresias,bound" // ones takes ~20 s under -race; its runs are raced in placement
	}
	out := t.TempDir()
	stdout, stderr, err := runCoordinator(t, "bench", "cluster", "--workloads", "1", "--policies", policies, "--seeds", "1", "--out", out, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Runs    []placement.BenchRun `json:"runs"`
		Targets []struct {
			Workload      string   `json:"workload"`
			TiresiasVsRef *float64 `json:"tiresias_vs_reference"`
			ONESVsPollux  *float64 `json:"ones_vs_pollux"`
			Seeds         int      `json:"seeds"`
		} `json:"targets"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	n := strings.Count(policies, ",") + 1
	if len(got.Runs) != n || len(got.Targets) != 1 {
		t.Fatalf("%d runs and %d targets, want %d and 1:\n%s", len(got.Runs), len(got.Targets), n, stdout)
	}
	if strings.Count(stderr, "bench cluster: ") != n {
		t.Errorf("want one progress line per run on stderr:\n%s", stderr)
	}
	sim, _ := simulateJSON(t, "--workload", filepath.Join(data, "workloads", "workload-1.csv"), "--policy", "tiresias")
	tir := got.Runs[0]
	if tir.Workload != "workload-1" || tir.Policy != "tiresias" || !tir.AnySeed || tir.AvgJCT != sim.AvgJCT || tir.Jobs != 160 {
		t.Errorf("tiresias run %+v; simulate gives avg JCT %v", tir, sim.AvgJCT)
	}
	ref, err := placement.LoadReference(data)
	if err != nil {
		t.Fatal(err)
	}
	refT := ref.Get("workload-1", "tiresias")
	tg := got.Targets[0]
	if refT == 0 || tg.TiresiasVsRef == nil || math.Abs(*tg.TiresiasVsRef-(sim.AvgJCT/refT-1)) > 1e-12 {
		t.Errorf("tiresias vs reference %v; want %v/%v − 1", tg.TiresiasVsRef, sim.AvgJCT, refT)
	}
	_, _, err = runCoordinator(t, "bench", "cluster", "--workloads", "../../examples/zoo-workload.csv", "--out", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `names application "`) || !strings.Contains(err.Error(), "coordinator simulate") {
		t.Errorf("a zoo workload: error %v, want one naming the application and pointing to simulate", err)
	}
	// The same workload twice is refused: rows go by name.
	_, _, err = runCoordinator(t, "bench", "cluster", "--workloads", "1,01", "--policies", "fifo", "--out", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "are both named workload-1") {
		t.Errorf("--workloads 1,01: error %v, want one naming the duplicate", err)
	}
	// An --out that cannot be a folder is refused before any simulation.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := runCoordinator(t, "bench", "cluster", "--workloads", "1", "--policies", "tiresias", "--out", file)
	if err == nil || !strings.Contains(err.Error(), "--out") || strings.Contains(errOut, "bench cluster: 1/1 runs") {
		t.Errorf("--out FILE: error %v, stderr %q; want --out refused before the run", err, errOut)
	}
	// A data folder whose README has no reference table: the figures, a
	// warning per missing figure, blank checks.
	bare := t.TempDir()
	for _, d := range []string{"apps", "workloads"} {
		if err := os.Symlink(filepath.Join(data, d), filepath.Join(bare, d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bare, "README.md"), []byte("# no table\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, errOut, err = runCoordinator(t, "bench", "cluster", "--data", bare, "--workloads", "1", "--policies", "tiresias", "--out", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "warning: workload-1 has no reference tiresias figure") || !strings.Contains(errOut, "no reference pollux figure") {
		t.Errorf("stderr lacks the warnings:\n%s", errOut)
	}
	if !strings.Contains(stdout, "| workload-1 | – | – | – |") || !strings.Contains(stdout, "coordinator bench cluster --data "+bare) {
		t.Errorf("want blank checks and --data in the command line:\n%s", stdout)
	}
	if raceEnabled != (tg.ONESVsPollux == nil) {
		t.Errorf("ones vs Pollux %v with policies %s", tg.ONESVsPollux, policies)
	}
	md, err := os.ReadFile(filepath.Join(out, "cluster.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| workload-1 | ") || !strings.Contains(string(md), "reference pollux") {
		t.Errorf("cluster.md:\n%s", md)
	}
	if st, err := os.Stat(filepath.Join(out, "cluster.png")); err != nil || st.Size() == 0 {
		t.Errorf("cluster.png: %v", err)
	}
	csv, err := os.ReadFile(filepath.Join(out, "cluster.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(csv), "\n"); lines != n+1 {
		t.Errorf("cluster.csv has %d lines, want a header and %d runs:\n%s", lines, n, csv)
	}
}

// --reference reaches both commands: simulate's tiresias on workload 1 and
// bench cluster's tiresias and bound give the reference-mode figures (the
// reference Tiresias's 2474 s; the uncalibrated bound above the default
// one), and cluster.md's command line says it ran in reference mode.
func TestReferenceFlag(t *testing.T) {
	data, err := placement.FindDataDir(".")
	if err != nil {
		t.Skipf("%v: the measured workloads are not here", err)
	}
	wl := filepath.Join(data, "workloads", "workload-1.csv")
	def, _ := simulateJSON(t, "--workload", wl, "--policy", "tiresias")
	ref, _ := simulateJSON(t, "--workload", wl, "--policy", "tiresias", "--reference")
	if math.Abs(ref.AvgJCT/2474-1) > 0.002 || def.AvgJCT >= 2474 {
		t.Fatalf("tiresias on workload 1: %.1f s with --reference (want 2474 ± 0.2 %%), %.1f s without (want below it)", ref.AvgJCT, def.AvgJCT)
	}
	simOut := t.TempDir()
	if _, _, err := runCoordinator(t, "simulate", "--workload", wl, "--policy", "tiresias", "--reference", "--horizon", "1h", "--out", simOut); err != nil {
		t.Fatal(err)
	}
	// --horizon once (a first version gave it twice).
	if md, err := os.ReadFile(filepath.Join(simOut, "sim.md")); err != nil || !strings.Contains(string(md), " --reference") || strings.Count(string(md), "--horizon") != 1 {
		t.Errorf("sim.md does not give the command with --reference and --horizon once (err %v):\n%s", err, md)
	}
	boundDef, _ := simulateJSON(t, "--workload", wl, "--policy", "bound")
	boundRef, _ := simulateJSON(t, "--workload", wl, "--policy", "bound", "--reference")
	if boundRef.AvgJCT == boundDef.AvgJCT {
		t.Fatalf("the bound is %.1f s with and without --reference", boundRef.AvgJCT)
	}
	out := t.TempDir()
	stdout, _, err := runCoordinator(t, "bench", "cluster", "--workloads", "1", "--policies", "tiresias,bound", "--reference", "--out", out, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Runs []struct {
			Policy string  `json:"policy"`
			AvgJCT float64 `json:"avg_jct_s"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if md, err := os.ReadFile(filepath.Join(out, "cluster.md")); err != nil || !strings.Contains(string(md), " --reference") {
		t.Errorf("cluster.md does not give the command with --reference (err %v)", err)
	}
	for _, r := range got.Runs {
		want := map[string]float64{"tiresias": ref.AvgJCT, "bound": boundRef.AvgJCT}[r.Policy]
		if r.AvgJCT != want {
			t.Errorf("bench cluster --reference %s: %.3f s, simulate --reference gives %.3f s", r.Policy, r.AvgJCT, want)
		}
	}
	if len(got.Runs) != 2 {
		t.Errorf("%d runs, want 2", len(got.Runs))
	}
}
