package placement

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BenchWorkload is one workload of a cluster benchmark.
type BenchWorkload struct {
	Name string // e.g. "workload-1"
	Jobs []WorkloadJob
}

// ClusterBenchOptions configures RunClusterBench.
type ClusterBenchOptions struct {
	Workloads []BenchWorkload
	// Policies are simulated (PolicyNames) or "bound" (Bound, with start
	// costs when BoundStartCosts is set).
	Policies []string
	// Seeds are the seeds of the policies that draw random numbers (ones).
	// A policy that draws none (fifo, tiresias, bound) runs once: its
	// result is the same for every seed.
	Seeds []int64
	// Sim configures every simulation (Progress is ignored: runs report
	// through Progress below).
	Sim             SimConfig
	BoundStartCosts bool
	// Horizon and ONES configure policy ones (PolicyOptions).
	Horizon float64
	ONES    ONESTuning
	// Apps returns the application profiles. It is called once per worker,
	// so no two simulations share an App.
	Apps func() (Apps, error)
	// Workers is how many simulations run at once (0: GOMAXPROCS).
	Workers int
	// Progress, if set, receives a line as each run completes.
	Progress func(string)
}

// BenchRun is one simulation of a cluster benchmark.
type BenchRun struct {
	Workload string `json:"workload"`
	Policy   string `json:"policy"`
	// Seed is the policy's seed; 0 with AnySeed for a policy whose result
	// does not depend on it.
	Seed    int64 `json:"seed"`
	AnySeed bool  `json:"any_seed,omitempty"`
	Jobs    int   `json:"jobs"`
	JCTStats
	// WallSeconds is the run's wall time, setting up its policy included.
	WallSeconds float64 `json:"wall_s"`
}

// SeededPolicy reports whether a policy's result depends on its seed.
func SeededPolicy(p string) bool { return p == "ones" }

// PolicyMoveCost is the PolicyOptions.MoveCost that makes a policy weigh
// the restart cost a simulation charges (SimConfig.MoveCost): there 0 is
// no cost, while PolicyOptions reads 0 as the default and a negative
// cost as none.
func PolicyMoveCost(simMoveCost float64) float64 {
	if simMoveCost == 0 {
		return -1
	}
	return simMoveCost
}

// RunClusterBench simulates every workload under every policy (and every
// seed, for a seeded policy), Workers at a time. The runs come back in a
// fixed order (workload, policy, seed as given), whatever the workers.
func RunClusterBench(o ClusterBenchOptions) ([]BenchRun, error) {
	if len(o.Workloads) == 0 || len(o.Policies) == 0 || len(o.Seeds) == 0 {
		return nil, fmt.Errorf("cluster bench: need at least one workload, policy and seed (got %d, %d, %d)",
			len(o.Workloads), len(o.Policies), len(o.Seeds))
	}
	for _, p := range o.Policies {
		if p != "bound" && !slices.Contains(PolicyNames, p) {
			return nil, fmt.Errorf("cluster bench: unknown policy %q (want %s or bound)", p, strings.Join(PolicyNames, ", "))
		}
	}
	if !o.ONES.Empty() && !slices.Contains(o.Policies, "ones") {
		return nil, fmt.Errorf("cluster bench: ONES settings (%s) given without policy ones", o.ONES)
	}
	if o.Apps == nil {
		return nil, fmt.Errorf("cluster bench: no application profiles (Apps is nil)")
	}
	for i, w := range o.Workloads {
		for _, v := range o.Workloads[:i] {
			if v.Name == w.Name {
				return nil, fmt.Errorf("cluster bench: two workloads are named %q: results are grouped by name, so name each once", w.Name)
			}
		}
	}
	type task struct {
		w    BenchWorkload
		pol  string
		seed int64
		any  bool
	}
	var tasks []task
	for _, w := range o.Workloads {
		for _, p := range o.Policies {
			if !SeededPolicy(p) {
				tasks = append(tasks, task{w, p, 0, true})
				continue
			}
			for _, s := range o.Seeds {
				tasks = append(tasks, task{w, p, s, false})
			}
		}
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(tasks))
	runs := make([]BenchRun, len(tasks))
	errs := make([]error, len(tasks))
	next := make(chan int)
	var mu sync.Mutex // orders progress lines and counts them
	done := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			apps, err := o.Apps()
			for i := range next {
				if err != nil {
					errs[i] = err
					continue
				}
				t := tasks[i]
				runs[i], errs[i] = benchOne(o, apps, t.w, t.pol, t.seed)
				runs[i].AnySeed = t.any
				if o.Progress == nil || errs[i] != nil {
					continue
				}
				mu.Lock()
				done++
				seed := "any seed"
				if !t.any {
					seed = "seed " + strconv.FormatInt(t.seed, 10)
				}
				o.Progress(fmt.Sprintf("bench cluster: %d/%d runs (%s %s %s: avg JCT %.0f s, %.1f s)",
					done, len(tasks), t.w.Name, t.pol, seed, runs[i].AvgJCT, runs[i].WallSeconds))
				mu.Unlock()
			}
		}()
	}
	for i := range tasks {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("cluster bench: %s under %s: %w", tasks[i].w.Name, tasks[i].pol, err)
		}
	}
	return runs, nil
}

