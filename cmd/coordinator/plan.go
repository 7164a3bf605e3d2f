package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

type planOpts struct {
	model, trace, device, kind    string
	batch, seq                    int
	jsonOut, residentStart, turns bool
	policy, budget, tolerance     string
	jobs, mode, profiles          string
	dtype, paramChunk             string
	fusedOptimizer, spread        bool
	// toleranceSet: --tolerance was given (with --jobs it then overrides
	// the jobs' own tolerances).
	toleranceSet bool
}

func init() {
	var o planOpts
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Predict a job's memory and time on a device, and plan its memory schedule",
		Long: `plan builds one iteration of a job (a zoo model or a trace), runs it on the
simulated device to measure its vanilla peak memory and iteration time, and with
--policy plans swapping/recomputation and reports MSR, EOR and CBR.

With --jobs FILE.yaml it plans several jobs on one GPU and reports each job
and the GPU (--mode joint or sum-of-peaks for the tensile policy).`,
		Example: `  coordinator plan --model resnet50 --batch 16 --device h100-80gb --json
  coordinator plan --model vgg16 --batch 16 --device rtx2080ti-11gb --policy tensile --tolerance 30%
  coordinator plan --model bert-base --policy tensile --budget 60%
  coordinator plan --model resnet50 --device rtx2080ti-11gb --policy tensile --resident-start
  coordinator plan --jobs jobs.yaml --device a100-40gb --policy tensile --mode joint`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.toleranceSet = cmd.Flags().Changed("tolerance")
			return runPlan(cmd.OutOrStdout(), &o, cmd.Flags().Changed("model"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "resnet50", "zoo model ("+strings.Join(zoo.Models(), ", ")+")")
	f.StringVar(&o.trace, "trace", "", "plan a gpusched.trace/v1 graph file instead of a zoo model")
	f.IntVar(&o.batch, "batch", 16, "batch size")
	f.IntVar(&o.seq, "seq", 0, "sequence length for bert-base / gpt2-small (0: the model's default)")
	f.StringVar(&o.dtype, "dtype", "", "precision: fp32 (default), tf32, fp16, bf16")
	f.BoolVar(&o.fusedOptimizer, "fused-optimizer", false, "zoo models: run each parameter's Adam update as soon as its gradient is final, inside backward (the optimizer step fused into backward)")
	f.BoolVar(&o.spread, "spread-optimizer", false, "zoo models, with --param-chunk: spread a chunked weight's Adam updates over the rest of backward instead of running them together (implies --fused-optimizer)")
	f.StringVar(&o.paramChunk, "param-chunk", "", "store each linear weight larger than this size as row chunks, each with its own gradient and Adam moments (64MiB; default: weights whole)")
	f.StringVar(&o.device, "device", "h100-80gb", "device profile ("+strings.Join(gpu.ProfileNames(), ", ")+")")
	f.StringVar(&o.kind, "kind", "train", "job kind: train or infer")
	f.BoolVar(&o.jsonOut, "json", false, "print one JSON object")
	f.StringVar(&o.policy, "policy", "", "memory policy: none, vdnn-all, vdnn-conv, checkpoint, capuchin, tensile")
	f.StringVar(&o.budget, "budget", "", "memory budget for tensile: bytes with a unit (4GiB, 512MiB, 2GB) or a percentage of the vanilla peak (60%)")
	f.StringVar(&o.tolerance, "tolerance", "10%", "tolerated extra iteration time for tensile (10% or 0.1); with --jobs, when not given, the tightest of the jobs' own tolerance fields")
	f.StringVar(&o.jobs, "jobs", "", "YAML file of job specs to plan together on one GPU")
	f.StringVar(&o.mode, "mode", "joint", "several-job planning for tensile: joint (combined timeline) or sum-of-peaks")
	f.BoolVar(&o.turns, "turns", true, "tensile --jobs in joint mode: let the jobs take turns by whole iterations when that reserves less (--turns=false: interleaved ops and start offsets only)")
	f.BoolVar(&o.residentStart, "resident-start", false, "tensile: keep every parameter and optimizer state tensor on the device from the start (default: those a plan swaps across iterations start on the host, so the first iteration peaks no higher than the later ones)")
	f.StringVar(&o.profiles, "profiles", "", "YAML file of extra device profiles")
	rootCmd.AddCommand(cmd)
}

// planJobsTensile plans several jobs together with TENSILE in mode joint
// (on the combined timeline of the GPU) or sum-of-peaks (each job alone, as
// if all peaked together), and returns the plans with the planner's
// statistics (joint mode's start offsets, the horizon): what
// tensorsched.MeasureSeveral runs them with. When the budget cannot be met
// it returns the best plans found together with the error.
func planJobsTensile(jobs []tensorsched.Job, p gpu.Profile, t tensorsched.Target, mode string) ([]*tensorsched.Plan, *tensorsched.JointStats, error) {
	m, err := tensorsched.ParseMode(mode)
	if err != nil {
		return nil, nil, fmt.Errorf("--mode: %w", err)
	}
	plans, st, err := tensorsched.PlanJobs(jobs, p, m, t)
	return plans, &st, err
}

// policyNames lists every --policy value.
func policyNames() []string {
	return append(tensorsched.BaselineNames(), tensorsched.PolicyTensile)
}

// planReport is the JSON of a single-job plan.
type planReport struct {
	Model             string  `json:"model"`
	Kind              string  `json:"kind"`
	Batch             int     `json:"batch"`
	Device            string  `json:"device"`
	DeviceMemory      int64   `json:"device_memory_bytes"`
	Params            int64   `json:"params"`
	ParamBytes        int64   `json:"param_bytes"`
	PersistentBytes   int64   `json:"persistent_bytes"`
	Ops               int     `json:"ops"`
	Tensors           int     `json:"tensors"`
	VanillaPeakBytes  int64   `json:"vanilla_peak_bytes"`
	IterationSeconds  float64 `json:"iteration_seconds"`
	VanillaFitsDevice bool    `json:"vanilla_fits_device"`
	// FloorBytes is the least memory any plan of whole tensors needs: what
	// op FloorOp reads and writes at once (workload.Graph.OpFloor);
	// MSRCeiling = 1 − FloorBytes/VanillaPeakBytes bounds every plan's MSR.
	FloorBytes int64   `json:"floor_bytes"`
	FloorOp    string  `json:"floor_op"`
	MSRCeiling float64 `json:"msr_ceiling"`
	*policyReport
}

// policyReport is what --policy adds.
type policyReport struct {
	Policy      string  `json:"policy"`
	BudgetBytes int64   `json:"budget_bytes,omitempty"`
	Tolerance   float64 `json:"tolerance"`
	PeakBytes   int64   `json:"peak_bytes"`
	// RunPeakBytes is the high-water mark over the whole run, the first
	// iteration included (what a budget must cover).
	RunPeakBytes int64 `json:"run_peak_bytes"`
	// StartOnHost counts the tensors the plan starts on the host.
	StartOnHost int `json:"start_on_host"`
	// WaitsOnCopies: the greedy planner missed the budget and tensile's
	// waiting fallback (built from vdnn-all's plan) fits it.
	WaitsOnCopies             bool    `json:"waits_on_copies,omitempty"`
	ScheduledIterationSeconds float64 `json:"scheduled_iteration_seconds"`
	MSR                       float64 `json:"msr"`
	EOR                       float64 `json:"eor"`
	CBR                       float64 `json:"cbr"`
	SwappedBytes              int64   `json:"swapped_bytes"`
	RecomputedOps             int     `json:"recomputed_ops"`
	StallSeconds              float64 `json:"stall_seconds"`
	Actions                   int     `json:"actions"`
	PlanningMS                float64 `json:"planning_ms"`
	FitsDevice                bool    `json:"fits_device"`
	FitsBudget                *bool   `json:"fits_budget,omitempty"`
	Check                     string  `json:"check"`
	Note                      string  `json:"note,omitempty"`
}

func runPlan(w io.Writer, o *planOpts, modelSet bool) error {
	if o.profiles != "" {
		if _, err := gpu.LoadProfiles(o.profiles); err != nil {
			return fmt.Errorf("--profiles: %w", err)
		}
	}
	p, err := gpu.LookupProfile(o.device)
	if err != nil {
		return fmt.Errorf("--device: %w (a profile of your own: --profiles FILE.yaml, see README)", err)
	}
	tol, err := parseTolerance("--tolerance", o.tolerance, false)
	if err != nil {
		return err
	}
	if o.policy != "" && o.policy != tensorsched.PolicyTensile {
		if _, err := tensorsched.LookupBaseline(o.policy); err != nil {
			return fmt.Errorf("--policy %q: unknown policy (known: %s)", o.policy, strings.Join(policyNames(), ", "))
		}
	}
	if o.mode != "joint" && o.mode != "sum-of-peaks" {
		return fmt.Errorf("--mode %q: want joint or sum-of-peaks", o.mode)
	}
	if (o.paramChunk != "" || o.fusedOptimizer || o.spread) && (o.jobs != "" || o.trace != "") {
		return errors.New("--param-chunk, --fused-optimizer and --spread-optimizer apply to zoo models (--model); a trace or a jobs file keeps its graph as it is")
	}
	if o.jobs != "" {
		if o.trace != "" || modelSet {
			return errors.New("--jobs plans the jobs in the file; drop --model/--trace")
		}
		return runPlanJobs(w, o, p, tol)
	}
	g, err := planGraph(o)
	if err != nil {
		return err
	}
	if o.residentStart && o.policy != tensorsched.PolicyTensile {
		return errors.New("--resident-start needs --policy tensile")
	}
	rep, err := planOne(g, p, o.policy, o.budget, tol, o.residentStart)
	if err != nil {
		return err
	}
	if o.jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printPlan(w, rep)
	return nil
}

func planGraph(o *planOpts) (*workload.Graph, error) {
	if o.trace != "" {
		g, err := workload.LoadTrace(o.trace)
		if err != nil {
			return nil, fmt.Errorf("--trace: %w", err)
		}
		return g, nil
	}
	if _, ok := zoo.Canonical(o.model); !ok {
		return nil, fmt.Errorf("--model %q: unknown model (known: %s; or use --trace FILE)", o.model, strings.Join(zoo.Models(), ", "))
	}
	kind := workload.JobKind(o.kind)
	if kind != workload.Train && kind != workload.Infer {
		return nil, fmt.Errorf("--kind %q: want train or infer", o.kind)
	}
	if o.batch < 1 {
		return nil, fmt.Errorf("--batch %d: the batch size must be at least 1", o.batch)
	}
	if o.batch > workload.MaxBatch {
		return nil, fmt.Errorf("--batch %d: the batch size must be at most %d, as in a job spec", o.batch, workload.MaxBatch)
	}
	switch o.dtype {
	case "", "fp32", "tf32", "fp16", "bf16":
	default:
		return nil, fmt.Errorf("--dtype %q: want fp32, tf32, fp16 or bf16 (default fp32)", o.dtype)
	}
	if o.seq < 0 {
		return nil, fmt.Errorf("--seq %d: want a sequence length ≥ 1, or 0: the model's default", o.seq)
	}
	if max := zoo.MaxSeq(o.model); max > 0 && o.seq > max {
		name, _ := zoo.Canonical(o.model)
		return nil, fmt.Errorf("--seq %d: %s takes at most %d (0: the model's default)", o.seq, name, max)
	}
	opt, err := graphOptions(o.paramChunk, o.fusedOptimizer, o.spread)
	if err != nil {
		return nil, err
	}
	opt.Seq, opt.DType = o.seq, o.dtype
	g, err := zoo.Build(o.model, kind, o.batch, opt)
	if err != nil {
		return nil, fmt.Errorf("--model %s: %w", o.model, err)
	}
	return g, nil
}

// unbounded is p with practically unlimited memory: plan measures what a
// job needs, then says whether it fits the real device.
func unbounded(p gpu.Profile) gpu.Profile {
	p.MemoryBytes = 1 << 60
	return p
}

func planOne(g *workload.Graph, p gpu.Profile, policy, budgetFlag string, tol float64, residentStart bool) (*planReport, error) {
	sim := unbounded(p)
	van, err := tensorsched.Execute(gpu.NewSim(sim, gpu.SimOptions{}), []tensorsched.Job{{Graph: g}}, tensorsched.ExecOptions{Check: true})
	if err != nil {
		return nil, fmt.Errorf("vanilla run: %w", err)
	}
	rep := &planReport{
		Model: g.Model, Kind: string(g.Kind), Batch: g.Batch, Device: p.Name, DeviceMemory: p.MemoryBytes,
		Params: g.ParamCount(), ParamBytes: g.BytesOfKind(workload.Param), PersistentBytes: g.PersistentBytes(),
		Ops: len(g.Ops), Tensors: len(g.Tensors),
		VanillaPeakBytes: van.PeakBytes, IterationSeconds: van.Seconds,
		VanillaFitsDevice: van.PeakBytes <= p.MemoryBytes,
	}
	if fl, op := g.OpFloor(); op >= 0 && van.PeakBytes > 0 {
		rep.FloorBytes, rep.FloorOp = fl, g.Ops[op].Name
		rep.MSRCeiling = 1 - float64(fl)/float64(van.PeakBytes)
	}
	if policy == "" {
		if budgetFlag != "" {
			return nil, errors.New("--budget needs --policy (e.g. --policy tensile)")
		}
		return rep, nil
	}
	budget, err := parseBudget(budgetFlag, van.PeakBytes, g.PersistentBytes(), rep.FloorBytes, rep.FloorOp)
	if err != nil {
		return nil, err
	}
	pr := &policyReport{Policy: policy, BudgetBytes: budget, Tolerance: tol}
	t0 := time.Now()
	var plan *tensorsched.Plan
	if policy == tensorsched.PolicyTensile {
		var perr error
		var st tensorsched.PlanStats
		plan, st, perr = tensorsched.PlanTensile(g, p, tensorsched.Target{Budget: budget, Tolerance: tol, ResidentStart: residentStart})
		if plan == nil {
			return nil, fmt.Errorf("tensile: %w", perr)
		}
		pr.WaitsOnCopies = st.WaitsOnCopies
		if perr != nil {
			pr.Note = perr.Error()
		}
	} else {
		b, _ := tensorsched.LookupBaseline(policy)
		plan = b(g, p)
		if budget > 0 {
			pr.Note = "baselines do not take a budget; fits_budget says whether the plan happens to fit"
		}
	}
	pr.PlanningMS = float64(time.Since(t0).Microseconds()) / 1000
	if policy == tensorsched.PolicyTensile && budget >= rep.FloorBytes && budget > 0 && tol > 0 && strings.HasPrefix(pr.Note, tensorsched.ErrBudget.Error()) {
		pr.Note += toleranceHint(g, p, budget, residentStart)
	}
	pr.Actions = len(plan.Actions)
	pr.StartOnHost = countStartOnHost(plan)
	res, err := tensorsched.Execute(gpu.NewSim(sim, gpu.SimOptions{}), []tensorsched.Job{{Graph: g, Plan: plan}}, tensorsched.ExecOptions{Check: true})
	if err != nil {
		return nil, fmt.Errorf("running the %s plan: %w", policy, err)
	}
	pr.Check = "passed"
	j := res.Jobs[0]
	pr.PeakBytes = res.PeakBytes
	pr.RunPeakBytes = j.RunPeakBytes
	pr.ScheduledIterationSeconds = res.Seconds
	m := tensorsched.ComputeMetrics(van.PeakBytes, res.PeakBytes, van.Seconds, res.Seconds)
	pr.MSR, pr.EOR, pr.CBR = m.MSR, m.EOR, m.CBR
	pr.SwappedBytes = j.SwappedOutBytes
	pr.RecomputedOps = j.RecomputedOps
	pr.StallSeconds = j.StallSeconds
	pr.FitsDevice = res.PeakBytes <= p.MemoryBytes
	if budget > 0 {
		fits := max(res.PeakBytes, j.RunPeakBytes) <= budget
		pr.FitsBudget = &fits
	}
	rep.policyReport = pr
	return rep, nil
}

// percent writes a fraction as a percentage with no more digits than it
// needs: 0.1 → "10%", 0.025 → "2.5%".
func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + "%" }

