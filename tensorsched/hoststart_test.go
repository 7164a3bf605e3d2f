package tensorsched

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// acrossPlan swaps W out after the optimizer and back in at the next
// iteration's start (TestExecuteAcrossIteration's plan), starting it on
// the host when host is set.
func acrossPlan(host bool) *Plan {
	p := &Plan{Policy: "t", Actions: []Action{
		{Kind: SwapOut, Tensor: 0, After: 3, Before: -1},
		{Kind: SwapIn, Tensor: 0, After: -1, Before: 0},
	}}
	if host {
		p.Actions = append(p.Actions, Action{Kind: StartOnHost, Tensor: 0, After: -1, Before: -1})
	}
	return p
}

// A tensor that starts on the host reaches the device by its first
// swap-in: the first op waits for the copy (a stall like any other), the
// host copy is freed when it ends, and AnalyzePeak predicts it exactly.
func TestExecuteStartOnHost(t *testing.T) {
	p := testProfile(1<<20, 100) // W: 100 B at 100 B/s, 1 s a copy
	g, secs := smallGraph()
	for _, host := range []bool{false, true} {
		jobs := []Job{{Name: "j", Graph: g, Plan: acrossPlan(host), Seconds: secs}}
		dev := gpu.NewSim(p, gpu.SimOptions{})
		res, err := Execute(dev, jobs, ExecOptions{Iterations: 1, RecordTimeline: true, Check: true})
		if err != nil {
			t.Fatalf("host %v: %v", host, err)
		}
		j := res.Jobs[0]
		wantStart, wantStall, wantIn := 0.0, 0.0, int64(0)
		want := []MemSample{{0, 130}, {1, 160}, {3, 190}, {6, 140}, {10, 100}, {11, 0}}
		if host {
			// W copies in 0..1, so op0 runs 1..2 and everything after it
			// one second later.
			wantStart, wantStall, wantIn = 1, 1, 100
			want = []MemSample{{0, 110}, {1, 130}, {2, 160}, {4, 190}, {7, 140}, {11, 100}, {12, 0}}
		}
		if j.OpStart[0] != wantStart || j.StallSeconds != wantStall || j.SwappedInBytes != wantIn {
			t.Errorf("host %v: first op at %v, stall %v, swapped in %d; want %v, %v, %d", host, j.OpStart[0], j.StallSeconds, j.SwappedInBytes, wantStart, wantStall, wantIn)
		}
		if !slices.Equal(res.Timeline, want) {
			t.Errorf("host %v: timeline %v, want %v", host, res.Timeline, want)
		}
		// W's host copy: swapped out again after the optimizer.
		if dev.HostInUse() != 100 {
			t.Errorf("host %v: %d B on the host at the end, want 100", host, dev.HostInUse())
		}
		for _, iters := range []int{1, 2, 3} {
			res, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, ExecOptions{Iterations: iters, Check: true})
			if err != nil {
				t.Fatal(err)
			}
			m, err := newModel(jobs, p)
			if err != nil {
				t.Fatal(err)
			}
			r, err := m.sim.steadyN([][]Action{jobs[0].Plan.Actions}, iters)
			if err != nil {
				t.Fatal(err)
			}
			if r.peak != res.PeakBytes || r.firstPeak != res.Jobs[0].RunPeakBytes || r.makespan != res.Seconds || r.jobs[0].stall != res.Jobs[0].StallSeconds {
				t.Errorf("host %v, %d iterations: predicted peak %d, run peak %d, %vs, stall %v; executor %d, %d, %vs, %v",
					host, iters, r.peak, r.firstPeak, r.makespan, r.jobs[0].stall, res.PeakBytes, res.Jobs[0].RunPeakBytes, res.Seconds, res.Jobs[0].StallSeconds)
			}
		}
	}
}