func benchOne(o ClusterBenchOptions, apps Apps, w BenchWorkload, pol string, seed int64) (BenchRun, error) {
	wall := time.Now()
	var res *SimResult
	var err error
	cfg := o.Sim
	cfg.Progress = nil
	if pol == "bound" {
		res, err = Bound(apps, w.Jobs, BoundConfig{Nodes: cfg.Nodes, GPUsPerNode: cfg.GPUsPerNode, Memory: cfg.Memory,
			StartCosts: o.BoundStartCosts, Interval: cfg.Interval, MoveCost: cfg.MoveCost, Reference: cfg.Reference})
	} else {
		opt := PolicyOptions{Seed: seed, Memory: cfg.Memory, MoveCost: PolicyMoveCost(cfg.MoveCost), Interval: cfg.Interval, Horizon: o.Horizon,
			MostFreeFirst: cfg.Reference}
		if pol == "ones" {
			opt.ONES = o.ONES
		}
		var p Policy
		if p, err = NewPolicy(pol, opt); err != nil {
			return BenchRun{}, err
		}
		res, err = Simulate(apps, w.Jobs, p, cfg)
	}
	if err != nil {
		return BenchRun{}, err
	}
	return BenchRun{Workload: w.Name, Policy: pol, Seed: seed, Jobs: res.NumJobs, JCTStats: res.JCTStats,
		WallSeconds: time.Since(wall).Seconds()}, nil
}

// Reference holds published average JCTs.
type Reference struct {
	// Columns are the schedulers (lower case) in the table's order.
	Columns []string
	// JCT: workload name → scheduler → seconds.
	JCT map[string]map[string]float64
}

// Get returns workload w's figure for scheduler s, or 0.
func (r *Reference) Get(w, s string) float64 {
	if r == nil {
		return 0
	}
	return r.JCT[w][s]
}

// LoadReference reads the reference results table of a data directory's
// README.md: the first markdown table whose header's first cell is
// "workload", one row per workload, one column per scheduler, average JCT
// in seconds. A README without such a table gives an empty Reference; a
// table with a cell that is not a number is an error naming the line.
// Cells are numbers of seconds; thousands separators (2,089) are allowed,
// and an empty cell or a dash is a missing figure. A header's unit in
// brackets is dropped ("Pollux (s)" is the column pollux).
func LoadReference(dataDir string) (*Reference, error) {
	path := filepath.Join(dataDir, "README.md")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reference results: %w", err)
	}
	defer f.Close()
	return parseReference(f, path)
}

