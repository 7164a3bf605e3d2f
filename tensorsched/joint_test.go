package tensorsched

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// jointCase is one several-job experiment: copies of one model, or a mix.
type jointCase struct {
	name   string
	models []string
	batch  int
}

func jointCases() []jointCase {
	var cs []jointCase
	for _, model := range []string{"resnet50", "inception-v3"} {
		for n := 2; n <= 4; n++ {
			ms := make([]string, n)
			for i := range ms {
				ms[i] = model
			}
			cs = append(cs, jointCase{fmt.Sprintf("%dx %s", n, model), ms, 16})
		}
	}
	cs = append(cs, jointCase{"five-model mix", []string{"vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"}, 2})
	return cs
}

// jointRow is one mode of one case, measured on the executor.
type jointRow struct {
	msr, eor          float64 // by the several-job accounting
	reserved, devPeak int64
	vanillaCombined   int64
	sumVanilla        int64
	offsets           []float64
	planning          float64 // ms
	longPeak          int64   // device peak of the 40th iteration
}

// runJointMode plans jobs in one mode and checks the plans on the
// executor with the checker: the jobs run co-located (joint: from their
// start offsets) for JointStats.Horizon iterations on a device whose
// capacity is exactly the memory the mode reserves, so any moment over the
// reservation fails the run, and the executor must measure the device peak
// and every job's iteration time the planner predicted.
func runJointMode(t *testing.T, p gpu.Profile, jobs []Job, mode Mode, tol float64, vanCo *Result, sumVanilla int64) jointRow {
	t.Helper()
	plans, st, err := PlanJobs(jobs, p, mode, Target{Tolerance: tol})
	if err != nil {
		t.Fatalf("%s: %v", mode, err)
	}
	run := st.Apply(jobs, plans)
	capped := p
	capped.MemoryBytes = st.ReservedBytes
	res, err := Execute(gpu.NewSim(capped, gpu.SimOptions{}), run, ExecOptions{Check: true, Iterations: st.Horizon})
	if err != nil {
		t.Fatalf("%s: the plans do not run within the %s reserved: %v", mode, gpu.FormatBytes(st.ReservedBytes), err)
	}
	if res.PeakBytes != st.PeakBytes {
		t.Errorf("%s: predicted device peak %d, executor %d", mode, st.PeakBytes, res.PeakBytes)
	}
	for j := range res.Jobs {
		if got, want := res.Jobs[j].IterationSeconds, st.JobIterationSeconds[j]; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: job %d: predicted iteration %.9fs, executor %.9fs", mode, j, want, got)
		}
	}
	// The accounting, measured (MeasureSeveral, as plan --jobs and bench
	// memory report it): joint exactly as predicted.
	sr, err := MeasureSeveral(p, jobs, plans, &st, false)
	if err != nil {
		t.Fatalf("%s: %v", mode, err)
	}
	if sr.SumOfVanillaJobPeaks != sumVanilla || sr.Horizon != st.Horizon || (mode == SumOfPeaks && slices.Max(sr.StartOffsets) != 0) {
		t.Errorf("%s: Σ vanilla %d (want %d), horizon %d (planned %d), offsets %v", mode, sr.SumOfVanillaJobPeaks, sumVanilla, sr.Horizon, st.Horizon, sr.StartOffsets)
	}
	if mode == Joint && (!slices.Equal(sr.StartOffsets, st.StartOffsets) || math.Abs(sr.MSR-st.MSR) > 1e-9 || math.Abs(sr.EOR-st.EOR) > 1e-9) {
		t.Errorf("joint: measured from offsets %v MSR %.12f EOR %.12f; planned offsets %v MSR %.12f EOR %.12f",
			sr.StartOffsets, sr.MSR, sr.EOR, st.StartOffsets, st.MSR, st.EOR)
	}
	row := jointRow{reserved: sr.ReservedBytes, devPeak: res.PeakBytes, vanillaCombined: vanCo.PeakBytes,
		sumVanilla: sumVanilla, offsets: sr.StartOffsets, eor: sr.EOR, msr: sr.MSR,
		planning: float64(st.Planning.Microseconds()) / 1000}
	// Longer runs: the device peak of the 40th iteration (checked against
	// the reservation).
	long, err := Execute(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), run, ExecOptions{Iterations: 40})
	if err != nil {
		t.Fatal(err)
	}
	row.longPeak = long.PeakBytes
	return row
}

// jointTolerance is the time tolerance of the several-job table.
var jointTolerance = map[string]float64{"rtx2080ti-11gb": 0.10, "h100-80gb": 0.05}

// jointMet lists the cases where joint must save at least 10 MSR points
// more than sum-of-peaks at equal or lower EOR (regressions fail): every
// case, since joint mode's candidates take turns (planTurns): copies one
// iteration each per round, the five-model mix by keys (its jobs'
// iterations differ in length; one iteration each per round slowed the
// short ones far beyond the tolerance, and it kept its interleaved
// plans, +1.8). Before turns, with start offsets only, three met it (H100
// ResNet-50 ×2/×3/×4, +12.5/+10.1/+10.2): offsets shift the jobs' peaks,
// which drift back together, and solo plans had already flattened each
// job's curve.
var jointMet = map[string]bool{}

