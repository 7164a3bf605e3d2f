package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched/fikit"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// kernelPair is one benchmark case: a high-priority inference service
// sharing a GPU with a low-priority training job.
type kernelPair struct {
	HPModel string
	HPBatch int
	Rate    float64 // requests per second (Poisson); 0: closed loop (back to back)
	LPModel string
	LPBatch int
}

func (p kernelPair) name() string {
	rate := "closed"
	if p.Rate > 0 {
		rate = fmt.Sprintf("%g/s", p.Rate)
	}
	return fmt.Sprintf("%s-b%d@%s+%s-b%d", p.HPModel, p.HPBatch, rate, p.LPModel, p.LPBatch)
}

// The pairs cover the three inference models at several batch sizes and
// request rates against five training jobs. Poisson rates keep the
// service's own GPU utilisation well under one, so the GPU idles between
// requests; closed-loop pairs (a client that sends the next request when
// the last is answered) idle only during host pre/post-processing, and
// their completion time measures the service's slowdown directly.
var kernelPairs = []kernelPair{
	{"resnet50", 1, 100, "vgg16", 32},
	{"resnet50", 8, 50, "vgg16", 16},
	{"resnet50", 32, 20, "densenet121", 32},
	{"resnet50", 1, 0, "inception-v3", 32},
	{"bert-base", 1, 150, "resnet50", 32},
	{"bert-base", 8, 50, "vgg16", 32},
	{"bert-base", 1, 0, "densenet121", 32},
	{"bert-base", 8, 30, "inception-v3", 32},
	{"gpt2-small", 1, 40, "resnet50", 32},
	{"gpt2-small", 4, 12, "densenet121", 32},
	{"gpt2-small", 1, 0, "vgg16", 16},
	{"resnet50", 8, 60, "bert-base", 8},
}

// Host-side costs. Inference: a request is decoded and resized (images)
// or tokenised (text) before its forward pass and its outputs are turned
// into a response afterwards; eager frameworks spend a few microseconds of
// host time per kernel launch. Training: each iteration waits for its
// batch from the data loader and launches its kernels from the host.
const (
	inferLaunchHost = 6e-6
	trainLaunchHost = 5e-6
	trainDataHost   = 1.5e-3
	benchSeconds    = 2.0 // virtual time each service runs for
	minRequests     = 40
)

func hostPrePost(model string, batch int) (pre, post float64) {
	b := float64(batch)
	switch model {
	case "resnet50":
		return 2e-3 + 0.25e-3*b, 0.5e-3 + 0.02e-3*b // JPEG decode + resize; top-k
	case "bert-base":
		return 1.5e-3 + 0.1e-3*b, 0.3e-3 + 0.02e-3*b // tokenise; softmax/labels
	default:
		return 2e-3 + 0.2e-3*b, 1e-3 + 0.2e-3*b // tokenise; sample and detokenise
	}
}

// kernelRow is one line of the table: one pair under one mode.
type kernelRow struct {
	Pair     string  `json:"pair"`
	Mode     string  `json:"mode"`
	HPJCT    float64 `json:"hp_jct_s"`
	HPP50    float64 `json:"hp_p50_s"`
	HPP99    float64 `json:"hp_p99_s"`
	LPJCT    float64 `json:"lp_jct_s"`
	GapFill  float64 `json:"gap_fill"`
	VsShare  float64 `json:"hp_speedup_vs_share"`
	P50Share float64 `json:"hp_p50_speedup_vs_share"`
	VsExcl   float64 `json:"hp_jct_vs_exclusive"`
	P99Excl  float64 `json:"hp_p99_vs_exclusive"`
	LPShare  float64 `json:"lp_jct_vs_share"`
	Requests int     `json:"requests"`
	DurMAPE  float64 `json:"duration_mape"`
	GapMAPE  float64 `json:"gap_mape"`
	GapWAPE  float64 `json:"gap_wape"`
}

var benchKernelsFlags struct {
	out, device        string
	json               bool
	seed               uint64
	jitter, hostJitter float64
	modelError, margin float64
	slice              time.Duration
	measure, plotPair  int
}