// A tensor that starts on the host is not on the device before its first
// swap-in: reading it earlier fails the checker (and the executor and the
// peak analysis without it), and only persistent tensors may start there.
func TestStartOnHostEarlyRead(t *testing.T) {
	p := testProfile(1<<20, 1e6)
	host := Action{Kind: StartOnHost, Tensor: 0, After: -1, Before: -1}
	cases := []struct {
		name          string
		plan          []Action
		check, noChk  string // the executor's error with and without the checker
		analyzeErrors bool
	}{
		{"no swap-in", []Action{host},
			"op 0 (f) reads tensor 0 (W), which the plan starts on the host and does not swap in before it",
			"op 0 (f) reads tensor 0 (W), which is swapped out to the host at iteration 1", true},
		{"swap-in after the first read", []Action{host,
			{Kind: SwapOut, Tensor: 0, After: 3, Before: -1},
			{Kind: SwapIn, Tensor: 0, After: 1, Before: 3}},
			"op 0 (f) reads tensor 0 (W), which the plan starts on the host and does not swap in before it",
			"op 0 (f) reads tensor 0 (W), which is swapped out to the host at iteration 1", true},
		{"swap-in before the first read", []Action{host,
			{Kind: SwapOut, Tensor: 0, After: 3, Before: -1},
			{Kind: SwapIn, Tensor: 0, After: -1, Before: 0}}, "", "", false},
		{"an activation", []Action{{Kind: StartOnHost, Tensor: 2, After: -1, Before: -1}},
			"only parameters and optimizer state can start on the host",
			"only parameters and optimizer state can start on the host", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := &Plan{Policy: "t", Actions: c.plan}
			for _, chk := range []bool{true, false} {
				want := c.noChk
				if chk {
					want = c.check
				}
				_, _, err := runSmall(t, p, plan, 0, ExecOptions{Iterations: 2, Check: chk})
				if want == "" && err != nil {
					t.Fatalf("check %v: correct plan failed: %v", chk, err)
				}
				if want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
					t.Fatalf("check %v: error %v, want one containing %q", chk, err, want)
				}
			}
			g, secs := smallGraph()
			_, err := AnalyzePeak([]Job{{Name: "j", Graph: g, Plan: plan, Seconds: secs}}, p)
			if (err != nil) != c.analyzeErrors {
				t.Fatalf("AnalyzePeak: error %v, want one: %v", err, c.analyzeErrors)
			}
		})
	}
}

// Planned by default (not ResidentStart), ResNet-50's params and optimizer state swapped
// across iterations start on the host: the first iteration, which set the
// whole run's peak, no longer holds them (RTX 2080 Ti, batch 16, 10 %:
// 719.6 → 681.8 MiB), the steady state is unchanged, and the executor
// measures exactly what the planner predicted. A budget between the two
// whole-run peaks fits only with the option.
func TestPlanStartOnHostRunPeak(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "resnet50", 16)
	var runPeak [2]int64
	for i, on := range []bool{false, true} {
		plan, st, err := PlanTensile(g, p, Target{Tolerance: 0.1, ResidentStart: !on})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range plan.Actions {
			if a.Kind == StartOnHost {
				n++
			}
		}
		if n != st.StartOnHost || (n > 0) != on {
			t.Fatalf("start on host %v: %d StartOnHost actions, stats count %d", on, n, st.StartOnHost)
		}
		res := execute(t, p, []Job{{Graph: g, Plan: plan}})
		if res.PeakBytes != st.PeakBytes || res.Jobs[0].RunPeakBytes != st.FirstIterationPeakBytes || res.Seconds != st.Seconds {
			t.Errorf("start on host %v: predicted peak %d, run peak %d, %.9fs; executor %d, %d, %.9fs",
				on, st.PeakBytes, st.FirstIterationPeakBytes, st.Seconds, res.PeakBytes, res.Jobs[0].RunPeakBytes, res.Seconds)
		}
		runPeak[i] = max(st.PeakBytes, st.FirstIterationPeakBytes)
		if !on && st.FirstIterationPeakBytes <= st.PeakBytes {
			t.Fatalf("the first iteration (%d) no longer sets the peak (%d): pick another case", st.FirstIterationPeakBytes, st.PeakBytes)
		}
		t.Logf("start on host %v: peak %s, whole run %s, %d tensors start on the host", on, gpu.FormatBytes(st.PeakBytes), gpu.FormatBytes(runPeak[i]), n)
	}
	if runPeak[1] >= runPeak[0] {
		t.Fatalf("whole-run peak %d with start on host, %d without", runPeak[1], runPeak[0])
	}
	budget := (runPeak[0] + runPeak[1]) / 2
	if _, _, err := PlanTensile(g, p, Target{Budget: budget, Tolerance: 0.1, ResidentStart: true}); err == nil {
		t.Logf("a budget of %s fits at 10 %% without starting on the host too", gpu.FormatBytes(budget))
	}
	plan, st, err := PlanTensile(g, p, Target{Budget: budget, Tolerance: 0.1})
	if err != nil {
		t.Fatalf("budget %s with start on host: %v", gpu.FormatBytes(budget), err)
	}
	res := execute(t, p, []Job{{Graph: g, Plan: plan, Budget: budget}})
	if res.Jobs[0].RunPeakBytes > budget || max(st.PeakBytes, st.FirstIterationPeakBytes) > budget {
		t.Errorf("budget %d: run peak %d (predicted %d)", budget, res.Jobs[0].RunPeakBytes, st.FirstIterationPeakBytes)
	}
}

