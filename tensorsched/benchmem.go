package tensorsched

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// EORFloor is the smallest extra-time ratio CBR divides by: a plan that
// saves memory at no measurable extra time gets CBR = MSR / EORFloor (a
// large, finite number) instead of +Inf, which JSON cannot hold.
const EORFloor = 1e-4

// Metrics are TENSILE's figures of merit for a scheduled run against the
// vanilla one.
type Metrics struct {
	// MSR = 1 − peak/vanilla_peak: the memory saving ratio.
	MSR float64 `json:"msr"`
	// EOR = time/vanilla_time − 1: the extra overhead ratio.
	EOR float64 `json:"eor"`
	// CBR = MSR/EOR: the cost-benefit ratio (EOR floored at EORFloor; 0
	// when nothing is saved).
	CBR float64 `json:"cbr"`
}

// ComputeMetrics returns MSR, EOR and CBR from peaks and iteration times.
func ComputeMetrics(vanillaPeak, peak int64, vanillaSeconds, seconds float64) Metrics {
	var m Metrics
	if vanillaPeak > 0 {
		m.MSR = 1 - float64(peak)/float64(vanillaPeak)
	}
	if vanillaSeconds > 0 {
		m.EOR = seconds/vanillaSeconds - 1
	}
	if math.Abs(m.EOR) < 1e-12 {
		m.EOR = 0
	}
	if m.MSR > 0 {
		m.CBR = m.MSR / math.Max(m.EOR, EORFloor)
	}
	return m
}

// PaperEOR is the extra-time ratio TENSILE reports for each model at batch
// 16 on an RTX 2080 Ti; the memory benchmark uses it as the tolerance of the
// "least peak within tolerance" target unless told otherwise.
var PaperEOR = map[string]float64{
	"vgg16": 0.26, "inception-v3": 0.30, "inception-v4": 0.16, "resnet50": 0.61, "densenet121": 0.16,
}

// BenchModels are TENSILE's evaluation models.
var BenchModels = []string{"vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"}

// MemBenchJob is one job of a memory-benchmark experiment.
type MemBenchJob struct {
	Model string
	Graph *workload.Graph
}

// MemBenchRow is one (experiment, policy) result.
type MemBenchRow struct {
	Experiment  string  `json:"experiment"` // single, copies, batch, mix
	Workload    string  `json:"workload"`   // e.g. resnet50 x3
	Batch       int     `json:"batch"`
	Jobs        int     `json:"jobs"`
	Policy      string  `json:"policy"`
	Mode        string  `json:"mode,omitempty"`
	Tolerance   float64 `json:"tolerance,omitempty"`
	VanillaPeak int64   `json:"vanilla_peak_bytes"`
	Peak        int64   `json:"peak_bytes"`
	VanillaSec  float64 `json:"vanilla_seconds"`
	Seconds     float64 `json:"seconds"`
	Metrics
	SwappedBytes  int64   `json:"swapped_bytes"`
	RecomputedOps int     `json:"recomputed_ops"`
	PlanningMS    float64 `json:"planning_ms"`
	Check         string  `json:"check"` // passed, or why not
	// Vanilla and Scheduled are the memory timelines of the measured
	// iteration (single-workload rows only).
	Vanilla   []MemSample `json:"-"`
	Scheduled []MemSample `json:"-"`
}

// SeveralPlanner plans several co-located jobs with TENSILE in a mode
// (joint or sum-of-peaks); nil when no such planner is available.
type SeveralPlanner func(jobs []Job, p gpu.Profile, t Target, mode string) ([]*Plan, error)

// planSeveral is the default SeveralPlanner: PlanJobs in the named mode.
func planSeveral(jobs []Job, p gpu.Profile, t Target, mode string) ([]*Plan, error) {
	m, err := ParseMode(mode)
	if err != nil {
		return nil, err
	}
	plans, _, err := PlanJobs(jobs, p, m, t)
	return plans, err
}

// MemBenchOptions configure RunMemoryBench.
type MemBenchOptions struct {
	Device   gpu.Profile
	Policies []string // baselines and/or "tensile"
	// Tolerance overrides PaperEOR for tensile's target when positive.
	Tolerance float64
	// Models are the models of the single, batch and mix experiments
	// (default BenchModels); the mix runs when there are at least two.
	Models []string
	// CopiesModel is the model of the copies experiment (default resnet50);
	// MaxCopies its largest number of copies (default 4).
	CopiesModel string
	MaxCopies   int
	// Batches is the batch sweep (default 2, 4, 8, 16, 32).
	Batches []int
	// Several plans several-job rows with tensile (nil: PlanJobs).
	Several SeveralPlanner
	// Progress, when set, gets one line per experiment.
	Progress func(string)
}

