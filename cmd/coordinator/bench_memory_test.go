package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// bench memory on a reduced configuration: two models, one batch size in
// the sweep, up to two copies. It writes the table, the CSV and a plot per
// model, every run passes the checker, and the several-job rows are
// planned by TENSILE in both modes.
func TestBenchMemoryReduced(t *testing.T) {
	if raceEnabled {
		t.Skip("plans co-located jobs through the CLI on one goroutine (tensorsched's race tests cover the planner's): 25 s under the race detector")
	}
	dir := t.TempDir()
	out, stderr, err := runCoordinator(t, "bench", "memory", "--models", "mlp,resnet50", "--batches", "2", "--copies", "2",
		"--copies-model", "mlp", "--device", "h100-80gb", "--out", dir, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rows []tensorsched.MemBenchRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	// single: 2 models x 6 policies; copies: x1 6, x2 5 baselines + tensile
	// joint and sum-of-peaks; batch: 2 models x 6; mix: 7.
	// Then, for every baseline row that saved memory, tensile planned to
	// that memory (--equal-memory, on by default) and within its extra
	// time (--equal-time, on by default).
	var equal, equalTime int
	for _, r := range rows {
		switch {
		case r.BudgetOf != "":
			equal++
		case r.TimeOf != "":
			equalTime++
		}
	}
	if len(rows)-equal-equalTime != 12+6+7+12+7 {
		t.Errorf("%d rows besides %d equal-memory and %d equal-time ones, want 44", len(rows)-equal-equalTime, equal, equalTime)
	}
	if cs := tensorsched.EqualMemoryComparisons(rows); equal == 0 || len(cs) != equal {
		t.Errorf("%d equal-memory rows, %d paired with their baseline; want every one paired", equal, len(cs))
	}
	if cs := tensorsched.EqualTimeComparisons(rows); equalTime != equal || len(cs) != equalTime {
		t.Errorf("%d equal-time rows, %d paired with their baseline; want every one paired, one per equal-memory row (%d)", equalTime, len(cs), equal)
	}
	modes := map[string]int{}
	for _, r := range rows {
		if r.Check != "passed" {
			t.Errorf("%s %s %s %s: check %q", r.Experiment, r.Workload, r.Policy, r.Mode, r.Check)
		}
		if r.Jobs > 1 && r.Policy == tensorsched.PolicyTensile && r.BudgetOf == "" && r.TimeOf == "" {
			modes[r.Mode]++
		}
		if r.Policy == "none" && (r.MSR != 0 || r.Peak != r.VanillaPeak) {
			t.Errorf("%s %s none: MSR %v peak %d vanilla %d", r.Experiment, r.Workload, r.MSR, r.Peak, r.VanillaPeak)
		}
		if r.Experiment == "single" && r.Workload == "resnet50" && r.Policy != "none" && r.MSR <= 0 {
			t.Errorf("single resnet50 %s: MSR %.3f, want memory saved", r.Policy, r.MSR)
		}
	}
	if modes["joint"] != 2 || modes["sum-of-peaks"] != 2 {
		t.Errorf("several-job tensile rows by mode %v, want 2 joint and 2 sum-of-peaks", modes)
	}
	// Several-job rows are measured under the several-job accounting,
	// every policy over the same run; joint from its start offsets.
	msr := map[string]float64{}
	for _, r := range rows {
		if r.Jobs < 2 || r.Check != "passed" {
			continue
		}
		// (Jobs taking turns paced by keys run longer: see PlanJobs.)
		if (r.Horizon != tensorsched.SeveralHorizon && !r.PacedTurns) || (r.PacedTurns && r.Horizon <= tensorsched.SeveralHorizon) ||
			r.SumVanillaJobPeaks <= 0 || r.Reserved <= 0 {
			t.Errorf("%s %s %s %s: horizon %d, Σ vanilla job peaks %d, reserved %d", r.Experiment, r.Workload, r.Policy, r.Mode, r.Horizon, r.SumVanillaJobPeaks, r.Reserved)
		}
		if want := 1 - float64(r.Reserved)/float64(r.SumVanillaJobPeaks); math.Abs(r.MSR-want) > 1e-12 {
			t.Errorf("%s %s %s %s: MSR %v, 1 − reserved/Σ vanilla job peaks = %v", r.Experiment, r.Workload, r.Policy, r.Mode, r.MSR, want)
		}
		if (r.Mode == "joint") != (len(r.StartOffsets) == r.Jobs) {
			t.Errorf("%s %s %s %s: start offsets %v", r.Experiment, r.Workload, r.Policy, r.Mode, r.StartOffsets)
		}
		// Joint reserves the high-water mark of a longer run than the
		// horizon (phases drift): at least the horizon's.
		if r.Mode == "joint" && r.Reserved < r.RunPeak {
			t.Errorf("%s %s joint: reserved %d below the whole-run peak %d", r.Experiment, r.Workload, r.Reserved, r.RunPeak)
		}
		if r.Experiment == "copies" && r.BudgetOf == "" && r.TimeOf == "" {
			msr[r.Policy+" "+r.Mode] = r.MSR
		}
	}
	if msr["tensile joint"] < msr["tensile sum-of-peaks"] {
		t.Errorf("mlp x2: joint MSR %.3f below sum-of-peaks %.3f", msr["tensile joint"], msr["tensile sum-of-peaks"])
	}
	// The joint copies row is the planner's prediction, measured: the
	// same MSR and EOR.
	g, err := zoo.Build("mlp", workload.Train, 16, zoo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []tensorsched.Job{{Name: "mlp#0", Graph: g}, {Name: "mlp#1", Graph: g}}
	_, st, err := tensorsched.PlanJobs(jobs, gpu.MustProfile("h100-80gb"), tensorsched.Joint, tensorsched.Target{Tolerance: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Experiment == "copies" && r.Jobs == 2 && r.Mode == "joint" && r.TimeOf == "" &&
			(math.Abs(r.MSR-st.MSR) > 1e-9 || math.Abs(r.EOR-st.EOR) > 1e-9 || !slices.Equal(r.StartOffsets, st.StartOffsets)) {
			t.Errorf("mlp x2 joint: measured MSR %.6f EOR %.6f offsets %v; planned %.6f %.6f %v", r.MSR, r.EOR, r.StartOffsets, st.MSR, st.EOR, st.StartOffsets)
		}
	}
	if !strings.Contains(stderr, "single") || !strings.Contains(stderr, "mix") {
		t.Errorf("progress on stderr lacks experiments:\n%s", stderr)
	}
	md, err := os.ReadFile(filepath.Join(dir, "memory.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| single | resnet50 | 16 | checkpoint |") || !strings.Contains(string(md), "| reserved | Σ vanilla job peaks |") || strings.Contains(string(md), "FAILED") {
		t.Errorf("memory.md:\n%s", md)
	}
	recs := readCSV(t, filepath.Join(dir, "memory.csv"))
	if len(recs) != len(rows)+1 || recs[0][len(recs[0])-1] != "check" || !slices.Contains(recs[0], "reserved_bytes") || !slices.Contains(recs[0], "sum_of_vanilla_job_peaks") {
		t.Fatalf("CSV has %d records (want %d) header %v", len(recs), len(rows)+1, recs[0])
	}
	for _, r := range recs[1:] {
		if r[len(r)-1] != "passed" {
			t.Errorf("CSV row %v did not pass the checker", r)
		}
	}
	for _, m := range []string{"mlp", "resnet50"} {
		png, err := os.ReadFile(filepath.Join(dir, "memory-"+m+".png"))
		if err != nil {
			t.Fatal(err)
		}
		if len(png) < 1000 || string(png[1:4]) != "PNG" {
			t.Errorf("memory-%s.png: %d bytes, not a PNG", m, len(png))
		}
	}
}

func TestBenchMemoryFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--models", "vgg16,lenet"}, []string{"--models", "lenet", "known:"}},
		{[]string{"--models", ","}, []string{"--models", "at least one model"}},
		{[]string{"--batches", "2,x"}, []string{"--batches", `"x"`, "positive integers"}},
		{[]string{"--copies", "0"}, []string{"--copies 0", "at least 1"}},
		{[]string{"--copies-model", "lenet"}, []string{"--copies-model", "lenet", "known:"}},
		{[]string{"--policies", "none,magic"}, []string{"--policies", "magic", "known:"}},
		{[]string{"--tolerance", "lots"}, []string{"--tolerance", "paper"}},
		{[]string{"--spread-optimizer"}, []string{"--spread-optimizer spreads the updates of chunked weights", "--param-chunk"}},
		{[]string{"--device", "tpu-v9"}, []string{"--device", "tpu-v9", "known:"}},
		{[]string{"--param-chunk", "big"}, []string{"--param-chunk", `"big" is not a chunk size`}},
	}
	for _, c := range cases {
		_, _, err := runCoordinator(t, append([]string{"bench", "memory", "--out", t.TempDir()}, c.args...)...)
		if err == nil {
			t.Errorf("bench memory %v: no error", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("bench memory %v: error %q does not mention %q", c.args, err, w)
			}
		}
	}
}

// --fused-optimizer and --param-chunk reach every graph of the benchmark
// and its title: VGG16's vanilla run holds fewer gradients at once fused,
// and the rows say which graphs they measured.
func TestBenchMemoryGraphOptions(t *testing.T) {
	peak := func(extra ...string) (int64, string) {
		t.Helper()
		dir := t.TempDir()
		out, _, err := runCoordinator(t, append([]string{"bench", "memory", "--out", dir, "--models", "vgg16", "--batches", "2",
			"--copies", "1", "--copies-model", "mlp", "--policies", "none", "--json"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		var rows []tensorsched.MemBenchRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		md, err := os.ReadFile(filepath.Join(dir, "memory.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Experiment == "single" {
				return r.VanillaPeak, strings.SplitN(string(md), "\n", 2)[0]
			}
		}
		t.Fatalf("no single-model row in %d rows", len(rows))
		return 0, ""
	}
	std, stdTitle := peak()
	fu, fuTitle := peak("--fused-optimizer", "--param-chunk", "128MiB")
	if fu >= std {
		t.Errorf("vgg16 vanilla peak fused %d, standard %d: want the fused graph lower", fu, std)
	}
	if stdTitle != "# Memory scheduling on rtx2080ti-11gb" || fuTitle != "# Memory scheduling on rtx2080ti-11gb (optimizer fused into backward; linear weights in chunks of at most 128.00 MiB)" {
		t.Errorf("titles %q and %q", stdTitle, fuTitle)
	}
	// Spread chunk updates hold some gradients longer than fused ones: the
	// vanilla peak lies between fused and standard, so the option reached
	// the graphs.
	sp, spTitle := peak("--spread-optimizer", "--param-chunk", "4MiB")
	fc, _ := peak("--fused-optimizer", "--param-chunk", "4MiB")
	if sp <= fc || sp >= std {
		t.Errorf("vgg16 vanilla peak spread %d, fused %d, standard %d: want spread between them", sp, fc, std)
	}
	if spTitle != "# Memory scheduling on rtx2080ti-11gb (optimizer fused into backward, chunk updates spread; linear weights in chunks of at most 4.00 MiB)" {
		t.Errorf("spread title %q", spTitle)
	}
}

// --tolerance must be a finite positive number: NaN and Inf parse as
// floats but are no tolerance (NaN made every tensile row's tolerance
// blank, Inf ran unbounded and broke --json).
func TestBenchMemoryToleranceNotFinite(t *testing.T) {
	for _, tol := range []string{"NaN", "inf", "+Inf%", "-inf"} {
		_, _, err := runCoordinator(t, "bench", "memory", "--out", t.TempDir(), "--models", "mlp", "--batches", "2",
			"--copies", "1", "--copies-model", "mlp", "--policies", "tensile", "--equal-memory=false", "--tolerance", tol)
		if err == nil || !strings.Contains(err.Error(), "--tolerance") || !strings.Contains(err.Error(), "paper") {
			t.Errorf("bench memory --tolerance %s: error %v, want one naming --tolerance and a valid value", tol, err)
		}
	}
}

// --policies naming no policy is refused like --models and --batches,
// instead of writing an empty table and exiting 0.
func TestBenchMemoryNoPolicies(t *testing.T) {
	for _, pols := range []string{"", ",", " , "} {
		_, _, err := runCoordinator(t, "bench", "memory", "--out", t.TempDir(), "--models", "mlp", "--batches", "2",
			"--copies", "1", "--copies-model", "mlp", "--policies", pols)
		if err == nil || !strings.Contains(err.Error(), "--policies") || !strings.Contains(err.Error(), "at least one policy") {
			t.Errorf("bench memory --policies %q: error %v, want one naming --policies and asking for at least one policy", pols, err)
		}
	}
}

// The plot of a model shows each policy's own row once: the equal-memory
// and equal-time rows are tensile's too, and must not replace or repeat
// its line.
func TestPlotSeriesOwnRowsOnly(t *testing.T) {
	tl := func(b int64) []tensorsched.MemSample { return []tensorsched.MemSample{{Bytes: b}} }
	row := func(pol string, b int64) tensorsched.MemBenchRow {
		return tensorsched.MemBenchRow{Experiment: "single", Workload: "m", Batch: 16, Policy: pol, Vanilla: tl(100), Scheduled: tl(b)}
	}
	budget, timed := row(tensorsched.PolicyTensile, 70), row(tensorsched.PolicyTensile, 80)
	budget.BudgetOf, timed.TimeOf = "checkpoint", "checkpoint"
	other := row("checkpoint", 1)
	other.Workload = "n"
	rows := []tensorsched.MemBenchRow{row("none", 100), row("checkpoint", 60), row(tensorsched.PolicyTensile, 50), budget, timed, other}
	van, sched, order := plotSeries(rows, "m")
	if len(van) != 1 || van[0].Bytes != 100 {
		t.Errorf("vanilla %v, want the model's vanilla timeline", van)
	}
	if !slices.Equal(order, []string{"checkpoint", tensorsched.PolicyTensile}) {
		t.Errorf("order %v, want checkpoint and tensile once each", order)
	}
	if s := sched[tensorsched.PolicyTensile]; len(s) != 1 || s[0].Bytes != 50 {
		t.Errorf("tensile's line %v, want its own row's (50 B), not a comparison row's", s)
	}
	if s := sched["checkpoint"]; len(s) != 1 || s[0].Bytes != 60 {
		t.Errorf("checkpoint's line %v, want model m's (60 B)", s)
	}
}