// parseTolerance parses a tolerance flag: a percentage (10%) or a fraction
// (0.1), finite and not negative. A bare number above 1 is refused: "10"
// would be 1000 %, which is rarely meant (write "10%", or "1000%" for
// that). upTo100 refuses anything above 100 % (a job's tolerance, as the
// live runtime takes it).
func parseTolerance(flag, s string, upTo100 bool) (float64, error) {
	t, err := parseFraction(s)
	if err != nil || !(t >= 0) || math.IsInf(t, 0) {
		return 0, fmt.Errorf("%s %q: want a non-negative percentage (10%%) or fraction (0.1)", flag, s)
	}
	v := strings.TrimSpace(s)
	hint := ""
	if !strings.HasSuffix(v, "%") {
		hint = fmt.Sprintf(" (for %s percent write \"%s%%\")", v, v)
	}
	switch {
	case upTo100 && t > 1:
		return 0, fmt.Errorf("%s %q: want 0%%–100%%%s, a job's tolerance (10%% or 0.1)", flag, s, hint)
	case t > 1 && hint != "":
		return 0, fmt.Errorf("%s %q: a fraction above 1 is %s%s; write a tolerance above 100%% as a percentage", flag, s, percent(t), hint)
	}
	return t, nil
}

// parseFraction accepts "10%" or "0.1".
func parseFraction(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if v, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f / 100, err
	}
	return strconv.ParseFloat(s, 64)
}

