package placement

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestParseReference(t *testing.T) {
	const readme = `# Data

Some text | with a bar.

| workload | Pollux (s) | Tiresias |
|---|---|---|
| workload-1 | 2089 | 2,474 |
| workload-2 | 3323 | – |
| workload-3 |  | 5145 |

| workload | other |
|---|---|
| workload-1 | 1 |
`
	ref, err := parseReference(strings.NewReader(readme), "README.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ref.Columns, ","); got != "pollux,tiresias" {
		t.Errorf("columns %q, want pollux,tiresias (the first table only, in its order)", got)
	}
	if ref.Get("workload-1", "tiresias") != 2474 || ref.Get("workload-2", "pollux") != 3323 || ref.Get("workload-2", "tiresias") != 0 ||
		ref.Get("workload-3", "pollux") != 0 || ref.Get("workload-3", "tiresias") != 5145 || ref.Get("workload-4", "pollux") != 0 {
		t.Errorf("figures %v", ref.JCT)
	}
	var none *Reference
	if none.Get("workload-1", "pollux") != 0 {
		t.Error("a nil reference has figures")
	}

	empty, err := parseReference(strings.NewReader("# nothing\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"), "README.md")
	if err != nil || len(empty.JCT) != 0 {
		t.Errorf("README without a workload table: %v, %v; want no figures and no error", empty, err)
	}

	for _, bad := range []struct{ table, want string }{
		{"| workload | Pollux |\n|---|---|\n| workload-1 | soon |\n", `README.md:3: column pollux: "soon" is not a positive number`},
		{"| workload | Pollux |\n|---|---|\n| workload-1 | -5 |\n", `README.md:3: column pollux: "-5"`},
		{"| workload | Pollux | Tiresias |\n|---|---|---|\n| workload-1 | 5 |\n", "README.md:3: reference row has 2 cells, the header 3"},
	} {
		_, err := parseReference(strings.NewReader(bad.table), "README.md")
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("table %q: error %v, want one containing %q", bad.table, err, bad.want)
		}
	}
}

// benchApps returns two synthetic applications for the cluster benchmark
// tests: a short one that scales well and a long one that does not.
func benchApps() (Apps, error) {
	// step is a fixed cost, a cost per local sample, and with more than
	// one replica a synchronisation cost per node.
	step := func(fixed, perSample, syncPerNode float64) func(nodes, r int, l float64) (float64, float64) {
		return func(nodes, r int, l float64) (float64, float64) {
			sync := 0.0
			if r > 1 {
				sync = syncPerNode * float64(nodes)
			}
			return fixed + perSample*l + sync, sync
		}
	}
	short, err := NewSyntheticApp(SyntheticApp{Name: "short", BaseBatch: 8, MaxBatch: 128, MinLocal: 1, MaxLocal: 32,
		NoiseScale: 256, DatasetSize: 20000, Epochs: 2, Step: step(0.05, 0.004, 0.02)})
	if err != nil {
		return nil, err
	}
	long, err := NewSyntheticApp(SyntheticApp{Name: "long", BaseBatch: 16, MaxBatch: 256, MinLocal: 1, MaxLocal: 16,
		NoiseScale: 2048, DatasetSize: 200000, Epochs: 3, Step: step(0.2, 0.01, 0.1)})
	if err != nil {
		return nil, err
	}
	return Apps{"short": short, "long": long}, nil
}

func benchWorkloads() []BenchWorkload {
	var a, b []WorkloadJob
	for i := range 8 {
		app := "short"
		if i%3 == 0 {
			app = "long"
		}
		a = append(a, WorkloadJob{Name: fmt.Sprintf("a%d", i), Time: float64(90 * i), App: app, Replicas: 1 + i%2, Batch: 16})
		b = append(b, WorkloadJob{Name: fmt.Sprintf("b%d", i), Time: float64(40 * i), App: app, Replicas: 2, Batch: 32})
	}
	return []BenchWorkload{{Name: "wa", Jobs: a}, {Name: "wb", Jobs: b}}
}

