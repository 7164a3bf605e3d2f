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
//
// A single-job row measures one iteration after a warm-up (Execute's
// default): Peak and VanillaPeak are the job's peaks with and without the
// plan, MSR = 1 − Peak/VanillaPeak, EOR = Seconds/VanillaSec − 1; Reserved
// is Peak and SumVanillaJobPeaks VanillaPeak. A several-job row is
// measured by MeasureSeveral under the several-job accounting: Reserved is
// what the GPU reserves over a run of SeveralResult.CheckIterations (joint:
// the device's high-water mark, from the start offsets; sum-of-peaks and
// the baselines, which plan jobs one by one: the sum of the jobs' own
// high-water marks), MSR = 1 − Reserved/SumVanillaJobPeaks, EOR the mean
// over jobs of their mean
// iteration time with the plans over co-located vanilla (same offsets)
// minus one; Peak is the device peak of the steady (last) iteration with
// the plans and VanillaPeak the co-located vanilla one, Seconds and
// VanillaSec the last iteration's makespans.
type MemBenchRow struct {
	Experiment string  `json:"experiment"` // single, copies, batch, mix
	Workload   string  `json:"workload"`   // e.g. resnet50 x3
	Batch      int     `json:"batch"`
	Jobs       int     `json:"jobs"`
	Policy     string  `json:"policy"`
	Mode       string  `json:"mode,omitempty"`
	Tolerance  float64 `json:"tolerance,omitempty"`
	// BudgetOf names the baseline whose measured reserved memory was this
	// tensile row's budget (the equal-memory comparison); empty otherwise.
	BudgetOf string `json:"budget_of,omitempty"`
	// TimeOf names the baseline whose measured EOR was this tensile row's
	// tolerance (the equal-time comparison); empty otherwise.
	TimeOf      string `json:"time_of,omitempty"`
	VanillaPeak int64  `json:"vanilla_peak_bytes"`
	Peak        int64  `json:"peak_bytes"`
	// Reserved and SumVanillaJobPeaks are the accounting's (see above).
	Reserved           int64 `json:"reserved_bytes"`
	SumVanillaJobPeaks int64 `json:"sum_of_vanilla_job_peaks"`
	// RunPeak is the device's high-water mark over the whole run with the
	// plans (several jobs).
	RunPeak int64 `json:"run_peak_bytes,omitempty"`
	// JobReserved is each job's own whole-run high-water mark (several
	// jobs), what sum-of-peaks reserves for it.
	JobReserved []int64 `json:"job_reserved_bytes,omitempty"`
	// Horizon is how many iterations a several-job row ran, StartOffsets
	// the jobs' start offsets (joint mode).
	Horizon      int       `json:"horizon,omitempty"`
	StartOffsets []float64 `json:"start_offsets,omitempty"`
	// Turns: the jobs took turns by iterations (joint mode, Job.Turns);
	// PacedTurns: paced by keys (Job.TurnKeys).
	Turns      bool    `json:"turns,omitempty"`
	PacedTurns bool    `json:"paced_turns,omitempty"`
	VanillaSec float64 `json:"vanilla_seconds"`
	Seconds    float64 `json:"seconds"`
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
// (joint or sum-of-peaks) and returns the plans with the planner's
// statistics (the start offsets and horizon MeasureSeveral runs them
// with); on ErrBudget the best plans found.
type SeveralPlanner func(jobs []Job, p gpu.Profile, t Target, mode string) ([]*Plan, *JointStats, error)

// planSeveral is the default SeveralPlanner: PlanJobs in the named mode.
func planSeveral(jobs []Job, p gpu.Profile, t Target, mode string) ([]*Plan, *JointStats, error) {
	m, err := ParseMode(mode)
	if err != nil {
		return nil, nil, err
	}
	plans, st, err := PlanJobs(jobs, p, m, t)
	return plans, &st, err
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
	// EqualMemory adds, for every baseline row, tensile planned to fit the
	// memory that baseline reserved (CBR compared at equal memory).
	EqualMemory bool
	// EqualTime adds, for every baseline row, tensile planned for the
	// least peak within that baseline's extra time (CBR compared at equal
	// time).
	EqualTime bool
	// ResidentStart plans tensile with Target.ResidentStart.
	ResidentStart bool
	// Graph holds the zoo build options of every graph (ParamChunkBytes,
	// FusedOptimizer); the zero value builds the standard graphs.
	Graph zoo.Options
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
		return zoo.Build(m, workload.Train, batch, o.Graph)
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
		if len(jobs) > 1 {
			// Several jobs plan jointly, for each comparison too: say
			// what runs before the tens of seconds it can take.
			say("%-7s %-28s batch %2d: %d jobs, planning...", exp, name, batch, len(jobs))
		}
		rs, err := memBenchRows(o, exp, name, batch, jobs)
		if err != nil {
			return fmt.Errorf("%s %s batch %d: %w", exp, name, batch, err)
		}
		say("%-7s %-28s batch %2d: %d rows in %.1fs", exp, name, batch, len(rs), time.Since(start).Seconds())
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
	single := len(jobs) == 1
	var van *Result
	var base SeveralResult
	if single {
		var err error
		van, err = Execute(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), jobs, ExecOptions{Check: true, RecordTimeline: true})
		if err != nil {
			return nil, fmt.Errorf("vanilla: %w", err)
		}
	} else {
		// The jobs without plans: the figures rows that cannot be run
		// still show.
		var err error
		base, err = MeasureSeveral(p, jobs, make([]*Plan, len(jobs)), nil, true)
		if err != nil {
			return nil, fmt.Errorf("vanilla: %w", err)
		}
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
			row := MemBenchRow{Experiment: exp, Workload: name, Batch: batch, Jobs: len(jobs), Policy: pol, Mode: mode}
			if single {
				row.VanillaPeak, row.VanillaSec, row.Vanilla = van.PeakBytes, van.Seconds, van.Timeline
				row.SumVanillaJobPeaks = van.PeakBytes
			} else {
				row.VanillaPeak, row.VanillaSec = base.VanillaPeakBytes, base.VanillaSeconds
				row.SumVanillaJobPeaks, row.Horizon = base.SumOfVanillaJobPeaks, base.Horizon
			}
			plans := make([]*Plan, len(jobs))
			var st *JointStats
			t0 := time.Now()
			var perr error
			switch {
			case pol == PolicyTensile:
				row.Tolerance = tol
				plans, st, perr = planTensileJobs(o, jobs, Target{Tolerance: tol}, mode)
			default:
				b, err := LookupBaseline(pol)
				if err != nil {
					return nil, err
				}
				for i := range jobs {
					plans[i] = b(jobs[i].Graph, p)
				}
			}
			row.PlanningMS = float64(time.Since(t0).Microseconds()) / 1000
			if perr != nil {
				row.Check = "n/a: " + perr.Error()
				rows = append(rows, row)
				continue
			}
			rows = append(rows, measureBenchRow(row, p, jobs, plans, st, van))
		}
	}
	rows = append(rows, append(equalMemoryRows(o, rows, jobs, van), equalTimeRows(o, rows, jobs, van)...)...)
	return rows, nil
}