// Several jobs starting on the host (the default) against ResidentStart (two to four ResNet-50 b16 on the H100 at
// 5 %, each job its own graph and joint held to sum-of-peaks' EOR, as in
// the several-job table): sum-of-peaks reserves less (each job's first
// iteration no longer sets its peak), joint's reservation still covers its
// check run on a device of exactly that capacity, and joint still reserves
// less than sum-of-peaks. The log shows what starting on the host costs
// joint's lead: joint's reservations fall too (its start offsets had kept
// most of the first iterations from stacking), but by less.
func TestPlanJobsStartOnHost(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans 2-4 jobs in both modes, with and without the option (skipped with -short and -race: a table; shorter tests cover its concurrency)")
	}
	p := gpu.MustProfile("h100-80gb")
	vanilla := execute(t, p, []Job{{Graph: buildGraph(t, "resnet50", 16)}}).PeakBytes
	for n := 2; n <= 4; n++ {
		jobs := make([]Job, n)
		for j := range jobs {
			jobs[j] = Job{Name: string(rune('a' + j)), Graph: buildGraph(t, "resnet50", 16)}
		}
		var sop, jnt [2]JointStats
		var plans []*Plan
		for i, on := range []bool{false, true} {
			var err error
			if _, sop[i], err = PlanJobs(jobs, p, SumOfPeaks, Target{Tolerance: 0.05, ResidentStart: !on}); err != nil {
				t.Fatal(err)
			}
			if plans, jnt[i], err = PlanJobs(jobs, p, Joint, Target{Tolerance: min(0.05, sop[i].EOR), ResidentStart: !on}); err != nil {
				t.Fatal(err)
			}
		}
		msr := func(st JointStats) float64 { return 1 - float64(st.ReservedBytes)/float64(int64(n)*vanilla) }
		t.Logf("%dx resnet50: sum-of-peaks MSR %.3f -> %.3f, joint %.3f -> %.3f with start on host; joint's lead %+.3f -> %+.3f",
			n, msr(sop[0]), msr(sop[1]), msr(jnt[0]), msr(jnt[1]), msr(jnt[0])-msr(sop[0]), msr(jnt[1])-msr(sop[1]))
		if sop[1].ReservedBytes >= sop[0].ReservedBytes || jnt[1].ReservedBytes >= sop[1].ReservedBytes {
			t.Errorf("%dx: reserved: sum-of-peaks %d -> %d, joint %d -> %d with start on host", n,
				sop[0].ReservedBytes, sop[1].ReservedBytes, jnt[0].ReservedBytes, jnt[1].ReservedBytes)
		}
		run := jnt[1].Apply(jobs, plans)
		host := 0
		for j := range run {
			for _, a := range plans[j].Actions {
				if a.Kind == StartOnHost {
					host++
				}
			}
		}
		if host == 0 {
			t.Fatalf("%dx: joint plans start nothing on the host", n)
		}
		capped := p
		capped.MemoryBytes = jnt[1].ReservedBytes
		if _, err := Execute(gpu.NewSim(capped, gpu.SimOptions{}), run, ExecOptions{Check: true, Iterations: jnt[1].CheckIterations}); err != nil {
			t.Fatalf("%dx: the plans do not run %d iterations within the %s reserved: %v", n, jnt[1].CheckIterations, gpu.FormatBytes(jnt[1].ReservedBytes), err)
		}
	}
}
