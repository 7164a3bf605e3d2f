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