// planTensileJobs plans jobs with tensile for target t: one job alone,
// several in mode (joint or sum-of-peaks). Plans that miss a budget are
// returned as the best found, without an error, so that they are measured.
// o.ResidentStart sets t.ResidentStart.
func planTensileJobs(o MemBenchOptions, jobs []Job, t Target, mode string) ([]*Plan, *JointStats, error) {
	t.ResidentStart = o.ResidentStart
	if len(jobs) == 1 {
		plan, _, err := PlanTensile(jobs[0].Graph, o.Device, t)
		if plan == nil {
			return nil, nil, err
		}
		return []*Plan{plan}, nil, nil
	}
	several := o.Several
	if several == nil {
		several = planSeveral
	}
	ps, st, err := several(jobs, o.Device, t, mode)
	if len(ps) != len(jobs) || st == nil {
		if err == nil {
			err = fmt.Errorf("%d plans for %d jobs", len(ps), len(jobs))
		}
		return nil, nil, err
	}
	if err != nil && !errors.Is(err, ErrBudget) {
		return nil, nil, err
	}
	return ps, st, nil
}

// measureBenchRow runs plans (one per job; st from joint planning, else
// nil) through the executor with the correctness checker and fills row's
// measured figures. van is the vanilla run of a single job (nil for
// several jobs).
func measureBenchRow(row MemBenchRow, p gpu.Profile, jobs []Job, plans []*Plan, st *JointStats, van *Result) MemBenchRow {
	if van == nil {
		sr, err := MeasureSeveral(p, jobs, plans, st, true)
		if err != nil {
			row.Check = "FAILED: " + err.Error()
			return row
		}
		row.Check = "passed"
		row.VanillaPeak, row.VanillaSec = sr.VanillaPeakBytes, sr.VanillaSeconds
		row.Peak, row.Seconds, row.RunPeak = sr.PeakBytes, sr.Seconds, sr.RunPeakBytes
		row.Reserved, row.SumVanillaJobPeaks = sr.ReservedBytes, sr.SumOfVanillaJobPeaks
		row.Horizon = sr.Horizon
		if sr.Joint {
			row.StartOffsets, row.Turns, row.PacedTurns = sr.StartOffsets, sr.Turns, sr.PacedTurns
		}
		row.Metrics = sr.Metrics
		row.SwappedBytes, row.RecomputedOps = sr.SwappedBytes, sr.RecomputedOps
		for _, j := range sr.Jobs {
			row.JobReserved = append(row.JobReserved, j.RunPeakBytes)
		}
		return row
	}
	planned := []Job{jobs[0]}
	planned[0].Plan = plans[0]
	res, err := Execute(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), planned, ExecOptions{Check: true, RecordTimeline: true})
	if err != nil {
		row.Check = "FAILED: " + err.Error()
		return row
	}
	row.Check = "passed"
	row.Peak, row.Seconds, row.Reserved = res.PeakBytes, res.Seconds, res.PeakBytes
	row.Metrics = ComputeMetrics(van.PeakBytes, res.PeakBytes, van.Seconds, res.Seconds)
	for _, j := range res.Jobs {
		row.SwappedBytes += j.SwappedOutBytes
		row.RecomputedOps += j.RecomputedOps
	}
	row.Scheduled = res.Timeline
	return row
}

