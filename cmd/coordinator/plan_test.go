package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// resetCLIFlags puts every flag of c and its subcommands back to its default:
// cobra keeps the values a previous Execute parsed, and each subcommand
// keeps its flags in variables of its own.
func resetCLIFlags(c *cobra.Command) {
	reset := func(f *pflag.Flag) {
		_ = f.Value.Set(f.DefValue)
		f.Changed = false
	}
	c.Flags().VisitAll(reset)
	c.PersistentFlags().VisitAll(reset)
	for _, sub := range c.Commands() {
		resetCLIFlags(sub)
	}
}

// runCoordinator runs the coordinator in-process with args and returns its stdout,
// stderr and error.
func runCoordinator(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	resetCLIFlags(rootCmd)
	var out, errOut bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&errOut)
	rootCmd.SetArgs(args)
	defer rootCmd.SetArgs(nil)
	err := rootCmd.Execute()
	return out.String(), errOut.String(), err
}

// planJSON runs plan with --json and decodes the object.
func planJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, _, err := runCoordinator(t, append(append([]string{"plan"}, args...), "--json")...)
	if err != nil {
		t.Fatalf("plan %v: %v", args, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("plan %v: output is not one JSON object: %v\n%s", args, err, out)
	}
	return m
}

func num(t *testing.T, m map[string]any, key string) float64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("field %q missing or not a number: %v", key, m[key])
	}
	return v
}

var planFields = []string{"model", "kind", "batch", "device", "device_memory_bytes", "params", "param_bytes",
	"persistent_bytes", "ops", "tensors", "vanilla_peak_bytes", "iteration_seconds", "vanilla_fits_device",
	"floor_bytes", "floor_op", "msr_ceiling"}

var policyFields = []string{"policy", "tolerance", "peak_bytes", "scheduled_iteration_seconds", "msr", "eor", "cbr",
	"swapped_bytes", "recomputed_ops", "stall_seconds", "actions", "planning_ms", "fits_device", "check"}