var benchKernelsCmd = &cobra.Command{
	Use:   "kernels",
	Short: "FIKIT kernel dispatch: a high-priority service beside low-priority training, under share, streams, exclusive and fikit",
	Long: `Runs pairs of a high-priority inference service (ResNet-50, BERT-base,
GPT-2 small at several batch sizes, Poisson request rates or a closed loop) with a
low-priority training job on one simulated GPU, under four modes: share
(time slices), streams (arrival order), exclusive (low priority waits) and
fikit (low-priority kernels fill the service's predicted idle gaps).

Writes DIR/kernels.md, DIR/kernels.csv and DIR/kernels-timeline.png; with
--json prints the rows on stdout. Progress goes to stderr.`,
	Args: noArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return runBenchKernels(cmd.OutOrStdout(), cmd.ErrOrStderr())
	},
}

func init() {
	f := benchKernelsCmd.Flags()
	fl := &benchKernelsFlags
	f.StringVar(&fl.out, "out", "./out/bench-kernels", "directory for kernels.md, kernels.csv and kernels-timeline.png")
	f.BoolVar(&fl.json, "json", false, "print the rows as a JSON list on stdout")
	f.Uint64Var(&fl.seed, "seed", 1, "seed for arrivals and duration noise")
	f.Float64Var(&fl.jitter, "jitter", 0.03, "relative std. dev. of each kernel's duration")
	f.Float64Var(&fl.hostJitter, "host-jitter", 0.05, "relative std. dev. of host pre/post-processing and launch times")
	f.Float64Var(&fl.modelError, "model-error", 0.1, "relative std. dev. of the fixed per-kernel gap between cost model and device")
	f.Float64Var(&fl.margin, "margin", 0.05, "overrun a low-priority kernel may be predicted to have, as a fraction of the remaining gap")
	f.DurationVar(&fl.slice, "slice", 2*time.Millisecond, "time slice of share mode")
	f.IntVar(&fl.measure, "measure", 3, "requests in fikit's measurement phase")
	f.IntVar(&fl.plotPair, "plot-pair", 0, "index of the pair drawn in kernels-timeline.png")
	f.StringVar(&fl.device, "device", "h100-80gb", "device profile ("+strings.Join(gpu.ProfileNames(), ", ")+")")
	benchCmd.AddCommand(benchKernelsCmd)
}

type graphKey struct {
	model string
	kind  workload.JobKind
	batch int
}

type graphCache struct {
	mu sync.Mutex
	m  map[graphKey]*workload.Graph
}

func (c *graphCache) get(model string, kind workload.JobKind, batch int) (*workload.Graph, error) {
	k := graphKey{model, kind, batch}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.m[k]; ok {
		return g, nil
	}
	g, err := zoo.Build(model, kind, batch, zoo.Options{})
	if err != nil {
		return nil, err
	}
	c.m[k] = g
	return g, nil
}

// pairJobs builds the two jobs of pair p. The training job gets enough
// iterations to keep wanting the GPU for the whole life of the service.
func pairJobs(p kernelPair, prof gpu.Profile, gc *graphCache) ([]fikit.Job, error) {
	hg, err := gc.get(p.HPModel, workload.Infer, p.HPBatch)
	if err != nil {
		return nil, err
	}
	lg, err := gc.get(p.LPModel, workload.Train, p.LPBatch)
	if err != nil {
		return nil, err
	}
	pre, post := hostPrePost(p.HPModel, p.HPBatch)
	// a request alone: host work plus its kernels, or their launches when
	// the host is the bottleneck
	service := pre + post + math.Max(prof.GraphSeconds(hg), float64(len(hg.Ops))*inferLaunchHost)
	rate := p.Rate
	if rate <= 0 {
		rate = 1 / service
	}
	reqs := max(minRequests, int(math.Round(rate*benchSeconds)))
	span := float64(reqs)/rate + service
	iter := prof.GraphSeconds(lg) + trainDataHost
	iters := max(5, int(math.Ceil(1.1*span/iter)))
	return []fikit.Job{
		{Name: fmt.Sprintf("%s-b%d infer", p.HPModel, p.HPBatch), Graph: hg, Priority: 9,
			Requests: reqs, Rate: p.Rate, HostPre: pre, HostPost: post, HostPerKernel: inferLaunchHost},
		{Name: fmt.Sprintf("%s-b%d train", p.LPModel, p.LPBatch), Graph: lg, Priority: 0,
			Iterations: iters, HostPerIteration: trainDataHost, HostPerKernel: trainLaunchHost},
	}, nil
}