// WriteMemBenchMarkdown writes the rows as a markdown table.
func WriteMemBenchMarkdown(w io.Writer, device string, rows []MemBenchRow) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Memory scheduling on %s\n\n", device)
	b.WriteString("One job: MSR = 1 − peak/vanilla peak; EOR = time/vanilla time − 1. ")
	b.WriteString("Several jobs (every policy, measured over the same run): reserved is what the GPU reserves for the jobs — ")
	b.WriteString("joint: the device's high-water mark over the whole run, the jobs started at their start offsets or, marked (turns), taking turns by whole iterations, or (paced turns) paced by when their iterations end interleaved, over a longer run; ")
	b.WriteString("sum-of-peaks and the baselines (jobs planned one by one): the sum of the jobs' own high-water marks; ")
	b.WriteString("MSR = 1 − reserved/Σ vanilla job peaks (each job alone); EOR = mean over jobs of (iteration time with the plans / ")
	b.WriteString("co-located vanilla iteration time, same offsets; paced turns: periods over each job's iterations while every job runs, none counted below 0) − 1; peak is the device peak of the steady (last) iteration ")
	b.WriteString("and vanilla peak the co-located vanilla one. CBR = MSR/max(EOR, 1e-4). ")
	b.WriteString("Every run is checked by the executor's correctness checker.\n\n")
	b.WriteString("| experiment | workload | batch | policy | mode | tolerance | vanilla peak | peak | reserved | Σ vanilla job peaks | MSR | EOR | CBR | swapped | recomputed | planning ms | checker |\n")
	b.WriteString("|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		tol := ""
		if r.Tolerance > 0 {
			tol = fmt.Sprintf("%.2f", r.Tolerance)
		}
		if !strings.HasPrefix(r.Check, "passed") {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | – | – | %s | – | – | – | – | – | %.1f | %s |\n",
				r.Experiment, r.Workload, r.Batch, r.Policy, modeColumn(r), tol, gpu.FormatBytes(r.VanillaPeak), gpu.FormatBytes(r.SumVanillaJobPeaks),
				r.PlanningMS, strings.ReplaceAll(r.Check, "|", "/"))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %.3f | %.3f | %.2f | %s | %d | %.1f | %s |\n",
			r.Experiment, r.Workload, r.Batch, r.Policy, modeColumn(r), tol, gpu.FormatBytes(r.VanillaPeak), gpu.FormatBytes(r.Peak),
			gpu.FormatBytes(r.Reserved), gpu.FormatBytes(r.SumVanillaJobPeaks),
			r.MSR, r.EOR, r.CBR, gpu.FormatBytes(r.SwappedBytes), r.RecomputedOps, r.PlanningMS, r.Check)
	}
	writeEqualMemoryMarkdown(&b, rows)
	_, err := io.WriteString(w, b.String())
	return err
}

