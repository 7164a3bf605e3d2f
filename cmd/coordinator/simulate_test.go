package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/placement"
)

// simulateZoo runs the example zoo workload under FIFO with extra flags and
// decodes the JSON result (zoo models need no measured profiles).
func simulateZoo(t *testing.T, extra ...string) (*placement.SimResult, string) {
	t.Helper()
	return simulateJSON(t, append([]string{"--workload", "../../examples/zoo-workload.csv", "--policy", "fifo"}, extra...)...)
}

// simulateJSON runs coordinator simulate --json with args and decodes the
// result; it also returns what went to stderr.
func simulateJSON(t *testing.T, args ...string) (*placement.SimResult, string) {
	t.Helper()
	out, errOut, err := runCoordinator(t, append([]string{"simulate", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("simulate %v: %v", args, err)
	}
	var r placement.SimResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return &r, errOut
}

// TestSimulateZooWorkload: the example workload of zoo models simulates
// from the cost model on --device; a slower device makes the jobs slower.
func TestSimulateZooWorkload(t *testing.T) {
	if raceEnabled {
		// Finding the TENSILE batch bounds of eight models plans each
		// 10–20 times (≈ 2 min under -race); the builder's concurrency is
		// raced in placement/zooapps.
		t.Skip("plans eight zoo models' batch bounds; runs without -race")
	}
	h, errOut := simulateZoo(t)
	if h.NumJobs != 12 || len(h.PerJob) != 12 {
		t.Fatalf("%d jobs, want 12", h.NumJobs)
	}
	for _, m := range []string{"vgg16", "resnet50", "inception-v3", "inception-v4", "densenet121", "bert-base", "gpt2-small", "mlp"} {
		if !strings.Contains(errOut, "zoo model "+m+" on h100-80gb:") {
			t.Errorf("stderr does not describe zoo model %s:\n%s", m, errOut)
		}
	}
	if !strings.Contains(errOut, "zoo model gpt2-small on h100-80gb: ") || !strings.Contains(errOut, "(TENSILE at 10%; vanilla ≤ ") {
		t.Errorf("stderr does not give the TENSILE and vanilla per-GPU bounds:\n%s", errOut)
	}
	a, aErr := simulateZoo(t, "--device", "a100-40gb", "--memory", "vanilla")
	if !(a.AvgJCT > 1.5*h.AvgJCT) {
		t.Errorf("avg JCT %.0f s on a100-40gb, %.0f s on h100-80gb: want the A100 much slower", a.AvgJCT, h.AvgJCT)
	}
	if !strings.Contains(aErr, "(vanilla)") || strings.Contains(aErr, "TENSILE") {
		t.Errorf("--memory vanilla: stderr should give only vanilla bounds:\n%s", aErr)
	}
}

func TestSimulateZooFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--device", "nope"}, `simulate: --device: unknown device profile "nope"`},
		{[]string{"--inter-node-gbs", "0"}, "simulate: --inter-node-gbs: 0 must be a bandwidth > 0 GB/s"},
		{[]string{"--memory", "swap"}, `simulate: --memory "swap": want tensile or vanilla`},
		{[]string{"--tolerance", "-5%"}, `simulate: --tolerance "-5%": want a non-negative percentage`},
		// The policy list names bound too, and the flag; "one" is a typo of ones.
		{[]string{"--policy", "one"}, `simulate: --policy: unknown policy "one" (want one of fifo, tiresias, ones, bound)`},
	} {
		args := append([]string{"simulate", "--workload", "../../examples/zoo-workload.csv", "--policy", "fifo"}, c.args...)
		if _, _, err := runCoordinator(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.args, err, c.want)
		}
	}
}

// TestSimulateBound: --policy bound prints the lower bound, which every
// policy's average JCT respects; --bound-start-costs adds the wait for the
// first decision and one move cost per job.
func TestSimulateBound(t *testing.T) {
	d, err := placement.FindDataDir(".")
	if err != nil {
		t.Skipf("measured profiles not available: %v", err)
	}
	wl := filepath.Join(t.TempDir(), "w.csv")
	csv := "name,time,application,num_replicas,batch_size\n" +
		"a,0,cifar10,1,128\nb,10,bert,2,12\nc,95,yolov3,4,8\nd,100,cifar10,2,256\n"
	if err := os.WriteFile(wl, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) *placement.SimResult {
		t.Helper()
		r, _ := simulateJSON(t, append([]string{"--workload", wl, "--apps", filepath.Join(d, "apps")}, args...)...)
		return r
	}
	pure := run("--policy", "bound")
	start := run("--policy", "bound", "--bound-start-costs")
	if pure.Policy != "bound" || len(pure.PerJob) != 4 || len(start.PerJob) != 4 {
		t.Fatalf("bound: policy %q, %d and %d jobs", pure.Policy, len(pure.PerJob), len(start.PerJob))
	}
	// Decisions every 60 s; a move cost of 30 s.
	delay := map[string]float64{"a": 30, "b": 80, "c": 55, "d": 50}
	for i, j := range pure.PerJob {
		s := start.PerJob[i]
		if !(j.JCT > 0) || math.Abs(s.JCT-j.JCT-delay[j.Name]) > 1e-6 {
			t.Errorf("job %s: bound %v, with start costs %v, want %v more", j.Name, j.JCT, s.JCT, delay[j.Name])
		}
	}
	for _, p := range []string{"fifo", "tiresias", "ones"} {
		if r := run("--policy", p); r.AvgJCT < start.AvgJCT {
			t.Errorf("%s: average JCT %.1f below the bound %.1f", p, r.AvgJCT, start.AvgJCT)
		}
	}
	if _, _, err := runCoordinator(t, "simulate", "--workload", wl, "--policy", "fifo", "--bound-start-costs"); err == nil ||
		!strings.Contains(err.Error(), "--bound-start-costs needs --policy bound") {
		t.Errorf("--bound-start-costs with fifo: error %v", err)
	}
}

