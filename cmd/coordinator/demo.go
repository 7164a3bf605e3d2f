package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

// The demo's elastic loop settings (flags --policy, --elastic-interval).
var (
	demoElastic      actors.ElasticConfig
	demoElasticEvery = seconds(actors.DefaultElasticInterval * float64(time.Second))
	demoONES         onesFlag
	demoCluster      = defaultDemoShape
	demoPlanWait     seconds
)

func init() {
	var (
		file    string
		scale   float64
		limit   time.Duration
		asJSON  bool
		verbose bool
	)
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole cluster in this process: embedded NATS, the coordinator, nodes of simulated GPUs (by default two × two h100-80gb); submit examples/demo.yaml and report",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(file, scale, limit, asJSON, verbose)
		},
	}
	c.Flags().StringVar(&file, "file", "examples/demo.yaml", "job spec file to submit")
	c.Flags().Float64Var(&scale, "time-scale", 60, "simulated GPUs run this many times faster than real time")
	c.Flags().DurationVar(&limit, "limit", 55*time.Second, "give up after this long")
	c.Flags().BoolVar(&asJSON, "json", false, "print the final report as JSON")
	c.Flags().BoolVar(&verbose, "verbose", false, "show runtime logs")
	c.Flags().StringVar(&demoElastic.Policy, "policy", "ones", "elastic policy: "+strings.Join(placement.PolicyNames, ", "))
	c.Flags().Var(&demoONES, "ones", onesFlagHelp)
	c.Flags().Var(&demoElasticEvery, "elastic-interval", "job time between elastic rounds (seconds or a duration; 0 disables them)")
	demoCluster.register(c.Flags())
	registerPlacement(c.Flags(), &demoCluster.placement)
	c.Flags().Var(&demoPlanWait, "plan-wait", planWaitHelp)
	rootCmd.AddCommand(c)
}

// DemoReport is the demo's final report.
type DemoReport struct {
	WallSeconds float64          `json:"wall_seconds"`
	Jobs        []DemoJob        `json:"jobs"`
	GPUs        []DemoGPU        `json:"gpus"`
	FitWith     int              `json:"jobs_fitting_at_once_with_memory_scheduling"`
	FitWithout  int              `json:"jobs_fitting_at_once_without_memory_scheduling"`
	Total       int              `json:"total_jobs"`
	States      map[string]int   `json:"states"`
	Events      map[string]int64 `json:"events"`
	// AvgCompletion is the completed jobs' mean time from submission to
	// completion, in job time (wall seconds × the time scale): the figure
	// to compare policies by (--policy).
	AvgCompletion float64 `json:"avg_completion_job_s"`
	// ElasticChanges counts the elastic loop's resizes and moves that
	// jobs made (resized events with a GPU count).
	ElasticChanges int `json:"elastic_changes"`
	// The cluster: Nodes nodes of GPUsPerNode simulated Device GPUs,
	// jobs placed by the Placement strategy.
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus_per_node"`
	Device      string `json:"device"`
	Placement   string `json:"placement"`
}

// DemoJob is one job in the report.
type DemoJob struct {
	ID, Name, Model, State, GPU string
	Priority                    int
	Budget, Min, Vanilla, Peak  int64
	Swapped                     int64
	Resizes, Requeues           int
	CompletedAfter, VirtualSecs float64
}

// DemoGPU is one GPU in the report.
type DemoGPU struct {
	GPU       string
	Capacity  int64
	HighWater int64
}

