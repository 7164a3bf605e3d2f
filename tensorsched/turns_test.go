package tensorsched

import (
	"math"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// turnJobs returns two ResNet-50 b16 copies and an Inception-v3 b8, all
// taking turns, with TENSILE plans made alone at 5 % (nil plans: vanilla).
func turnJobs(t *testing.T, p gpu.Profile, withPlans bool) []Job {
	t.Helper()
	r := buildGraph(t, "resnet50", 16)
	jobs := []Job{{Name: "a", Graph: r}, {Name: "b", Graph: r}, {Name: "c", Graph: buildGraph(t, "inception-v3", 8)}}
	if withPlans {
		plans, _, err := PlanJobs(jobs, p, SumOfPeaks, Target{Tolerance: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		for j := range jobs {
			jobs[j].Plan = plans[j]
		}
	}
	for j := range jobs {
		jobs[j].Turns = true
	}
	return jobs
}

// Jobs taking turns run whole iterations one at a time in job order: no
// two jobs' iterations overlap on the compute engine, and a vanilla round
// (one iteration of each job) takes exactly the jobs' iterations alone
// added up, so every job's period is that sum: turns cost no compute time.
func TestTurnsRunIterationsOneAtATime(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	for _, withPlans := range []bool{false, true} {
		jobs := turnJobs(t, p, withPlans)
		res, err := Execute(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), jobs, ExecOptions{Check: true, Iterations: 4})
		if err != nil {
			t.Fatal(err)
		}
		// The measured (last) iterations follow one another in job order.
		for j := 1; j < len(jobs); j++ {
			prevEnd := res.Jobs[j-1].OpEnd[len(res.Jobs[j-1].OpEnd)-1]
			if start := res.Jobs[j].OpStart[0]; start < prevEnd-1e-12 {
				t.Errorf("plans %v: job %d's last iteration starts at %.6fs, before job %d's ends at %.6fs", withPlans, j, start, j-1, prevEnd)
			}
		}
		var round float64
		for j := range jobs {
			alone := jobs[j]
			alone.Turns = false
			r, err := Execute(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), []Job{alone}, ExecOptions{Iterations: 4})
			if err != nil {
				t.Fatal(err)
			}
			round += r.Jobs[0].IterationSeconds
		}
		for j, jr := range res.Jobs {
			if jr.PeriodSeconds <= 0 {
				t.Fatalf("plans %v: job %d: no period", withPlans, j)
			}
			if !withPlans && math.Abs(jr.PeriodSeconds-round) > 1e-9*round {
				t.Errorf("vanilla: job %d's period %.9fs, the iterations alone add up to %.9fs", j, jr.PeriodSeconds, round)
			}
			if withPlans && jr.PeriodSeconds < round*(1-1e-9) {
				t.Errorf("plans: job %d's period %.9fs below the vanilla round %.9fs", j, jr.PeriodSeconds, round)
			}
		}
	}
}

// The planner predicts what the executor measures for jobs taking turns:
// the device's peak, each job's peak and last iteration, and the period
// (simJob.iterSeconds against JobResult.PeriodSeconds).
func TestTurnsPlannerPredictsExecutor(t *testing.T) {
	for _, dev := range []string{"h100-80gb", "rtx2080ti-11gb"} {
		p := gpu.MustProfile(dev)
		for _, withPlans := range []bool{false, true} {
			jobs := turnJobs(t, p, withPlans)
			m, err := newModel(jobs, p)
			if err != nil {
				t.Fatal(err)
			}
			plans := make([][]Action, len(jobs))
			for j := range jobs {
				if jobs[j].Plan != nil {
					plans[j] = jobs[j].Plan.Actions
				}
			}
			const iters = 6
			r, err := m.sim.steadyN(plans, iters)
			if err != nil {
				t.Fatal(err)
			}
			sim := gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{})
			res, err := Execute(sim, jobs, ExecOptions{Check: true, Iterations: iters})
			if err != nil {
				t.Fatal(err)
			}
			if r.peak != res.PeakBytes || max(r.peak, r.firstPeak) != sim.HighWater() {
				t.Errorf("%s plans %v: predicted peak %d (run %d), executor %d (run %d)", dev, withPlans, r.peak, r.firstPeak, res.PeakBytes, sim.HighWater())
			}
			for j, sj := range r.jobs {
				got := res.Jobs[j]
				if sj.peak != got.PeakBytes {
					t.Errorf("%s plans %v: job %d peak predicted %d, executor %d", dev, withPlans, j, sj.peak, got.PeakBytes)
				}
				if want := sj.iterSeconds(); math.Abs(want-got.PeriodSeconds) > 1e-9*want {
					t.Errorf("%s plans %v: job %d period predicted %.9fs, executor %.9fs", dev, withPlans, j, want, got.PeriodSeconds)
				}
				if want := sj.lastEnd - sj.first; math.Abs(want-got.IterationSeconds) > 1e-9*want {
					t.Errorf("%s plans %v: job %d iteration predicted %.9fs, executor %.9fs", dev, withPlans, j, want, got.IterationSeconds)
				}
			}
		}
	}
}