func benchKernelsOptions(prof gpu.Profile, m fikit.Mode) fikit.Options {
	fl := &benchKernelsFlags
	o := fikit.DefaultOptions(prof)
	o.Mode, o.Seed = m, fl.seed
	o.Jitter, o.HostJitter, o.ModelError = fl.jitter, fl.hostJitter, fl.modelError
	o.Margin, o.Slice, o.MeasureUnits = fl.margin, fl.slice.Seconds(), fl.measure
	return o
}

func runBenchKernels(stdout, stderr io.Writer) error {
	fl := &benchKernelsFlags
	prof, err := gpu.LookupProfile(fl.device)
	if err != nil {
		return fmt.Errorf("--device: %w", err)
	}
	if err := checkBenchKernelsFlags(); err != nil {
		return err
	}
	if fl.plotPair < 0 || fl.plotPair >= len(kernelPairs) {
		return fmt.Errorf("--plot-pair %d out of range 0..%d", fl.plotPair, len(kernelPairs)-1)
	}
	t0 := time.Now()
	gc := &graphCache{m: map[graphKey]*workload.Graph{}}
	rows := make([][]kernelRow, len(kernelPairs))
	errs := make([]error, len(kernelPairs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, p := range kernelPairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[i], errs[i] = benchKernelPair(p, prof, gc)
			mu.Lock()
			if errs[i] == nil {
				f := rows[i][len(rows[i])-1]
				fmt.Fprintf(stderr, "bench kernels: %-45s fikit %.2fx share, %.3fx exclusive, gap fill %.2f (%s)\n",
					p.name(), f.VsShare, f.VsExcl, f.GapFill, time.Since(t0).Round(time.Millisecond))
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	var all []kernelRow
	for i := range rows {
		if errs[i] != nil {
			return fmt.Errorf("pair %s: %w", kernelPairs[i].name(), errs[i])
		}
		all = append(all, rows[i]...)
	}
	if err := os.MkdirAll(fl.out, 0o755); err != nil {
		return err
	}
	if err := writeKernelsCSV(filepath.Join(fl.out, "kernels.csv"), all); err != nil {
		return err
	}
	if err := writeKernelsMarkdown(filepath.Join(fl.out, "kernels.md"), all, prof); err != nil {
		return err
	}
	png := filepath.Join(fl.out, "kernels-timeline.png")
	if err := plotKernelTimeline(png, kernelPairs[fl.plotPair], prof, gc); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench kernels: wrote %s, %s and %s in %s\n", filepath.Join(fl.out, "kernels.md"),
		filepath.Join(fl.out, "kernels.csv"), png, time.Since(t0).Round(time.Millisecond))
	if fl.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	return nil
}

// checkBenchKernelsFlags refuses values fikit.Simulate would clamp,
// replace by a default or refuse in terms of its Options, so that what
// runs is what kernels.md records as the command.
func checkBenchKernelsFlags() error {
	fl := &benchKernelsFlags
	for _, f := range []struct {
		name string
		v    float64
	}{{"--jitter", fl.jitter}, {"--host-jitter", fl.hostJitter}, {"--model-error", fl.modelError}} {
		if !(f.v >= 0 && f.v <= 0.3) {
			return fmt.Errorf("%s %g: want a relative standard deviation from 0 to 0.3", f.name, f.v)
		}
	}
	if !(fl.margin >= 0) || math.IsInf(fl.margin, 0) {
		return fmt.Errorf("--margin %g: want a finite fraction >= 0 of the remaining gap (e.g. 0.05)", fl.margin)
	}
	if fl.measure < 0 {
		return fmt.Errorf("--measure %d: want a number of requests >= 0", fl.measure)
	}
	if minSlice := time.Duration(fikit.MinSlice * float64(time.Second)); fl.slice < minSlice {
		return fmt.Errorf("--slice %s: want at least %s (default %s)", fl.slice, minSlice, time.Duration(fikit.DefaultSlice*float64(time.Second)))
	}
	return nil
}

// benchKernelPair runs one pair under every mode and fills in the ratios.
func benchKernelPair(p kernelPair, prof gpu.Profile, gc *graphCache) ([]kernelRow, error) {
	jobs, err := pairJobs(p, prof, gc)
	if err != nil {
		return nil, err
	}
	res := map[fikit.Mode]*fikit.Result{}
	for _, m := range fikit.Modes {
		r, err := fikit.Simulate(jobs, benchKernelsOptions(prof, m))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m, err)
		}
		res[m] = r
	}
	sh, ex := res[fikit.Share], res[fikit.Exclusive]
	var rows []kernelRow
	for _, m := range fikit.Modes {
		r := res[m]
		hp, lp := r.Jobs[0], r.Jobs[1]
		rows = append(rows, kernelRow{
			Pair: p.name(), Mode: string(m), HPJCT: hp.JCT, HPP50: hp.P50, HPP99: hp.P99, LPJCT: lp.JCT,
			GapFill: r.GapFill, VsShare: sh.Jobs[0].JCT / hp.JCT, P50Share: sh.Jobs[0].P50 / hp.P50,
			VsExcl: hp.JCT / ex.Jobs[0].JCT, P99Excl: hp.P99 / ex.Jobs[0].P99, LPShare: lp.JCT / sh.Jobs[1].JCT,
			Requests: len(hp.Latencies), DurMAPE: r.DurErr.MAPE(), GapMAPE: r.GapErr.MAPE(), GapWAPE: r.GapErr.WAPE(),
		})
	}
	return rows, nil
}