// parseParamChunk reads --param-chunk: "" keeps weights whole (0).
func parseParamChunk(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	c, err := parseBytes(s)
	if err != nil || c == 0 {
		return 0, fmt.Errorf("--param-chunk: %q is not a chunk size: give one such as 64MiB, or leave the flag out to keep weights whole", s)
	}
	return c, nil
}

// graphOptions turns --param-chunk, --fused-optimizer and
// --spread-optimizer into build options, with the optimizer order named as
// a job spec names it. --spread-optimizer implies the fused optimizer, and
// without --param-chunk it is refused: with no chunked weight there is
// nothing to spread, and the run would be the fused one under another name.
func graphOptions(paramChunk string, fused, spread bool) (zoo.Options, error) {
	if spread && paramChunk == "" {
		return zoo.Options{}, errors.New("--spread-optimizer spreads the updates of chunked weights: give --param-chunk too (4MiB, say), or use --fused-optimizer alone")
	}
	chunk, err := parseParamChunk(paramChunk)
	if err != nil {
		return zoo.Options{}, err
	}
	order := ""
	switch {
	case spread:
		order = "spread"
	case fused:
		order = "fused"
	}
	return zoo.WithOptimizer(zoo.Options{ParamChunkBytes: chunk}, order), nil
}

// graphOptionsLabel describes non-default graph options for a report title.
func graphOptionsLabel(o zoo.Options) string {
	var parts []string
	switch {
	case o.SpreadOptimizer:
		parts = append(parts, "optimizer fused into backward, chunk updates spread")
	case o.FusedOptimizer:
		parts = append(parts, "optimizer fused into backward")
	}
	if o.ParamChunkBytes > 0 {
		parts = append(parts, "linear weights in chunks of at most "+gpu.FormatBytes(o.ParamChunkBytes))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// parseBytes accepts a byte count with an optional unit: 4GiB, 512MiB, 2GB, 1000.
func parseBytes(s string) (int64, error) { return workload.ParseBytes(s) }

// parseBudget turns --budget into bytes: a size, or a percentage of the
// vanilla peak. It refuses a budget below the persistent bytes, naming the
// op floor (floor bytes at op floorOp; 0: unknown) too when it is below
// that.
func parseBudget(s string, vanillaPeak, persistent, floor int64, floorOp string) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	var b int64
	if v, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("--budget %q: want a positive percentage of the vanilla peak, e.g. 60%%", s)
		}
		if f/100*float64(vanillaPeak) >= math.MaxInt64 {
			return 0, fmt.Errorf("--budget %q: more bytes than a size can hold; want a percentage of the vanilla peak, e.g. 60%%", s)
		}
		b = int64(f / 100 * float64(vanillaPeak))
	} else {
		v, err := parseBytes(s)
		if err != nil {
			return 0, fmt.Errorf("--budget: %w, or a percentage of the vanilla peak such as 60%%", err)
		}
		b = v
	}
	if b < persistent {
		var below string
		if b < floor {
			below = fmt.Sprintf("; no plan of whole tensors fits below %s either (op %s reads and writes that much at once)", gpu.FormatBytes(floor), floorOp)
		}
		return 0, fmt.Errorf("--budget %s (%s) is below the job's persistent memory (parameters and optimizer state); the minimum is %s (%d bytes, %.1f%% of the vanilla peak %s)%s",
			s, gpu.FormatBytes(b), gpu.FormatBytes(persistent), persistent, 100*float64(persistent)/float64(vanillaPeak), gpu.FormatBytes(vanillaPeak), below)
	}
	return b, nil
}