// Taking turns holds one job's activations at a time: two vanilla
// ResNet-50s peak far below the two interleaved (which start together and
// peak together), and a marked run of jobs taking turns reports what its
// two runs report.
func TestTurnsLowerTheCombinedPeak(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	r := buildGraph(t, "resnet50", 16)
	inter := []Job{{Graph: r}, {Graph: r}}
	turns := []Job{{Graph: r, Turns: true}, {Graph: r, Turns: true}}
	alone := execute(t, withUnboundedMemory(p), inter[:1]).PeakBytes
	ri := execute(t, withUnboundedMemory(p), inter)
	rt := execute(t, withUnboundedMemory(p), turns)
	if rt.PeakBytes >= ri.PeakBytes || float64(rt.PeakBytes) > 1.4*float64(alone) {
		t.Errorf("two ResNet-50s taking turns peak at %s, interleaved %s, one alone %s", gpu.FormatBytes(rt.PeakBytes), gpu.FormatBytes(ri.PeakBytes), gpu.FormatBytes(alone))
	}
	mr, shortErr, longErr := executeMarked(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), turns, ExecOptions{Iterations: 10}, 3)
	if shortErr != nil || longErr != nil {
		t.Fatal(shortErr, longErr)
	}
	short := executeIters(t, withUnboundedMemory(p), turns, 3)
	if mr.short.PeakBytes != short.PeakBytes || mr.short.Jobs[1].PeriodSeconds != short.Jobs[1].PeriodSeconds {
		t.Errorf("marked run's short part %d B, %.9fs; its own run %d B, %.9fs", mr.short.PeakBytes, mr.short.Jobs[1].PeriodSeconds, short.PeakBytes, short.Jobs[1].PeriodSeconds)
	}
}

// Turns are for every job of the device or none: some jobs only is an
// error naming the field, in the executor and the planner alike.
func TestTurnsOnSomeJobsRefused(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	g := buildGraph(t, "mlp", 8)
	jobs := []Job{{Graph: g, Turns: true}, {Graph: g}}
	if _, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, ExecOptions{}); err == nil || !strings.Contains(err.Error(), "Job.Turns") {
		t.Errorf("executor: %v", err)
	}
	if _, err := AnalyzePeak(jobs, p); err == nil || !strings.Contains(err.Error(), "Job.Turns") {
		t.Errorf("planner: %v", err)
	}
	// One job takes no turns: the same as without.
	one := []Job{{Graph: g, Turns: true}}
	a, b := execute(t, p, one), execute(t, p, []Job{{Graph: g}})
	if a.PeakBytes != b.PeakBytes || a.Jobs[0].IterationSeconds != b.Jobs[0].IterationSeconds || a.Jobs[0].PeriodSeconds != b.Jobs[0].PeriodSeconds {
		t.Errorf("one job taking turns: %+v, without: %+v", a.Jobs[0], b.Jobs[0])
	}
}

// Joint mode's choice of turns reaches the several-job measurement: the
// reservation holds on a device of exactly that size over the check run,
// and the measured MSR and EOR are the planner's.
func TestPlanJointTakesTurns(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	r := buildGraph(t, "resnet50", 16)
	jobs := []Job{{Name: "a", Graph: r}, {Name: "b", Graph: r}, {Name: "c", Graph: r}}
	plans, st, err := PlanJobs(jobs, p, Joint, Target{Tolerance: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Turns {
		t.Fatalf("three ResNet-50s at 5%%: joint mode did not take turns (MSR %.3f)", st.MSR)
	}
	sr, err := MeasureSeveral(p, jobs, plans, &st, true)
	if err != nil {
		t.Fatal(err)
	}
	if !sr.Turns || sr.ReservedBytes != st.ReservedBytes || math.Abs(sr.MSR-st.MSR) > 1e-9 || math.Abs(sr.EOR-st.EOR) > 1e-9 {
		t.Errorf("measured turns %v reserved %d MSR %.6f EOR %.6f; planned reserved %d MSR %.6f EOR %.6f", sr.Turns, sr.ReservedBytes, sr.MSR, sr.EOR, st.ReservedBytes, st.MSR, st.EOR)
	}
	run := append([]Job(nil), jobs...)
	for j := range run {
		run[j].Plan, run[j].Turns = plans[j], true
	}
	capped := p
	capped.MemoryBytes = st.ReservedBytes
	if _, err := Execute(gpu.NewSim(capped, gpu.SimOptions{}), run, ExecOptions{Check: true, Iterations: st.CheckIterations}); err != nil {
		t.Fatalf("the plans do not run %d iterations within the %s reserved: %v", st.CheckIterations, gpu.FormatBytes(st.ReservedBytes), err)
	}
}
