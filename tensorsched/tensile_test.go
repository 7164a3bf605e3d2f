package tensorsched

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

func buildGraph(t testing.TB, model string, batch int) *workload.Graph {
	t.Helper()
	g, err := zoo.Build(model, workload.Train, batch, zoo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func execute(t testing.TB, p gpu.Profile, jobs []Job) *Result {
	t.Helper()
	return executeIters(t, p, jobs, 0)
}

// executeIters runs jobs for iters iterations (0: Execute's default) on a
// fresh sim device of profile p with the checker.
func executeIters(t testing.TB, p gpu.Profile, jobs []Job, iters int) *Result {
	t.Helper()
	res, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, ExecOptions{Check: true, Iterations: iters})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The peak analysis predicts what the executor measures, exactly.
func TestAnalyzePeakMatchesExecutor(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	for _, model := range []string{"mlp", "resnet50", "densenet121"} {
		g := buildGraph(t, model, 8)
		rep, err := AnalyzePeak([]Job{{Graph: g}}, p)
		if err != nil {
			t.Fatal(err)
		}
		res := execute(t, p, []Job{{Graph: g}})
		if rep.Bytes != res.PeakBytes || math.Abs(rep.Seconds-res.Seconds) > 1e-9*res.Seconds {
			t.Errorf("%s: predicted peak %d, %.6fs; executor %d, %.6fs", model, rep.Bytes, rep.Seconds, res.PeakBytes, res.Seconds)
		}
		if len(rep.Resident) == 0 || rep.Op < 0 {
			t.Errorf("%s: empty peak report %+v", model, rep)
		}
		var sum int64
		for _, r := range rep.Resident {
			sum += r.Bytes
		}
		if sum != rep.Bytes {
			t.Errorf("%s: resident tensors add up to %d, peak is %d", model, sum, rep.Bytes)
		}
	}
}

// Peak analysis on a hand-built graph: a (4) → b (2) → c (1), b and c read
// a again at the end.
func TestAnalyzePeakHandBuilt(t *testing.T) {
	g := &workload.Graph{Model: "chain", Kind: workload.Train, Batch: 1,
		Tensors: []workload.Tensor{
			{ID: 0, Name: "x", Bytes: 1, Kind: workload.Input},
			{ID: 1, Name: "a", Bytes: 4, Kind: workload.Activation},
			{ID: 2, Name: "b", Bytes: 2, Kind: workload.Activation},
			{ID: 3, Name: "c", Bytes: 8, Kind: workload.Activation},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "f0", Inputs: []int{0}, Outputs: []int{1}, MeasuredSeconds: 1},
			{ID: 1, Name: "f1", Inputs: []int{1}, Outputs: []int{2}, MeasuredSeconds: 1},
			{ID: 2, Name: "f2", Inputs: []int{2}, Outputs: []int{3}, MeasuredSeconds: 1},
			{ID: 3, Name: "f3", Inputs: []int{3, 1}, Outputs: nil, MeasuredSeconds: 1},
		},
	}
	p := gpu.MustProfile("rtx2080ti-11gb")
	rep, err := AnalyzePeak([]Job{{Graph: g}}, p)
	if err != nil {
		t.Fatal(err)
	}
	// x freed after f0, b after f2: peak at f2's start = a + b + c = 14.
	if rep.Bytes != 14 || rep.Op != 2 || rep.Time != 2 {
		t.Fatalf("peak %d at op %d t=%v, want 14 at op 2 t=2", rep.Bytes, rep.Op, rep.Time)
	}
	want := map[int][2]int{3: {2, 3}, 1: {1, 3}, 2: {2, 2}}
	for _, r := range rep.Resident {
		w := want[r.Tensor]
		if r.LastAccess != w[0] {
			t.Errorf("tensor %d: last access %d, want %d", r.Tensor, r.LastAccess, w[0])
		}
	}
	if rep.Seconds != 4 {
		t.Errorf("seconds %v, want 4", rep.Seconds)
	}
}

// paperTolerance is the paper's EOR for each model on the RTX 2080 Ti.
var paperTolerance = map[string]float64{"vgg16": 0.26, "inception-v3": 0.30, "inception-v4": 0.16, "resnet50": 0.61, "densenet121": 0.16}

// paperMSR is the paper's MSR for each model on the RTX 2080 Ti (the
// issue's target: at least this at most paperTolerance); on the H100 the
// target is 0.5 at 5 %.
var paperMSR = map[string]float64{"vgg16": 0.33, "inception-v3": 0.59, "inception-v4": 0.65, "resnet50": 0.67, "densenet121": 0.76}

// msrMet lists the (device, model) pairs whose MSR target is met: a
// regression below it fails.
var msrMet = map[string]bool{"rtx2080ti-11gb densenet121": true, "rtx2080ti-11gb vgg16": true, "rtx2080ti-11gb inception-v3": true, "rtx2080ti-11gb inception-v4": true, "rtx2080ti-11gb resnet50": true, "h100-80gb densenet121": true, "h100-80gb inception-v3": true, "h100-80gb inception-v4": true, "h100-80gb resnet50": true}

// Every plan runs on the executor with the correctness checker, measures
// what the planner predicted, and stays within its tolerance. The log is
// the MSR/EOR table of the five models on both devices (batch 16).
func TestPlanTensileMSRTable(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans five models on two devices (skipped with -short and -race: a table; shorter tests cover its concurrency)")
	}
	for _, dev := range []string{"rtx2080ti-11gb", "h100-80gb"} {
		p := gpu.MustProfile(dev)
		for _, model := range []string{"vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"} {
			tol, target := 0.05, 0.5
			if dev == "rtx2080ti-11gb" {
				tol, target = paperTolerance[model], paperMSR[model]
			}
			g := buildGraph(t, model, 16)
			plan, st, err := PlanTensile(g, p, Target{Tolerance: tol})
			if err != nil {
				t.Fatalf("%s %s: %v", dev, model, err)
			}
			van := execute(t, p, []Job{{Graph: g}})
			res := execute(t, p, []Job{{Graph: g, Plan: plan}})
			// MSR over the whole run, its first iteration included (what
			// a budget covers): with the default start on the host it is
			// the steady state's.
			steadyMSR := 1 - float64(res.PeakBytes)/float64(van.PeakBytes)
			msr := 1 - float64(max(res.PeakBytes, res.Jobs[0].RunPeakBytes))/float64(van.PeakBytes)
			eor := res.Seconds/van.Seconds - 1
			met := "not met"
			if msr >= target && eor <= tol+1e-9 {
				met = "met"
			}
			// The same planned with every parameter and optimizer state
			// tensor resident from the start (ResidentStart): its first
			// iteration sets the whole run's peak.
			_, rst, err := PlanTensile(g, p, Target{Tolerance: tol, ResidentStart: true})
			if err != nil {
				t.Fatalf("%s %s resident from the start: %v", dev, model, err)
			}
			residentMSR := 1 - float64(max(rst.PeakBytes, rst.FirstIterationPeakBytes))/float64(van.PeakBytes)
			t.Logf("%-15s %-13s tolerance %.2f  MSR %.3f  EOR %.3f  CBR %.2f  steady MSR %.3f  (resident start: whole-run MSR %.3f)  swapped %s  recomputed ops %d  planning %v  (target MSR %.2f: %s)",
				dev, model, tol, msr, eor, msr/math.Max(eor, 1e-9), steadyMSR, residentMSR, gpu.FormatBytes(res.Jobs[0].SwappedOutBytes), res.Jobs[0].RecomputedOps, st.Planning, target, met)
			if msr < residentMSR-0.01 {
				t.Errorf("%s %s: starting on the host raises the whole run's peak: MSR %.3f resident, %.3f on the host", dev, model, residentMSR, msr)
			}
			if msrMet[dev+" "+model] && met != "met" {
				t.Errorf("%s %s: MSR %.3f EOR %.3f no longer meets the target %.2f", dev, model, msr, eor, target)
			}
			// The prediction is exact: the planner simulates what the
			// executor runs.
			if res.PeakBytes != st.PeakBytes || math.Abs(res.Seconds-st.Seconds) > 1e-9*res.Seconds {
				t.Errorf("%s %s: predicted %d B %.6fs, executor %d B %.6fs", dev, model, st.PeakBytes, st.Seconds, res.PeakBytes, res.Seconds)
			}
			if eor > tol+1e-9 || msr <= 0.1 {
				t.Errorf("%s %s: MSR %.3f EOR %.3f (tolerance %.2f)", dev, model, msr, eor, tol)
			}
		}
	}
}

