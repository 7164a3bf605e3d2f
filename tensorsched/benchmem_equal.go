package tensorsched

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpusched/gpusched/gpu"
)

// CBR at equal memory.
//
// A baseline is a single point on the memory/time trade-off, while tensile's
// "least peak within tolerance" row spends the tolerance it is given, so
// comparing the two rows' CBR (MSR/EOR) mixes up two questions: how much a
// policy saves and how cheaply. The memory benchmark therefore also plans
// tensile to fit exactly the memory each baseline reserved (target "fit a
// budget with the least extra time") and compares CBR at that equal memory:
// the question a user with a budget asks.

// equalMemoryRows plans tensile, once per baseline row of rows that passed
// the checker and saved memory, with that row's reserved bytes as the
// budget (several jobs: each job the memory the baseline took for it), and
// measures it like every other row.
func equalMemoryRows(o MemBenchOptions, rows []MemBenchRow, jobs []Job, van *Result) []MemBenchRow {
	if !o.EqualMemory {
		return nil
	}
	var out []MemBenchRow
	for _, b := range rows {
		if !isBaselineRow(b) {
			continue
		}
		row := comparisonRow(b)
		row.BudgetOf = b.Policy
		mode, target, planned := "", Target{Budget: b.Reserved}, jobs
		if len(jobs) > 1 {
			// Each job gets the memory the baseline's plan took for it and
			// is planned to it alone (sum-of-peaks with per-job budgets):
			// joint mode plans for the least reserve within a tolerance
			// and does not aim at a given budget, and splitting the total
			// in proportion to vanilla peaks starves jobs whose memory is
			// mostly parameters (VGG16 at batch 2).
			if len(b.JobReserved) != len(jobs) {
				continue
			}
			mode, target = "sum-of-peaks", Target{}
			planned = append([]Job(nil), jobs...)
			for j := range planned {
				planned[j].Budget = b.JobReserved[j]
			}
			row.Mode = mode
		} else {
			row.Vanilla = b.Vanilla
		}
		out = append(out, planEqualMemory(o, row, jobs, planned, target, mode, van, b.Reserved))
	}
	return out
}

// planEqualMemory plans tensile for the equal-memory row and measures it.
// Sum-of-peaks plans each job alone to its budget, and co-located the
// jobs delay one another's copies: with parameters and optimizer state
// starting on the host, their first iterations' swap-ins share the H2D
// engine and a job's measured peak can exceed its solo plan's by a MiB or
// two. When the measured reservation misses the baseline's, the jobs are
// planned again resident from the start and that is kept if it fits
// (two ResNet-50s on the H100 planned to vdnn-all's 1.24 GiB missed it by
// 1.5 MiB starting on the host, and fit resident).
func planEqualMemory(o MemBenchOptions, row MemBenchRow, jobs, planned []Job, target Target, mode string, van *Result, budget int64) MemBenchRow {
	t0 := time.Now()
	plan := func(o MemBenchOptions) (MemBenchRow, error) {
		plans, st, err := planTensileJobs(o, planned, target, mode)
		if err != nil {
			return row, err
		}
		return measureBenchRow(row, o.Device, jobs, plans, st, van), nil
	}
	r, err := plan(o)
	if err == nil && r.Reserved > budget && !o.ResidentStart && len(jobs) > 1 {
		ro := o
		ro.ResidentStart = true
		if rr, rerr := plan(ro); rerr == nil && rr.Reserved <= budget {
			r = rr
		}
	}
	if err != nil {
		r.Check = "n/a: " + err.Error()
	}
	r.PlanningMS = float64(time.Since(t0).Microseconds()) / 1000
	return r
}

// Comparison reports whether r is a tensile row planned against a
// baseline's row (to its memory: BudgetOf; within its time: TimeOf).
func (r MemBenchRow) Comparison() bool { return r.BudgetOf != "" || r.TimeOf != "" }

// EqualMemoryComparison pairs a baseline row with tensile planned to the
// baseline's reserved memory (equal-memory rows) or to the baseline's
// extra time (equal-time rows).
type EqualMemoryComparison struct {
	Baseline, Tensile MemBenchRow
}

// TensileWins reports whether tensile's CBR is at least the baseline's
// (CBRs within 0.5% count as a tie, which is a win: both hid all the
// cost) while it fits the baseline's memory (equal-memory rows) or, in
// equal-time rows, saves at least the baseline's memory share in no more
// than its extra time (within eorSlack).
func (c EqualMemoryComparison) TensileWins() bool {
	t, b := c.Tensile, c.Baseline
	if !strings.HasPrefix(t.Check, "passed") || t.CBR < b.CBR*(1-0.005) {
		return false
	}
	if t.TimeOf != "" {
		return t.EOR <= b.EOR+eorSlack && t.MSR >= b.MSR
	}
	return t.Reserved <= b.Reserved
}

// eorSlack is how far an equal-time row's measured EOR may exceed the
// baseline's and still count as equal time: several jobs' times scatter
// a little about what joint planning predicted (see planTurns).
const eorSlack = 0.005

// EqualMemoryComparisons pairs every equal-memory tensile row with the
// baseline row of the same experiment whose memory it was given.
func EqualMemoryComparisons(rows []MemBenchRow) []EqualMemoryComparison {
	return pairWithBaselines(rows, func(r MemBenchRow) string { return r.BudgetOf })
}

// EqualTimeComparisons pairs every equal-time tensile row with the
// baseline row of the same experiment whose extra time it was given.
func EqualTimeComparisons(rows []MemBenchRow) []EqualMemoryComparison {
	return pairWithBaselines(rows, func(r MemBenchRow) string { return r.TimeOf })
}

