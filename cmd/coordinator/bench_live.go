package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/workload"
)

type benchLiveFlags struct {
	file, policies, out string
	runs, warmup        int
	scale               float64
	limit               time.Duration
	every, planWait     seconds
	json, verbose       bool
	shape               demoShape
	ones                onesFlag
}

func init() {
	f := &benchLiveFlags{scale: 100, limit: 5 * time.Minute, every: seconds(actors.DefaultElasticInterval * float64(time.Second)), shape: defaultDemoShape}
	cmd := &cobra.Command{
		Use:   "live",
		Short: "Run a job file through the live elastic loop under each policy, several times, and compare average completion",
		Long: `bench live runs the demo's whole in-process cluster (embedded NATS, the
coordinator, --nodes nodes of --gpus-per-node simulated --device GPUs, by
default two of two h100-80gb) once per --runs for each of --policies, submitting --file each time, and compares the elastic
policies by the jobs' average completion time in job time (submission to
completion, wall seconds × --time-scale). Runs take turns between the
policies (run 1 of each, then run 2, ...), so a change in the machine's load
touches every policy alike. The memory predictions are planned once, before
the first run, and shared by all runs; --warmup runs each policy that many
times first, left out of the figures.

Live figures vary from run to run: the memory planner runs in wall time
beside jobs that run --time-scale times faster, so a round may decide a few
job seconds later in one run than in another. Compare medians.

It prints a table (median, least and most average completion, the median
makespan and elastic changes per policy, over the runs that completed every
job; or JSON with --json), a line per finished run on stderr, and writes
DIR/live.md, DIR/live.csv (one row per run) and DIR/live.png (each run's
average completion per policy, and the median). A run that fails or leaves
jobs unfinished is reported and the others go on; the command then exits
with an error, after its report.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchLive(f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.file, "file", "examples/elastic-mix.yaml", "job spec file to submit in every run")
	fl.StringVar(&f.policies, "policies", strings.Join(placement.PolicyNames, ","), "comma-separated elastic policies: "+strings.Join(placement.PolicyNames, ", "))
	fl.IntVar(&f.runs, "runs", 3, "runs per policy")
	fl.IntVar(&f.warmup, "warmup", 0, "runs per policy before the measured ones, left out of the figures (a policy's first run waits for plans of batches no run planned before)")
	fl.Float64Var(&f.scale, "time-scale", f.scale, "simulated GPUs run this many times faster than real time")
	fl.DurationVar(&f.limit, "limit", f.limit, "give up on a run after this long (wall time)")
	fl.Var(&f.every, "elastic-interval", "job time between elastic rounds (seconds or a duration)")
	fl.StringVar(&f.out, "out", "./out/bench-live", "output directory")
	fl.BoolVar(&f.json, "json", false, "print the runs and the summary as JSON on stdout")
	fl.BoolVar(&f.verbose, "verbose", false, "show the runs' runtime logs on stderr")
	fl.Var(&f.ones, "ones", "the ones runs' parameters, e.g. hold=4,explore=4 (keys as simulate --ones)")
	f.shape.register(fl)
	registerPlacement(fl, &f.shape.placement)
	fl.Var(&f.planWait, "plan-wait", planWaitHelp)
	benchCmd.AddCommand(cmd)
}

// parsePolicies reads a comma-separated --policies list of known policies
// (placement.PolicyNames and extra), without repeats.
func parsePolicies(s string, extra ...string) ([]string, error) {
	known := append(slices.Clone(placement.PolicyNames), extra...)
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" || slices.Contains(out, p) {
			continue
		}
		if !slices.Contains(known, p) {
			return nil, fmt.Errorf("--policies: %q is not a policy (known: %s)", p, strings.Join(known, ", "))
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--policies %q: name at least one policy, e.g. %s", s, strings.Join(known, ","))
	}
	return out, nil
}

// LiveRun is one run of bench live.
type LiveRun struct {
	Policy string `json:"policy"`
	Run    int    `json:"run"`
	// AvgCompletion is the completed jobs' mean submission-to-completion
	// time in job time; Makespan the longest (the run's makespan: every
	// job is submitted at once).
	AvgCompletion float64 `json:"avg_completion_job_s"`
	Makespan      float64 `json:"makespan_job_s"`
	Completed     int     `json:"completed"`
	Jobs          int     `json:"jobs"`
	// Changes counts the elastic changes the jobs made (resizes and moves
	// the loop ordered); Requeues the devices' re-queues.
	Changes     int     `json:"elastic_changes"`
	Requeues    int     `json:"requeues"`
	WallSeconds float64 `json:"wall_s"`
	// Error is why the run stopped before its report (its cluster did
	// not start, say); the other runs go on.
	Error string `json:"error,omitempty"`
}

// LiveSummary is one policy's runs of bench live.
type LiveSummary struct {
	Policy string `json:"policy"`
	Runs   int    `json:"runs"`
	// Complete counts the runs in which every job completed; the
	// completion figures are over those runs only.
	Complete       int     `json:"complete_runs"`
	MedianAvg      float64 `json:"median_avg_completion_job_s"`
	MinAvg         float64 `json:"min_avg_completion_job_s"`
	MaxAvg         float64 `json:"max_avg_completion_job_s"`
	MedianMakespan float64 `json:"median_makespan_job_s"`
	MedianChanges  float64 `json:"median_elastic_changes"`
}

func runBenchLive(f *benchLiveFlags) error {
	policies, err := parsePolicies(f.policies)
	if err != nil {
		return err
	}
	if f.runs < 1 || f.runs > 100 {
		return fmt.Errorf("--runs %d: want 1 to 100 runs per policy", f.runs)
	}
	if f.warmup < 0 || f.warmup > 10 {
		return fmt.Errorf("--warmup %d: want 0 to 10 warm-up runs per policy", f.warmup)
	}
	if err := checkElastic("bench live", f.scale, f.every); err != nil {
		return err
	}
	if f.every == 0 {
		return fmt.Errorf("bench live: --elastic-interval 0 turns the elastic rounds off: there would be no policy to compare")
	}
	if f.limit <= 0 {
		return fmt.Errorf("bench live: --limit %s: want a wall time per run > 0, e.g. 5m", f.limit)
	}
	if t := placement.ONESTuning(f.ones); !t.Empty() && !slices.Contains(policies, "ones") {
		return fmt.Errorf("bench live: --ones %s applies to policy ones, which --policies %q leaves out", t, f.policies)
	}
	prof, err := f.shape.profile()
	if err != nil {
		return fmt.Errorf("bench live: %w", err)
	}
	specs, err := loadJobFile(f.file)
	if err != nil {
		return err
	}
	elastic := 0
	for i := range specs {
		if specs[i].Kind == workload.Train && specs[i].Elastic() {
			elastic++
		}
	}
	if elastic == 0 {
		return fmt.Errorf("--file %s: no elastic training job (batch or gpus given as a range): the policies would have nothing to decide", f.file)
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	planner := actors.DefaultPlanner()
	pred := actors.NewZooPredictor(planner)
	total := (f.warmup + f.runs) * len(policies)
	logs := io.Discard
	if f.verbose {
		logs = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(logs, nil))
	// Planned once here, with progress, rather than inside the first run.
	t0 := time.Now()
	fmt.Fprintf(os.Stderr, "bench live: predicting the memory demand of %d jobs ...\n", len(specs))
	if err := warmPredictions(pred, specs, prof.Name, prof.MemoryBytes, os.Stderr, 5*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench live: predicted in %.1fs; %d runs follow\n", time.Since(t0).Seconds(), total)
	// Warm-up runs (k ≤ 0) come first, taking turns as the measured ones
	// do, and are kept apart from them.
	var runs, warm []LiveRun
	for k := 1 - f.warmup; k <= f.runs; k++ {
		for _, p := range policies {
			start := time.Now()
			name := fmt.Sprintf("run %d", k)
			if k <= 0 {
				name = fmt.Sprintf("warm-up run %d", k+f.warmup)
			}
			rep, err := runDemoCluster(demoRun{specs: specs, file: f.file, scale: f.scale, limit: f.limit, start: start, log: log.With("policy", p, "run", name), progress: io.Discard,
				pred: pred, planner: planner, name: fmt.Sprintf("bench-live-%d-%s-%d", os.Getpid(), p, k+f.warmup), shape: f.shape,
				elastic: actors.ElasticConfig{Policy: p, Interval: time.Duration(f.every).Seconds(), ONES: f.onesFor(p), PlanWait: planWait(f.planWait, f.every, f.scale)}})
			r := LiveRun{Policy: p, Run: k, Jobs: len(specs), WallSeconds: time.Since(start).Seconds()}
			if err != nil {
				r.Error = err.Error()
			} else {
				r = liveRun(rep, p, k, f.scale)
			}
			done := len(runs) + len(warm) + 1
			if k <= 0 {
				r.Run = k + f.warmup
				warm = append(warm, r)
			} else {
				runs = append(runs, r)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench live: %d/%d %s %s failed: %v\n", done, total, p, name, err)
				continue
			}
			fmt.Fprintf(os.Stderr, "bench live: %d/%d %s %s: %d/%d jobs completed, average completion %.0f s, makespan %.0f s of job time, %d elastic changes (%.1f s wall)\n",
				done, total, p, name, r.Completed, r.Jobs, r.AvgCompletion, r.Makespan, r.Changes, r.WallSeconds)
		}
	}
	sums := summariseLive(policies, runs)
	if err := writeLiveFiles(f.out, f, sums, runs); err != nil {
		return err
	}
	if err := plotLive(filepath.Join(f.out, "live.png"), f, sums, runs); err != nil {
		return fmt.Errorf("bench live: plot: %w", err)
	}
	// As demo does, a run that left jobs unfinished fails the command,
	// after its report: its figures would be no completion times.
	incomplete := 0
	for _, r := range runs {
		if r.Error != "" || r.Completed < r.Jobs {
			incomplete++
		}
	}
	var failed error
	if incomplete > 0 {
		failed = fmt.Errorf("bench live: %d of %d runs did not complete every job (%s has each run; raise --limit, or see the failed runs' lines)",
			incomplete, len(runs), filepath.Join(f.out, "live.csv"))
	}
	if f.json {
		if err := printJSON(struct {
			File        string        `json:"file"`
			Scale       float64       `json:"time_scale"`
			Nodes       int           `json:"nodes"`
			GPUsPerNode int           `json:"gpus_per_node"`
			Device      string        `json:"device"`
			Placement   string        `json:"placement"`
			ONES        string        `json:"ones,omitempty"`
			Summary     []LiveSummary `json:"summary"`
			Runs        []LiveRun     `json:"runs"`
			Warmup      []LiveRun     `json:"warmup_runs,omitempty"`
		}{f.file, f.scale, f.shape.nodes, f.shape.gpusPerNode, f.shape.device, string(f.shape.placement), placement.ONESTuning(f.ones).String(), sums, runs, warm}); err != nil {
			return err
		}
		return failed
	}
	fmt.Print(liveTable(f, sums))
	fmt.Printf("\nwrote %s, %s and %s\n", filepath.Join(f.out, "live.md"), filepath.Join(f.out, "live.csv"), filepath.Join(f.out, "live.png"))
	return failed
}

// onesFor is --ones for a run of policy p: none but ones takes it.
func (f *benchLiveFlags) onesFor(p string) placement.ONESTuning {
	if p != "ones" {
		return placement.ONESTuning{}
	}
	return placement.ONESTuning(f.ones)
}

// liveRun is what bench live keeps of one run's report.
func liveRun(rep DemoReport, policy string, k int, scale float64) LiveRun {
	r := LiveRun{Policy: policy, Run: k, AvgCompletion: rep.AvgCompletion, Jobs: rep.Total, WallSeconds: rep.WallSeconds,
		Completed: rep.States[string(actors.StateCompleted)], Changes: rep.ElasticChanges}
	for _, j := range rep.Jobs {
		if j.State == string(actors.StateCompleted) {
			r.Makespan = max(r.Makespan, j.CompletedAfter*scale)
		}
		r.Requeues += j.Requeues
	}
	return r
}

// summariseLive sums up each policy's runs; the completion figures count
// only the runs in which every job completed.
func summariseLive(policies []string, runs []LiveRun) []LiveSummary {
	var out []LiveSummary
	for _, p := range policies {
		s := LiveSummary{Policy: p}
		var avg, span, changes []float64
		for _, r := range runs {
			if r.Policy != p {
				continue
			}
			s.Runs++
			if r.Jobs > 0 && r.Completed == r.Jobs {
				s.Complete++
				avg, span = append(avg, r.AvgCompletion), append(span, r.Makespan)
				changes = append(changes, float64(r.Changes))
			}
		}
		if len(avg) > 0 {
			s.MedianAvg, s.MinAvg, s.MaxAvg = medianOf(avg), slices.Min(avg), slices.Max(avg)
			s.MedianMakespan, s.MedianChanges = medianOf(span), medianOf(changes)
		}
		out = append(out, s)
	}
	return out
}

// medianOf is the median of xs (not empty; the mean of the middle two of
// an even count).
func medianOf(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// liveTable is bench live's summary as a markdown table, with each
// policy's median against the best median.
func liveTable(f *benchLiveFlags, sums []LiveSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench live: %s on %s, %d run(s) per policy, time scale %g×, elastic rounds every %s of job time", f.file, f.shape, f.runs, f.scale, time.Duration(f.every))
	if f.warmup > 0 {
		fmt.Fprintf(&b, ", after %d warm-up run(s) per policy", f.warmup)
	}
	if t := placement.ONESTuning(f.ones); !t.Empty() {
		fmt.Fprintf(&b, ", ones with --ones %s", t)
	}
	b.WriteString("\n\n")
	b.WriteString("| policy | complete runs | average completion, median (s) | least–most (s) | makespan, median (s) | elastic changes, median | vs best median |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	best := 0.0
	for _, s := range sums {
		if s.Complete > 0 && (best == 0 || s.MedianAvg < best) {
			best = s.MedianAvg
		}
	}
	for _, s := range sums {
		if s.Complete == 0 {
			fmt.Fprintf(&b, "| %s | 0 of %d | – | – | – | – | – |\n", s.Policy, s.Runs)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d of %d | %.0f | %.0f–%.0f | %.0f | %.0f | %+.1f %% |\n", s.Policy, s.Complete, s.Runs, s.MedianAvg, s.MinAvg, s.MaxAvg,
			s.MedianMakespan, s.MedianChanges, 100*(s.MedianAvg/best-1))
	}
	return b.String()
}

// writeLiveFiles writes DIR/live.md (the summary table) and DIR/live.csv
// (one row per run).
func writeLiveFiles(dir string, f *benchLiveFlags, sums []LiveSummary, runs []LiveRun) error {
	if err := os.WriteFile(filepath.Join(dir, "live.md"), []byte(liveTable(f, sums)), 0o644); err != nil {
		return err
	}
	c, err := os.Create(filepath.Join(dir, "live.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(c)
	_ = w.Write([]string{"policy", "run", "avg_completion_job_s", "makespan_job_s", "completed", "jobs", "elastic_changes", "requeues", "wall_s", "error",
		"nodes", "gpus_per_node", "device", "placement", "ones"})
	for _, r := range runs {
		_ = w.Write([]string{r.Policy, strconv.Itoa(r.Run), strconv.FormatFloat(r.AvgCompletion, 'f', 1, 64), strconv.FormatFloat(r.Makespan, 'f', 1, 64),
			strconv.Itoa(r.Completed), strconv.Itoa(r.Jobs), strconv.Itoa(r.Changes), strconv.Itoa(r.Requeues), strconv.FormatFloat(r.WallSeconds, 'f', 1, 64), r.Error,
			strconv.Itoa(f.shape.nodes), strconv.Itoa(f.shape.gpusPerNode), f.shape.device, string(f.shape.placement), f.onesFor(r.Policy).String()})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		c.Close()
		return err
	}
	return c.Close()
}

// plotLive draws each policy's runs' average completion (small marks; a
// run that left jobs unfinished is not drawn) and their median (a large
// mark, with a bar from the least to the most).
func plotLive(path string, f *benchLiveFlags, sums []LiveSummary, runs []LiveRun) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("bench live: %s, %d run(s) per policy, time scale %g×\n%s", filepath.Base(f.file), f.runs, f.scale, f.shape)
	if t := placement.ONESTuning(f.ones); !t.Empty() {
		p.Title.Text += ", ones with " + t.String()
	}
	p.Y.Label.Text = "average completion (s of job time)"
	names := make([]string, len(sums))
	for i, s := range sums {
		names[i] = s.Policy
	}
	p.NominalX(names...)
	for i, s := range sums {
		var each plotter.XYs
		k := 0
		for _, r := range runs {
			if r.Policy == s.Policy && r.Error == "" && r.Jobs > 0 && r.Completed == r.Jobs {
				// Side by side, left of the median, so that equal runs
				// do not hide each other.
				each = append(each, plotter.XY{X: float64(i) - 0.35 + 0.25*float64(k)/float64(max(s.Complete-1, 1)), Y: r.AvgCompletion})
				k++
			}
		}
		if len(each) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(each)
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(i), Radius: vg.Points(2.5), Shape: draw.RingGlyph{}}
		p.Add(sc)
		med := plotter.XYs{{X: float64(i), Y: s.MedianAvg}}
		mc, err := plotter.NewScatter(med)
		if err != nil {
			return err
		}
		mc.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(i), Radius: vg.Points(5), Shape: draw.BoxGlyph{}}
		p.Add(mc)
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{med, plotter.YErrors{{Low: s.MedianAvg - s.MinAvg, High: s.MaxAvg - s.MedianAvg}}})
		if err != nil {
			return err
		}
		eb.Color = plotutil.Color(i)
		p.Add(eb)
		if i == 0 {
			p.Legend.Add("run", sc)
			p.Legend.Add("median (bar: least to most)", mc)
		}
	}
	p.Y.Min = 0
	p.Y.Max *= 1.15
	p.X.Min, p.X.Max = -0.5, float64(len(sums))-0.5
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}