// modeColumn is a row's mode, and for an equal-memory row whose budget it had.
func modeColumn(r MemBenchRow) string {
	mode := r.Mode
	switch {
	case r.PacedTurns:
		mode += " (paced turns)"
	case r.Turns:
		mode += " (turns)"
	}
	switch {
	case r.BudgetOf != "":
		return strings.TrimSpace(mode + " budget = " + r.BudgetOf + "'s")
	case r.TimeOf != "":
		return strings.TrimSpace(mode + " time = " + r.TimeOf + "'s")
	}
	return mode
}

// WriteMemBenchCSV writes the rows as CSV.
func WriteMemBenchCSV(w io.Writer, rows []MemBenchRow) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"experiment", "workload", "batch", "jobs", "policy", "mode", "budget_of", "time_of", "tolerance", "vanilla_peak_bytes", "peak_bytes",
		"reserved_bytes", "sum_of_vanilla_job_peaks", "run_peak_bytes", "horizon", "start_offsets", "turns", "paced_turns",
		"vanilla_seconds", "seconds", "msr", "eor", "cbr", "swapped_bytes", "recomputed_ops", "planning_ms", "check"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range rows {
		offs := make([]string, len(r.StartOffsets))
		for i, o := range r.StartOffsets {
			offs[i] = f(o)
		}
		cw.Write([]string{r.Experiment, r.Workload, strconv.Itoa(r.Batch), strconv.Itoa(r.Jobs), r.Policy, r.Mode, r.BudgetOf, r.TimeOf, f(r.Tolerance),
			strconv.FormatInt(r.VanillaPeak, 10), strconv.FormatInt(r.Peak, 10),
			strconv.FormatInt(r.Reserved, 10), strconv.FormatInt(r.SumVanillaJobPeaks, 10), strconv.FormatInt(r.RunPeak, 10),
			strconv.Itoa(r.Horizon), strings.Join(offs, ";"), strconv.FormatBool(r.Turns), strconv.FormatBool(r.PacedTurns),
			f(r.VanillaSec), f(r.Seconds),
			f(r.MSR), f(r.EOR), f(r.CBR), strconv.FormatInt(r.SwappedBytes, 10), strconv.Itoa(r.RecomputedOps), f(r.PlanningMS), r.Check})
	}
	cw.Flush()
	return cw.Error()
}