// Target (a): fit a budget; the executor enforces it as the job's budget.
func TestPlanTensileBudget(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "resnet50", 16)
	van := execute(t, p, []Job{{Graph: g}})
	for _, frac := range []float64{0.9, 0.7, 0.6} {
		budget := int64(frac * float64(van.PeakBytes))
		plan, st, err := PlanTensile(g, p, Target{Budget: budget})
		if err != nil {
			t.Fatalf("budget %.0f%%: %v", 100*frac, err)
		}
		if st.PeakBytes > budget {
			t.Fatalf("budget %.0f%%: peak %d over %d", 100*frac, st.PeakBytes, budget)
		}
		res := execute(t, p, []Job{{Graph: g, Plan: plan, Budget: budget}})
		if res.PeakBytes > budget {
			t.Errorf("budget %.0f%%: executor peak %d over %d", 100*frac, res.PeakBytes, budget)
		}
	}
	// An impossible budget says so and still returns the best plan.
	plan, _, err := PlanTensile(g, p, Target{Budget: van.PeakBytes / 20, Tolerance: 0.01})
	if !errors.Is(err, ErrBudget) || plan == nil {
		t.Fatalf("impossible budget: plan %v, err %v", plan != nil, err)
	}
}

// Both multi-job modes produce plans the executor runs correctly; the
// joint prediction is the device's combined peak.
func TestPlanJobsModes(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	cases := []struct {
		name   string
		models []string
		batch  int
	}{
		{"two resnet50", []string{"resnet50", "resnet50"}, 8},
		{"mixed", []string{"mlp", "resnet50", "densenet121"}, 4},
	}
	for _, tc := range cases {
		var jobs []Job
		for _, m := range tc.models {
			jobs = append(jobs, Job{Graph: buildGraph(t, m, tc.batch)})
		}
		van := execute(t, p, jobs)
		for _, mode := range []Mode{SumOfPeaks, Joint} {
			plans, st, err := PlanJobs(jobs, p, mode, Target{Tolerance: 0.1})
			if err != nil {
				t.Fatalf("%s %s: %v", tc.name, mode, err)
			}
			run := append([]Job(nil), jobs...)
			for j := range run {
				run[j].Plan = plans[j]
			}
			res := execute(t, p, run)
			t.Logf("%-13s %-12s predicted MSR %.3f EOR %.3f; executor MSR %.3f EOR %.3f", tc.name, mode, st.MSR, st.EOR,
				1-float64(res.PeakBytes)/float64(van.PeakBytes), res.Seconds/van.Seconds-1)
			if res.PeakBytes >= van.PeakBytes {
				t.Errorf("%s %s: no memory saved (%d vs %d)", tc.name, mode, res.PeakBytes, van.PeakBytes)
			}
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{SumOfPeaks, Joint} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("both"); err == nil {
		t.Error("ParseMode(both) should fail")
	}
}

// TestPlanJobsNamesEveryJobOverItsShare: in sum-of-peaks mode, when several
// jobs cannot fit their shares of a total budget, the error (the CLI's
// note) names each of them, not only the first (two VGG16s, batch 16 and
// 8, at 60 % of their summed peaks on the RTX 2080 Ti: both miss).
func TestPlanJobsNamesEveryJobOverItsShare(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	jobs := []Job{{Name: "a", Graph: buildGraph(t, "vgg16", 16)}, {Name: "b", Graph: buildGraph(t, "vgg16", 8)}}
	var sum int64
	for _, j := range jobs {
		sum += execute(t, p, []Job{j}).PeakBytes
	}
	_, _, err := PlanJobs(jobs, p, SumOfPeaks, Target{Budget: sum * 6 / 10})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("error %v, want ErrBudget", err)
	}
	for _, name := range []string{`job "a"`, `job "b"`} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}
