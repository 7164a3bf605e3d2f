package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gpusched/gpusched/placement"
)

type benchClusterFlags struct {
	data, workloads, policies, seeds, out string
	gpus, gpusPerNode, workers            int
	interval, moveCost, horizon           time.Duration
	boundStart, json, reference           bool
	ones                                  onesFlag
}

func init() {
	f := &benchClusterFlags{interval: 60 * time.Second, moveCost: time.Duration(placement.DefaultMoveCost) * time.Second}
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Reproduce the cluster experiments: every policy on the measured workloads, against the reference figures",
		Long: `bench cluster simulates each measured workload (by default workload-1 to
workload-4 of the data directory) under each policy (fifo, tiresias, ones and the
lower bound) -- ones once per --seeds, the others once, as they draw no random
numbers -- several simulations at a time (--workers). It reads the reference
figures from the data directory's README.md and checks the cluster targets:
our tiresias within ±15 % of the reference Tiresias, ones below the reference
Pollux, ones at least 30 % below our tiresias. It writes DIR/cluster.md (the
tables), DIR/cluster.csv (one row per simulation) and DIR/cluster.png (average
JCT per workload and policy beside the reference figures), prints the tables (or
JSON with --json), and shows a line per finished simulation on stderr. An unmet
target is reported, not an error. The simulations are those of
"coordinator simulate" with the same flags; a workload of zoo models runs there.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchCluster(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "", "data directory with apps/, workloads/ and README.md (default: shared/data/pollux above the working directory)")
	fl.StringVar(&f.workloads, "workloads", "1,2,3,4", "comma-separated workloads: a number N for the data directory's workloads/workload-N.csv, or a CSV file")
	fl.StringVar(&f.policies, "policies", strings.Join(append(slices.Clone(placement.PolicyNames), "bound"), ","), "comma-separated policies: "+strings.Join(placement.PolicyNames, ", ")+", bound")
	fl.StringVar(&f.seeds, "seeds", "1", "seeds of ones: N, N-M or a comma-separated list (e.g. 1-9)")
	fl.IntVar(&f.gpus, "gpus", 64, "GPUs in the cluster")
	fl.IntVar(&f.gpusPerNode, "gpus-per-node", 4, "GPUs per node")
	fl.Var((*seconds)(&f.interval), "interval", "scheduling interval (seconds, or a duration such as 1m)")
	fl.Var((*seconds)(&f.moveCost), "move-cost", "checkpoint-and-restart time of starting, resizing or moving a job (seconds or duration)")
	fl.Var((*seconds)(&f.horizon), "horizon", "ONES fitness horizon (seconds or duration; 0: the policy's default)")
	fl.BoolVar(&f.reference, "reference", false, referenceHelp)
	fl.BoolVar(&f.boundStart, "bound-start-costs", false, "bound: start each job at the first decision after its arrival and charge --move-cost once, as the simulator does")
	fl.Var(&f.ones, "ones", "override ones's parameters, e.g. hold=4,hysteresis=8 (keys: "+placement.ONESTuningKeys()+"; see the README)")
	fl.IntVar(&f.workers, "workers", 0, "simulations run at once (0: one per CPU)")
	fl.StringVar(&f.out, "out", "./out/bench-cluster", "output directory")
	fl.BoolVar(&f.json, "json", false, "print the runs and the target checks as JSON on stdout")
	benchCmd.AddCommand(cmd)
}

// parseSeeds reads --seeds: N, N-M (inclusive) or a comma-separated list
// of either.
func parseSeeds(s string) ([]int64, error) {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds: %q is not a seed (want N, N-M or a list such as 1,2,5)", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(strings.TrimSpace(hi), 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("--seeds: %q is not a range N-M with N ≤ M", part)
			}
			if b-a >= 1000 {
				return nil, fmt.Errorf("--seeds: %q names %d seeds; at most 1000", part, b-a+1)
			}
		}
		for k := int64(0); k <= b-a; k++ { // an offset: x++ would wrap at the largest int64
			if x := a + k; !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--seeds %q: name at least one seed, e.g. 1 or 1-9", s)
	}
	return out, nil
}

func runBenchCluster(cmd *cobra.Command, f *benchClusterFlags) error {
	if err := checkSimFlags(f.gpus, f.gpusPerNode, f.interval, f.moveCost, f.horizon); err != nil {
		return err
	}
	if f.workers < 0 {
		return fmt.Errorf("--workers %d: want 0 (one per CPU) or more", f.workers)
	}
	policies, err := parsePolicies(f.policies, "bound")
	if err != nil {
		return err
	}
	tuning := placement.ONESTuning(f.ones)
	if !tuning.Empty() && !slices.Contains(policies, "ones") {
		return fmt.Errorf("--ones %s applies to policy ones, which --policies %q leaves out", tuning, f.policies)
	}
	if f.boundStart && !slices.Contains(policies, "bound") {
		return fmt.Errorf("--bound-start-costs applies to policy bound, which --policies %q leaves out", f.policies)
	}
	seeds, err := parseSeeds(f.seeds)
	if err != nil {
		return err
	}
	data := f.data
	if data == "" {
		if data, err = placement.FindDataDir("."); err != nil {
			return fmt.Errorf("%v: pass --data DIR (a folder with apps/, workloads/ and README.md)", err)
		}
	}
	appsDir := filepath.Join(data, "apps")
	apps, err := placement.LoadApps(appsDir)
	if err != nil {
		return err
	}
	var wls []placement.BenchWorkload
	paths := map[string]string{}
	for _, w := range strings.Split(f.workloads, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		path := w
		if n, err := strconv.Atoi(w); err == nil {
			path = filepath.Join(data, "workloads", fmt.Sprintf("workload-%d.csv", n))
		}
		jobs, err := placement.LoadWorkload(path, apps)
		if err != nil {
			return fmt.Errorf("--workloads %s: %w", w, err)
		}
		for _, j := range jobs {
			if _, ok := apps[j.App]; !ok {
				return fmt.Errorf("--workloads %s: job %s names application %q, which has no measured profile in %s; "+
					"run a workload of zoo models with coordinator simulate, which builds their profiles from the cost model", w, j.Name, j.App, appsDir)
			}
		}
		name := strings.TrimSuffix(filepath.Base(path), ".csv")
		if prev, dup := paths[name]; dup {
			return fmt.Errorf("--workloads: %s and %s are both named %s (rows and reference figures go by the file name): name each workload once", prev, path, name)
		}
		paths[name] = path
		wls = append(wls, placement.BenchWorkload{Name: name, Jobs: jobs})
	}
	if len(wls) == 0 {
		return fmt.Errorf("--workloads %q: name at least one workload, e.g. 1,2,3,4", f.workloads)
	}
	ref, err := placement.LoadReference(data)
	if err != nil {
		// The figures are still worth having without the reference.
		fmt.Fprintf(cmd.ErrOrStderr(), "bench cluster: warning: %v; the target checks that need it are left blank\n", err)
		ref = nil
	}
	for _, w := range wls {
		for _, col := range []string{"tiresias", "pollux"} {
			if ref.Get(w.Name, col) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "bench cluster: warning: %s has no reference %s figure in %s; the checks against it are left blank\n",
					w.Name, col, filepath.Join(data, "README.md"))
			}
		}
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	runs, err := placement.RunClusterBench(placement.ClusterBenchOptions{
		Workloads: wls, Policies: policies, Seeds: seeds,
		Sim: placement.SimConfig{Nodes: f.gpus / f.gpusPerNode, GPUsPerNode: f.gpusPerNode,
			Interval: f.interval.Seconds(), MoveCost: f.moveCost.Seconds(), Reference: f.reference},
		BoundStartCosts: f.boundStart, Horizon: f.horizon.Seconds(), ONES: tuning,
		Apps:     func() (placement.Apps, error) { return placement.LoadApps(appsDir) },
		Workers:  f.workers,
		Progress: func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), s) },
	})
	if err != nil {
		return err
	}
	line := benchClusterCommand(f)
	var md strings.Builder
	if err := placement.WriteClusterBenchMarkdown(&md, line, policies, runs, ref); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(f.out, "cluster.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(f.out, "cluster.csv"), func(fh *os.File) error { return placement.WriteClusterBenchCSV(fh, runs) }); err != nil {
		return err
	}
	if err := plotClusterBench(filepath.Join(f.out, "cluster.png"), policies, wls, runs, ref); err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if f.json {
		_, targets := placement.SummariseClusterBench(runs, ref)
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Runs    []placement.BenchRun    `json:"runs"`
			Targets []benchClusterTargetOut `json:"targets"`
		}{runs, targetsOut(targets)})
	}
	fmt.Fprint(w, md.String())
	fmt.Fprintf(w, "\nwrote %s (cluster.md, cluster.csv, cluster.png): %d simulations\n", f.out, len(runs))
	return nil
}

// benchClusterTargetOut is a target check in JSON: a figure that could not
// be computed (no reference, policy not run) is null, not NaN.
type benchClusterTargetOut struct {
	Workload           string   `json:"workload"`
	TiresiasVsRef      *float64 `json:"tiresias_vs_reference"`
	ONESVsPollux       *float64 `json:"ones_vs_pollux"`
	ONESBelowPollux    int      `json:"ones_seeds_below_pollux"`
	ONESReduction      *float64 `json:"ones_reduction_vs_tiresias"`
	ONESMeetsReduction int      `json:"ones_seeds_meeting_reduction"`
	Seeds              int      `json:"seeds"`
}

func targetsOut(ts []placement.BenchTarget) []benchClusterTargetOut {
	num := func(x float64) *float64 {
		if x != x { // NaN
			return nil
		}
		return &x
	}
	out := make([]benchClusterTargetOut, len(ts))
	for i, t := range ts {
		out[i] = benchClusterTargetOut{Workload: t.Workload, TiresiasVsRef: num(t.TiresiasVsRef), ONESVsPollux: num(t.ONESVsPollux),
			ONESBelowPollux: t.ONESBelowPollux, ONESReduction: num(t.ONESReduction), ONESMeetsReduction: t.ONESMeetsReduction, Seeds: t.Seeds}
	}
	return out
}

// benchClusterCommand is the command line that reproduces the run.
func benchClusterCommand(f *benchClusterFlags) string {
	s := "coordinator bench cluster"
	if f.data != "" {
		s += " --data " + f.data
	}
	s += " --workloads " + f.workloads + " --policies " + f.policies + " --seeds " + f.seeds +
		" --gpus " + strconv.Itoa(f.gpus) + " --gpus-per-node " + strconv.Itoa(f.gpusPerNode) +
		" --interval " + f.interval.String() + " --move-cost " + f.moveCost.String()
	if f.horizon > 0 {
		s += " --horizon " + f.horizon.String()
	}
	if t := placement.ONESTuning(f.ones); !t.Empty() {
		s += " --ones " + t.String()
	}
	return s + modeArgs(f.boundStart, f.reference)
}

// plotClusterBench draws every policy's average JCT per workload on a log
// axis (a seeded policy's mean, with bars from its least to its greatest
// seed), beside the reference figures as hollow marks.
func plotClusterBench(path string, policies []string, wls []placement.BenchWorkload, runs []placement.BenchRun, ref *placement.Reference) error {
	cells, _ := placement.SummariseClusterBench(runs, ref)
	p := plot.New()
	p.Title.Text = "Average job completion time by workload (a seeded policy: mean over its seeds, bars from the least to the greatest)"
	p.Y.Label.Text = "average JCT (s, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	names := make([]string, len(wls))
	for i, w := range wls {
		names[i] = w.Name
	}
	p.NominalX(names...)
	var refCols []string
	if ref != nil {
		refCols = ref.Columns
	}
	// Policies are filled marks in colour, the reference figures hollow
	// black ones.
	filled := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}}
	hollow := []draw.GlyphDrawer{draw.RingGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}}
	series := len(policies) + len(refCols)
	x := func(i, k int) float64 { return float64(i) + 0.6*(float64(k)+0.5)/float64(series) - 0.3 }
	for k, pol := range policies {
		var pts plotter.XYs
		var errs plotter.YErrors
		for i, w := range wls {
			c := cells[w.Name][pol]
			if c == nil {
				continue
			}
			pts = append(pts, plotter.XY{X: x(i, k), Y: c.Mean})
			errs = append(errs, struct{ Low, High float64 }{c.Mean - c.Min, c.Max - c.Mean})
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(k), Radius: vg.Points(4), Shape: filled[k%len(filled)]}
		p.Add(sc)
		p.Legend.Add(pol, sc)
		if placement.SeededPolicy(pol) {
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{pts, errs})
			if err != nil {
				return err
			}
			eb.Color = plotutil.Color(k)
			p.Add(eb)
		}
	}
	for r, col := range refCols {
		var pts plotter.XYs
		for i, w := range wls {
			if v := ref.Get(w.Name, col); v > 0 {
				pts = append(pts, plotter.XY{X: x(i, len(policies)+r), Y: v})
			}
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(4), Shape: hollow[r%len(hollow)]}
		p.Add(sc)
		p.Legend.Add("reference "+col, sc)
	}
	// Room above the highest mark for the legend, and beside the outer
	// marks.
	p.Y.Max *= 8
	p.Y.Min /= 1.5
	p.X.Min, p.X.Max = -0.5, float64(len(wls))-0.5
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p.Save(10*vg.Inch, 5*vg.Inch, path)
}