func printPlan(w io.Writer, r *planReport) {
	fmt.Fprintf(w, "%s (%s, batch %d) on %s (%s)\n", r.Model, r.Kind, r.Batch, r.Device, gpu.FormatBytes(r.DeviceMemory))
	fmt.Fprintf(w, "  parameters        %d (%s); params + optimizer state %s\n", r.Params, gpu.FormatBytes(r.ParamBytes), gpu.FormatBytes(r.PersistentBytes))
	fmt.Fprintf(w, "  graph             %d ops, %d tensors\n", r.Ops, r.Tensors)
	fits := "fits the device"
	if !r.VanillaFitsDevice {
		fits = "does NOT fit the device"
	}
	fmt.Fprintf(w, "  vanilla peak      %s (%s)\n", gpu.FormatBytes(r.VanillaPeakBytes), fits)
	fmt.Fprintf(w, "  iteration time    %.3f ms\n", r.IterationSeconds*1e3)
	if r.FloorBytes > 0 {
		fmt.Fprintf(w, "  floor             %s (op %s reads and writes it at once: no plan of whole tensors goes below, MSR ≤ %.3f)\n",
			gpu.FormatBytes(r.FloorBytes), r.FloorOp, r.MSRCeiling)
	}
	if pr := r.policyReport; pr != nil {
		fmt.Fprintf(w, "policy %s", pr.Policy)
		if pr.BudgetBytes > 0 {
			fmt.Fprintf(w, " (budget %s)", gpu.FormatBytes(pr.BudgetBytes))
		}
		if pr.Policy == tensorsched.PolicyTensile {
			fmt.Fprintf(w, " (tolerance %.0f%%)", pr.Tolerance*100)
		}
		fmt.Fprintf(w, ", planned in %.1f ms, %d actions, checker %s\n", pr.PlanningMS, pr.Actions, pr.Check)
		fmt.Fprintf(w, "  peak              %s (whole run %s)\n", gpu.FormatBytes(pr.PeakBytes), gpu.FormatBytes(pr.RunPeakBytes))
		if pr.StartOnHost > 0 {
			fmt.Fprintf(w, "  start on host     %d parameter and optimizer state tensors\n", pr.StartOnHost)
		}
		if pr.WaitsOnCopies {
			fmt.Fprintf(w, "  the planner missed the budget: this is the waiting fallback (vdnn-all's plan, improved)\n")
		}
		fmt.Fprintf(w, "  iteration time    %.3f ms (stalled %.3f ms)\n", pr.ScheduledIterationSeconds*1e3, pr.StallSeconds*1e3)
		fmt.Fprintf(w, "  MSR %.3f  EOR %.3f  CBR %.2f\n", pr.MSR, pr.EOR, pr.CBR)
		fmt.Fprintf(w, "  swapped out       %s per iteration; %d ops recomputed\n", gpu.FormatBytes(pr.SwappedBytes), pr.RecomputedOps)
		if pr.FitsBudget != nil && !*pr.FitsBudget {
			fmt.Fprintf(w, "  the plan does NOT fit the budget\n")
		}
		if pr.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", pr.Note)
		}
	}
}