// TestRunClusterBench: every workload runs under every policy, ones once
// per seed and the others once; each run is what Simulate (or Bound) gives
// for the same policy and seed, whatever the number of workers; no policy
// beats the bound.
func TestRunClusterBench(t *testing.T) {
	sim := SimConfig{Nodes: 2, GPUsPerNode: 4, Interval: 60, MoveCost: 30}
	opts := ClusterBenchOptions{
		Workloads: benchWorkloads(), Policies: []string{"fifo", "tiresias", "ones", "bound"}, Seeds: []int64{1, 2},
		Sim: sim, Apps: benchApps,
	}
	var lines []string
	opts.Workers = 1
	opts.Progress = func(s string) { lines = append(lines, s) }
	one, err := RunClusterBench(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Workers, opts.Progress = 3, nil
	three, err := RunClusterBench(opts)
	if err != nil {
		t.Fatal(err)
	}
	// 2 workloads × (fifo, tiresias, bound once; ones twice).
	if len(one) != 10 || len(three) != 10 || len(lines) != 10 {
		t.Fatalf("%d and %d runs, %d progress lines; want 10 each", len(one), len(three), len(lines))
	}
	if !strings.HasPrefix(lines[9], "bench cluster: 10/10 runs (") {
		t.Errorf("last progress line %q", lines[9])
	}
	apps, _ := benchApps()
	wls := benchWorkloads()
	i := 0
	for wi, w := range wls {
		for _, p := range opts.Policies {
			seeds := []int64{0}
			if p == "ones" {
				seeds = opts.Seeds
			}
			for _, s := range seeds {
				r := one[i]
				if r.Workload != w.Name || r.Policy != p || r.Seed != s || r.AnySeed != (p != "ones") || r.Jobs != 8 {
					t.Fatalf("run %d is %s/%s seed %d (any %v, %d jobs), want %s/%s seed %d", i, r.Workload, r.Policy, r.Seed, r.AnySeed, r.Jobs, w.Name, p, s)
				}
				r3 := three[i]
				r3.WallSeconds = r.WallSeconds
				if r3 != r {
					t.Errorf("run %d differs with 3 workers:\n%+v\n%+v", i, r, r3)
				}
				var want *SimResult
				if p == "bound" {
					want, err = Bound(apps, w.Jobs, BoundConfig{Nodes: 2, GPUsPerNode: 4})
				} else {
					pol, perr := NewPolicy(p, PolicyOptions{Seed: s, MoveCost: 30, Interval: 60})
					if perr != nil {
						t.Fatal(perr)
					}
					want, err = Simulate(apps, w.Jobs, pol, sim)
				}
				if err != nil {
					t.Fatal(err)
				}
				if r.AvgJCT != want.AvgJCT || r.Makespan != want.Makespan || r.Restarts != want.Restarts {
					t.Errorf("%s/%s seed %d: avg JCT %v, makespan %v, restarts %d; the direct run gives %v, %v, %d",
						w.Name, p, s, r.AvgJCT, r.Makespan, r.Restarts, want.AvgJCT, want.Makespan, want.Restarts)
				}
				if bound := one[wi*5+4]; r.AvgJCT < bound.AvgJCT-1e-9 {
					t.Errorf("%s/%s: avg JCT %v below the bound %v", w.Name, p, r.AvgJCT, bound.AvgJCT)
				}
				i++
			}
		}
	}

	// The ONES settings, the horizon and the bound's start costs reach the
	// runs (and change them, so that dropping one fails here).
	tuned, err := ParseONESTuning("hold=6,hysteresis=1")
	if err != nil {
		t.Fatal(err)
	}
	topts := ClusterBenchOptions{Workloads: wls[:1], Policies: []string{"ones", "bound"}, Seeds: []int64{1},
		Sim: sim, Apps: benchApps, ONES: tuned, Horizon: 600, BoundStartCosts: true}
	tr, err := RunClusterBench(topts)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := NewPolicy("ones", PolicyOptions{Seed: 1, MoveCost: 30, Interval: 60, Horizon: 600, ONES: tuned})
	if err != nil {
		t.Fatal(err)
	}
	wantOnes, err := Simulate(apps, wls[0].Jobs, pol, sim)
	if err != nil {
		t.Fatal(err)
	}
	wantBound, err := Bound(apps, wls[0].Jobs, BoundConfig{Nodes: 2, GPUsPerNode: 4, StartCosts: true, Interval: 60, MoveCost: 30})
	if err != nil {
		t.Fatal(err)
	}
	if tr[0].AvgJCT != wantOnes.AvgJCT || tr[1].AvgJCT != wantBound.AvgJCT {
		t.Errorf("tuned ones %v, bound with start costs %v; direct runs give %v, %v", tr[0].AvgJCT, tr[1].AvgJCT, wantOnes.AvgJCT, wantBound.AvgJCT)
	}
	if tr[0].AvgJCT == one[2].AvgJCT || tr[1].AvgJCT == one[4].AvgJCT {
		t.Errorf("tuned ones %v and bound with start costs %v equal the defaults' %v and %v: the test cannot tell them apart",
			tr[0].AvgJCT, tr[1].AvgJCT, one[2].AvgJCT, one[4].AvgJCT)
	}

	hold2, err := ParseONESTuning("hold=2")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		o    ClusterBenchOptions
		want string
	}{
		{ClusterBenchOptions{Workloads: wls, Policies: []string{"srtf"}, Seeds: []int64{1}, Sim: sim, Apps: benchApps}, `unknown policy "srtf"`},
		{ClusterBenchOptions{Workloads: wls, Policies: []string{"fifo"}, Seeds: []int64{1}, Sim: sim}, "Apps is nil"},
		{ClusterBenchOptions{Workloads: wls, Policies: []string{"fifo"}, Sim: sim, Apps: benchApps}, "need at least one workload, policy and seed"},
		{ClusterBenchOptions{Workloads: wls, Policies: []string{"fifo"}, Seeds: []int64{1}, Sim: sim, Apps: benchApps, ONES: hold2}, "without policy ones"},
		{ClusterBenchOptions{Workloads: []BenchWorkload{wls[0], wls[0]}, Policies: []string{"fifo"}, Seeds: []int64{1}, Sim: sim, Apps: benchApps},
			`two workloads are named "wa"`},
		{ClusterBenchOptions{Workloads: []BenchWorkload{{Name: "x", Jobs: []WorkloadJob{{Name: "j", App: "nope", Replicas: 1, Batch: 8}}}},
			Policies: []string{"fifo"}, Seeds: []int64{1}, Sim: sim, Apps: benchApps}, "x under fifo"},
	} {
		_, err := RunClusterBench(bad.o)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("error %v, want one containing %q", err, bad.want)
		}
	}
}