func init() {
	for _, dev := range []string{"rtx2080ti-11gb", "h100-80gb"} {
		for _, tc := range jointCases() {
			jointMet[dev+" "+tc.name] = true
		}
	}
}

// The several-job table: joint against sum-of-peaks for 2–4 copies of
// ResNet-50 and Inception-v3 (batch 16) and the five-model mix (batch 2),
// on both devices, every plan run through the executor with the checker.
// MSR = 1 − reserved / Σ vanilla job peaks; EOR = mean per-job co-located
// iteration time over co-located vanilla − 1 (see joint.go).
func TestPlanJointTable(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans 14 several-job cases on two devices (skipped with -short and -race: a table; shorter tests cover its concurrency)")
	}
	for _, dev := range []string{"rtx2080ti-11gb", "h100-80gb"} {
		for _, tc := range jointCases() {
			sop, jnt := checkJointCase(t, dev, tc)
			if jointMet[dev+" "+tc.name] && (jnt.msr < sop.msr+0.10 || jnt.eor > sop.eor+1e-9) {
				t.Errorf("%s %s: joint MSR %.3f EOR %.3f no longer beats sum-of-peaks MSR %.3f EOR %.3f by 10 points", dev, tc.name, jnt.msr, jnt.eor, sop.msr, sop.eor)
			}
		}
	}
}

// checkJointCase plans one several-job case on dev (at jointTolerance) in
// both modes, runs each through runJointMode, logs the table's row and
// checks the invariants every case must hold: each mode's EOR within the
// tolerance, joint's EOR at most sum-of-peaks', joint's 40th-iteration
// device peak within its reservation, and, for copies of one model, joint's
// MSR at least sum-of-peaks'. It returns both rows (sum-of-peaks, joint)
// for case-specific targets (jointMet).
func checkJointCase(t *testing.T, dev string, tc jointCase) (sop, jnt jointRow) {
	t.Helper()
	p := gpu.MustProfile(dev)
	tol := jointTolerance[dev]
	var jobs []Job
	var sumVanilla int64
	for i, model := range tc.models {
		g := buildGraph(t, model, tc.batch)
		jobs = append(jobs, Job{Name: fmt.Sprintf("%s#%d", model, i), Graph: g})
		sumVanilla += execute(t, withUnboundedMemory(p), []Job{{Graph: g}}).PeakBytes
	}
	vanCo := execute(t, withUnboundedMemory(p), jobs)
	sop = runJointMode(t, p, jobs, SumOfPeaks, tol, vanCo, sumVanilla)
	// Joint gets the same tolerance; its own rule (pickJoint)
	// keeps its mean EOR at or below that of sum-of-peaks' plans.
	jtol := tol
	jnt = runJointMode(t, p, jobs, Joint, jtol, vanCo, sumVanilla)
	offs := make([]string, len(jnt.offsets))
	for j, o := range jnt.offsets {
		offs[j] = fmt.Sprintf("%.1fms", 1000*o)
	}
	t.Logf("%-14s %-15s tol %.2f | sum-of-peaks MSR %.3f EOR %.3f (reserved %s, device peak %s) | joint MSR %.3f EOR %.3f (reserved %s, device peak %s, 40th iteration %s, offsets %s) | Σ vanilla %s, vanilla co-located peak %s | gain %+.3f | planning %.0f/%.0f ms",
		dev, tc.name, tol, sop.msr, sop.eor, gpu.FormatBytes(sop.reserved), gpu.FormatBytes(sop.devPeak),
		jnt.msr, jnt.eor, gpu.FormatBytes(jnt.reserved), gpu.FormatBytes(jnt.devPeak), gpu.FormatBytes(jnt.longPeak), strings.Join(offs, ","),
		gpu.FormatBytes(sumVanilla), gpu.FormatBytes(vanCo.PeakBytes), jnt.msr-sop.msr, sop.planning, jnt.planning)
	if jnt.eor > jtol+1e-9 || sop.eor > tol+1e-9 || jnt.eor > sop.eor+1e-9 {
		t.Errorf("%s %s: EOR over the tolerance or above sum-of-peaks': joint %.3f (%.3f), sum-of-peaks %.3f (%.2f)", dev, tc.name, jnt.eor, jtol, sop.eor, tol)
	}
	// The reservation covers the check run (40 iterations); the
	// jobs' phases drift after the 8-iteration horizon, so a
	// steady state that outgrows the reservation is a regression
	// (with the reservation over the horizon only, starting
	// parameters on the host let ResNet-50 ×4 reach 3.03 GiB at
	// the 40th iteration against 2.54 GiB reserved).
	if jnt.longPeak > jnt.reserved {
		t.Errorf("%s %s: joint's 40th-iteration device peak %s exceeds its reservation %s", dev, tc.name, gpu.FormatBytes(jnt.longPeak), gpu.FormatBytes(jnt.reserved))
	}
	if copies := !slices.ContainsFunc(tc.models, func(m string) bool { return m != tc.models[0] }); copies && jnt.msr < sop.msr {
		t.Errorf("%s %s: joint MSR %.3f below sum-of-peaks %.3f", dev, tc.name, jnt.msr, sop.msr)
	}
	return sop, jnt
}

