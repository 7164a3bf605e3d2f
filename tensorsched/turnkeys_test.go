package tensorsched

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// turnOrder simulates jobs for iters iterations and returns the jobs in
// the order their iterations started.
func turnOrder(t *testing.T, p gpu.Profile, jobs []Job, iters int) []int {
	t.Helper()
	order, _ := turnOrderDistinct(t, p, jobs, iters)
	return order
}

// turnOrderDistinct is turnOrder that also reports whether the
// iterations' starts were all distinct (the order is read off them).
func turnOrderDistinct(t *testing.T, p gpu.Profile, jobs []Job, iters int) ([]int, bool) {
	t.Helper()
	m, err := newModel(jobs, p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.sim.steadyN(reviewActs(jobs), iters)
	if err != nil {
		t.Fatal(err)
	}
	type start struct {
		t float64
		j int
	}
	var starts []start
	seen := map[float64]bool{}
	distinct := true
	for j, sj := range r.jobs {
		for k := 0; k < iters; k++ {
			base := sj.its[k].base
			distinct = distinct && !seen[base]
			seen[base] = true
			starts = append(starts, start{base, j})
		}
	}
	slices.SortStableFunc(starts, func(a, b start) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	order := make([]int, len(starts))
	for i, s := range starts {
		order[i] = s.j
	}
	return order, distinct
}

// A turn goes to the job whose next iteration has the least key (the
// earlier job on ties), keys past the end go on at the mean spacing, and
// without keys the jobs take one turn each per round in job order. The
// executor runs the same order as the planner's simulator (every figure
// of reviewCompare agrees).
func TestTurnKeysOrderTheTurns(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	mlp := buildGraph(t, "mlp", 8)
	r := buildGraph(t, "resnet50", 8)
	cases := []struct {
		name  string
		keys  [][]float64
		iters int
		want  []int
	}{
		{"round robin without keys", nil, 3, []int{0, 1, 0, 1, 0, 1}},
		{"two short turns per long one", [][]float64{{1, 2, 3, 4}, {2.5, 5, 7.5, 10}}, 4, []int{0, 0, 1, 0, 0, 1, 1, 1}},
		{"ties go to the earlier job", [][]float64{{2, 4}, {2, 4}}, 2, []int{0, 1, 0, 1}},
		// Job 1's keys end after one: past it, 3 per iteration (its
		// first key from 0); job 0's go on at their mean spacing 1.
		{"keys carried on past the end", [][]float64{{1, 2}, {3}}, 4, []int{0, 0, 0, 1, 0, 1, 1, 1}},
	}
	for _, c := range cases {
		jobs := []Job{{Name: "short", Graph: mlp, Turns: true}, {Name: "long", Graph: r, Turns: true}}
		for j := range jobs {
			if c.keys != nil {
				jobs[j].TurnKeys = c.keys[j]
			}
		}
		if got := turnOrder(t, p, jobs, c.iters); !slices.Equal(got, c.want) {
			t.Errorf("%s: turns %v, want %v", c.name, got, c.want)
		}
		reviewCompare(t, c.name, p, jobs, c.iters)
	}
	for _, c := range []struct {
		keys []float64
		k    int
		want float64
	}{{nil, 3, 3}, {[]float64{2}, 0, 2}, {[]float64{2}, 2, 6}, {[]float64{1, 3, 4}, 2, 4}, {[]float64{1, 3, 4}, 4, 7}} {
		if got := turnKey(c.keys, c.k); got != c.want {
			t.Errorf("turnKey(%v, %d) = %g, want %g", c.keys, c.k, got, c.want)
		}
	}
}

// Keys on some jobs only, keys that are not finite or go down, and keys on
// jobs that take no turns are errors naming the field, in the executor
// and the planner alike.
func TestTurnKeysRefused(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	g := buildGraph(t, "mlp", 8)
	for _, c := range []struct {
		name string
		jobs []Job
		want string
	}{
		{"some jobs", []Job{{Graph: g, Turns: true, TurnKeys: []float64{1}}, {Graph: g, Turns: true}}, "1 of 2 jobs taking turns have Job.TurnKeys"},
		{"not a number", []Job{{Graph: g, Turns: true, TurnKeys: []float64{1, math.NaN()}}, {Graph: g, Turns: true, TurnKeys: []float64{1}}}, "Job.TurnKeys[1]"},
		{"going down", []Job{{Graph: g, Turns: true, TurnKeys: []float64{1}}, {Graph: g, Turns: true, TurnKeys: []float64{2, 1}}}, "non-decreasing"},
		{"no turns", []Job{{Graph: g, TurnKeys: []float64{1}}, {Graph: g}}, "takes no turns"},
	} {
		if _, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), c.jobs, ExecOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: executor: %v, want an error with %q", c.name, err, c.want)
		}
		if _, err := AnalyzePeak(c.jobs, p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: planner: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// turnMix returns jobs of different iteration lengths (the five-model
// mix's kind, smaller).
func turnMix(t *testing.T) []Job {
	var jobs []Job
	for i, s := range []struct {
		model string
		batch int
	}{{"vgg16", 2}, {"resnet50", 2}, {"densenet121", 2}} {
		jobs = append(jobs, Job{Name: fmt.Sprintf("%s#%d", s.model, i), Graph: buildGraph(t, s.model, s.batch)})
	}
	return jobs
}

// Jobs taking turns by turnKeys' keys replay the interleaved order
// without its waits: without plans, every iteration of every job ends no
// later than interleaved (the GPU runs one op at a time either way), and
// each job's period over the check run is within 2 % of its interleaved
// period (planTurns times such jobs by their periods over their steady
// windows of a longer run).
func TestTurnKeysKeepTheInterleavedPace(t *testing.T) {
	for _, dev := range []string{"h100-80gb", "rtx2080ti-11gb"} {
		p := gpu.MustProfile(dev)
		jobs := turnMix(t)
		const n = 40
		keys, err := turnKeys(jobs, p, n)
		if err != nil {
			t.Fatal(err)
		}
		inter, err := interleavedEnds(jobs, p, n)
		if err != nil {
			t.Fatal(err)
		}
		tj := append([]Job(nil), jobs...)
		for j := range tj {
			tj[j].Turns, tj[j].TurnKeys = true, keys[j]
		}
		m, err := newModel(tj, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.sim.steadyN(nil, n)
		if err != nil {
			t.Fatal(err)
		}
		for j, sj := range r.jobs {
			for k := 0; k < n; k++ {
				if end := sj.its[k].lastEnd; end > inter[j][k]*(1+1e-9) {
					t.Errorf("%s: job %s iteration %d ends at %.6fs taking turns, %.6fs interleaved", dev, jobs[j].Name, k, end, inter[j][k])
				}
			}
			ip := (inter[j][n-1] - inter[j][0]) / (n - 1)
			if x := sj.periodOver(n) / ip; math.Abs(x-1) > 0.02 {
				t.Errorf("%s: job %s period %.6fs taking turns, %.6fs interleaved (×%.3f)", dev, jobs[j].Name, sj.periodOver(n), ip, x)
			}
		}
		// The executor runs the same turns.
		reviewCompare(t, dev+" keyed mix", p, tj, 12)
	}
}

// keyedGraphs are graphs of different iteration lengths for the random
// executor-against-simulator comparison below.
func keyedGraphs(t *testing.T) []*workload.Graph {
	return []*workload.Graph{buildGraph(t, "mlp", 8), buildGraph(t, "resnet50", 4), buildGraph(t, "inception-v3", 2)}
}

// With plans, jobs taking turns by keys run on the executor exactly as the
// planner's simulator predicts (peaks, iterations, periods, stalls).
func TestTurnKeysSimMatchesExecutorWithPlans(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	gs := keyedGraphs(t)
	jobs := reviewTurnJobs(t, p, gs, 0.10)
	plain := append([]Job(nil), jobs...)
	for j := range plain {
		plain[j].Turns = false
	}
	keys, err := turnKeys(plain, p, 10)
	if err != nil {
		t.Fatal(err)
	}
	for j := range jobs {
		jobs[j].TurnKeys = keys[j]
	}
	for _, iters := range []int{1, 2, 7, 15} {
		reviewCompare(t, fmt.Sprintf("keyed with plans, %d iterations", iters), p, jobs, iters)
	}
}

// steadyPaces simulates jobs for iters iterations and returns each job's
// mean period while every job is still running (up to the first job's
// last iteration end, cut) and how many iterations that covers.
func steadyPaces(t *testing.T, p gpu.Profile, jobs []Job, iters int, cut float64) ([]float64, []int, float64) {
	t.Helper()
	m, err := newModel(jobs, p)
	if err != nil {
		t.Fatal(err)
	}
	m.sim.peaksOnly = true
	r, err := m.sim.steadyN(reviewActs(jobs), iters)
	if err != nil {
		t.Fatal(err)
	}
	if cut <= 0 {
		cut = math.Inf(1)
		for _, sj := range r.jobs {
			cut = min(cut, sj.its[iters-1].lastEnd)
		}
	}
	paces, counts := make([]float64, len(jobs)), make([]int, len(jobs))
	for j, sj := range r.jobs {
		c := 0
		for c < iters && sj.its[c].lastEnd <= cut {
			c++
		}
		if c < 2 {
			t.Fatalf("job %d ends %d iterations by %.3fs", j, c, cut)
		}
		paces[j], counts[j] = (sj.its[c-1].lastEnd-sj.its[0].lastEnd)/float64(c-1), c
	}
	return paces, counts, cut
}

// The five-model mix taking turns by keys with joint mode's plans, run for
// long (150 iterations each): while every job is still running, each
// job's mean period is within the tolerance of its interleaved period
// without plans over the same time. The check run (what planTurns times)
// is shorter than this steady state; the README quotes both.
func TestPlanJointMixKeepsPaceLongRun(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans the five-model mix on two devices and runs it 150 iterations (skipped with -short and -race)")
	}
	for _, dev := range []string{"rtx2080ti-11gb", "h100-80gb"} {
		p := gpu.MustProfile(dev)
		tol := jointTolerance[dev]
		var jobs []Job
		for i, model := range []string{"vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"} {
			jobs = append(jobs, Job{Name: fmt.Sprintf("%s#%d", model, i), Graph: buildGraph(t, model, 2)})
		}
		plans, st, err := PlanJobs(jobs, p, Joint, Target{Tolerance: tol})
		if err != nil {
			t.Fatal(err)
		}
		if !st.Turns || len(st.TurnKeys) != len(jobs) || st.Horizon != st.CheckIterations {
			t.Fatalf("%s: the mix does not take turns by keys (turns %v, %d keys, horizon %d)", dev, st.Turns, len(st.TurnKeys), st.Horizon)
		}
		const iters = 150
		inter, ni, cut := steadyPaces(t, p, jobs, iters, 0)
		turns, nt, _ := steadyPaces(t, p, st.Apply(jobs, plans), iters, cut)
		var mean float64
		row := ""
		for j := range jobs {
			x := turns[j] / inter[j]
			mean += (x - 1) / float64(len(jobs))
			row += fmt.Sprintf(" %s ×%.3f (%d/%d)", jobs[j].Name, x, nt[j], ni[j])
			if x > 1+tol || nt[j] < ni[j]*9/10 {
				t.Errorf("%s: %s's steady period ×%.3f its interleaved one, %d iterations by %.2fs against %d", dev, jobs[j].Name, x, nt[j], cut, ni[j])
			}
		}
		t.Logf("%s five-model mix, joint (turns by keys, EOR %.3f over the check run): steady periods over interleaved up to %.2fs:%s; mean %+.3f", dev, st.EOR, cut, row, mean)
	}
}

// The Scheduler hands paced turns on: planning jobs of different lengths
// on its tolerance alone (no budgets), its Jobs() carry the keys joint
// mode chose, and running them gives the device peak and per-job periods
// the planner predicted (without the keys they would run one turn each
// per round, out of step with the plans).
func TestSchedulerPassesTurnKeysOn(t *testing.T) {
	if raceEnabled {
		t.Skip("plans paced turns over 100+ iterations (the plain run has it)")
	}
	p := gpu.MustProfile("rtx2080ti-11gb")
	s := NewScheduler(p, Joint, 0.10)
	for _, j := range []struct {
		name  string
		model string
		batch int
	}{{"mlp", "mlp", 8}, {"r1", "resnet50", 4}, {"r2", "resnet50", 4}} {
		if err := s.AddJob(j.name, buildGraph(t, j.model, j.batch), 0); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if !st.Turns || len(st.TurnKeys) != 3 {
		t.Fatalf("the scheduler's joint plans do not take paced turns (turns %v, %d keys)", st.Turns, len(st.TurnKeys))
	}
	jobs := s.Jobs()
	for j := range jobs {
		if !jobs[j].Turns || !slices.Equal(jobs[j].TurnKeys, st.TurnKeys[j]) {
			t.Fatalf("job %d runs with turns %v and %d keys, planned %d", j, jobs[j].Turns, len(jobs[j].TurnKeys), len(st.TurnKeys[j]))
		}
	}
	sim := gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{})
	res, err := Execute(sim, jobs, ExecOptions{Check: true, Iterations: st.Horizon})
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakBytes != st.PeakBytes || sim.HighWater() > st.ReservedBytes {
		t.Errorf("device peak %d (high-water %d), planned %d (reserved %d)", res.PeakBytes, sim.HighWater(), st.PeakBytes, st.ReservedBytes)
	}
	for j := range jobs {
		if got, want := res.Jobs[j].IterationSeconds, st.JobIterationSeconds[j]; math.Abs(got-want) > 1e-9*want {
			t.Errorf("job %d: last iteration %.9fs, planned %.9fs", j, got, want)
		}
	}
}

// Joint planning of two jobs of different lengths (ResNet-50 at batch 2
// and 4) takes paced turns, its candidates planned concurrently
// (planJoint, planTurns' greedy beside its fractions): it runs under the
// race detector too, and the measured accounting equals the planner's.
func TestPlanJointPacedTurnsSmall(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	jobs := []Job{{Name: "r2", Graph: buildGraph(t, "resnet50", 2)}, {Name: "r4", Graph: buildGraph(t, "resnet50", 4)}}
	plans, st, err := PlanJobs(jobs, p, Joint, Target{Tolerance: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Turns || st.TurnKeys == nil {
		t.Fatalf("ResNet-50 b2 beside b4: no paced turns (turns %v)", st.Turns)
	}
	sr, err := MeasureSeveral(p, jobs, plans, &st, true)
	if err != nil {
		t.Fatal(err)
	}
	if !sr.PacedTurns || sr.ReservedBytes != st.ReservedBytes || math.Abs(sr.EOR-st.EOR) > 1e-9 || sr.EOR > 0.1 {
		t.Errorf("measured paced %v reserved %d EOR %.6f; planned reserved %d EOR %.6f", sr.PacedTurns, sr.ReservedBytes, sr.EOR, st.ReservedBytes, st.EOR)
	}
}
