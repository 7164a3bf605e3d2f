package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
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

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/placement/zooapps"
)

type simulateFlags struct {
	workload, apps, policy, out string
	device, memory, tolerance   string
	intraGBs, interGBs          float64
	gpus, gpusPerNode           int
	interval, moveCost          time.Duration
	horizon                     time.Duration
	seed                        int64
	json, timeline              bool
	boundStart                  bool
	reference                   bool
	ones                        onesFlag
}

func init() {
	f := &simulateFlags{}
	cmd := &cobra.Command{
		Use:   "simulate --workload FILE.csv --policy fifo|tiresias|ones|bound",
		Short: "Replay a workload trace on a virtual cluster under a scheduling policy",
		Long: `simulate replays a workload trace (CSV: name,time,application,num_replicas,
batch_size) on a virtual cluster, in virtual time, calling the same policy code
the coordinator runs. Job speed and progress come from measured application
profiles (--apps; by default shared/data/pollux/apps found by walking up from
the working directory) or, for an application that names a zoo model
(vgg16, resnet50, inception-v3, inception-v4, densenet121, bert-base,
gpt2-small, mlp), from the cost model on --device: step time of one training
iteration, a ring all-reduce of the gradients (--intra-node-gbs within a node,
--inter-node-gbs across nodes), per-GPU batch up to the largest that fits the
device, and progress from a constant gradient noise scale (arXiv 1812.06162)
over the model's default recipe (see placement/zooapps).

What fits is --memory tensile (default): the largest per-GPU batch whose
TENSILE minimum budget at --tolerance (default 10%, the live runtime's default
for a job) fits the device, as the coordinator's memory oracle decides; a
batch above the vanilla bound runs under a TENSILE plan and its compute time
is charged the plan's extra time, bounded from above: on a grid of four
batches between the two bounds, the least tolerance level (0, 1%, 2%, 5%,
10%, ...) at which the grid batch's minimum budget fits, each batch taking
that of the grid batch at or above it. --memory vanilla: the largest whose
peak without memory scheduling fits.

It prints average, median, p95 and p99 job completion time, makespan, GPU
utilisation, where the GPU-hours went (training; (re)starting; idle while a
job waits, for the next decision or left waiting; idle with none waiting)
and a table by application (jobs, average JCT, share of the average, wait
before the first start, GPU-hours, restarts; the bound: the first four, and
no GPU time). --json prints JSON instead, with gpu_time, per_app and per_job. --out DIR
writes sim.md, sim.csv (one row per job), events.csv (one row per change to a
job: start, grow, shrink, move, batch, preempt, resume, complete, with its GPUs
before and after, placement, batch and progress; not for the bound) and
sim-<policy>.png (utilisation and queue length over time).

--policy bound runs no scheduler: it prints the optimistic lower bound, every
job alone on the otherwise empty cluster from its arrival, in every epoch at
its fastest GPU count, placement and batch under the same model (no queueing,
no contention, no restarts). No policy's JCT can be lower, job by job.
--bound-start-costs adds what the simulator charges every job anyway: it
starts at the first decision after its arrival and pays --move-cost once.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSimulate(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.workload, "workload", "", "workload CSV (name,time,application,num_replicas,batch_size)")
	fl.StringVar(&f.apps, "apps", "", "directory of application profiles (default: shared/data/pollux/apps above the working directory)")
	fl.StringVar(&f.device, "device", "h100-80gb", "device profile of every GPU, for zoo models ("+strings.Join(gpu.ProfileNames(), ", ")+")")
	fl.StringVar(&f.memory, "memory", string(zooapps.Tensile), "zoo models: what bounds the per-GPU batch: tensile (TENSILE's minimum budget at --tolerance fits the device) or vanilla (the peak without memory scheduling fits)")
	fl.StringVar(&f.tolerance, "tolerance", "10%", "zoo models with --memory tensile: tolerated extra iteration time of a TENSILE plan (10% or 0.1)")
	fl.Float64Var(&f.intraGBs, "intra-node-gbs", zooapps.DefaultNetwork.IntraNode/1e9, "zoo models: all-reduce bandwidth between GPUs of one node, GB/s")
	fl.Float64Var(&f.interGBs, "inter-node-gbs", zooapps.DefaultNetwork.InterNode/1e9, "zoo models: all-reduce bandwidth between nodes, GB/s")
	fl.StringVar(&f.policy, "policy", "ones", "scheduling policy: "+strings.Join(placement.PolicyNames, ", ")+"; or bound (the lower bound: each job alone on the cluster, no queueing)")
	fl.BoolVar(&f.boundStart, "bound-start-costs", false, "with --policy bound: start each job at the first decision after its arrival and charge --move-cost once, as the simulator does")
	fl.IntVar(&f.gpus, "gpus", 64, "GPUs in the cluster")
	fl.IntVar(&f.gpusPerNode, "gpus-per-node", 4, "GPUs per node")
	f.interval = 60 * time.Second
	f.moveCost = time.Duration(placement.DefaultMoveCost) * time.Second
	fl.Var((*seconds)(&f.interval), "interval", "scheduling interval (seconds, or a duration such as 1m)")
	fl.Var((*seconds)(&f.moveCost), "move-cost", "checkpoint-and-restart time of starting, resizing or moving a job (seconds or duration)")
	fl.Var((*seconds)(&f.horizon), "horizon", "ONES fitness horizon (seconds or duration; 0: the policy's default)")
	fl.Int64Var(&f.seed, "seed", 1, "random seed of the policy")
	fl.Var(&f.ones, "ones", onesFlagHelp)
	fl.StringVar(&f.out, "out", "", "directory for sim.md, sim.csv, events.csv and sim-<policy>.png")
	fl.BoolVar(&f.json, "json", false, "print the result as JSON")
	fl.BoolVar(&f.timeline, "timeline", false, "include the utilisation timeline in the JSON")
	fl.BoolVar(&f.reference, "reference", false, referenceHelp)
	rootCmd.AddCommand(cmd)
}

// referenceHelp is the help of simulate's and bench cluster's --reference.
const referenceHelp = "replay as the data's reference simulator does: the noise-scale gain without the per-batch calibration to the validation runs' iteration counts, epoch ends at whole seconds, step times looked up in allocation order, and tiresias placing on the node with the most free GPUs first (our tiresias then reproduces the reference Tiresias figures)"

// modeArgs is the flags that change the model, as simulate's and bench
// cluster's reproducing command lines write them: --bound-start-costs and
// --reference (simulate's onesArg gives --horizon).
func modeArgs(boundStart, reference bool) string {
	s := ""
	if boundStart {
		s += " --bound-start-costs"
	}
	if reference {
		s += " --reference"
	}
	return s
}

// simulatePolicy is the policy simulate runs, weighing the move cost the
// simulator charges (placement.PolicyMoveCost: --move-cost 0 is no cost).
func simulatePolicy(f *simulateFlags) (placement.Policy, error) {
	pol, err := placement.NewPolicy(f.policy, placement.PolicyOptions{
		Seed: f.seed, MoveCost: placement.PolicyMoveCost(f.moveCost.Seconds()), Interval: f.interval.Seconds(), Horizon: f.horizon.Seconds(),
		ONES: placement.ONESTuning(f.ones), MostFreeFirst: f.reference,
	})
	if err != nil {
		if !slices.Contains(placement.PolicyNames, f.policy) {
			return nil, fmt.Errorf("simulate: --policy: unknown policy %q (want one of %s, bound)", f.policy, strings.Join(placement.PolicyNames, ", "))
		}
		return nil, fmt.Errorf("simulate: %v", err)
	}
	return pol, nil
}

// maxSimulatedGPUs bounds simulate --gpus: a workload at this size runs in
// about 25 s and 170 MB under ones; hundreds of millions ran out of memory.
const maxSimulatedGPUs = 65536

// minSimInterval is the shortest scheduling interval simulate accepts: a
// 160-job workload spans about a day of virtual time, so one decision a
// second is already some 10^5 policy runs.
const minSimInterval = time.Second

// checkSimFlags checks the cluster and timing flags simulate and bench
// cluster share.
func checkSimFlags(gpus, gpusPerNode int, interval, moveCost, horizon time.Duration) error {
	if gpus <= 0 || gpusPerNode <= 0 || gpus%gpusPerNode != 0 {
		return fmt.Errorf("--gpus (%d) must be a positive multiple of --gpus-per-node (%d)", gpus, gpusPerNode)
	}
	if gpus > maxSimulatedGPUs {
		return fmt.Errorf("--gpus %d: at most %d (the simulator keeps every GPU's state in memory)", gpus, maxSimulatedGPUs)
	}
	if interval < minSimInterval {
		return fmt.Errorf("--interval %v: at least %v (every decision runs the policy, so a workload decided every few milliseconds of virtual time takes hours; the reference simulator decides every 60s)", interval, minSimInterval)
	}
	if moveCost < 0 {
		return fmt.Errorf("--move-cost must not be negative")
	}
	if horizon < 0 {
		return fmt.Errorf("--horizon must not be negative (0: the policy's default)")
	}
	return nil
}

// exampleWorkload is a workload file to suggest from the working
// directory: the measured workload-1.csv when shared/data/pollux is above
// it, else the zoo workload in examples/ (there from the repository root).
func exampleWorkload() string {
	d, err := placement.FindDataDir(".")
	if err != nil {
		return "examples/zoo-workload.csv"
	}
	p := filepath.Join(d, "workloads", "workload-1.csv")
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil {
			return rel
		}
	}
	return p
}

func runSimulate(cmd *cobra.Command, f *simulateFlags) error {
	if f.workload == "" {
		return fmt.Errorf("simulate: --workload FILE.csv is required (e.g. --workload %s)", exampleWorkload())
	}
	if err := checkSimFlags(f.gpus, f.gpusPerNode, f.interval, f.moveCost, f.horizon); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	if err := checkONESFlag("simulate", f.policy, placement.ONESTuning(f.ones)); err != nil {
		return err
	}
	// The policy is checked (and made) before the profiles are loaded and
	// the zoo models' built: TENSILE's batch bounds take seconds to tens of
	// seconds, and a misspelt --policy must not wait for them.
	var pol placement.Policy
	switch {
	case f.policy == "bound":
		// --policy bound runs no scheduler (placement.Bound).
	case f.boundStart:
		return fmt.Errorf("simulate: --bound-start-costs needs --policy bound")
	default:
		var err error
		if pol, err = simulatePolicy(f); err != nil {
			return err
		}
	}
	apps := placement.Apps{}
	appsDir := f.apps
	if appsDir == "" {
		// Without measured profiles a workload of zoo models still runs;
		// LoadWorkload names the missing profiles if it uses others.
		if d, err := placement.FindDataDir("."); err == nil {
			appsDir = filepath.Join(d, "apps")
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "simulate: %v: only zoo models can be simulated (pass --apps DIR for measured profiles)\n", err)
		}
	}
	if appsDir != "" {
		var err error
		if apps, err = placement.LoadApps(appsDir); err != nil {
			return err
		}
	}
	jobs, err := placement.LoadWorkload(f.workload, apps)
	if err != nil {
		return err
	}
	if err := addZooApps(cmd, f, apps, jobs); err != nil {
		return err
	}
	var res *placement.SimResult
	if f.policy == "bound" {
		if f.out != "" {
			// The bound schedules nothing: an events.csv there is an
			// earlier run's.
			if rerr := os.Remove(filepath.Join(f.out, eventsFile)); rerr != nil && !os.IsNotExist(rerr) {
				return fmt.Errorf("simulate: --out: %v", rerr)
			}
		}
		res, err = placement.Bound(apps, jobs, placement.BoundConfig{
			Nodes: f.gpus / f.gpusPerNode, GPUsPerNode: f.gpusPerNode,
			StartCosts: f.boundStart, Interval: f.interval.Seconds(), MoveCost: f.moveCost.Seconds(), Reference: f.reference,
		})
	} else {
		cfg := placement.SimConfig{
			Nodes: f.gpus / f.gpusPerNode, GPUsPerNode: f.gpusPerNode,
			Interval: f.interval.Seconds(), MoveCost: f.moveCost.Seconds(), Progress: cmd.ErrOrStderr(), Reference: f.reference,
		}
		var events *csvFile
		if f.out != "" {
			if err := os.MkdirAll(f.out, 0o755); err != nil {
				return fmt.Errorf("simulate: --out: %v", err)
			}
			if events, err = createCSV(filepath.Join(f.out, eventsFile), eventsHeader); err != nil {
				return fmt.Errorf("simulate: --out: %v", err)
			}
			cfg.OnEvent = func(e placement.SimEvent) { events.row(eventRow(e)) }
		}
		res, err = placement.Simulate(apps, jobs, pol, cfg)
		if events != nil {
			if cerr := events.close(); err != nil {
				// A failed run's partial schedule is not left to be
				// read beside an earlier run's results.
				_ = os.Remove(events.f.Name())
			} else if cerr != nil {
				err = fmt.Errorf("simulate: --out: %s: %v", eventsFile, cerr)
			}
		}
	}
	if err != nil {
		return err
	}
	if f.out != "" {
		if err := writeSimOutputs(f, res); err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	if f.json {
		out := *res
		if !f.timeline {
			out.Timeline = nil
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprint(w, simSummary(f, res))
	return nil
}

// addZooApps adds the synthetic profile of every zoo model the workload
// names and reports each on stderr.
func addZooApps(cmd *cobra.Command, f *simulateFlags, apps placement.Apps, jobs []placement.WorkloadJob) error {
	// The flags are checked whether or not a zoo model is named: a bad
	// value is an error, not silently unused.
	prof, err := gpu.LookupProfile(f.device)
	if err != nil {
		return fmt.Errorf("simulate: --device: %v", err)
	}
	if err := checkLinks("simulate", f.intraGBs, f.interGBs); err != nil {
		return err
	}
	mem, tol, err := zooMemory(f)
	if err != nil {
		return err
	}
	need := false
	for _, j := range jobs {
		if _, ok := apps[j.App]; !ok {
			need = true
		}
	}
	if !need {
		return nil
	}
	b, err := zooapps.New(zooapps.Config{Device: prof, Network: zooapps.Network{IntraNode: f.intraGBs * 1e9, InterNode: f.interGBs * 1e9},
		Memory: mem, Tolerance: tol})
	if err != nil {
		return fmt.Errorf("simulate: %v", err)
	}
	added, err := b.AddTo(apps, jobs)
	if err != nil {
		return fmt.Errorf("simulate: %v", err)
	}
	for _, m := range added {
		a := apps[m]
		r, _ := b.Recipe(m)
		step, _ := a.StepTime([]int{1}, float64(r.BaseBatch))
		bound := "vanilla"
		if mem == zooapps.Tensile {
			vm, _ := b.VanillaMaxLocal(m)
			bound = fmt.Sprintf("TENSILE at %s; vanilla ≤ %d", f.tolerance, vm)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "zoo model %s on %s: %.4f s per iteration at batch %d on one GPU, per-GPU batch ≤ %d (%s), B0 %d, Bnoise %.0f, %d epochs of %s (%d samples)\n",
			m, prof.Name, step, r.BaseBatch, a.MaxLocal, bound, r.BaseBatch, r.NoiseScale, r.Epochs, r.Dataset, r.DatasetSize)
	}
	return nil
}

// zooMemory parses --memory and --tolerance.
func zooMemory(f *simulateFlags) (zooapps.MemoryModel, float64, error) {
	mem := zooapps.MemoryModel(strings.ToLower(strings.TrimSpace(f.memory)))
	if mem != zooapps.Tensile && mem != zooapps.Vanilla {
		return "", 0, fmt.Errorf("simulate: --memory %q: want %s or %s", f.memory, zooapps.Tensile, zooapps.Vanilla)
	}
	// A job's tolerance is 0%–100% in the live runtime (workload.Spec),
	// whose memory oracle this bound stands for; "10" is 1000%, not 10%.
	tol, err := parseTolerance("--tolerance", f.tolerance, true)
	if err != nil {
		return "", 0, fmt.Errorf("simulate: %w", err)
	}
	return mem, tol, nil
}

// gpuTimeLine says where a run's GPU-hours went: each part's share of
// the total (each rounded on its own, so training and (re)starting may
// differ from the utilisation in the last digit), then the GPU-hours
// themselves.
func gpuTimeLine(g placement.GPUTime) string {
	total := g.Training + g.Restarting + g.IdleWaiting + g.IdleNoneWaiting
	pct := func(x float64) float64 {
		if total <= 0 {
			return 0
		}
		return 100 * x / total
	}
	return fmt.Sprintf("%.1f%% training, %.1f%% (re)starting, %.1f%% idle with jobs waiting, %.1f%% idle with none waiting (GPU-hours %.1f / %.1f / %.1f / %.1f)",
		pct(g.Training), pct(g.Restarting), pct(g.IdleWaiting), pct(g.IdleNoneWaiting), g.Training, g.Restarting, g.IdleWaiting, g.IdleNoneWaiting)
}

func simSummary(f *simulateFlags, r *placement.SimResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "workload %s, policy %s, %d GPUs (%d per node), interval %v, move cost %v, seed %d\n",
		filepath.Base(f.workload), r.Policy, r.GPUs, f.gpusPerNode, f.interval, f.moveCost, f.seed)
	fmt.Fprintf(&b, "jobs %d  avg JCT %.0f s  median %.0f s  p95 %.0f s  p99 %.0f s\n", r.NumJobs, r.AvgJCT, r.MedianJCT, r.P95JCT, r.P99JCT)
	if r.Policy == "bound" {
		// Each job alone on its best configuration: no shared cluster,
		// so no utilisation, restarts or decisions to report.
		fmt.Fprintf(&b, "makespan %.0f s  (lower bound: every job alone from its arrival on its fastest configuration)  wall %.2f s\n",
			r.Makespan, r.WallSeconds)
	} else {
		fmt.Fprintf(&b, "makespan %.0f s  GPU utilisation %.1f%%  restarts %d  decisions %d  wall %.2f s (policy %.2f s)\n",
			r.Makespan, 100*r.Utilisation, r.Restarts, r.Decisions, r.WallSeconds, r.PolicyWall)
		fmt.Fprintf(&b, "GPU time: %s\n", gpuTimeLine(r.GPUTime))
	}
	b.WriteString("by application (share: what its jobs add to the average JCT):\n")
	rows := appRows(r)
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for k, c := range row {
			width[k] = max(width[k], len(c))
		}
	}
	for _, row := range rows {
		// The application's name to the left, the figures to the right.
		fmt.Fprintf(&b, "  %-*s", width[0], row[0])
		for k := 1; k < len(row); k++ {
			fmt.Fprintf(&b, "  %*s", width[k], row[k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// appRows is the per-application table of r (placement.ByApp), header
// first. The bound has no GPU time or restarts to show, and its start is
// when progress starts (after the move cost with --bound-start-costs), not
// a first allocation: it shows jobs, average JCT and share only.
func appRows(r *placement.SimResult) [][]string {
	bound := r.Policy == "bound"
	head := []string{"application", "jobs", "avg JCT (s)", "share (s)"}
	if !bound {
		head = append(head, "wait (s)", "GPU-hours", "restarts")
	}
	rows := [][]string{head}
	for _, a := range r.PerApp {
		row := []string{a.App, strconv.Itoa(a.Jobs), fmt.Sprintf("%.0f", a.AvgJCT), fmt.Sprintf("%.0f", a.Share)}
		if !bound {
			row = append(row, fmt.Sprintf("%.0f", a.AvgWait), fmt.Sprintf("%.1f", a.GPUHours), strconv.Itoa(a.Restarts))
		}
		rows = append(rows, row)
	}
	return rows
}

// csvFile is a CSV file written row by row (sim.csv, and events.csv as
// the simulation runs); a write error is kept by the csv writer and
// reported by close.
type csvFile struct {
	f *os.File
	w *csv.Writer
}

// createCSV creates path with its header row.
func createCSV(path string, header []string) (*csvFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	c := &csvFile{f: f, w: csv.NewWriter(f)}
	c.row(header)
	return c, nil
}

func (c *csvFile) row(r []string) { _ = c.w.Write(r) }

// close flushes and closes the file, and returns the first error of a
// write, the flush or the close.
func (c *csvFile) close() error {
	c.w.Flush()
	err := c.w.Error()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// eventsFile is the schedule simulate --out writes (placement.SimEvent).
const eventsFile = "events.csv"

// eventsHeader is events.csv's header: SimEvent's JSON keys, in its
// field order.
var eventsHeader = []string{"t_s", "job", "app", "event", "from_gpus", "to_gpus", "placement", "nodes", "batch", "local_batch", "accum_steps", "progress"}

// eventRow is one event's row of events.csv.
func eventRow(e placement.SimEvent) []string {
	return []string{ff(e.T), e.Job, e.App, e.Kind, strconv.Itoa(e.FromGPUs), strconv.Itoa(e.ToGPUs), e.Placement,
		strconv.Itoa(e.Nodes), strconv.Itoa(e.Batch), strconv.Itoa(e.LocalBatch), strconv.Itoa(e.AccumSteps),
		strconv.FormatFloat(e.Progress, 'f', 4, 64)}
}

func writeSimOutputs(f *simulateFlags, r *placement.SimResult) error {
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("simulate: --out: %v", err)
	}
	// sim.md
	var md strings.Builder
	md.WriteString("# Simulation\n\n```\ncoordinator simulate --workload " + f.workload + " --policy " + r.Policy +
		" --gpus " + strconv.Itoa(f.gpus) + " --gpus-per-node " + strconv.Itoa(f.gpusPerNode) +
		" --interval " + f.interval.String() + " --move-cost " + f.moveCost.String() + " --seed " + strconv.FormatInt(f.seed, 10) + zooFlags(f) + onesArg(f) + modeArgs(f.boundStart, f.reference) + "\n```\n\n")
	md.WriteString("| metric | value |\n|---|---|\n")
	metrics := [][2]string{
		{"jobs", strconv.Itoa(r.NumJobs)},
		{"average JCT (s)", fmt.Sprintf("%.0f", r.AvgJCT)},
		{"median JCT (s)", fmt.Sprintf("%.0f", r.MedianJCT)},
		{"p95 JCT (s)", fmt.Sprintf("%.0f", r.P95JCT)},
		{"p99 JCT (s)", fmt.Sprintf("%.0f", r.P99JCT)},
		{"makespan (s)", fmt.Sprintf("%.0f", r.Makespan)},
	}
	if r.Policy != "bound" {
		// The bound runs each job alone: it shares no cluster, so it
		// has no utilisation, restarts or GPU time to report.
		metrics = append(metrics, [][2]string{
			{"GPU utilisation", fmt.Sprintf("%.1f%%", 100*r.Utilisation)},
			{"restarts", strconv.Itoa(r.Restarts)},
			{"GPU time", gpuTimeLine(r.GPUTime)},
		}...)
	}
	metrics = append(metrics, [2]string{"wall time (s)", fmt.Sprintf("%.2f", r.WallSeconds)})
	for _, kv := range metrics {
		md.WriteString("| " + kv[0] + " | " + kv[1] + " |\n")
	}
	md.WriteString("\n## By application\n\nShare: what the application's jobs add to the average JCT (the shares add up to it before rounding).\n\n")
	for k, row := range appRows(r) {
		md.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if k == 0 {
			md.WriteString(strings.Repeat("|---", len(row)) + "|\n")
		}
	}
	events := ""
	if f.policy != "bound" {
		events = "; every start, resize, move, batch change, preemption and completion in events.csv"
	}
	md.WriteString("\nPer-job results are in sim.csv" + events + "; utilisation and queue length over time in sim-" + r.Policy + ".png.\n")
	if err := os.WriteFile(filepath.Join(f.out, "sim.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	// sim.csv
	cf, err := createCSV(filepath.Join(f.out, "sim.csv"), []string{"name", "app", "arrival_s", "start_s", "completion_s", "jct_s", "restarts", "gpu_seconds", "max_gpus", "last_batch"})
	if err != nil {
		return err
	}
	for _, j := range r.PerJob {
		cf.row([]string{j.Name, j.App, ff(j.Arrival), ff(j.Start), ff(j.Completion), ff(j.JCT),
			strconv.Itoa(j.Restarts), ff(j.GPUSeconds), strconv.Itoa(j.MaxGPUs), strconv.Itoa(j.LastBatch)})
	}
	if err := cf.close(); err != nil {
		return err
	}
	return plotTimeline(filepath.Join(f.out, "sim-"+r.Policy+".png"), r)
}

// onesArg is the ONES flags --horizon and --ones as given, or "" when
// neither is.
func onesArg(f *simulateFlags) string {
	s := ""
	if f.horizon > 0 {
		s += " --horizon " + f.horizon.String()
	}
	if t := placement.ONESTuning(f.ones); !t.Empty() {
		s += " --ones " + t.String()
	}
	return s
}

// zooFlags is the device and network flags when they differ from the
// defaults (they only matter for zoo models).
func zooFlags(f *simulateFlags) string {
	s := ""
	if f.device != "h100-80gb" {
		s += " --device " + f.device
	}
	if f.memory != string(zooapps.Tensile) {
		s += " --memory " + f.memory
	}
	if f.tolerance != "10%" {
		s += " --tolerance " + f.tolerance
	}
	if f.intraGBs != zooapps.DefaultNetwork.IntraNode/1e9 {
		s += " --intra-node-gbs " + strconv.FormatFloat(f.intraGBs, 'g', -1, 64)
	}
	if f.interGBs != zooapps.DefaultNetwork.InterNode/1e9 {
		s += " --inter-node-gbs " + strconv.FormatFloat(f.interGBs, 'g', -1, 64)
	}
	return s
}

// seconds is a duration flag that also accepts a plain number of seconds.
type seconds time.Duration

func (s *seconds) String() string { return time.Duration(*s).String() }

func (s *seconds) Type() string { return "seconds" }

func (s *seconds) Set(v string) error {
	if x, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%q is not a finite number of seconds", v)
		}
		if d := x * float64(time.Second); d >= math.MaxInt64 || d < math.MinInt64 {
			return fmt.Errorf("%q seconds is out of range (at most %.0f seconds, about 292 years)", v, math.MaxInt64/float64(time.Second))
		}
		*s = seconds(x * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is neither seconds nor a duration such as 30s or 1m", v)
	}
	*s = seconds(d)
	return nil
}

func ff(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

func plotTimeline(path string, r *placement.SimResult) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: GPU utilisation and queue length (avg JCT %.0f s)", r.Policy, r.AvgJCT)
	p.X.Label.Text = "time (hours)"
	p.Y.Label.Text = "% of GPUs in use / jobs queued"
	util := make(plotter.XYs, len(r.Timeline))
	queue := make(plotter.XYs, len(r.Timeline))
	for i, tp := range r.Timeline {
		util[i].X, util[i].Y = tp.T/3600, 100*float64(tp.Used)/float64(r.GPUs)
		queue[i].X, queue[i].Y = tp.T/3600, float64(tp.Queued)
	}
	lu, err := plotter.NewLine(util)
	if err != nil {
		return err
	}
	lq, err := plotter.NewLine(queue)
	if err != nil {
		return err
	}
	lu.Color = plotutil.Color(0)
	lq.Color = plotutil.Color(1)
	p.Add(lu, lq)
	p.Legend.Add("GPU utilisation (%)", lu)
	p.Legend.Add("queued jobs", lq)
	p.Legend.Top = true
	return p.Save(10*vg.Inch, 4*vg.Inch, path)
}

// checkLinks validates the --intra-node-gbs and --inter-node-gbs flags of
// command cmd (finite, positive GB/s).
func checkLinks(cmd string, intraGBs, interGBs float64) error {
	for _, bw := range []struct {
		flag string
		v    float64
	}{{"--intra-node-gbs", intraGBs}, {"--inter-node-gbs", interGBs}} {
		if !(bw.v > 0) || math.IsInf(bw.v, 0) {
			return fmt.Errorf("%s: %s: %v must be a bandwidth > 0 GB/s", cmd, bw.flag, bw.v)
		}
	}
	return nil
}

// onesFlag is --ones: overrides of ONES's search and stability parameters
// (placement.ParseONESTuning).
type onesFlag placement.ONESTuning

func (o *onesFlag) String() string { return placement.ONESTuning(*o).String() }

func (o *onesFlag) Type() string { return "key=value,..." }

func (o *onesFlag) Set(v string) error {
	t, err := placement.ParseONESTuning(v)
	if err != nil {
		return err
	}
	*o = onesFlag(t)
	return nil
}

// onesFlagHelp is --ones's help text.
var onesFlagHelp = "with --policy ones: override its parameters, e.g. hold=4,hysteresis=8 (keys: " + placement.ONESTuningKeys() + "; see the README)"

// checkONESFlag refuses --ones with a policy other than ones.
func checkONESFlag(cmd, policy string, t placement.ONESTuning) error {
	if policy != "ones" && !t.Empty() {
		return fmt.Errorf("%s: --ones %s applies to --policy ones only (got --policy %s): drop --ones or use --policy ones", cmd, t, policy)
	}
	return nil
}