// Joint mode given only a total budget and no time cap (no job budgets)
// plans to it: it used to plan nothing, reserving 2.52 GiB for two
// ResNet-50s against a 1.96 GiB budget.
func TestPlanJointTotalBudgetNoCap(t *testing.T) {
	if testing.Short() {
		t.Skip("plans two ResNet-50s")
	}
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "resnet50", 16)
	jobs := []Job{{Name: "a", Graph: g}, {Name: "b", Graph: g}}
	budget := int64(1638) << 20 // 1.6 GiB
	plans, st, err := PlanJobs(jobs, p, Joint, Target{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	sr, err := MeasureSeveral(p, jobs, plans, &st, true)
	if err != nil {
		t.Fatal(err)
	}
	if sr.ReservedBytes > budget || st.ReservedBytes > budget {
		t.Errorf("reserved %s measured, %s planned; budget %s", gpu.FormatBytes(sr.ReservedBytes), gpu.FormatBytes(st.ReservedBytes), gpu.FormatBytes(budget))
	}
}

// Joint mode's reservation covers the phases co-located jobs of different
// lengths drift into after the planning horizon. Two ResNet-50 b16 and an
// Inception-v3 b8 on the H100: reserving only the 8-iteration high-water
// mark (1.80 GiB) left the device at 1.97 GiB by the 40th iteration. The
// plans must run within the reservation on a device of exactly that
// capacity for CheckIterations iterations, and the measured accounting
// must reserve the same.
func TestJointReservationCoversDrift(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans three jobs and runs them 40 iterations or more (skipped with -short and -race: 20 s under the race detector)")
	}
	p := gpu.MustProfile("h100-80gb")
	r50 := buildGraph(t, "resnet50", 16)
	jobs := []Job{{Name: "a", Graph: r50}, {Name: "b", Graph: r50}, {Name: "c", Graph: buildGraph(t, "inception-v3", 8)}}
	plans, st, err := PlanJobs(jobs, p, Joint, Target{Tolerance: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	// Jobs taking turns by keys are timed over the check run itself.
	if (st.TurnKeys == nil && st.CheckIterations < 5*st.Horizon) || (st.TurnKeys != nil && st.CheckIterations != st.Horizon) {
		t.Fatalf("check run %d iterations, horizon %d (turns by keys: %v)", st.CheckIterations, st.Horizon, st.TurnKeys != nil)
	}
	run := st.Apply(jobs, plans)
	capped := p
	capped.MemoryBytes = st.ReservedBytes
	sim := gpu.NewSim(capped, gpu.SimOptions{})
	if _, err := Execute(sim, run, ExecOptions{Check: true, Iterations: st.CheckIterations}); err != nil {
		t.Fatalf("the plans do not run %d iterations within the %s reserved: %v", st.CheckIterations, gpu.FormatBytes(st.ReservedBytes), err)
	}
	if hw := sim.HighWater(); hw > st.ReservedBytes {
		t.Fatalf("high-water mark %s over the reservation %s", gpu.FormatBytes(hw), gpu.FormatBytes(st.ReservedBytes))
	}
	sr, err := MeasureSeveral(p, jobs, plans, &st, false)
	if err != nil {
		t.Fatal(err)
	}
	if sr.ReservedBytes != st.ReservedBytes || sr.CheckIterations != st.CheckIterations || sr.ReservedBytes < sr.RunPeakBytes {
		t.Errorf("measured reservation %d over %d iterations (horizon high-water %d); planned %d over %d",
			sr.ReservedBytes, sr.CheckIterations, sr.RunPeakBytes, st.ReservedBytes, st.CheckIterations)
	}
}

// One job planned by PlanJobs (as the runtime plans a GPU's jobs, joint
// mode first, to a budget and no time cap) meets the budget MinBudget
// answered for it, in both modes, and runs within it: BERT-base b64 on the
// H100 at 20 %, where the budget-first greedy alone stopped at 2.46 GiB
// against 1.70 GiB.
func TestPlanJobsOneJobMeetsMinBudget(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	g := buildGraph(t, "bert-base", 64)
	minB, _, err := MinBudget(g, p, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{Joint, SumOfPeaks} {
		jobs := []Job{{Name: "bert", Graph: g, Budget: minB}}
		plans, st, err := PlanJobs(jobs, p, mode, Target{Budget: minB})
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		jobs[0].Plan = plans[0]
		res := execute(t, p, jobs)
		if st.ReservedBytes > minB || res.Jobs[0].RunPeakBytes > minB {
			t.Errorf("%v: reserved %d, run peak %d, budget %d", mode, st.ReservedBytes, res.Jobs[0].RunPeakBytes, minB)
		}
	}
}