// jobsReport is the JSON of plan --jobs: the jobs run co-located with
// their plans and are measured by tensorsched.MeasureSeveral under the
// several-job accounting (MSR = 1 − reserved / Σ vanilla job peaks, EOR the
// mean per-job iteration-time ratio to co-located vanilla, minus one).
type jobsReport struct {
	Device       string         `json:"device"`
	DeviceMemory int64          `json:"device_memory_bytes"`
	Policy       string         `json:"policy"`
	Mode         string         `json:"mode,omitempty"`
	Jobs         []jobPlanEntry `json:"jobs"`
	// SumOfVanillaJobPeaks adds up each job's vanilla peak alone (the MSR
	// denominator); SumOfVanillaPeaks is the same under its older name.
	SumOfVanillaJobPeaks int64 `json:"sum_of_vanilla_job_peaks"`
	SumOfVanillaPeaks    int64 `json:"sum_of_vanilla_peaks_bytes"`
	// VanillaPeakBytes is the co-located device peak without plans.
	VanillaPeakBytes int64   `json:"vanilla_peak_bytes"`
	VanillaSeconds   float64 `json:"vanilla_seconds"`
	// ReservedBytes is what the GPU reserves for the jobs: joint mode, the
	// device's high-water mark over a run of CheckIterations (longer than
	// the horizon: phases drift); sum-of-peaks and the baselines, the sum
	// of the jobs' own high-water marks.
	ReservedBytes   int64 `json:"reserved_bytes"`
	CheckIterations int   `json:"check_iterations,omitempty"`
	// PeakBytes is the device peak of the last (steady) iteration with the
	// plans, RunPeakBytes the high-water mark over the whole run.
	PeakBytes    int64 `json:"peak_bytes"`
	RunPeakBytes int64 `json:"run_peak_bytes"`
	// Seconds is the last iteration's makespan.
	Seconds float64 `json:"seconds"`
	// Horizon is the iterations run; StartOffsets each job's delay before
	// its first iteration (joint mode; zero otherwise).
	Horizon      int       `json:"horizon"`
	StartOffsets []float64 `json:"start_offsets"`
	// Turns: the jobs take turns by whole iterations (joint mode may
	// choose it; offsets are then zero).
	Turns bool `json:"turns"`
	// PacedTurns: their turns are paced by their interleaved iteration
	// ends (jobs of different iteration lengths; JointStats.TurnKeys).
	PacedTurns bool    `json:"paced_turns,omitempty"`
	MSR        float64 `json:"msr"`
	EOR        float64 `json:"eor"`
	CBR        float64 `json:"cbr"`
	// FitsDevice: the reservation fits the device's memory.
	FitsDevice bool    `json:"fits_device"`
	PlanningMS float64 `json:"planning_ms"`
	// StartOnHost counts the tensors the plans start on the host (all jobs).
	StartOnHost int    `json:"start_on_host"`
	Check       string `json:"check"`
	Note        string `json:"note,omitempty"`
	// Tolerance is what tensile planned the GPU to, ToleranceFrom where it
	// came from: "--tolerance", or the job whose own tolerance is the
	// tightest.
	Tolerance     *float64 `json:"tolerance,omitempty"`
	ToleranceFrom string   `json:"tolerance_from,omitempty"`
}