// simulate --move-cost 0 tells ONES that changes are free, as the
// simulator charges them: ONES used to weigh its 30 s default instead.
func TestSimulateMoveCostReachesPolicy(t *testing.T) {
	for _, c := range []struct {
		cost time.Duration
		want float64
	}{{0, 0}, {45 * time.Second, 45}, {time.Duration(placement.DefaultMoveCost) * time.Second, placement.DefaultMoveCost}} {
		p, err := simulatePolicy(&simulateFlags{policy: "ones", seed: 1, interval: time.Minute, moveCost: c.cost})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(*placement.ONES).Config().MoveCost; got != c.want {
			t.Errorf("--move-cost %v: ONES weighs %v s, want %v", c.cost, got, c.want)
		}
	}
}

// TestSimulateZooFlagsCheckedWithoutZooJobs: --device, --memory,
// --tolerance and the bandwidths are checked whether or not the workload
// names a zoo model (before, a measured-only workload ignored bad values
// silently).
func TestSimulateZooFlagsCheckedWithoutZooJobs(t *testing.T) {
	good := simulateFlags{device: "h100-80gb", memory: "tensile", tolerance: "10%", intraGBs: 100, interGBs: 12.5}
	if err := addZooApps(nil, &good, placement.Apps{}, nil); err != nil {
		t.Fatalf("default zoo flags: %v", err)
	}
	for _, c := range []struct {
		edit func(*simulateFlags)
		want string
	}{
		{func(f *simulateFlags) { f.device = "no-such-gpu" }, "--device"},
		{func(f *simulateFlags) { f.memory = "lots" }, "--memory"},
		{func(f *simulateFlags) { f.tolerance = "10" }, "--tolerance"},
		{func(f *simulateFlags) { f.interGBs = -1 }, "inter-node"},
	} {
		f := good
		c.edit(&f)
		if err := addZooApps(nil, &f, placement.Apps{}, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v with no zoo jobs: error %v, want one naming %s", f, err, c.want)
		}
	}
}

// The bound's summary says what it is instead of a 0.0 % utilisation and
// zero restarts and decisions it never computes; a policy's keeps them.
func TestSimulateBoundSummary(t *testing.T) {
	f := &simulateFlags{workload: "w.csv", gpusPerNode: 4}
	b := simSummary(f, &placement.SimResult{Policy: "bound", NumJobs: 2, JCTStats: placement.JCTStats{Makespan: 100}})
	if strings.Contains(b, "utilisation") || strings.Contains(b, "restarts") || !strings.Contains(b, "lower bound") {
		t.Errorf("bound summary:\n%s", b)
	}
	o := simSummary(f, &placement.SimResult{Policy: "ones", NumJobs: 2, JCTStats: placement.JCTStats{Makespan: 100, Utilisation: 0.5}})
	if !strings.Contains(o, "GPU utilisation 50.0%") || !strings.Contains(o, "restarts 0") {
		t.Errorf("ones summary:\n%s", o)
	}
}

// simulate without --workload suggests a file that exists from where it
// runs: the measured workload-1.csv when shared/data/pollux is above the
// working directory, else the zoo workload shipped in examples/ (it
// suggested "shared/data/pollux/workloads/workload-1.csv", which is not
// there from the repository root, where the README's ../shared path is).
func TestSimulateWorkloadRequiredSuggestsExistingFile(t *testing.T) {
	if _, err := placement.FindDataDir("."); err != nil {
		t.Skipf("shared/data/pollux not above the test's directory: %v", err)
	}
	_, _, err := runCoordinator(t, "simulate")
	if err == nil || !strings.Contains(err.Error(), "--workload FILE.csv is required (e.g. --workload ") {
		t.Fatalf("simulate without --workload: %v", err)
	}
	s := err.Error()
	path := strings.TrimSuffix(s[strings.Index(s, "(e.g. --workload ")+len("(e.g. --workload "):], ")")
	if _, serr := os.Stat(path); serr != nil {
		t.Errorf("simulate suggests %q, which does not exist here: %v", path, serr)
	}
}