func fmtF(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

var kernelColumns = []string{"pair", "mode", "requests", "hp_jct_s", "hp_p50_s", "hp_p99_s", "lp_jct_s", "gap_fill",
	"hp_speedup_vs_share", "hp_p50_speedup_vs_share", "hp_jct_vs_exclusive", "hp_p99_vs_exclusive", "lp_jct_vs_share",
	"duration_mape", "gap_mape", "gap_wape"}

func (r kernelRow) fields() []string {
	return []string{r.Pair, r.Mode, strconv.Itoa(r.Requests), fmtF(r.HPJCT, 4), fmtF(r.HPP50, 5), fmtF(r.HPP99, 5),
		fmtF(r.LPJCT, 4), fmtF(r.GapFill, 3), fmtF(r.VsShare, 3), fmtF(r.P50Share, 3), fmtF(r.VsExcl, 4),
		fmtF(r.P99Excl, 3), fmtF(r.LPShare, 3), fmtF(r.DurMAPE, 4), fmtF(r.GapMAPE, 4), fmtF(r.GapWAPE, 4)}
}

func writeKernelsCSV(path string, rows []kernelRow) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(kernelColumns)
	for _, r := range rows {
		w.Write(r.fields())
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeKernelsMarkdown(path string, rows []kernelRow, prof gpu.Profile) error {
	fl := &benchKernelsFlags
	var b strings.Builder
	fmt.Fprintf(&b, "# bench kernels: FIKIT kernel dispatch on %s\n\n", prof.Name)
	fmt.Fprintf(&b, "Command: `coordinator bench kernels --seed %d --jitter %g --host-jitter %g --model-error %g --margin %g --slice %s --measure %d --device %s`\n\n",
		fl.seed, fl.jitter, fl.hostJitter, fl.modelError, fl.margin, fl.slice, fl.measure, prof.Name)
	b.WriteString("High priority (9): an inference service, with Poisson arrivals or a closed loop (`@closed`: the next request is sent when the last is answered); low priority (0): a training job. " +
		"Times in seconds of virtual time. Speed-ups are share's HP completion time ÷ this mode's; " +
		"`vs excl` is this mode's HP completion time ÷ exclusive's. Gap fill: low-priority kernel time during the " +
		"service's idle time (from its first kernel to its last response) ÷ that idle time.\n\n")
	b.WriteString("## fikit per pair\n\n| pair | speed-up vs share (JCT) | p50 speed-up vs share | fikit/exclusive JCT | fikit/exclusive p99 | gap fill | LP JCT vs share | duration MAPE | gap WAPE / MAPE |\n|---|---|---|---|---|---|---|---|---|\n")
	okExcl, okFill := true, true
	minS, maxS := math.Inf(1), 0.0
	for _, r := range rows {
		if r.Mode != string(fikit.FIKIT) {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.2f× | %.2f× | %.4f | %.3f | %.3f | %.3f | %.1f%% | %.1f%% / %.0f%% |\n", r.Pair, r.VsShare, r.P50Share,
			r.VsExcl, r.P99Excl, r.GapFill, r.LPShare, 100*r.DurMAPE, 100*r.GapWAPE, 100*r.GapMAPE)
		okExcl = okExcl && r.VsExcl <= 1.05
		okFill = okFill && r.GapFill >= 0.8
		minS, maxS = math.Min(minS, r.VsShare), math.Max(maxS, r.VsShare)
	}
	fmt.Fprintf(&b, "\nTargets: fikit HP JCT within 1.05× of exclusive for every pair: **%v**; gap fill ≥ 0.8 for every pair: **%v**; "+
		"fikit speed-up over share %.2f×–%.2f× in completion time (paper: 1.32×–16.41×).\n\n", okExcl, okFill, minS, maxS)
	b.WriteString("With Poisson arrivals a service's completion time is bounded below by its last arrival, so " +
		"completion-time ratios stay near 1 even when requests are much slower; the p50 and p99 columns show " +
		"per-request effects. Closed-loop pairs send the next request when the last is answered, so their completion " +
		"time is the service's slowdown. Duration and gap errors score predictions that rested on a measurement; " +
		"gap WAPE (Σ|error| ÷ Σ gap) is the meaningful figure because launch gaps of a few microseconds make MAPE explode; " +
		"waits for requests are not scored.\n\n")
	b.WriteString("## every mode\n\n| " + strings.Join(kernelColumns, " | ") + " |\n|" + strings.Repeat("---|", len(kernelColumns)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r.fields(), " | ") + " |\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// spans draws kernel spans as bars, one row per (mode, job).
type spans struct {
	rows  [][]fikit.Span
	color []color.Color
	x0    float64
}

func (s *spans) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	for row, list := range s.rows {
		for _, sp := range list {
			x0, x1 := trX((sp.Start-s.x0)*1e3), trX((sp.End-s.x0)*1e3)
			if x1-x0 < 0.3 {
				x1 = x0 + 0.3 // keep microsecond kernels visible
			}
			y0, y1 := trY(float64(row)-0.35), trY(float64(row)+0.35)
			c.FillPolygon(s.color[row], []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		}
	}
}

// plotKernelTimeline draws 60 ms of pair p, just after fikit's measurement
// phase, under every mode: which job's kernels ran when.
func plotKernelTimeline(path string, p kernelPair, prof gpu.Profile, gc *graphCache) error {
	jobs, err := pairJobs(p, prof, gc)
	if err != nil {
		return err
	}
	const window = 0.06
	var from float64
	s := &spans{}
	var names []string
	hpC, lpC := color.RGBA{R: 200, G: 40, B: 40, A: 255}, color.RGBA{R: 40, G: 90, B: 200, A: 255}
	for _, m := range fikit.Modes {
		o := benchKernelsOptions(prof, m)
		o.Timeline = true
		r, err := fikit.Simulate(jobs, o)
		if err != nil {
			return err
		}
		if from == 0 {
			// start a little after the measurement phase, the same for every mode
			from = r.Jobs[0].JCT * float64(benchKernelsFlags.measure+2) / float64(len(r.Jobs[0].Latencies))
		}
		var hp, lp []fikit.Span
		for _, sp := range r.Timeline {
			if sp.End < from || sp.Start > from+window {
				continue
			}
			sp.Start, sp.End = math.Max(sp.Start, from), math.Min(sp.End, from+window)
			if sp.Job == 0 {
				hp = append(hp, sp)
			} else {
				lp = append(lp, sp)
			}
		}
		s.rows = append(s.rows, lp, hp)
		s.color = append(s.color, lpC, hpC)
		names = append(names, string(m)+": LP "+jobs[1].Name, string(m)+": HP "+jobs[0].Name)
	}
	s.x0 = from
	plt := plot.New()
	plt.Title.Text = fmt.Sprintf("%s on %s: kernels by job (HP red, LP blue)", p.name(), prof.Name)
	plt.X.Label.Text = fmt.Sprintf("ms after t = %.3f s", from)
	plt.X.Min, plt.X.Max = 0, window*1e3
	plt.Y.Min, plt.Y.Max = -0.6, float64(len(names))-0.4
	plt.Add(s)
	plt.NominalY(names...)
	return plt.Save(28*vg.Centimeter, 12*vg.Centimeter, path)
}