func runDemo(file string, scale float64, limit time.Duration, asJSON, verbose bool) error {
	start := time.Now()
	// With --json standard output holds the report alone; the lines that
	// follow the run go to standard error.
	progress := os.Stdout
	if asJSON {
		progress = os.Stderr
	}
	if err := checkElastic("demo", scale, demoElasticEvery); err != nil {
		return err
	}
	if err := checkONESFlag("demo", demoElastic.Policy, placement.ONESTuning(demoONES)); err != nil {
		return err
	}
	if _, err := demoCluster.profile(); err != nil {
		return err
	}
	specs, err := loadJobFile(file)
	if err != nil {
		return err
	}
	var log *slog.Logger
	if verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	} else {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	planner := actors.DefaultPlanner()
	rep, err := runDemoCluster(demoRun{specs: specs, file: file, scale: scale, limit: limit, log: log, progress: progress, start: start,
		planner: planner, pred: actors.NewZooPredictor(planner), name: fmt.Sprintf("demo-%d", os.Getpid()), shape: demoCluster,
		elastic: actors.ElasticConfig{Policy: demoElastic.Policy, ONES: placement.ONESTuning(demoONES), Interval: time.Duration(demoElasticEvery).Seconds(),
			PlanWait: planWait(demoPlanWait, demoElasticEvery, scale)}})
	if err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(rep); err != nil {
			return err
		}
		return demoIncomplete(rep)
	}
	fmt.Printf("\n%-12s %-12s %-3s %-10s %-13s %10s %10s %10s %10s %12s %4s %4s %9s %9s\n",
		"JOB", "MODEL", "PRI", "STATE", "GPU", "MIN", "VANILLA", "BUDGET", "PEAK", "SWAPPED/IT", "RESZ", "REQ", "DONE(s)", "VIRT(s)")
	requeues := 0
	for _, j := range rep.Jobs {
		fmt.Printf("%-12s %-12s %-3d %-10s %-13s %10s %10s %10s %10s %12s %4d %4d %9.1f %9.1f\n", j.Name, j.Model, j.Priority, j.State, j.GPU,
			gib(j.Min), gib(j.Vanilla), gib(j.Budget), gib(j.Peak), gib(j.Swapped), j.Resizes, j.Requeues, j.CompletedAfter, j.VirtualSecs)
		requeues += j.Requeues
	}
	fmt.Printf("\n%-13s %12s %12s %6s\n", "GPU", "HIGH-WATER", "CAPACITY", "USE")
	for _, g := range rep.GPUs {
		fmt.Printf("%-13s %12s %12s %5.1f%%\n", g.GPU, gib(g.HighWater), gib(g.Capacity), 100*float64(g.HighWater)/float64(g.Capacity))
	}
	fmt.Printf("\njobs that fit on the %d GPUs at once: %d of %d with TENSILE memory scheduling (minimum budgets), %d of %d without (vanilla peaks)\n",
		demoCluster.gpus(), rep.FitWith, rep.Total, rep.FitWithout, rep.Total)
	fmt.Printf("events: %s\n", demoEventCounts(rep.Events))
	fmt.Printf("re-queues: %d (a device refused a job or could not keep it next to its neighbours, or a starved job moved to a GPU where it runs)\n", requeues)
	if rep.AvgCompletion > 0 {
		fmt.Printf("average completion: %.0f s of job time from submission (%d completed jobs, time scale %g×)\n", rep.AvgCompletion, rep.States[string(actors.StateCompleted)], scale)
	}
	fmt.Printf("wall time: %.1fs\n", rep.WallSeconds)
	return demoIncomplete(rep)
}