// RunMemoryBench reproduces TENSILE's memory experiments on the sim device:
// each model alone at batch 16; 1–4 copies of one model; a batch sweep; the
// five models together at batch 2 — under every policy, with the
// correctness checker on every run. Options narrow it (fewer models,
// copies or batches) for quick runs.
func RunMemoryBench(o MemBenchOptions) ([]MemBenchRow, error) {
	if o.CopiesModel == "" {
		o.CopiesModel = "resnet50"
	}
	if len(o.Batches) == 0 {
		o.Batches = []int{2, 4, 8, 16, 32}
	}
	if len(o.Models) == 0 {
		o.Models = BenchModels
	}
	if o.MaxCopies <= 0 {
		o.MaxCopies = 4
	}
	var rows []MemBenchRow
	say := func(format string, a ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, a...))
		}
	}
	build := func(m string, batch int) (*workload.Graph, error) {
		return zoo.Build(m, workload.Train, batch, zoo.Options{})
	}
	run := func(exp, name string, batch int, models []string) error {
		jobs := make([]Job, len(models))
		for i, m := range models {
			g, err := build(m, batch)
			if err != nil {
				return err
			}
			jobs[i] = Job{Name: fmt.Sprintf("%s#%d", m, i), Graph: g}
		}
		start := time.Now()
		rs, err := memBenchRows(o, exp, name, batch, jobs)
		if err != nil {
			return fmt.Errorf("%s %s batch %d: %w", exp, name, batch, err)
		}
		say("%-7s %-28s batch %2d: %d policies in %.1fs", exp, name, batch, len(rs), time.Since(start).Seconds())
		rows = append(rows, rs...)
		return nil
	}
	for _, m := range o.Models {
		if err := run("single", m, 16, []string{m}); err != nil {
			return rows, err
		}
	}
	for n := 1; n <= o.MaxCopies; n++ {
		ms := make([]string, n)
		for i := range ms {
			ms[i] = o.CopiesModel
		}
		if err := run("copies", fmt.Sprintf("%s x%d", o.CopiesModel, n), 16, ms); err != nil {
			return rows, err
		}
	}
	for _, m := range o.Models {
		for _, b := range o.Batches {
			if err := run("batch", m, b, []string{m}); err != nil {
				return rows, err
			}
		}
	}
	if len(o.Models) > 1 {
		if err := run("mix", strings.Join(o.Models, "+"), 2, o.Models); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

func memBenchRows(o MemBenchOptions, exp, name string, batch int, jobs []Job) ([]MemBenchRow, error) {
	p := o.Device
	sim := withUnboundedMemory(p)
	single := len(jobs) == 1
	van, err := Execute(gpu.NewSim(sim, gpu.SimOptions{}), jobs, ExecOptions{Check: true, RecordTimeline: single})
	if err != nil {
		return nil, fmt.Errorf("vanilla: %w", err)
	}
	tol := o.Tolerance
	if tol <= 0 {
		tol = PaperEOR[jobs[0].Graph.Model]
		if tol == 0 {
			tol = 0.1
		}
	}
	var rows []MemBenchRow
	for _, pol := range o.Policies {
		modes := []string{""}
		if pol == PolicyTensile && !single {
			modes = []string{"joint", "sum-of-peaks"}
		}
		for _, mode := range modes {
			row := MemBenchRow{Experiment: exp, Workload: name, Batch: batch, Jobs: len(jobs), Policy: pol, Mode: mode,
				VanillaPeak: van.PeakBytes, VanillaSec: van.Seconds}
			if single {
				row.Vanilla = van.Timeline
			}
			planned := append([]Job(nil), jobs...)
			t0 := time.Now()
			var perr error
			switch {
			case pol == PolicyTensile && single:
				row.Tolerance = tol
				var plan *Plan
				plan, _, perr = PlanTensile(jobs[0].Graph, p, Target{Tolerance: tol})
				if plan != nil {
					planned[0].Plan, perr = plan, nil
				}
			case pol == PolicyTensile:
				row.Tolerance = tol
				several := o.Several
				if several == nil {
					several = planSeveral
				}
				var plans []*Plan
				plans, perr = several(jobs, p, Target{Tolerance: tol}, mode)
				if len(plans) != len(jobs) {
					if perr == nil {
						perr = fmt.Errorf("%d plans for %d jobs", len(plans), len(jobs))
					}
					break
				}
				if errors.Is(perr, ErrBudget) {
					perr = nil // the best plans found: measured as they are
				}
				for i := range plans {
					planned[i].Plan = plans[i]
				}
			default:
				b, err := LookupBaseline(pol)
				if err != nil {
					return nil, err
				}
				for i := range planned {
					planned[i].Plan = b(jobs[i].Graph, p)
				}
			}
			row.PlanningMS = float64(time.Since(t0).Microseconds()) / 1000
			if perr != nil {
				row.Check = "n/a: " + perr.Error()
				rows = append(rows, row)
				continue
			}
			res, err := Execute(gpu.NewSim(sim, gpu.SimOptions{}), planned, ExecOptions{Check: true, RecordTimeline: single})
			if err != nil {
				row.Check = "FAILED: " + err.Error()
				rows = append(rows, row)
				continue
			}
			row.Check = "passed"
			row.Peak, row.Seconds = res.PeakBytes, res.Seconds
			row.Metrics = ComputeMetrics(van.PeakBytes, res.PeakBytes, van.Seconds, res.Seconds)
			for _, j := range res.Jobs {
				row.SwappedBytes += j.SwappedOutBytes
				row.RecomputedOps += j.RecomputedOps
			}
			row.Scheduled = res.Timeline
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// WriteMemBenchMarkdown writes the rows as a markdown table.
func WriteMemBenchMarkdown(w io.Writer, device string, rows []MemBenchRow) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Memory scheduling on %s\n\n", device)
	b.WriteString("MSR = 1 − peak/vanilla peak; EOR = time/vanilla time − 1; CBR = MSR/max(EOR, 1e-4). ")
	b.WriteString("Every run is checked by the executor's correctness checker.\n\n")
	b.WriteString("| experiment | workload | batch | policy | mode | tolerance | vanilla peak | peak | MSR | EOR | CBR | swapped | recomputed | planning ms | checker |\n")
	b.WriteString("|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		tol := ""
		if r.Tolerance > 0 {
			tol = fmt.Sprintf("%.2f", r.Tolerance)
		}
		if !strings.HasPrefix(r.Check, "passed") {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | – | – | – | – | – | – | %.1f | %s |\n",
				r.Experiment, r.Workload, r.Batch, r.Policy, r.Mode, tol, gpu.FormatBytes(r.VanillaPeak), r.PlanningMS, strings.ReplaceAll(r.Check, "|", "/"))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %.3f | %.3f | %.2f | %s | %d | %.1f | %s |\n",
			r.Experiment, r.Workload, r.Batch, r.Policy, r.Mode, tol, gpu.FormatBytes(r.VanillaPeak), gpu.FormatBytes(r.Peak),
			r.MSR, r.EOR, r.CBR, gpu.FormatBytes(r.SwappedBytes), r.RecomputedOps, r.PlanningMS, r.Check)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMemBenchCSV writes the rows as CSV.
func WriteMemBenchCSV(w io.Writer, rows []MemBenchRow) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"experiment", "workload", "batch", "jobs", "policy", "mode", "tolerance", "vanilla_peak_bytes", "peak_bytes",
		"vanilla_seconds", "seconds", "msr", "eor", "cbr", "swapped_bytes", "recomputed_ops", "planning_ms", "check"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range rows {
		cw.Write([]string{r.Experiment, r.Workload, strconv.Itoa(r.Batch), strconv.Itoa(r.Jobs), r.Policy, r.Mode, f(r.Tolerance),
			strconv.FormatInt(r.VanillaPeak, 10), strconv.FormatInt(r.Peak, 10), f(r.VanillaSec), f(r.Seconds),
			f(r.MSR), f(r.EOR), f(r.CBR), strconv.FormatInt(r.SwappedBytes, 10), strconv.Itoa(r.RecomputedOps), f(r.PlanningMS), r.Check})
	}
	cw.Flush()
	return cw.Error()
}