// TestSummariseClusterBench checks the target arithmetic on runs made up
// for it.
func TestSummariseClusterBench(t *testing.T) {
	runs := []BenchRun{
		{Workload: "w1", Policy: "tiresias", AnySeed: true, JCTStats: JCTStats{AvgJCT: 1000}},
		{Workload: "w1", Policy: "ones", Seed: 1, JCTStats: JCTStats{AvgJCT: 650}},
		{Workload: "w1", Policy: "ones", Seed: 2, JCTStats: JCTStats{AvgJCT: 720}},
		{Workload: "w2", Policy: "ones", Seed: 1, JCTStats: JCTStats{AvgJCT: 500}},
	}
	ref := &Reference{Columns: []string{"pollux", "tiresias"}, JCT: map[string]map[string]float64{
		"w1": {"pollux": 700, "tiresias": 900},
	}}
	cells, targets := SummariseClusterBench(runs, ref)
	if c := cells["w1"]["ones"]; c.Mean != 685 || c.Min != 650 || c.Max != 720 || len(c.Runs) != 2 {
		t.Errorf("w1 ones cell %+v", c)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	w1 := targets[0]
	if w1.Workload != "w1" || !near(w1.TiresiasVsRef, 1000.0/900-1) || !near(w1.ONESVsPollux, (650.0/700+720.0/700)/2) ||
		w1.ONESBelowPollux != 1 || !near(w1.ONESReduction, (0.35+0.28)/2) || w1.ONESMeetsReduction != 1 || w1.Seeds != 2 {
		t.Errorf("w1 targets %+v", w1)
	}
	w2 := targets[1]
	if w2.Workload != "w2" || !math.IsNaN(w2.TiresiasVsRef) || !math.IsNaN(w2.ONESVsPollux) || !math.IsNaN(w2.ONESReduction) || w2.Seeds != 1 {
		t.Errorf("w2 (no reference, no tiresias) targets %+v", w2)
	}

	var md strings.Builder
	if err := WriteClusterBenchMarkdown(&md, "cmd", []string{"tiresias", "ones"}, runs, ref); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| workload | tiresias | ones | reference pollux | reference tiresias |",
		"| w1 | 1000 | 685 (650–720) | 700 | 900 |",
		"| w2 | – | 500 | – | – |",
		"| w1 | +11.1 % (met) | 0.979 (met); 1 of 2 seeds below | 31.5 % (met); 1 of 2 seeds |",
		"| w2 | – | – | – |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var csv strings.Builder
	if err := WriteClusterBenchCSV(&csv, runs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(csv.String(), "w1,tiresias,any,0,1000.0,") || !strings.Contains(csv.String(), "w1,ones,2,0,720.0,") {
		t.Errorf("csv:\n%s", csv.String())
	}
}