// loadJobFile reads the job specs of --file, checked as submit checks
// them; a relative path that does not exist says where it was looked for.
func loadJobFile(file string) ([]workload.Spec, error) {
	specs, err := workload.LoadSpecsWith(file, actors.SubmitValidateOptions())
	if errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(file) {
		return nil, fmt.Errorf("--file: %w (read from the current directory: run from the repository root, or pass --file PATH)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	return specs, nil
}

// demoRun is one run of a whole cluster in this process (the demo's, and
// each of bench live's runs).
type demoRun struct {
	specs    []workload.Spec
	file     string // where specs came from, for the progress lines
	scale    float64
	limit    time.Duration
	start    time.Time // the wall time the run's lines count from
	elastic  actors.ElasticConfig
	log      *slog.Logger
	progress io.Writer // the run's lines (io.Discard: none)
	// pred and planner are shared by the coordinator and the nodes, and
	// may be shared by several runs (their caches then serve them all).
	pred    actors.Predictor
	planner actors.Planner
	// name is the cluster's name: its own, so that the run's gossip never
	// mixes with another cluster's on this machine.
	name string
	// shape is the cluster's nodes and GPUs (checked: demoShape.profile).
	shape demoShape
}

// runDemoCluster starts embedded NATS, the coordinator and the nodes of
// d.shape (simulated GPUs), predicts the jobs' demands, submits them,
// follows them to the end (or d.limit) and reports.
func runDemoCluster(d demoRun) (DemoReport, error) {
	dir, err := os.MkdirTemp("", "gpusched-demo-")
	if err != nil {
		return DemoReport{}, err
	}
	defer os.RemoveAll(dir)
	log, progress, scale, specs, limit, start := d.log, d.progress, d.scale, d.specs, d.limit, d.start
	pred, planner, cluster := d.pred, d.planner, d.name
	elastic := d.elastic
	elastic.TimeScale = scale
	co, err := actors.StartCoordinator(actors.CoordinatorConfig{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0",
		Gossip: "127.0.0.1:0", Cluster: cluster, Predictor: pred, Log: log, Elastic: elastic, Placement: d.shape.placement})
	if err != nil {
		return DemoReport{}, err
	}
	defer co.Stop()
	prof, err := d.shape.profile()
	if err != nil {
		return DemoReport{}, err
	}
	var nodes []*actors.Node
	for i := 1; i <= d.shape.nodes; i++ {
		// Listen 127.0.0.1:0 shares the coordinator's actor system (one per
		// process); each node has its own gossip member and actors.
		n, err := actors.StartNode(actors.NodeConfig{Name: fmt.Sprintf("node-%d", i), Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0",
			Join: []string{co.GossipAddr()}, Cluster: cluster, GPUs: d.shape.gpusPerNode, Profile: prof, TimeScale: scale, Predictor: pred, Planner: planner, Log: log})
		if err != nil {
			return DemoReport{}, err
		}
		defer n.Kill()
		nodes = append(nodes, n)
	}
	fmt.Fprintf(progress, "gpusched demo: NATS %s, actors %s (one system: the coordinator and the nodes), %s (%s each), time scale %g×\n",
		co.NATSURL(), co.Address(), d.shape, gpu.FormatBytes(prof.MemoryBytes), scale)
	wait := 10*time.Second + time.Duration(d.shape.nodes)*time.Second
	deadline := time.Now().Add(wait)
	for {
		g, _ := co.GPUs()
		if len(g) == d.shape.gpus() {
			break
		}
		if time.Now().After(deadline) {
			return DemoReport{}, fmt.Errorf("the coordinator knew %d of the %d GPUs of %s after %s: the nodes did not all join", len(g), d.shape.gpus(), d.shape, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	nc, err := transport.Connect(co.NATSURL(), "demo")
	if err != nil {
		return DemoReport{}, err
	}
	defer nc.Close()
	events, changes := map[string]int64{}, 0
	evCh := make(chan *nats.Msg, 8192)
	if _, err := nc.ChanSubscribe(transport.AllEvents, evCh); err != nil {
		return DemoReport{}, err
	}
	// Predict every job's demand first (TENSILE's minimum budget search,
	// cached by the predictor), so the jobs are placed together, as a
	// batch arriving at a warm scheduler would be, rather than one by one
	// as their predictions finish.
	t0 := time.Now()
	fmt.Fprintf(progress, "predicting the memory demand of %d jobs ...\n", len(specs))
	if err := warmPredictions(pred, specs, prof.Name, prof.MemoryBytes, progress, time.Second); err != nil {
		return DemoReport{}, err
	}
	fmt.Fprintf(progress, "predicted the memory demand of %d jobs in %.1fs (TENSILE minimum budgets at each job's tolerance)\n", len(specs), time.Since(t0).Seconds())
	jobs, err := co.SubmitSpecs(specs)
	if err != nil {
		return DemoReport{}, err
	}
	fmt.Fprintf(progress, "submitted %d jobs from %s\n\n", len(jobs), d.file)
	names := make(map[string]string, len(jobs))
	for _, j := range jobs {
		names[j.ID] = j.Name
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var recs []*actors.JobRecord
	for {
		select {
		case m := <-evCh:
			e, err := transport.ParseEvent(m.Data)
			if err != nil {
				continue
			}
			events[e.Type]++
			if e.Type == transport.EvResized && e.GPUs > 0 {
				changes++ // an elastic change (a budget revision gives no GPU count)
			}
			switch e.Type {
			case transport.EvPlaced:
				fmt.Fprintf(progress, "  %5.1fs %-12s placed on %s (needs ≥ %s, vanilla %s)\n", time.Since(start).Seconds(), e.Name, e.GPU, gib(e.MinBudget), gib(e.VanillaPeak))
			case transport.EvResized:
				fmt.Fprintf(progress, "  %5.1fs %-12s budget %s → %s on %s (%s)\n", time.Since(start).Seconds(), e.Name, gib(e.OldBudget), gib(e.Budget), e.GPU, withJobNames(e.Reason, names))
			case transport.EvCompleted, transport.EvFailed, transport.EvRequeued:
				fmt.Fprintf(progress, "  %5.1fs %-12s %s\n", time.Since(start).Seconds(), e.Name, demoStateLine(e.Type, e.Reason))
			}
			continue
		case <-tick.C:
		}
		if recs, err = co.Jobs(); err != nil {
			return DemoReport{}, err
		}
		var parts []string
		done := 0
		for _, r := range recs {
			if r.State.Terminal() {
				done++
				continue
			}
			parts = append(parts, r.Spec.Name+" "+demoProgress(r))
		}
		fmt.Fprintln(progress, strings.TrimRight(fmt.Sprintf("  %5.1fs [%d/%d done] %s", time.Since(start).Seconds(), done, len(recs), strings.Join(parts, " · ")), " "))
		if done == len(recs) {
			break
		}
		if time.Since(start) > limit {
			fmt.Fprintf(progress, "demo: giving up after %s with %d of %d jobs done\n", limit, done, len(recs))
			break
		}
	}
	rep := DemoReport{Total: len(recs), States: map[string]int{}, Events: events, ElasticChanges: changes}
	for _, r := range recs {
		rep.States[string(r.State)]++
		dj := DemoJob{ID: r.ID, Name: r.Spec.Name, Model: r.Spec.Model, State: string(r.State), GPU: r.GPU, Priority: r.Spec.Priority,
			Budget: r.Budget, Min: r.MinBudget, Vanilla: r.VanillaPeak, Peak: r.PeakBytes, Swapped: r.SwappedBytes,
			Resizes: r.Resizes, Requeues: r.Attempt, VirtualSecs: r.VirtualSeconds}
		if !r.FinishedAt.IsZero() {
			dj.CompletedAfter = r.FinishedAt.Sub(r.SubmittedAt).Seconds()
		}
		rep.Jobs = append(rep.Jobs, dj)
	}
	for _, n := range nodes {
		st, err := n.Status(5 * time.Second)
		if err != nil {
			return DemoReport{}, err
		}
		for _, d := range st.Devices {
			rep.GPUs = append(rep.GPUs, DemoGPU{GPU: d.Gpu, Capacity: d.Capacity, HighWater: d.HighWater})
		}
	}
	// In node order, node-2 before node-10 (node i's GPUs are "node-i/gpuK").
	sort.Slice(rep.GPUs, func(i, j int) bool { return gpuOrder(rep.GPUs[i].GPU) < gpuOrder(rep.GPUs[j].GPU) })
	strategy, _ := placement.ParseStrategy(string(d.shape.placement)) // checked by the coordinator's start
	rep.Nodes, rep.GPUsPerNode, rep.Device, rep.Placement = d.shape.nodes, d.shape.gpusPerNode, prof.Name, string(strategy)
	rep.AvgCompletion = avgCompletion(rep.Jobs, scale)
	rep.FitWith, rep.FitWithout = fitCounts(recs, prof, d.shape.gpus())
	rep.WallSeconds = time.Since(start).Seconds()
	return rep, nil
}

// avgCompletion is the mean submission-to-completion time of the completed
// jobs in job time (wall seconds × scale); 0 when none completed.
func avgCompletion(jobs []DemoJob, scale float64) float64 {
	sum, n := 0.0, 0
	for _, j := range jobs {
		if j.State == string(actors.StateCompleted) && j.CompletedAfter > 0 {
			sum += j.CompletedAfter
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n) * scale
}

// demoStateLine is a completed, failed or requeued event in the demo's
// log: the state, then ": reason" when the event gives one.
func demoStateLine(state, reason string) string {
	if reason == "" {
		return state
	}
	return state + ": " + reason
}

// demoEventCounts writes the demo's event tally as "15 completed, 33
// placed, ...", event types in alphabetical order ("none" when empty).
func demoEventCounts(events map[string]int64) string {
	if len(events) == 0 {
		return "none"
	}
	types := make([]string, 0, len(events))
	for t := range events {
		types = append(types, t)
	}
	sort.Strings(types)
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%d %s", events[t], t)
	}
	return strings.Join(parts, ", ")
}

// demoProgress is a live job's part of the demo's progress line: its
// percentage, or why it has none yet (queued for a GPU, or admitted and
// waiting for its GPU's memory plan).
func demoProgress(r *actors.JobRecord) string {
	switch {
	case r.State == actors.StatePending || r.State == actors.StatePlaced:
		return "queued"
	case r.WaitsForPlan():
		return "planning"
	case r.Total > 0:
		return fmt.Sprintf("%d%%", 100*r.Iteration/r.Total)
	}
	return "0%"
}

// demoIncomplete is the demo's error when not every job completed.
func demoIncomplete(rep DemoReport) error {
	if rep.States[string(actors.StateCompleted)] != rep.Total {
		return fmt.Errorf("%d of %d jobs completed", rep.States[string(actors.StateCompleted)], rep.Total)
	}
	return nil
}

// warmPredictions predicts every spec's demand on deviceType, two at a
// time, writing to progress how many are done at most once per every
// (and not at all when it finishes within the first).
func warmPredictions(pred actors.Predictor, specs []workload.Spec, deviceType string, capacity int64, progress io.Writer, every time.Duration) error {
	errs := make([]error, len(specs))
	var mu sync.Mutex
	done, t0 := 0, time.Now()
	last := t0
	finished := func() {
		mu.Lock()
		defer mu.Unlock()
		done++
		if now := time.Now(); now.Sub(last) >= every && done < len(specs) {
			last = now
			fmt.Fprintf(progress, "  %d/%d predicted (%.1fs)\n", done, len(specs), now.Sub(t0).Seconds())
		}
	}
	next := make(chan int)
	var wg sync.WaitGroup
	// One worker per CPU: the searches are independent and CPU-bound
	// (their cache plans a model once even when two jobs ask together).
	for w := 0; w < max(2, runtime.GOMAXPROCS(0)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rs := actors.RunSpec(fmt.Sprintf("warm-%d", i), &specs[i])
				_, errs[i] = pred.Predict(rs, deviceType)
				if s := &specs[i]; errs[i] == nil && s.Kind == workload.Train && s.Elastic() {
					// The elastic loop's memory bounds too: planned in
					// its first round, they held every round up.
					lo, hi := s.BatchRange()
					actors.WarmElasticBounds(pred, rs, lo, max(hi, int(rs.Batch)), deviceType, capacity)
				}
				finished()
			}
		}()
	}
	for i := range specs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("predict %s: %w", specs[i].Name, err)
		}
	}
	return nil
}

// fitCounts places the jobs, in placement's order, on size empty GPUs at
// their minimum budgets and at their vanilla peaks, and counts how many fit.
func fitCounts(recs []*actors.JobRecord, prof gpu.Profile, size int) (with, without int) {
	count := func(vanilla bool) int {
		gpus := make([]placement.FitGPU, size)
		for i := range gpus {
			gpus[i] = placement.FitGPU{ID: fmt.Sprintf("gpu%d", i), DeviceType: prof.Name, Capacity: prof.MemoryBytes}
		}
		rs := append([]*actors.JobRecord(nil), recs...)
		placement.FitOrder(rs, func(r *actors.JobRecord) int { return r.Spec.Priority }, func(r *actors.JobRecord) uint64 { return r.Seq })
		n := 0
		for _, r := range rs {
			d := placement.Demand{Min: r.MinBudget, Vanilla: r.VanillaPeak}
			if vanilla {
				d.Min = r.VanillaPeak
			}
			// Packed, whatever --placement: the count is of what fits.
			dec := placement.Fit(gpus, placement.FitRequest{ID: r.ID, Priority: r.Spec.Priority, Demand: d, Strategy: placement.BinPack})
			if dec.OK {
				gpus[dec.Index].Jobs = append(gpus[dec.Index].Jobs, placement.FitJob{ID: r.ID, Min: d.Min, Vanilla: d.Vanilla, Priority: r.Spec.Priority})
				n++
			}
		}
		return n
	}
	return count(false), count(true)
}

// jobID is a job id as devices write it in re-budget reasons.
var jobID = regexp.MustCompile(`\bj-\d+\b`)

// withJobNames writes a re-budget reason with the demo's job names for the
// ids devices give ("job j-4 joined" → "job gpt2-d joined"), as every other
// demo line names jobs; an id it does not know stays.
func withJobNames(reason string, names map[string]string) string {
	return jobID.ReplaceAllStringFunc(reason, func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		return id
	})
}