// pairWithBaselines pairs every tensile row for which of names a baseline
// with that baseline's row of the same experiment, workload and batch.
func pairWithBaselines(rows []MemBenchRow, of func(MemBenchRow) string) []EqualMemoryComparison {
	type key struct {
		exp, workload string
		batch         int
		policy        string
	}
	base := map[key]MemBenchRow{}
	for _, r := range rows {
		if !r.Comparison() && r.Policy != PolicyTensile {
			base[key{r.Experiment, r.Workload, r.Batch, r.Policy}] = r
		}
	}
	var out []EqualMemoryComparison
	for _, r := range rows {
		if of(r) == "" {
			continue
		}
		if b, ok := base[key{r.Experiment, r.Workload, r.Batch, of(r)}]; ok {
			out = append(out, EqualMemoryComparison{Baseline: b, Tensile: r})
		}
	}
	return out
}

// equalTimeRows plans tensile, once per baseline row of rows that passed
// the checker and saved memory, for the least peak within that row's
// extra time (its EOR as the tolerance; several jobs: joint mode, whose
// mean EOR it holds), and measures it like every other row: the question
// of a user who accepts the baseline's slow-down.
func equalTimeRows(o MemBenchOptions, rows []MemBenchRow, jobs []Job, van *Result) []MemBenchRow {
	if !o.EqualTime {
		return nil
	}
	var out []MemBenchRow
	for _, b := range rows {
		if !isBaselineRow(b) {
			continue
		}
		tol := max(b.EOR, 0)
		row := comparisonRow(b)
		row.TimeOf, row.Tolerance = b.Policy, tol
		mode := ""
		if len(jobs) > 1 {
			mode = "joint"
			row.Mode = mode
		} else {
			row.Vanilla = b.Vanilla
		}
		t0 := time.Now()
		plans, st, err := planTensileJobs(o, jobs, Target{Tolerance: tol}, mode)
		if err != nil {
			row.Check = "n/a: " + err.Error()
		} else {
			row = measureBenchRow(row, o.Device, jobs, plans, st, van)
		}
		row.PlanningMS = float64(time.Since(t0).Microseconds()) / 1000
		out = append(out, row)
	}
	return out
}

// comparisonRow starts tensile's row compared with baseline row b: the
// same experiment and the same vanilla figures.
func comparisonRow(b MemBenchRow) MemBenchRow {
	return MemBenchRow{Experiment: b.Experiment, Workload: b.Workload, Batch: b.Batch, Jobs: b.Jobs, Policy: PolicyTensile,
		VanillaPeak: b.VanillaPeak, VanillaSec: b.VanillaSec, SumVanillaJobPeaks: b.SumVanillaJobPeaks, Horizon: b.Horizon}
}

// isBaselineRow reports whether r is a baseline's own row that passed the
// checker and saved memory: one the equal-memory and equal-time rows
// compare tensile with.
func isBaselineRow(r MemBenchRow) bool {
	return r.Policy != PolicyTensile && r.Policy != "none" && !r.Comparison() &&
		strings.HasPrefix(r.Check, "passed") && r.MSR > 0
}

// writeEqualMemoryMarkdown appends the equal-memory and equal-time tables
// and their tallies.
func writeEqualMemoryMarkdown(b *strings.Builder, rows []MemBenchRow) {
	writeComparisons(b, EqualMemoryComparisons(rows), "CBR at equal memory",
		"tensile planned to fit the memory each baseline reserved (least extra time; several jobs: each job planned alone to the memory the baseline took for it). ",
		"tensile fits with a CBR at least the baseline's in %d of %d comparisons.")
	writeComparisons(b, EqualTimeComparisons(rows), "CBR at equal time",
		"tensile planned for the least peak within the extra time each baseline took (its EOR as the tolerance; several jobs: joint mode, which holds the mean EOR). ",
		fmt.Sprintf("tensile saves at least the baseline's memory, with at least its CBR, in no more than its extra time (within %.1f points of EOR) in %%d of %%d comparisons.", eorSlack*100))
}

// writeComparisons appends one table of tensile against the baselines and
// its tally (tally takes the wins and the comparisons).
func writeComparisons(b *strings.Builder, cs []EqualMemoryComparison, title, intro, tally string) {
	if len(cs) == 0 {
		return
	}
	wins := 0
	for _, c := range cs {
		if c.TensileWins() {
			wins++
		}
	}
	fmt.Fprintf(b, "\n## %s\n\n%s", title, intro)
	fmt.Fprintf(b, tally+"\n\n", wins, len(cs))
	b.WriteString("| experiment | workload | batch | baseline | reserved | baseline MSR | baseline EOR | baseline CBR | tensile reserved | tensile MSR | tensile EOR | tensile CBR | tensile wins |\n")
	b.WriteString("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, c := range cs {
		t := c.Tensile
		win := "no"
		if c.TensileWins() {
			win = "yes"
		}
		if !strings.HasPrefix(t.Check, "passed") {
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %.3f | %.3f | %s | – | – | – | – | no (%s) |\n", t.Experiment, t.Workload, t.Batch, c.Baseline.Policy,
				gpu.FormatBytes(c.Baseline.Reserved), c.Baseline.MSR, c.Baseline.EOR, fmt.Sprintf("%.2f", c.Baseline.CBR), strings.ReplaceAll(t.Check, "|", "/"))
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %.3f | %.3f | %s | %s | %.3f | %.3f | %s | %s |\n", t.Experiment, t.Workload, t.Batch, c.Baseline.Policy,
			gpu.FormatBytes(c.Baseline.Reserved), c.Baseline.MSR, c.Baseline.EOR, fmt.Sprintf("%.2f", c.Baseline.CBR),
			gpu.FormatBytes(t.Reserved), t.MSR, t.EOR, fmt.Sprintf("%.2f", t.CBR), win)
	}
}