// countStartOnHost counts the tensors plan starts on the host.
func countStartOnHost(plan *tensorsched.Plan) int {
	n := 0
	if plan != nil {
		for _, a := range plan.Actions {
			if a.Kind == tensorsched.StartOnHost {
				n++
			}
		}
	}
	return n
}

type jobPlanEntry struct {
	Model string `json:"model"`
	Batch int    `json:"batch"`
	// The measured figures of the job (name, vanilla peak alone, peaks,
	// iteration times with and without plans, EOR, swaps, recomputes).
	tensorsched.SeveralJob
}

// specGraph builds the graph of a job spec (its largest batch size).
func specGraph(s *workload.Spec) (*workload.Graph, error) {
	var g *workload.Graph
	var err error
	if s.Trace != "" {
		// The trace fixes the batch size and kind; a spec that sets
		// others must not be planned as if it had them.
		g, err = workload.LoadTrace(s.Trace)
		switch {
		case err != nil:
		case s.Batch != (workload.Range{}) && s.Batch != workload.Fixed(g.Batch):
			err = fmt.Errorf("batch: %d, but the trace was recorded at batch %d; set batch: %d or leave it out", s.Batch.Max, g.Batch, g.Batch)
		case s.Kind != g.Kind:
			err = fmt.Errorf("kind: %q, but the trace is a %q graph; set kind: %s", s.Kind, g.Kind, g.Kind)
		}
	} else {
		_, batch := s.BatchRange()
		g, err = zoo.Build(s.Model, s.Kind, batch, zoo.WithOptimizer(zoo.Options{Seq: s.Seq, DType: s.DType, ParamChunkBytes: s.ParamChunk}, s.Optimizer))
	}
	if err != nil {
		return nil, fmt.Errorf("job %q: %w", s.Name, err)
	}
	if s.Host.PerIteration > 0 {
		g.HostSecondsPerIteration = s.Host.PerIteration
	}
	if s.Host.PerKernel > 0 {
		g.HostSecondsPerKernel = s.Host.PerKernel
	}
	return g, nil
}