func parseReference(r io.Reader, name string) (*Reference, error) {
	ref := &Reference{JCT: map[string]map[string]float64{}}
	sc := bufio.NewScanner(r)
	var cols []string
	line, inTable := 0, false
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(s, "|") {
			if inTable {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(s, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case !inTable:
			if strings.EqualFold(cells[0], "workload") && len(cells) > 1 {
				inTable = true
				cols = cells[1:]
				for i := range cols {
					cols[i] = refColumn(cols[i])
				}
				ref.Columns = cols
			}
		case strings.Trim(strings.Join(cells, ""), "-: ") == "":
			// the separator row
		default:
			if len(cells) != len(cols)+1 {
				return nil, fmt.Errorf("%s:%d: reference row has %d cells, the header %d", name, line, len(cells), len(cols)+1)
			}
			row := map[string]float64{}
			for i, c := range cells[1:] {
				if c == "" || c == "-" || c == "–" || c == "—" {
					continue // no figure
				}
				v, err := strconv.ParseFloat(strings.ReplaceAll(c, ",", ""), 64)
				if err != nil || !(v > 0) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("%s:%d: column %s: %q is not a positive number of seconds", name, line, cols[i], c)
				}
				row[cols[i]] = v
			}
			ref.JCT[cells[0]] = row
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return ref, nil
}

// refColumn is a reference table's scheduler name: lower case, without a
// unit in brackets ("Pollux (s)" is pollux).
func refColumn(h string) string {
	if i := strings.IndexAny(h, "(["); i > 0 {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSpace(h))
}

// Targets of the ONES issue checked by a cluster benchmark.
const (
	// FidelityTolerance: our tiresias within ±15 % of the reference's.
	FidelityTolerance = 0.15
	// ONESReduction: ones at least 30 % below our tiresias.
	ONESReduction = 0.30
)

// BenchCell summarises one policy on one workload over the seeds.
type BenchCell struct {
	Mean, Min, Max float64
	Runs           []BenchRun
}

// BenchTarget is one workload's target checks (NaN where a figure is
// missing: no reference, or the policy was not run; so it has no JSON form).
type BenchTarget struct {
	Workload string
	// TiresiasVsRef is our tiresias's average JCT over the reference
	// Tiresias's, minus 1.
	TiresiasVsRef float64
	// ONESVsPollux is the mean over seeds of ones's average JCT over the
	// reference Pollux figure; ONESBelowPollux counts the seeds below it.
	ONESVsPollux    float64
	ONESBelowPollux int
	// ONESReduction is the mean over seeds of 1 − ones / our tiresias;
	// ONESMeetsReduction counts the seeds at or above ONESReduction.
	ONESReduction      float64
	ONESMeetsReduction int
	Seeds              int
}

// SummariseClusterBench groups runs by workload and policy and checks the
// targets against ref (nil: no reference figures).
func SummariseClusterBench(runs []BenchRun, ref *Reference) (map[string]map[string]*BenchCell, []BenchTarget) {
	cells := map[string]map[string]*BenchCell{}
	var order []string
	for _, r := range runs {
		if cells[r.Workload] == nil {
			cells[r.Workload] = map[string]*BenchCell{}
			order = append(order, r.Workload)
		}
		c := cells[r.Workload][r.Policy]
		if c == nil {
			c = &BenchCell{Min: math.Inf(1), Max: math.Inf(-1)}
			cells[r.Workload][r.Policy] = c
		}
		c.Runs = append(c.Runs, r)
		c.Min, c.Max = math.Min(c.Min, r.AvgJCT), math.Max(c.Max, r.AvgJCT)
		c.Mean += (r.AvgJCT - c.Mean) / float64(len(c.Runs))
	}
	nan := math.NaN()
	var targets []BenchTarget
	for _, w := range order {
		t := BenchTarget{Workload: w, TiresiasVsRef: nan, ONESVsPollux: nan, ONESReduction: nan}
		ones, tir := cells[w]["ones"], cells[w]["tiresias"]
		refT, refP := ref.Get(w, "tiresias"), ref.Get(w, "pollux")
		if tir != nil && refT > 0 {
			t.TiresiasVsRef = tir.Mean/refT - 1
		}
		if ones != nil {
			t.Seeds = len(ones.Runs)
			if refP > 0 {
				t.ONESVsPollux = 0
				for _, r := range ones.Runs {
					t.ONESVsPollux += r.AvgJCT / refP / float64(len(ones.Runs))
					if r.AvgJCT < refP {
						t.ONESBelowPollux++
					}
				}
			}
			if tir != nil && tir.Mean > 0 {
				t.ONESReduction = 0
				for _, r := range ones.Runs {
					red := 1 - r.AvgJCT/tir.Mean
					t.ONESReduction += red / float64(len(ones.Runs))
					if red >= ONESReduction {
						t.ONESMeetsReduction++
					}
				}
			}
		}
		targets = append(targets, t)
	}
	return cells, targets
}

// WriteClusterBenchMarkdown writes the benchmark's tables: average JCT by
// workload and policy beside the reference figures, the targets, and
// every policy's other figures (means over seeds).
func WriteClusterBenchMarkdown(w io.Writer, command string, policies []string, runs []BenchRun, ref *Reference) error {
	cells, targets := SummariseClusterBench(runs, ref)
	var refCols []string
	if ref != nil {
		refCols = ref.Columns
	}
	var b strings.Builder
	b.WriteString("# Cluster benchmark\n\n```\n" + command + "\n```\n\n")
	seeds := 0
	for _, t := range targets {
		seeds = max(seeds, t.Seeds)
	}
	fmt.Fprintf(&b, "Average job completion time in seconds. ones shows the mean over %d seed(s) (min–max); "+
		"fifo, tiresias and bound draw no random numbers and run once. Reference figures are the data README's.\n\n", seeds)
	b.WriteString("| workload |")
	for _, p := range policies {
		b.WriteString(" " + p + " |")
	}
	for _, c := range refCols {
		b.WriteString(" reference " + c + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(policies)+len(refCols)) + "\n")
	for _, t := range targets {
		b.WriteString("| " + t.Workload + " |")
		for _, p := range policies {
			c := cells[t.Workload][p]
			switch {
			case c == nil:
				b.WriteString(" – |")
			case len(c.Runs) > 1:
				fmt.Fprintf(&b, " %.0f (%.0f–%.0f) |", c.Mean, c.Min, c.Max)
			default:
				fmt.Fprintf(&b, " %.0f |", c.Mean)
			}
		}
		for _, c := range refCols {
			if v := ref.Get(t.Workload, c); v > 0 {
				fmt.Fprintf(&b, " %.0f |", v)
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n## Targets\n\n| workload | our tiresias vs the reference Tiresias (within ±%.0f %%) | ones vs the reference Pollux (mean ratio over the seeds; seeds below it) | ones below our tiresias (mean over the seeds; seeds at least %.0f %% below) |\n|---|---|---|---|\n",
		100*FidelityTolerance, 100*ONESReduction)
	yes := func(ok bool) string {
		if ok {
			return "met"
		}
		return "not met"
	}
	for _, t := range targets {
		b.WriteString("| " + t.Workload + " |")
		if math.IsNaN(t.TiresiasVsRef) {
			b.WriteString(" – |")
		} else {
			fmt.Fprintf(&b, " %+.1f %% (%s) |", 100*t.TiresiasVsRef, yes(math.Abs(t.TiresiasVsRef) <= FidelityTolerance))
		}
		if math.IsNaN(t.ONESVsPollux) {
			b.WriteString(" – |")
		} else {
			fmt.Fprintf(&b, " %.3f (%s); %d of %d seeds below |", t.ONESVsPollux, yes(t.ONESVsPollux < 1), t.ONESBelowPollux, t.Seeds)
		}
		if math.IsNaN(t.ONESReduction) {
			b.WriteString(" – |")
		} else {
			fmt.Fprintf(&b, " %.1f %% (%s); %d of %d seeds |", 100*t.ONESReduction, yes(t.ONESReduction >= ONESReduction), t.ONESMeetsReduction, t.Seeds)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Every policy (means over its runs)\n\n| workload | policy | runs | avg JCT (s) | median (s) | p95 (s) | p99 (s) | makespan (s) | GPU utilisation | restarts | wall per run (s) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range targets {
		for _, p := range policies {
			c := cells[t.Workload][p]
			if c == nil {
				continue
			}
			var m BenchRun
			n := float64(len(c.Runs))
			for _, r := range c.Runs {
				m.AvgJCT += r.AvgJCT / n
				m.MedianJCT += r.MedianJCT / n
				m.P95JCT += r.P95JCT / n
				m.P99JCT += r.P99JCT / n
				m.Makespan += r.Makespan / n
				m.Utilisation += r.Utilisation / n
				m.WallSeconds += r.WallSeconds / n
				m.Restarts += r.Restarts
			}
			util := fmt.Sprintf("%.1f %%", 100*m.Utilisation)
			if p == "bound" {
				util = "–" // each job alone: no shared cluster
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %.0f | %.2f |\n", t.Workload, p, len(c.Runs),
				m.AvgJCT, m.MedianJCT, m.P95JCT, m.P99JCT, m.Makespan, util, float64(m.Restarts)/n, m.WallSeconds)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteClusterBenchCSV writes one row per run.
func WriteClusterBenchCSV(w io.Writer, runs []BenchRun) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"workload", "policy", "seed", "jobs", "avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "avg_utilisation", "restarts", "wall_s"})
	for _, r := range runs {
		seed := strconv.FormatInt(r.Seed, 10)
		if r.AnySeed {
			seed = "any"
		}
		f := func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
		_ = cw.Write([]string{r.Workload, r.Policy, seed, strconv.Itoa(r.Jobs), f(r.AvgJCT), f(r.MedianJCT), f(r.P95JCT), f(r.P99JCT),
			f(r.Makespan), strconv.FormatFloat(r.Utilisation, 'f', 4, 64), strconv.Itoa(r.Restarts), strconv.FormatFloat(r.WallSeconds, 'f', 3, 64)})
	}
	cw.Flush()
	return cw.Error()
}