func TestPlanJSONFields(t *testing.T) {
	m := planJSON(t, "--model", "resnet50", "--batch", "4", "--device", "h100-80gb")
	for _, f := range planFields {
		if _, ok := m[f]; !ok {
			t.Errorf("field %q missing", f)
		}
	}
	if _, ok := m["policy"]; ok {
		t.Errorf("policy reported without --policy: %v", m["policy"])
	}
	if m["model"] != "resnet50" || m["kind"] != "train" || m["device"] != "h100-80gb" || num(t, m, "batch") != 4 {
		t.Errorf("model %v kind %v device %v batch %v", m["model"], m["kind"], m["device"], m["batch"])
	}
	if p := num(t, m, "params"); p != 25557032 {
		t.Errorf("params %v, want 25557032", p)
	}
	pb, peak := num(t, m, "param_bytes"), num(t, m, "vanilla_peak_bytes")
	if pb != 4*25557032 || num(t, m, "persistent_bytes") < pb || peak <= num(t, m, "persistent_bytes") {
		t.Errorf("param bytes %v, persistent %v, vanilla peak %v: want 4 B per param, params <= persistent < peak", pb, m["persistent_bytes"], peak)
	}
	if num(t, m, "ops") <= 0 || num(t, m, "tensors") <= num(t, m, "ops") || num(t, m, "iteration_seconds") <= 0 {
		t.Errorf("ops %v tensors %v iteration %v", m["ops"], m["tensors"], m["iteration_seconds"])
	}
	if m["vanilla_fits_device"] != true || peak > num(t, m, "device_memory_bytes") {
		t.Errorf("a batch-4 ResNet-50 (%v B) should fit an H100 (%v B)", peak, m["device_memory_bytes"])
	}
	fl, ceil := num(t, m, "floor_bytes"), num(t, m, "msr_ceiling")
	g, err := zoo.Build("resnet50", workload.Train, 4, zoo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, op := g.OpFloor()
	if fl != float64(want) || m["floor_op"] != g.Ops[op].Name || fl >= peak || math.Abs(ceil-(1-fl/peak)) > 1e-9 {
		t.Errorf("floor %v B at op %v, MSR ceiling %v: want the graph's op floor %d B at %s, below the vanilla peak %v, ceiling 1 − floor/peak",
			fl, m["floor_op"], ceil, want, g.Ops[op].Name, peak)
	}
}

// The text names the floor and its op; a budget below both the persistent
// memory and the floor says that no plan fits below the floor either.
func TestPlanFloorTextAndBudget(t *testing.T) {
	out, _, err := runCoordinator(t, "plan", "--model", "vgg16", "--batch", "16", "--device", "h100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "floor             1.53 GiB (op classifier.0.weight.adam") || !strings.Contains(out, "MSR ≤ 0.483") {
		t.Errorf("plan text lacks VGG16's floor line:\n%s", out)
	}
	_, _, err = runCoordinator(t, "plan", "--model", "vgg16", "--batch", "16", "--device", "h100-80gb", "--policy", "tensile", "--budget", "1GiB")
	if err == nil || !strings.Contains(err.Error(), "below the job's persistent memory") || !strings.Contains(err.Error(), "no plan of whole tensors fits below 1.53 GiB either (op classifier.0.weight.adam") {
		t.Errorf("--budget 1GiB: err %v, want the persistent-memory refusal and the floor", err)
	}
	_, _, err = runCoordinator(t, "plan", "--model", "vgg16", "--batch", "16", "--device", "h100-80gb", "--policy", "tensile", "--budget", "1.54GiB")
	if err == nil || strings.Contains(err.Error(), "either") {
		t.Errorf("--budget 1.54GiB (above the floor, below persistent memory): err %v, want the refusal without the floor", err)
	}
}

// --param-chunk splits VGG16's classifier.0 weight: the Adam op that set
// the floor goes, the ceiling rises from 0.483 to 0.806, and tensile's plan
// at the H100 target's 5 % saves at least as much as with the weight whole.
func TestPlanParamChunk(t *testing.T) {
	type report struct {
		Params     int64   `json:"params"`
		Ops        int     `json:"ops"`
		FloorOp    string  `json:"floor_op"`
		MSRCeiling float64 `json:"msr_ceiling"`
		MSR        float64 `json:"msr"`
		EOR        float64 `json:"eor"`
		Check      string  `json:"check"`
	}
	msr := func(extra ...string) report {
		t.Helper()
		out, _, err := runCoordinator(t, append([]string{"plan", "--model", "vgg16", "--batch", "16", "--device", "h100-80gb",
			"--policy", "tensile", "--tolerance", "5%", "--json"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	whole, ch := msr(), msr("--param-chunk", "128MiB")
	// The optimizer step fused into backward: the same ops, gradients
	// freed as soon as they are used, and more saved at 5 %.
	if fu := msr("--fused-optimizer"); fu.Ops != whole.Ops || fu.MSR <= whole.MSR || fu.EOR > 0.05 {
		t.Errorf("--fused-optimizer: %d ops, MSR %.3f at EOR %.3f; whole %d ops, MSR %.3f", fu.Ops, fu.MSR, fu.EOR, whole.Ops, whole.MSR)
	}
	if whole.FloorOp != "classifier.0.weight.adam" || ch.FloorOp == whole.FloorOp || ch.MSRCeiling < 0.8 || whole.MSRCeiling > 0.49 {
		t.Errorf("floors: whole %s (ceiling %.3f), chunked %s (ceiling %.3f)", whole.FloorOp, whole.MSRCeiling, ch.FloorOp, ch.MSRCeiling)
	}
	if ch.Params != whole.Params || ch.Ops != whole.Ops+3 {
		t.Errorf("chunked: %d params, %d ops; whole: %d params, %d ops (want the same params and 3 more Adam ops)", ch.Params, ch.Ops, whole.Params, whole.Ops)
	}
	if ch.MSR < whole.MSR || ch.EOR > 0.05 {
		t.Errorf("chunked MSR %.3f at EOR %.3f, whole MSR %.3f: want at least as much saved within 5%%", ch.MSR, ch.EOR, whole.MSR)
	}
	// Chunks of 4 MiB with their updates spread over backward: each chunk's
	// moments come in only around its own update, and the H100 target's
	// half of the peak is saved within 5 %.
	sp := msr("--param-chunk", "4MiB", "--spread-optimizer")
	fc := msr("--param-chunk", "4MiB", "--fused-optimizer")
	if sp.Ops != fc.Ops || sp.MSR < 0.5 || sp.EOR > 0.05 || sp.MSR <= fc.MSR || sp.Check != "passed" {
		t.Errorf("--spread-optimizer: %d ops, MSR %.3f at EOR %.3f; fused alone %d ops, MSR %.3f; checker %q: want the same ops, at least 0.5 within 5%%, more than fused, checker passed", sp.Ops, sp.MSR, sp.EOR, fc.Ops, fc.MSR, sp.Check)
	}
}

func TestPlanPolicyJSON(t *testing.T) {
	base := []string{"--model", "resnet50", "--batch", "4", "--device", "h100-80gb"}
	for _, c := range []struct{ policy, budget string }{{"vdnn-all", "60%"}, {"tensile", "75%"}} {
		policy, frac := c.policy, 0.6
		if policy == "tensile" {
			frac = 0.75
		}
		m := planJSON(t, append(base, "--policy", policy, "--budget", c.budget)...)
		for _, f := range append(planFields, policyFields...) {
			if _, ok := m[f]; !ok {
				t.Errorf("%s: field %q missing", policy, f)
			}
		}
		van, peak, budget := num(t, m, "vanilla_peak_bytes"), num(t, m, "peak_bytes"), num(t, m, "budget_bytes")
		msr, eor := num(t, m, "msr"), num(t, m, "eor")
		t.Logf("%s: peak %.0f of %.0f (budget %.0f) MSR %.3f EOR %.3f CBR %.2f swapped %.0f recomputed %.0f planning %.1f ms",
			policy, peak, van, budget, msr, eor, num(t, m, "cbr"), num(t, m, "swapped_bytes"), num(t, m, "recomputed_ops"), num(t, m, "planning_ms"))
		if m["policy"] != policy || m["check"] != "passed" {
			t.Errorf("%s: policy %v check %v", policy, m["policy"], m["check"])
		}
		if want := float64(int64(frac * van)); budget != want {
			t.Errorf("%s: budget %v, want %s of %v = %v", policy, budget, c.budget, van, want)
		}
		if msr <= 0 || msr >= 1 || eor < 0 || peak >= van {
			t.Errorf("%s: MSR %v EOR %v peak %v vanilla %v", policy, msr, eor, peak, van)
		}
		if got := 1 - peak/van; got-msr > 1e-9 || msr-got > 1e-9 {
			t.Errorf("%s: MSR %v, but 1 - peak/vanilla = %v", policy, msr, got)
		}
		if num(t, m, "actions") <= 0 || num(t, m, "planning_ms") < 0 {
			t.Errorf("%s: actions %v planning %v", policy, m["actions"], m["planning_ms"])
		}
		switch policy {
		case "vdnn-all":
			if num(t, m, "swapped_bytes") <= 0 || num(t, m, "recomputed_ops") != 0 {
				t.Errorf("vdnn-all swapped %v recomputed %v", m["swapped_bytes"], m["recomputed_ops"])
			}
			if note, _ := m["note"].(string); !strings.Contains(note, "do not take a budget") {
				t.Errorf("vdnn-all with --budget: note %q should say baselines ignore it", note)
			}
		case "tensile":
			if m["fits_budget"] != true || peak > budget {
				t.Errorf("tensile: peak %v over budget %v (fits_budget %v)", peak, budget, m["fits_budget"])
			}
		}
	}
	// A budget no plan can meet (1 MiB above the parameters and optimizer
	// state) still gets the best plan, reported as not fitting, with why.
	m := planJSON(t, base...)
	budget := strconv.FormatInt(int64(num(t, m, "persistent_bytes"))+1<<20, 10)
	m = planJSON(t, append(base, "--policy", "tensile", "--budget", budget)...)
	if note, _ := m["note"].(string); m["fits_budget"] != false || !strings.Contains(note, "cannot fit the memory budget") || m["check"] != "passed" {
		t.Errorf("impossible budget: fits_budget %v check %v note %q", m["fits_budget"], m["check"], note)
	}
}

func TestPlanText(t *testing.T) {
	out, _, err := runCoordinator(t, "plan", "--model", "mlp", "--batch", "8", "--device", "h100-80gb", "--policy", "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"mlp (train, batch 8) on h100-80gb", "vanilla peak", "policy checkpoint", "checker passed", "MSR"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// By default the params and optimizer state a plan swaps across
// iterations start on the host (--resident-start keeps them on the
// device): the whole-run peak of ResNet-50 b16 on the RTX 2080 Ti falls to
// the steady state's, which does not change, and the report counts the
// tensors.
func TestPlanStartOnHost(t *testing.T) {
	base := []string{"--model", "resnet50", "--batch", "16", "--device", "rtx2080ti-11gb", "--policy", "tensile"}
	off := planJSON(t, append(base, "--resident-start")...)
	on := planJSON(t, base...)
	t.Logf("peak %.0f / %.0f, whole run %.0f / %.0f, start on host %v / %v", num(t, off, "peak_bytes"), num(t, on, "peak_bytes"),
		num(t, off, "run_peak_bytes"), num(t, on, "run_peak_bytes"), off["start_on_host"], on["start_on_host"])
	if num(t, off, "start_on_host") != 0 || num(t, on, "start_on_host") <= 0 || on["check"] != "passed" {
		t.Errorf("start on host: %v without the flag, %v with it (check %v)", off["start_on_host"], on["start_on_host"], on["check"])
	}
	if num(t, on, "run_peak_bytes") >= num(t, off, "run_peak_bytes") || num(t, on, "peak_bytes") != num(t, off, "peak_bytes") ||
		num(t, on, "run_peak_bytes") < num(t, on, "peak_bytes") {
		t.Errorf("peak %v / %v, whole run %v / %v: want the whole-run peak to fall to the same steady peak",
			off["peak_bytes"], on["peak_bytes"], off["run_peak_bytes"], on["run_peak_bytes"])
	}
	out, _, err := runCoordinator(t, append([]string{"plan"}, base...)...)
	if err != nil || !strings.Contains(out, "start on host ") || !strings.Contains(out, "(whole run ") {
		t.Errorf("text output (error %v) does not report the start on the host:\n%s", err, out)
	}
}

// Each bad flag is refused with the flag named and what would be accepted.
func TestPlanFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--model", "alexnet"}, []string{"--model", "alexnet", "unknown model", "resnet50", "--trace"}},
		{[]string{"--device", "tpu-v9"}, []string{"--device", "tpu-v9", "h100-80gb", "rtx2080ti-11gb"}},
		{[]string{"--policy", "tensile", "--budget", "1MiB"}, []string{"--budget", "1MiB", "below the job's persistent memory", "the minimum is"}},
		{[]string{"--policy", "tensile", "--budget", "lots"}, []string{"--budget", `"lots" is not a size`, "4GiB", "60%"}},
		{[]string{"--policy", "tensile", "--budget", "-5%"}, []string{"--budget", "positive percentage"}},
		{[]string{"--budget", "4GiB"}, []string{"--budget needs --policy"}},
		{[]string{"--policy", "magic"}, []string{"--policy", "magic", "known:", "vdnn-all", "tensile"}},
		{[]string{"--tolerance", "soon"}, []string{"--tolerance", "10%"}},
		{[]string{"--mode", "together"}, []string{"--mode", "joint or sum-of-peaks"}},
		{[]string{"--resident-start"}, []string{"--resident-start needs --policy tensile"}},
		{[]string{"--policy", "vdnn-all", "--resident-start"}, []string{"--resident-start needs --policy tensile"}},
		{[]string{"--batch", "0"}, []string{"--batch 0", "at least 1"}},
		{[]string{"--kind", "serve"}, []string{"--kind", "train or infer"}},
		{[]string{"--dtype", "float16"}, []string{"--dtype", "float16", "fp32, tf32, fp16 or bf16"}},
		{[]string{"--model", "bert-base", "--seq", "9999"}, []string{"--seq 9999", "bert-base", "at most 512"}},
		{[]string{"--model", "bert-base", "--seq", "-1"}, []string{"--seq -1", "0: the model's default"}},
		{[]string{"--trace", filepath.Join(t.TempDir(), "missing.json")}, []string{"--trace"}},
		{[]string{"--param-chunk", "lots"}, []string{"--param-chunk", `"lots" is not a chunk size`, "64MiB"}},
		{[]string{"--param-chunk", "0"}, []string{"--param-chunk", "leave the flag out"}},
		{[]string{"--param-chunk", "64MiB", "--jobs", "x.yaml"}, []string{"--param-chunk, --fused-optimizer and --spread-optimizer apply to zoo models"}},
		{[]string{"--fused-optimizer", "--trace", "x.json"}, []string{"--param-chunk, --fused-optimizer and --spread-optimizer apply to zoo models"}},
		{[]string{"--spread-optimizer", "--param-chunk", "4MiB", "--trace", "x.json"}, []string{"--param-chunk, --fused-optimizer and --spread-optimizer apply to zoo models"}},
		{[]string{"--spread-optimizer", "--model", "vgg16"}, []string{"--spread-optimizer spreads the updates of chunked weights", "give --param-chunk too"}},
	}
	for _, c := range cases {
		_, _, err := runCoordinator(t, append([]string{"plan", "--batch", "2"}, c.args...)...)
		if err == nil {
			t.Errorf("plan %v: no error", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("plan %v: error %q does not mention %q", c.args, err, w)
			}
		}
	}
}

// A trace exported from a zoo graph plans exactly like the zoo model.
func TestPlanTrace(t *testing.T) {
	g, err := zoo.Build("resnet50", workload.Train, 2, zoo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "resnet50.trace.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := workload.ExportTrace(f, g); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fromTrace := planJSON(t, "--trace", path, "--device", "rtx2080ti-11gb", "--policy", "checkpoint")
	fromZoo := planJSON(t, "--model", "resnet50", "--batch", "2", "--device", "rtx2080ti-11gb", "--policy", "checkpoint")
	for _, k := range []string{"model", "params", "ops", "tensors", "vanilla_peak_bytes", "iteration_seconds", "peak_bytes", "msr", "check"} {
		if fromTrace[k] != fromZoo[k] {
			t.Errorf("%s: trace %v, zoo %v", k, fromTrace[k], fromZoo[k])
		}
	}
	if fromTrace["check"] != "passed" {
		t.Errorf("check %v", fromTrace["check"])
	}
	_, _, err = runCoordinator(t, "plan", "--trace", path, "--model", "vgg16", "--jobs", path)
	if err == nil || !strings.Contains(err.Error(), "--jobs") {
		t.Errorf("--jobs with --model/--trace: error %v", err)
	}
}

// plan --jobs: several jobs on one GPU, with a baseline and with TENSILE in
// both several-job modes, every one measured under the several-job
// accounting: joint from the planner's start offsets, reserving the
// whole-run device peak (its MSR exactly the planner's); sum-of-peaks and
// the baselines from offset zero, reserving the jobs' own peaks.
func TestPlanJobs(t *testing.T) {
	if raceEnabled {
		t.Skip("plans co-located jobs through the CLI on one goroutine (tensorsched's race tests cover the planner's): 38 s under the race detector")
	}
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	spec := "jobs:\n  - name: small\n    model: mlp\n    batch: 8\n    iterations: 10\n  - name: res\n    model: resnet50\n    batch: 4\n    iterations: 10\n  - name: res2\n    model: resnet50\n    batch: 4\n    iterations: 10\n"
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ policy, mode string }{{"vdnn-conv", ""}, {"tensile", "joint"}, {"tensile", "sum-of-peaks"}} {
		args := []string{"plan", "--jobs", path, "--device", "rtx2080ti-11gb", "--policy", c.policy, "--json"}
		if c.mode != "" {
			args = append(args, "--mode", c.mode)
		}
		out, _, err := runCoordinator(t, args...)
		if err != nil {
			t.Fatalf("%s %s: %v", c.policy, c.mode, err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%s %s: %v\n%s", c.policy, c.mode, err, out)
		}
		for _, f := range []string{"reserved_bytes", "sum_of_vanilla_job_peaks", "start_offsets", "horizon", "run_peak_bytes", "msr", "eor", "cbr"} {
			if _, ok := m[f]; !ok {
				t.Errorf("%s %s: field %q missing", c.policy, c.mode, f)
			}
		}
		var rep jobsReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s %s: %v\n%s", c.policy, c.mode, err, out)
		}
		t.Logf("%-9s %-12s reserved %d of Σ vanilla %d (steady peak %d, vanilla co-located %d) MSR %.3f EOR %.3f offsets %v",
			c.policy, c.mode, rep.ReservedBytes, rep.SumOfVanillaJobPeaks, rep.PeakBytes, rep.VanillaPeakBytes, rep.MSR, rep.EOR, rep.StartOffsets)
		if len(rep.Jobs) != 3 || rep.Jobs[0].Name != "small" || rep.Jobs[1].Model != "resnet50" || rep.Jobs[1].Batch != 4 {
			t.Fatalf("%s %s: jobs %+v", c.policy, c.mode, rep.Jobs)
		}
		if rep.Check != "passed" || rep.Policy != c.policy || rep.Mode != c.mode {
			t.Errorf("check %q policy %q mode %q", rep.Check, rep.Policy, rep.Mode)
		}
		var sumVan, own int64
		eor := 0.0
		for _, j := range rep.Jobs {
			sumVan += j.VanillaPeakBytes
			own += j.RunPeakBytes
			if rep.PacedTurns {
				// Turns paced by keys: no job ahead of its interleaved
				// pace pays for another's extra time.
				eor += max(j.EOR, 0) / float64(len(rep.Jobs))
				continue
			}
			eor += j.EOR / float64(len(rep.Jobs))
		}
		if rep.SumOfVanillaJobPeaks != sumVan || rep.SumOfVanillaPeaks != sumVan || rep.VanillaPeakBytes > sumVan {
			t.Errorf("Σ vanilla job peaks %d (old name %d, jobs %d), co-located vanilla %d", rep.SumOfVanillaJobPeaks, rep.SumOfVanillaPeaks, sumVan, rep.VanillaPeakBytes)
		}
		// Jobs taking turns paced by keys are timed over the check run.
		if (rep.Horizon != tensorsched.SeveralHorizon && !(rep.PacedTurns && rep.Horizon == rep.CheckIterations)) || len(rep.StartOffsets) != 3 {
			t.Errorf("%s %s: horizon %d, offsets %v", c.policy, c.mode, rep.Horizon, rep.StartOffsets)
		}
		if want := 1 - float64(rep.ReservedBytes)/float64(sumVan); math.Abs(rep.MSR-want) > 1e-12 || math.Abs(rep.EOR-eor) > 1e-12 {
			t.Errorf("%s %s: MSR %v EOR %v, want 1 − reserved/Σ vanilla = %v and the mean job EOR %v", c.policy, c.mode, rep.MSR, rep.EOR, want, eor)
		}
		if rep.MSR <= 0 || rep.PeakBytes >= rep.VanillaPeakBytes {
			t.Errorf("%s %s: MSR %v, steady peak %d, vanilla %d: nothing saved", c.policy, c.mode, rep.MSR, rep.PeakBytes, rep.VanillaPeakBytes)
		}
		if c.mode == "joint" {
			// Measured from the planner's offsets: its reservation and
			// MSR exactly.
			jobs := make([]tensorsched.Job, len(rep.Jobs))
			for i, j := range rep.Jobs {
				g, err := zoo.Build(j.Model, workload.Train, j.Batch, zoo.Options{})
				if err != nil {
					t.Fatal(err)
				}
				jobs[i] = tensorsched.Job{Name: j.Name, Graph: g}
			}
			_, st, err := tensorsched.PlanJobs(jobs, gpu.MustProfile("rtx2080ti-11gb"), tensorsched.Joint, tensorsched.Target{Tolerance: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rep.StartOffsets, st.StartOffsets) || rep.ReservedBytes != st.ReservedBytes || rep.ReservedBytes < rep.RunPeakBytes ||
				rep.CheckIterations != st.CheckIterations || (rep.CheckIterations <= rep.Horizon && st.TurnKeys == nil) ||
				math.Abs(rep.MSR-st.MSR) > 1e-9 || math.Abs(rep.EOR-st.EOR) > 1e-9 {
				t.Errorf("joint: measured offsets %v reserved %d MSR %.6f EOR %.6f; planned %v %d %.6f %.6f",
					rep.StartOffsets, rep.ReservedBytes, rep.MSR, rep.EOR, st.StartOffsets, st.ReservedBytes, st.MSR, st.EOR)
			}
		} else if slices.Max(rep.StartOffsets) != 0 || rep.ReservedBytes != own {
			t.Errorf("%s %s: offsets %v, reserved %d, Σ own peaks %d", c.policy, c.mode, rep.StartOffsets, rep.ReservedBytes, own)
		}
	}
	out, _, err := runCoordinator(t, "plan", "--jobs", path, "--device", "rtx2080ti-11gb", "--policy", "tensile")
	if err != nil {
		t.Fatal(err)
	}
	// An MLP beside two ResNet-50s: iterations of different lengths, so
	// joint mode's jobs take turns paced by their interleaved iteration
	// ends (TestPlanJobsTurns: copies, one turn each per round).
	for _, s := range []string{"mode joint", "checker passed", "reserved", "take turns by whole iterations, paced by when their iterations end interleaved", "MSR"} {
		if !strings.Contains(out, s) {
			t.Errorf("plan --jobs text lacks %q:\n%s", s, out)
		}
	}
}

// plan --jobs treats --budget as plan does for one job: without --policy
// it is refused, and a baseline (which takes no budget) says so in note.
func TestPlanJobsBudgetWithoutTensile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	spec := "jobs:\n  - name: a\n    model: mlp\n    batch: 8\n    iterations: 10\n  - name: b\n    model: mlp\n    batch: 4\n    iterations: 10\n"
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCoordinator(t, "plan", "--jobs", path, "--device", "rtx2080ti-11gb", "--budget", "4GiB")
	if err == nil || !strings.Contains(err.Error(), "--budget needs --policy") {
		t.Errorf("plan --jobs --budget without --policy: error %v, want \"--budget needs --policy\"", err)
	}
	out, _, err := runCoordinator(t, "plan", "--jobs", path, "--device", "rtx2080ti-11gb", "--policy", "vdnn-conv", "--budget", "4GiB", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep jobsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(rep.Note, "baselines do not take a budget") {
		t.Errorf("plan --jobs --policy vdnn-conv --budget 4GiB: note %q, want it to say the budget was not used", rep.Note)
	}
}

// A trace job's spec may leave batch unset (the trace's batch is used), but
// a batch or kind it does set was dropped: a spec asking for batch 64 of a
// trace recorded at 8 was planned at 8 without a word. A spec that
// disagrees with its trace is refused, naming the field.
func TestSpecGraphTraceMustAgree(t *testing.T) {
	g, err := zoo.Build("mlp", workload.Train, 8, zoo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mlp.trace.json")
	var buf bytes.Buffer
	if err := workload.ExportTrace(&buf, g); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec workload.Spec
		want string
	}{
		{workload.Spec{Name: "t", Trace: path, Kind: workload.Train, Batch: workload.Fixed(64), Iterations: 1, GPUs: workload.Fixed(1)}, "batch: 64, but the trace was recorded at batch 8"},
		{workload.Spec{Name: "t", Trace: path, Kind: workload.Infer, Requests: 1, GPUs: workload.Fixed(1)}, `kind: "infer", but the trace is a "train" graph`},
	} {
		if err := c.spec.Validate(workload.ValidateOptions{}); err != nil {
			t.Fatalf("spec %+v: %v", c.spec, err)
		}
		got, err := specGraph(&c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			batch := 0
			if got != nil {
				batch = got.Batch
			}
			t.Errorf("spec %+v: graph at batch %d, error %v; want it to contain %q", c.spec, batch, err, c.want)
		}
	}
	ok := workload.Spec{Name: "t", Trace: path, Kind: workload.Train, Batch: workload.Fixed(8), Iterations: 1, GPUs: workload.Fixed(1)}
	if _, err := specGraph(&ok); err != nil {
		t.Errorf("spec agreeing with its trace: %v", err)
	}
}

// plan --jobs and demo report every problem of a spec file at once, as
// submit does: an unknown model was reported only after the other problems
// were fixed (the file was parsed, then models were looked up job by job).
func TestSpecFileProblemsReportedAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	spec := "jobs:\n  - {name: a, model: resnet51, batch: 8, iterations: 10}\n  - {name: b, model: mlp, batch: 0, iterations: 10}\n"
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{`jobs[0].model: unknown model "resnet51"`, "jobs[1].batch: must be ≥ 1"}
	_, _, err := runCoordinator(t, "plan", "--jobs", path, "--device", "rtx2080ti-11gb")
	err2 := runDemo(path, 60, time.Second, true, false)
	for name, e := range map[string]error{"plan --jobs": err, "demo": err2} {
		for _, w := range want {
			if e == nil || !strings.Contains(e.Error(), w) {
				t.Errorf("%s: error %v; want it to contain %q", name, e, w)
			}
		}
	}
}

// plan --jobs with one job says "1 job", not "1 jobs".
func TestPlanJobsOneJobSingular(t *testing.T) {
	out, _, err := runCoordinator(t, "plan", "--jobs", "../../examples/infer-bert.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "1 job on ") {
		t.Errorf("plan --jobs with one job: %q, want it to start with \"1 job on \"", firstLine(out))
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// plan --jobs plans to the jobs' own tolerances (the tightest of them)
// unless --tolerance is given: it planned every file at the flag's 10%
// default, ignoring a job's `tolerance: 2%`, and the smaller peak it found
// cost that job more extra time than its spec allows.
func TestPlanJobsHonoursJobTolerance(t *testing.T) {
	if raceEnabled {
		t.Skip("plans co-located jobs through the CLI on one goroutine (tensorsched's race tests cover the planner's): 26 s under the race detector")
	}
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	spec := "jobs:\n  - name: res\n    model: resnet50\n    batch: 8\n    iterations: 10\n  - name: tight\n    model: resnet50\n    batch: 8\n    iterations: 10\n    tolerance: 2%\n"
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func(extra ...string) jobsReport {
		t.Helper()
		return planJobsJSON(t, path, append([]string{"--device", "rtx2080ti-11gb"}, extra...)...)
	}
	own := plan()
	if own.Tolerance == nil || *own.Tolerance != 0.02 || own.ToleranceFrom != "tight" {
		t.Fatalf("tolerance %v from %q, want 0.02 from the job tight", own.Tolerance, own.ToleranceFrom)
	}
	for _, j := range own.Jobs {
		if j.EOR > 0.02+1e-9 {
			t.Errorf("job %s EOR %.4f above the tightest job's 2%%", j.Name, j.EOR)
		}
	}
	flag := plan("--tolerance", "10%")
	if flag.Tolerance == nil || *flag.Tolerance != 0.10 || flag.ToleranceFrom != "--tolerance" {
		t.Fatalf("with --tolerance 10%%: tolerance %v from %q", flag.Tolerance, flag.ToleranceFrom)
	}
	if flag.ReservedBytes >= own.ReservedBytes {
		t.Errorf("10%% reserves %d, 2%% %d: want the looser tolerance to save memory", flag.ReservedBytes, own.ReservedBytes)
	}
}

// A job whose co-located EOR exceeds the tolerance is named in the note
// (sum-of-peaks plans each job alone: an MLP beside a ResNet-50 ran 44%
// slower at a 1% tolerance, visible only in the table).
func TestPlanJobsNotesEORAboveTolerance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	spec := "jobs:\n  - {name: res, model: resnet50, batch: 8, iterations: 10}\n  - {name: small, model: mlp, batch: 4, iterations: 10}\n"
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"sum-of-peaks", "joint"} {
		out, _, err := runCoordinator(t, "plan", "--jobs", path, "--device", "rtx2080ti-11gb", "--policy", "tensile", "--tolerance", "1%", "--mode", mode, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var rep jobsReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var over []string
		for _, j := range rep.Jobs {
			if j.EOR > 0.01+1e-9 {
				over = append(over, j.Name)
			}
		}
		for _, name := range over {
			if !strings.Contains(rep.Note, "EOR above the tolerance 1%: ") || !strings.Contains(rep.Note, name) {
				t.Errorf("%s: job %s above the tolerance, note %q", mode, name, rep.Note)
			}
		}
		if len(over) == 0 && strings.Contains(rep.Note, "above the tolerance") {
			t.Errorf("%s: no job above the tolerance, note %q", mode, rep.Note)
		}
		if mode == "sum-of-peaks" && len(over) == 0 {
			t.Errorf("sum-of-peaks: every job within 1%%; the case no longer shows what it tests")
		}
	}
}

// Joint mode may let the jobs take turns by whole iterations; the report
// says so, and --turns=false plans them interleaved (start offsets only),
// reserving more on two ResNet-50s; --turns=false outside joint mode is
// refused naming the flags it needs.
func TestPlanJobsTurns(t *testing.T) {
	if raceEnabled {
		t.Skip("plans co-located jobs through the CLI on one goroutine (tensorsched's race tests cover the planner's): about 20 s under the race detector")
	}
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	spec := "jobs:\n  - name: a\n    model: resnet50\n    batch: 8\n    iterations: 10\n  - name: b\n    model: resnet50\n    batch: 8\n    iterations: 10\n"
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func(extra ...string) jobsReport {
		t.Helper()
		return planJobsJSON(t, path, append([]string{"--device", "h100-80gb", "--tolerance", "5%"}, extra...)...)
	}
	turns, inter := plan(), plan("--turns=false")
	if !turns.Turns || inter.Turns {
		t.Fatalf("turns: %v, with --turns=false: %v", turns.Turns, inter.Turns)
	}
	if turns.ReservedBytes >= inter.ReservedBytes || turns.EOR > 0.05+1e-9 {
		t.Errorf("taking turns reserves %d at EOR %.4f, interleaved %d at %.4f", turns.ReservedBytes, turns.EOR, inter.ReservedBytes, inter.EOR)
	}
	text, _, err := runCoordinator(t, "plan", "--jobs", path, "--device", "h100-80gb", "--policy", "tensile", "--tolerance", "5%")
	if err != nil || !strings.Contains(text, "the jobs take turns by whole iterations") {
		t.Errorf("plan --jobs text does not say the jobs take turns (%v):\n%s", err, text)
	}
	out, _, err := runCoordinator(t, "plan", "--jobs", path, "--policy", "tensile", "--mode", "sum-of-peaks", "--turns=false")
	if err == nil || !strings.Contains(err.Error()+out, "--turns=false needs --policy tensile and --mode joint") {
		t.Errorf("--turns=false with sum-of-peaks: %v %s", err, out)
	}
}

// planJobsJSON runs plan --jobs path --policy tensile --json with extra
// flags and decodes its report.
func planJobsJSON(t *testing.T, path string, extra ...string) jobsReport {
	t.Helper()
	out, _, err := runCoordinator(t, append([]string{"plan", "--jobs", path, "--policy", "tensile", "--json"}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep jobsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return rep
}

// A budget the plan misses within the time tolerance but meets with more
// extra time (VGG16 batch 16 on the H100 at 1.76 GiB, above the op floor
// of 1.53 GiB) gets a note with the EOR it needs and the tolerance to try;
// that tolerance fits it. A budget the planner misses even without a time
// cap (1.60 GiB, still above the floor) says so.
func TestPlanBudgetToleranceHint(t *testing.T) {
	base := []string{"--model", "vgg16", "--batch", "16", "--device", "h100-80gb", "--policy", "tensile", "--budget", "1.76GiB"}
	m := planJSON(t, append(base, "--tolerance", "10%")...)
	note, _ := m["note"].(string)
	k := strings.Index(note, "try --tolerance ")
	if m["fits_budget"] != false || k < 0 || !strings.Contains(note, "without a time cap it fits with EOR") {
		t.Fatalf("1.76 GiB at 10 %%: fits_budget %v, note %q; want the tolerance it needs", m["fits_budget"], note)
	}
	tol := strings.TrimSuffix(note[k+len("try --tolerance "):], "%")
	m = planJSON(t, append(base, "--tolerance", tol+"%")...)
	if m["fits_budget"] != true || num(t, m, "eor") > num(t, m, "tolerance")+1e-9 {
		t.Errorf("1.76 GiB at the suggested %s%%: fits_budget %v, EOR %v, note %v", tol, m["fits_budget"], m["eor"], m["note"])
	}

	m = planJSON(t, "--model", "vgg16", "--batch", "16", "--device", "h100-80gb", "--policy", "tensile", "--budget", "1.60GiB", "--tolerance", "10%")
	if note, _ := m["note"].(string); m["fits_budget"] != false || !strings.Contains(note, "without a time cap the planner does not fit it either") {
		t.Errorf("1.60 GiB: fits_budget %v, note %q; want it to say no extra time helps", m["fits_budget"], note)
	}
}

// plan --jobs builds a job's graph with its spec's param_chunk and
// optimizer: VGG16 b16 on the H100 at 5 % reserves under half its vanilla
// peak with its large weight in 4 MiB chunks and their updates spread, and
// about 0.73 of it as written.
func TestPlanJobsGraphOptions(t *testing.T) {
	dir := t.TempDir()
	reserve := func(extra string) jobsReport {
		t.Helper()
		path := filepath.Join(dir, "jobs.yaml")
		if err := os.WriteFile(path, []byte("jobs:\n- {name: a, model: vgg16, batch: 16, iterations: 10, tolerance: 5%"+extra+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return planJobsJSON(t, path, "--device", "h100-80gb")
	}
	std, sp := reserve(""), reserve(", param_chunk: 4MiB, optimizer: spread")
	for _, r := range []jobsReport{std, sp} {
		if len(r.Jobs) != 1 || r.Jobs[0].EOR > 0.05+1e-9 || r.Check != "passed" {
			t.Fatalf("report %+v: want one job within 5%% and the checker passed", r)
		}
	}
	if f := float64(sp.ReservedBytes) / float64(sp.SumOfVanillaJobPeaks); f > 0.5 {
		t.Errorf("spread: reserves %d of %d vanilla bytes (%.3f), want at most half", sp.ReservedBytes, sp.SumOfVanillaJobPeaks, f)
	}
	if f := float64(std.ReservedBytes) / float64(std.SumOfVanillaJobPeaks); f < 0.6 {
		t.Errorf("as written: reserves %.3f of the vanilla peak; the options did not stay with their spec", f)
	}
}