func runPlanJobs(w io.Writer, o *planOpts, p gpu.Profile, tol float64) error {
	specs, err := workload.LoadSpecsWith(o.jobs, actors.ValidateOptions())
	if err != nil {
		return fmt.Errorf("--jobs: %w", err)
	}
	if len(specs) == 0 {
		return fmt.Errorf("--jobs %s: no jobs in the file", o.jobs)
	}
	policy := o.policy
	if policy == "" {
		if strings.TrimSpace(o.budget) != "" {
			return errors.New("--budget needs --policy (e.g. --policy tensile)")
		}
		policy = "none"
	}
	// The planner takes one tolerance for the GPU; a job's own (its spec's
	// tolerance, 10% by default) is honoured by planning to the tightest,
	// unless --tolerance says otherwise.
	tolFrom := "--tolerance"
	if !o.toleranceSet {
		tol, tolFrom = specs[0].Tolerance, specs[0].Name
		for _, s := range specs[1:] {
			if s.Tolerance < tol {
				tol, tolFrom = s.Tolerance, s.Name
			}
		}
	}
	jobs := make([]tensorsched.Job, len(specs))
	for i := range specs {
		g, err := specGraph(&specs[i])
		if err != nil {
			return fmt.Errorf("--jobs: %w", err)
		}
		jobs[i] = tensorsched.Job{Name: specs[i].Name, Graph: g}
	}
	if o.residentStart && policy != tensorsched.PolicyTensile {
		return errors.New("--resident-start needs --policy tensile")
	}
	if !o.turns && (policy != tensorsched.PolicyTensile || o.mode != "joint") {
		return errors.New("--turns=false needs --policy tensile and --mode joint (only joint mode takes turns)")
	}
	rep, err := planJobs(jobs, p, policy, o.mode, o.budget, tensorsched.Target{Tolerance: tol, ResidentStart: o.residentStart, NoTurns: !o.turns})
	if err != nil {
		return err
	}
	if policy == tensorsched.PolicyTensile {
		rep.Tolerance, rep.ToleranceFrom = &tol, tolFrom
		// Sum-of-peaks plans each job alone: beside the others a job can
		// run slower than the tolerance allows, which the table shows
		// but is easy to miss.
		var over []string
		for _, j := range rep.Jobs {
			if j.EOR > tol+1e-9 {
				over = append(over, fmt.Sprintf("%s %.3f", j.Name, j.EOR))
			}
		}
		if len(over) > 0 {
			why := ""
			if o.mode == "sum-of-peaks" {
				why = " (sum-of-peaks plans each job alone, so co-located slow-downs are not bounded; joint mode plans them together)"
			}
			rep.Note = strings.TrimPrefix(rep.Note+"; ", "; ") + fmt.Sprintf("EOR above the tolerance %s: %s%s",
				percent(tol), strings.Join(over, ", "), why)
		}
	}
	if o.jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	noun := "jobs"
	if len(rep.Jobs) == 1 {
		noun = "job"
	}
	fmt.Fprintf(w, "%d %s on %s (%s), policy %s", len(rep.Jobs), noun, rep.Device, gpu.FormatBytes(rep.DeviceMemory), rep.Policy)
	if rep.Mode != "" {
		fmt.Fprintf(w, ", mode %s", rep.Mode)
	}
	if rep.Tolerance != nil {
		from := "from --tolerance"
		if rep.ToleranceFrom != "--tolerance" {
			from = "the tightest job's: " + rep.ToleranceFrom
		}
		fmt.Fprintf(w, ", tolerance %s (%s)", percent(*rep.Tolerance), from)
	}
	fmt.Fprintf(w, ", checker %s\n", rep.Check)
	fmt.Fprintf(w, "  %-16s %-14s %6s %14s %14s %12s %8s\n", "job", "model", "batch", "alone peak", "run peak", "iter ms", "EOR")
	for _, j := range rep.Jobs {
		fmt.Fprintf(w, "  %-16s %-14s %6d %14s %14s %12.3f %8.3f\n", j.Name, j.Model, j.Batch, gpu.FormatBytes(j.VanillaPeakBytes),
			gpu.FormatBytes(j.RunPeakBytes), j.IterationSeconds*1e3, j.EOR)
	}
	offs := make([]string, len(rep.StartOffsets))
	for i, o := range rep.StartOffsets {
		offs[i] = fmt.Sprintf("%.1f", o*1e3)
	}
	covers := ""
	if rep.CheckIterations > 0 {
		covers = fmt.Sprintf(" (high-water mark over %d iterations)", rep.CheckIterations)
	}
	how := "start offsets " + strings.Join(offs, ", ") + " ms"
	if rep.Turns {
		how = "the jobs take turns by whole iterations"
		if rep.PacedTurns {
			how += ", paced by when their iterations end interleaved"
		}
	}
	fmt.Fprintf(w, "GPU over %d iterations (%s): reserved %s%s of the sum of vanilla job peaks %s (fits: %v)\n",
		rep.Horizon, how, gpu.FormatBytes(rep.ReservedBytes), covers, gpu.FormatBytes(rep.SumOfVanillaJobPeaks), rep.FitsDevice)
	fmt.Fprintf(w, "     steady peak %s (vanilla co-located %s), whole-run peak %s\n",
		gpu.FormatBytes(rep.PeakBytes), gpu.FormatBytes(rep.VanillaPeakBytes), gpu.FormatBytes(rep.RunPeakBytes))
	if rep.StartOnHost > 0 {
		fmt.Fprintf(w, "     %d parameter and optimizer state tensors start on the host\n", rep.StartOnHost)
	}
	fmt.Fprintf(w, "     MSR %.3f  EOR %.3f  CBR %.2f  (makespan of the last iteration %.3f ms, vanilla %.3f ms)\n",
		rep.MSR, rep.EOR, rep.CBR, rep.Seconds*1e3, rep.VanillaSeconds*1e3)
	if rep.Note != "" {
		fmt.Fprintf(w, "note: %s\n", rep.Note)
	}
	return nil
}

// planJobs plans and runs several jobs on one GPU. A budget applies to the
// GPU (all jobs together).
// t is tensile's target but for the budget, which budgetFlag gives.
func planJobs(jobs []tensorsched.Job, p gpu.Profile, policy, mode, budgetFlag string, t tensorsched.Target) (*jobsReport, error) {
	rep := &jobsReport{Device: p.Name, DeviceMemory: p.MemoryBytes, Policy: policy}
	var persistent int64
	for i := range jobs {
		persistent += jobs[i].Graph.PersistentBytes()
	}
	// The jobs without plans: the vanilla peak a --budget percentage is of.
	van, err := tensorsched.MeasureSeveral(p, jobs, make([]*tensorsched.Plan, len(jobs)), nil, true)
	if err != nil {
		return nil, fmt.Errorf("vanilla co-located run: %w", err)
	}
	budget, err := parseBudget(budgetFlag, van.VanillaPeakBytes, persistent, 0, "")
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var plans []*tensorsched.Plan
	var st *tensorsched.JointStats
	if policy == tensorsched.PolicyTensile {
		rep.Mode = mode
		t.Budget = budget
		plans, st, err = planJobsTensile(jobs, p, t, mode)
		if len(plans) != len(jobs) || st == nil {
			if err == nil {
				err = fmt.Errorf("%d plans for %d jobs", len(plans), len(jobs))
			}
			return nil, fmt.Errorf("tensile (%s): %w", mode, err)
		}
		if err != nil {
			rep.Note = err.Error()
		}
	} else {
		b, err := tensorsched.LookupBaseline(policy)
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		plans = make([]*tensorsched.Plan, len(jobs))
		for i := range jobs {
			plans[i] = b(jobs[i].Graph, p)
		}
		if budget > 0 {
			rep.Note = fmt.Sprintf("baselines do not take a budget; the %s budget was not used (compare reserved_bytes)", gpu.FormatBytes(budget))
		}
	}
	rep.PlanningMS = float64(time.Since(t0).Microseconds()) / 1000
	for _, pl := range plans {
		rep.StartOnHost += countStartOnHost(pl)
	}
	sr, err := tensorsched.MeasureSeveral(p, jobs, plans, st, true)
	if err != nil {
		return nil, fmt.Errorf("running the %s plans: %w", policy, err)
	}
	rep.Check = "passed"
	rep.SumOfVanillaJobPeaks, rep.SumOfVanillaPeaks = sr.SumOfVanillaJobPeaks, sr.SumOfVanillaJobPeaks
	rep.VanillaPeakBytes, rep.VanillaSeconds = sr.VanillaPeakBytes, sr.VanillaSeconds
	rep.ReservedBytes, rep.PeakBytes, rep.RunPeakBytes, rep.Seconds = sr.ReservedBytes, sr.PeakBytes, sr.RunPeakBytes, sr.Seconds
	rep.Horizon, rep.StartOffsets, rep.CheckIterations, rep.Turns = sr.Horizon, sr.StartOffsets, sr.CheckIterations, sr.Turns
	rep.PacedTurns = sr.PacedTurns
	rep.MSR, rep.EOR, rep.CBR = sr.MSR, sr.EOR, sr.CBR
	rep.FitsDevice = sr.ReservedBytes <= p.MemoryBytes
	for i, j := range sr.Jobs {
		rep.Jobs = append(rep.Jobs, jobPlanEntry{Model: jobs[i].Graph.Model, Batch: jobs[i].Graph.Batch, SeveralJob: j})
	}
	return rep, nil
}

// toleranceHint is added to the note of a tensile plan that missed its
// budget (at or above the op floor) within the time tolerance: whether the
// budget fits with more extra time, and how much (the fix is a larger
// --tolerance), from one more planning without the time cap. The
// tolerance it suggests, the uncapped plan's EOR rounded up to a percent,
// is planned too and suggested only when it fits; otherwise the note says
// that --tolerance 0 (with a budget: no cap) does.
func toleranceHint(g *workload.Graph, p gpu.Profile, budget int64, residentStart bool) string {
	_, st, err := tensorsched.PlanTensile(g, p, tensorsched.Target{Budget: budget, ResidentStart: residentStart})
	switch {
	case errors.Is(err, tensorsched.ErrBudget):
		return fmt.Sprintf("; without a time cap the planner does not fit it either (its plan peaks at %s, EOR %.3f)",
			gpu.FormatBytes(max(st.PeakBytes, st.FirstIterationPeakBytes)), st.EOR)
	case err != nil:
		return ""
	}
	pct := int(math.Ceil(st.EOR * 100))
	if _, _, err := tensorsched.PlanTensile(g, p, tensorsched.Target{Budget: budget, Tolerance: float64(pct) / 100, ResidentStart: residentStart}); err == nil {
		return fmt.Sprintf("; without a time cap it fits with EOR %.3f: try --tolerance %d%%", st.EOR, pct)
	}
	return fmt.Sprintf("; without a time cap it fits with EOR %.3f: try --tolerance 0 (with a budget, no cap on the extra time)", st.EOR)
}
