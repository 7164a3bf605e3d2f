package tensorsched

// Review checks of jobs taking turns (Job.Turns): the planner's simulator
// against the executor, the simulator's early abort against full runs,
// reuse of a simulator, the marked-run fallbacks, refCache keys,
// verifyJoint's one-run check and MeasureSeveral's accounting.

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// reviewTurnJobs returns jobs on graphs gs, all taking turns, with plans
// made alone (PlanTensile at tol) when tol > 0.
func reviewTurnJobs(t *testing.T, p gpu.Profile, gs []*workload.Graph, tol float64) []Job {
	t.Helper()
	jobs := make([]Job, len(gs))
	for j, g := range gs {
		jobs[j] = Job{Name: fmt.Sprintf("j%d", j), Graph: g, Turns: true}
		if tol > 0 {
			pl, _, err := PlanJobs([]Job{{Graph: g}}, p, SumOfPeaks, Target{Tolerance: tol})
			if err != nil && !errors.Is(err, ErrBudget) {
				t.Fatal(err)
			}
			jobs[j].Plan = pl[0]
		}
	}
	return jobs
}

func reviewActs(jobs []Job) [][]Action {
	acts := make([][]Action, len(jobs))
	for j := range jobs {
		if jobs[j].Plan != nil {
			acts[j] = jobs[j].Plan.Actions
		}
	}
	return acts
}

func reviewClose(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1e-12, math.Max(math.Abs(a), math.Abs(b)))
}

// reviewCompare simulates jobs for iters iterations on the planner's model
// and executes them, and reports every figure that differs.
func reviewCompare(t *testing.T, what string, p gpu.Profile, jobs []Job, iters int) {
	t.Helper()
	m, err := newModel(jobs, p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.sim.steadyN(reviewActs(jobs), iters)
	if err != nil {
		t.Fatalf("%s: simulator: %v", what, err)
	}
	sim := gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{})
	res, err := Execute(sim, jobs, ExecOptions{Check: true, Iterations: iters})
	if err != nil {
		t.Fatalf("%s: executor: %v", what, err)
	}
	if r.peak != res.PeakBytes {
		t.Errorf("%s iters %d: predicted peak %d, executor %d", what, iters, r.peak, res.PeakBytes)
	}
	if hw := max(r.peak, r.firstPeak); hw != sim.HighWater() {
		t.Errorf("%s iters %d: predicted high-water %d, executor %d", what, iters, hw, sim.HighWater())
	}
	if !reviewClose(r.makespan, res.Seconds) {
		t.Errorf("%s iters %d: predicted makespan %.9f, executor %.9f", what, iters, r.makespan, res.Seconds)
	}
	for j, sj := range r.jobs {
		got := res.Jobs[j]
		if sj.peak != got.PeakBytes {
			t.Errorf("%s iters %d: job %d peak predicted %d, executor %d", what, iters, j, sj.peak, got.PeakBytes)
		}
		if r.firstJobPeak[j] != got.RunPeakBytes {
			t.Errorf("%s iters %d: job %d run peak predicted %d, executor %d", what, iters, j, r.firstJobPeak[j], got.RunPeakBytes)
		}
		if !reviewClose(sj.lastEnd-sj.first, got.IterationSeconds) {
			t.Errorf("%s iters %d: job %d iteration predicted %.9f, executor %.9f", what, iters, j, sj.lastEnd-sj.first, got.IterationSeconds)
		}
		if !reviewClose(sj.stall, got.StallSeconds) {
			t.Errorf("%s iters %d: job %d stall predicted %.9f, executor %.9f", what, iters, j, sj.stall, got.StallSeconds)
		}
		wantPeriod := 0.0
		if iters > 1 {
			wantPeriod = sj.periodOver(iters)
		}
		if !reviewClose(wantPeriod, got.PeriodSeconds) {
			t.Errorf("%s iters %d: job %d period predicted %.9f, executor %.9f", what, iters, j, wantPeriod, got.PeriodSeconds)
		}
		if m.turns && got.PeriodSeconds <= 0 && iters > 1 {
			t.Errorf("%s iters %d: job %d has no period", what, iters, j)
		}
	}
}

// The simulator predicts the executor under turns for small zoo graphs,
// vanilla and planned, over 1, 2, 3 and 5 iterations, two and three jobs.
func TestTurnsReviewSimMatchesExecutorZoo(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 8)
	for _, tol := range []float64{0, 0.1} {
		for _, gs := range [][]*workload.Graph{{mlp, mlp}, {mlp, res}, {res, mlp, mlp}} {
			jobs := reviewTurnJobs(t, p, gs, tol)
			for _, iters := range []int{1, 2, 3, 5} {
				reviewCompare(t, fmt.Sprintf("tol %.2f, %d jobs", tol, len(gs)), p, jobs, iters)
			}
		}
	}
}

// The same on random graphs (the fuzz generator: host time per iteration
// and per kernel, empty tensors, in-place updates), vanilla and planned.
func TestTurnsReviewSimMatchesExecutorRandom(t *testing.T) {
	actions := 0
	defer func() { t.Logf("%d plan actions over the planned seeds", actions) }()
	for seed := uint64(1); seed <= 60; seed++ {
		src := newFuzzSource(seed, nil)
		n := 2 + src.Intn(2)
		gs := make([]*workload.Graph, n)
		for j := range gs {
			gs[j] = genGraph(src)
			if err := gs[j].Validate(); err != nil {
				t.Fatal(err)
			}
		}
		p := fuzzProfile(src)
		tol := 0.0
		if seed%2 == 0 {
			tol = 0.2
		}
		jobs := reviewTurnJobs(t, p, gs, tol)
		for j := range jobs {
			if jobs[j].Plan != nil {
				actions += len(jobs[j].Plan.Actions)
			}
		}
		for _, iters := range []int{1, 2, 4} {
			reviewCompare(t, fmt.Sprintf("seed %d (%d jobs, tol %.1f)", seed, n, tol), p, jobs, iters)
		}
	}
}

// An aborted run under turns is one the caller rejects: for limits around
// each job's slowdown, a run stopped for time has a job slower than the
// limit over the full run, and one not stopped is the full run. A peak
// limit likewise.
func TestTurnsReviewAbortAgreesWithFullRun(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 8)
	for _, gs := range [][]*workload.Graph{{mlp, res}, {res, mlp, res}} {
		reviewAbort(t, p, reviewTurnJobs(t, p, gs, 0.2))
	}
	for seed := uint64(100); seed < 130; seed++ {
		src := newFuzzSource(seed, nil)
		gs := make([]*workload.Graph, 2+src.Intn(2))
		for j := range gs {
			gs[j] = genGraph(src)
		}
		p := fuzzProfile(src)
		reviewAbort(t, p, reviewTurnJobs(t, p, gs, 0.3))
	}
}

func reviewAbort(t *testing.T, p gpu.Profile, jobs []Job) {
	t.Helper()
	{
		for _, iters := range []int{1, 2, 8} {
			m, err := newModel(jobs, p)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := (&refCache{}).get(m, iters)
			if err != nil {
				t.Fatal(err)
			}
			full, err := m.sim.steadyN(reviewActs(jobs), iters)
			if err != nil {
				t.Fatal(err)
			}
			slow := make([]float64, len(jobs))
			worst := 0.0
			for j, sj := range full.jobs {
				slow[j] = sj.iterSeconds() / ref[j]
				worst = max(worst, slow[j])
			}
			fullPeak := max(full.peak, full.firstPeak)
			fullSecs := append([]float64(nil), slow...)
			var limits []float64
			for _, s := range fullSecs {
				limits = append(limits, s*(1-1e-7), s*(1+1e-7), s*0.9, s*0.5, s)
			}
			for _, lim := range limits {
				m.sim.abort = simAbort{ref: ref, maxSlow: lim, wholeRun: true}
				r, err := m.sim.steadyN(reviewActs(jobs), iters)
				m.sim.abort = simAbort{}
				rejected := worst > lim
				switch {
				case errors.Is(err, errAborted) && !rejected:
					t.Errorf("%d jobs iters %d: stopped at limit %.9f, the full run's slowest job %.9f is within it", len(jobs), iters, lim, worst)
				case err == nil:
					for j, sj := range r.jobs {
						if !reviewClose(sj.iterSeconds()/ref[j], fullSecs[j]) {
							t.Errorf("%d jobs iters %d: unstopped run's job %d slowdown %.9f, full run %.9f", len(jobs), iters, j, sj.iterSeconds()/ref[j], fullSecs[j])
						}
					}
				case err != nil && !errors.Is(err, errAborted):
					t.Fatal(err)
				}
			}
			for _, lim := range []int64{fullPeak - 1, fullPeak, fullPeak + 1, fullPeak / 2} {
				m.sim.abort = simAbort{peak: lim, wholeRun: true}
				r, err := m.sim.steadyN(reviewActs(jobs), iters)
				m.sim.abort = simAbort{}
				if errors.Is(err, errAborted) != (fullPeak > lim) {
					t.Errorf("%d jobs iters %d: peak limit %d (full %d): aborted %v", len(jobs), iters, lim, fullPeak, err)
				}
				if err == nil && max(r.peak, r.firstPeak) != fullPeak {
					t.Errorf("peak limit %d: run high-water %d, full %d", lim, max(r.peak, r.firstPeak), fullPeak)
				}
			}
		}
	}
}

// The planner's commit path: a planner on a turns model (planWindows) sees
// the same verdict with and without the abort for every trial it makes.
// Checked by comparing a greedy run with aborts against the plans a greedy
// without them would keep is too costly; instead the simulator is reused
// across iteration counts and plans, and must give what a fresh one gives.
func TestTurnsReviewSimulatorReuse(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 8)
	planned := reviewTurnJobs(t, p, []*workload.Graph{res, mlp, res}, 0.2)
	vanilla := reviewTurnJobs(t, p, []*workload.Graph{res, mlp, res}, 0)
	type fig struct {
		peak, high int64
		jobPeaks   []int64
		secs, last []float64
	}
	figs := func(r *simResult) fig {
		f := fig{peak: r.peak, high: max(r.peak, r.firstPeak)}
		for _, sj := range r.jobs {
			f.jobPeaks = append(f.jobPeaks, sj.peak)
			f.secs = append(f.secs, sj.iterSeconds())
			f.last = append(f.last, sj.lastEnd-sj.first)
		}
		return f
	}
	fresh := func(acts [][]Action, iters int) fig {
		m, err := newModel(planned, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.sim.steadyN(acts, iters)
		if err != nil {
			t.Fatal(err)
		}
		return figs(r)
	}
	m, err := newModel(planned, p)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := (&refCache{}).get(m, 8)
	if err != nil {
		t.Fatal(err)
	}
	seq := []struct {
		acts  [][]Action
		iters int
		abort bool
	}{
		{reviewActs(planned), 8, false}, {reviewActs(vanilla), 2, false}, {reviewActs(planned), 40, false},
		{reviewActs(planned), 8, true}, {reviewActs(planned), 1, false}, {reviewActs(vanilla), 8, false},
		{reviewActs(planned), 3, false}, {reviewActs(planned), 8, false},
	}
	for i, s := range seq {
		if s.abort {
			m.sim.abort = simAbort{ref: ref, maxSlow: 1.0000001, wholeRun: true}
			m.sim.steadyN(s.acts, s.iters) // likely aborted, leaving state behind
			m.sim.abort = simAbort{}
			continue
		}
		r, err := m.sim.steadyN(s.acts, s.iters)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := figs(r), fresh(s.acts, s.iters); !reflect.DeepEqual(got, want) {
			t.Errorf("run %d (%d iterations): reused simulator %+v, fresh %+v", i, s.iters, got, want)
		}
	}
	// runMarked falls back to two runs: each result is its own run's.
	var short fig
	long := figs(m.sim.runMarked(reviewActs(planned), 8, 40, func(r *simResult) { short = figs(r) }))
	if want := fresh(reviewActs(planned), 8); !reflect.DeepEqual(short, want) {
		t.Errorf("runMarked's short run %+v, its own %+v", short, want)
	}
	if want := fresh(reviewActs(planned), 40); !reflect.DeepEqual(long, want) {
		t.Errorf("runMarked's long run %+v, its own %+v", long, want)
	}
}

// executeMarked under turns returns what two separate runs return.
func TestTurnsReviewExecuteMarkedEqualsSeparate(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 8)
	jobs := reviewTurnJobs(t, p, []*workload.Graph{res, mlp}, 0.2)
	for _, mark := range []int{1, 3} {
		checkMarkedEqualsSeparate(t, fmt.Sprintf("mark %d", mark), p, jobs, mark, 6)
	}
}

// checkMarkedEqualsSeparate checks that executeMarked's two parts (mark
// and iters iterations) equal the two runs made separately: results and
// high-water marks.
func checkMarkedEqualsSeparate(t *testing.T, what string, p gpu.Profile, jobs []Job, mark, iters int) {
	t.Helper()
	dev := withUnboundedMemory(p)
	mr, se, le := executeMarked(gpu.NewSim(dev, gpu.SimOptions{}), jobs, ExecOptions{Check: true, Iterations: iters}, mark)
	if se != nil || le != nil {
		t.Fatal(se, le)
	}
	ss := gpu.NewSim(dev, gpu.SimOptions{})
	short, err := Execute(ss, jobs, ExecOptions{Check: true, Iterations: mark})
	if err != nil {
		t.Fatal(err)
	}
	ls := gpu.NewSim(dev, gpu.SimOptions{})
	long, err := Execute(ls, jobs, ExecOptions{Check: true, Iterations: iters})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(mr.short, short) || mr.shortHigh != ss.HighWater() {
		t.Errorf("%s: marked run's short part differs from its own run", what)
	}
	if !reflect.DeepEqual(mr.long, long) || mr.longHigh != ls.HighWater() {
		t.Errorf("%s: marked run's long part differs from its own run", what)
	}
}

// Edge cases: one iteration (every job runs once, in order), three jobs,
// a job without ops among jobs asking for turns (no turns, no deadlock),
// one job asking for turns.
func TestTurnsReviewEdgeCases(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 8)
	jobs := reviewTurnJobs(t, p, []*workload.Graph{mlp, res, mlp}, 0)
	for _, iters := range []int{1, 2, 3} {
		r := executeIters(t, withUnboundedMemory(p), jobs, iters)
		for j := range jobs {
			jr := r.Jobs[j]
			if len(jr.OpStart) != len(jobs[j].Graph.Ops) || jr.IterationSeconds <= 0 {
				t.Fatalf("iters %d: job %d never ran its last iteration", iters, j)
			}
			if j > 0 && jr.OpStart[0] < r.Jobs[j-1].OpEnd[len(r.Jobs[j-1].OpEnd)-1] {
				t.Errorf("iters %d: job %d starts before job %d ends", iters, j, j-1)
			}
		}
		// A round is the iterations alone added up (vanilla): the period.
		if iters > 1 {
			var round float64
			for j := range jobs {
				a := jobs[j]
				a.Turns = false
				round += executeIters(t, withUnboundedMemory(p), []Job{a}, iters).Jobs[0].IterationSeconds
			}
			for j := range jobs {
				if !reviewClose(r.Jobs[j].PeriodSeconds, round) {
					t.Errorf("iters %d: job %d period %.9f, round %.9f", iters, j, r.Jobs[j].PeriodSeconds, round)
				}
			}
		}
	}
	empty := &workload.Graph{Model: "empty", Kind: workload.Train, Batch: 1}
	withEmpty := []Job{{Graph: mlp, Turns: true}, {Graph: empty, Turns: true}, {Graph: res, Turns: true}}
	plain := []Job{{Graph: mlp}, {Graph: empty}, {Graph: res}}
	for _, iters := range []int{1, 3} {
		a := executeIters(t, withUnboundedMemory(p), withEmpty, iters)
		b := executeIters(t, withUnboundedMemory(p), plain, iters)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("iters %d: jobs asking for turns with an empty job differ from without turns", iters)
		}
		m, err := newModel(withEmpty, p)
		if err != nil {
			t.Fatal(err)
		}
		if m.turns {
			t.Errorf("a model with an empty job takes turns")
		}
		if _, err := m.sim.steadyN(nil, iters); err != nil {
			t.Fatal(err)
		}
	}
	// Turns with nil graphs: an error, not a panic.
	if _, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), []Job{{Graph: mlp, Turns: true}, {Turns: true}}, ExecOptions{}); err == nil {
		t.Errorf("a job without a graph ran")
	}
}

// refCache keys: turns and interleaved models with the same offsets and
// iterations get their own references, whichever is asked first, equal to
// uncached simulations.
func TestTurnsReviewRefCacheKeys(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 8)
	turnsJobs := []Job{{Graph: res, Turns: true}, {Graph: mlp, Turns: true}}
	plainJobs := []Job{{Graph: res}, {Graph: mlp}}
	direct := func(jobs []Job, iters int) []float64 {
		m, err := newModel(jobs, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.sim.steadyN(nil, iters)
		if err != nil {
			t.Fatal(err)
		}
		var out []float64
		for _, sj := range r.jobs {
			out = append(out, sj.iterSeconds())
		}
		return out
	}
	for _, order := range [][]bool{{true, false}, {false, true}} {
		c := &refCache{}
		for _, iters := range []int{1, 2, 8} {
			for _, turns := range order {
				jobs := plainJobs
				if turns {
					jobs = turnsJobs
				}
				m, err := newModel(jobs, p)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.get(m, iters)
				if err != nil {
					t.Fatal(err)
				}
				if want := direct(jobs, iters); !reflect.DeepEqual(got, want) {
					t.Errorf("turns %v iters %d: cached %v, direct %v", turns, iters, got, want)
				}
			}
		}
	}
}

// verifyJoint's one-run check under turns reads the horizon's figures off
// the check run: they equal a run of the horizon's own, and the
// reservation is the check run's high-water mark.
func TestTurnsReviewVerifyJointOneRun(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 8)
	jobs := reviewTurnJobs(t, p, []*workload.Graph{res, mlp, res}, 0.2)
	plans := make([]*Plan, len(jobs))
	for j := range jobs {
		plans[j] = jobs[j].Plan
	}
	zero := make([]float64, len(jobs))
	const iters, check = 8, 40
	high, slow, eor, err := verifyJoint(jobs, p, plans, zero, iters, check, &refCache{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := newModel(jobs, p)
	// The reference of jobs taking turns: the jobs interleaved.
	ref, _, err := turnsReference(jobs, p, iters, &refCache{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.sim.steadyN(reviewActs(jobs), iters)
	if err != nil {
		t.Fatal(err)
	}
	var wslow, weor float64
	for j, sj := range r.jobs {
		x := sj.iterSeconds() / ref[j]
		wslow = max(wslow, x)
		weor += (x - 1) / float64(len(jobs))
	}
	h8 := max(r.peak, r.firstPeak)
	r40, err := m.sim.steadyN(reviewActs(jobs), check)
	if err != nil {
		t.Fatal(err)
	}
	h40 := max(r40.peak, r40.firstPeak)
	if !reviewClose(slow, wslow) || !reviewClose(eor, weor) || high != max(h8, h40) {
		t.Errorf("verifyJoint: high %d slow %.12f eor %.12f; separate runs high %d slow %.12f eor %.12f", high, slow, eor, max(h8, h40), wslow, weor)
	}
	// And the executor's marked run measures the same.
	sim := gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{})
	mr, se, le := executeMarked(sim, jobs, ExecOptions{Iterations: check}, iters)
	if se != nil || le != nil {
		t.Fatal(se, le)
	}
	if got := max(mr.shortHigh, mr.longHigh); got != high {
		t.Errorf("executor high-water over the check run %d, verifyJoint %d", got, high)
	}
}

// MeasureSeveral under turns measures what PlanJobs predicts: the
// reservation, MSR, EOR, each job's EOR and peak (three ResNet-50s, where
// joint mode takes turns).
func TestTurnsReviewMeasureSeveralMatchesPlan(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	res := buildGraph(t, "resnet50", 8)
	jobs := []Job{{Name: "a", Graph: res}, {Name: "b", Graph: res}, {Name: "c", Graph: res}}
	plans, st, err := PlanJobs(jobs, p, Joint, Target{Tolerance: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("joint: turns %v reserved %d MSR %.4f EOR %.4f", st.Turns, st.ReservedBytes, st.MSR, st.EOR)
	if !st.Turns {
		t.Fatal("joint mode did not take turns here: the check below needs a turns plan")
	}
	sr, err := MeasureSeveral(p, jobs, plans, &st, true)
	if err != nil {
		t.Fatal(err)
	}
	if sr.Turns != st.Turns || sr.ReservedBytes != st.ReservedBytes || math.Abs(sr.MSR-st.MSR) > 1e-9 || math.Abs(sr.EOR-st.EOR) > 1e-9 {
		t.Errorf("measured turns %v reserved %d MSR %.9f EOR %.9f; planned turns %v reserved %d MSR %.9f EOR %.9f",
			sr.Turns, sr.ReservedBytes, sr.MSR, sr.EOR, st.Turns, st.ReservedBytes, st.MSR, st.EOR)
	}
	for j := range jobs {
		if math.Abs(sr.Jobs[j].EOR-st.JobEOR[j]) > 1e-9 || sr.Jobs[j].PeakBytes != st.JobPeakBytes[j] {
			t.Errorf("job %d: measured EOR %.9f peak %d; planned %.9f, %d", j, sr.Jobs[j].EOR, sr.Jobs[j].PeakBytes, st.JobEOR[j], st.JobPeakBytes[j])
		}
	}
	if sr.PeakBytes != st.PeakBytes {
		t.Errorf("measured peak %d, planned %d", sr.PeakBytes, st.PeakBytes)
	}
}

// Joint mode's turns candidates are held to sum-of-peaks' EOR "so they
// take no more time" (README, planTurns): in absolute time, no job of the
// joint plans taking turns may be slower than under sum-of-peaks' plans
// beyond the tolerance, nor slower than vanilla interleaved beyond it. The
// EORs are against different references (vanilla taking turns versus
// vanilla interleaved), so compare seconds. Jobs taking turns by keys are
// timed over their steady window of a longer run (steadyCounts): the
// other sides are then measured over the same iterations (over a short
// run the MLP ends early and the ResNet-50s run on without it, 8 %
// faster per iteration than while it runs).
func TestTurnsReviewJointNoSlowerThanSumOfPeaksAbsolute(t *testing.T) {
	if raceEnabled {
		t.Skip("plans paced turns over 100+ iterations on one goroutine at a time (77 s under the race detector; TestPlanJointPacedTurnsSmall plans paced turns there)")
	}
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 8)
	const tol = 0.2
	for _, jobs := range [][]Job{
		{{Name: "a", Graph: res}, {Name: "b", Graph: mlp}, {Name: "c", Graph: res}},
		{{Name: "a", Graph: res}, {Name: "b", Graph: mlp}},
	} {
		jp, jst, err := PlanJobs(jobs, p, Joint, Target{Tolerance: tol})
		if err != nil {
			t.Fatal(err)
		}
		if !jst.Turns {
			t.Logf("%d jobs: joint did not take turns", len(jobs))
			continue
		}
		sp, sst, err := PlanJobs(jobs, p, SumOfPeaks, Target{Tolerance: tol})
		if err != nil {
			t.Fatal(err)
		}
		jsr, err := MeasureSeveral(p, jobs, jp, &jst, false)
		if err != nil {
			t.Fatal(err)
		}
		ssr, err := MeasureSeveral(p, jobs, sp, &sst, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d jobs: joint (turns) reserved %d EOR %.4f; sum-of-peaks reserved %d EOR %.4f", len(jobs), jsr.ReservedBytes, jsr.EOR, ssr.ReservedBytes, ssr.EOR)
		if jst.TurnKeys != nil {
			// Sum-of-peaks' plans and vanilla interleaved over the
			// same run and steady window as joint's paced turns.
			ends := func(plans []*Plan) [][]float64 {
				run := append([]Job(nil), jobs...)
				for j := range run {
					run[j].Plan = plans[j]
				}
				r, err := Execute(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), run, ExecOptions{Iterations: jst.Horizon})
				if err != nil {
					t.Fatal(err)
				}
				out := make([][]float64, len(r.Jobs))
				for j := range r.Jobs {
					out[j] = r.Jobs[j].IterationEnds
				}
				return out
			}
			van, spe := ends(make([]*Plan, len(jobs))), ends(sp)
			counts := steadyCounts(van)
			period := func(e []float64, c int) float64 { return (e[c-1] - e[0]) / float64(c-1) }
			for j := range jobs {
				ssr.Jobs[j].VanillaIterationSeconds = period(van[j], counts[j])
				ssr.Jobs[j].IterationSeconds = period(spe[j], counts[j])
			}
		}
		for j := range jobs {
			js, ss := jsr.Jobs[j], ssr.Jobs[j]
			t.Logf("  job %s: joint %.6fs (its reference, vanilla taking turns, %.6fs); sum-of-peaks %.6fs (vanilla interleaved %.6fs)",
				js.Name, js.IterationSeconds, js.VanillaIterationSeconds, ss.IterationSeconds, ss.VanillaIterationSeconds)
			if js.IterationSeconds > max(ss.IterationSeconds, ss.VanillaIterationSeconds*(1+tol))*(1+1e-9) {
				t.Errorf("%d jobs: job %s takes %.6fs per iteration under joint's turns, %.2fx sum-of-peaks' %.6fs and %.2fx vanilla interleaved (%.6fs), beyond the tolerance %.2f; its reported EOR %.4f (sum-of-peaks' %.4f)",
					len(jobs), js.Name, js.IterationSeconds, js.IterationSeconds/ss.IterationSeconds, ss.IterationSeconds,
					js.IterationSeconds/ss.VanillaIterationSeconds, ss.VanillaIterationSeconds, tol, js.EOR, ss.EOR)
			}
		}
	}
}

// Turns candidates are "only for a time tolerance without budgets ... the
// runtime's budget targets run their plans interleaved" (planJoint): jobs
// with budgets of their own (the Scheduler's jobs) planned with a time
// tolerance must not come back taking turns, and whatever comes back must
// keep each job within its budget when run as JointStats says.
func TestTurnsReviewJobBudgetsKeepInterleaved(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 8)
	jobs := []Job{{Name: "a", Graph: res}, {Name: "b", Graph: mlp}, {Name: "c", Graph: res}}
	for j := range jobs {
		rep, err := AnalyzePeak([]Job{{Graph: jobs[j].Graph}}, p)
		if err != nil {
			t.Fatal(err)
		}
		jobs[j].Budget = rep.Bytes // generous: the vanilla peak
	}
	plans, st, err := PlanJobs(jobs, p, Joint, Target{Tolerance: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Turns {
		t.Errorf("jobs with budgets of their own and a time tolerance: joint mode takes turns (planJoint's mayMore ignores job budgets)")
	}
	run := st.Apply(jobs, plans)
	r, err := Execute(gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{}), run, ExecOptions{Check: true, Iterations: jointCheckIterations})
	if err != nil {
		t.Fatalf("the plans over the check run within the jobs' budgets: %v", err)
	}
	for j := range jobs {
		if r.Jobs[j].RunPeakBytes > jobs[j].Budget {
			t.Errorf("job %d: run peak %d over its budget %d", j, r.Jobs[j].RunPeakBytes, jobs[j].Budget)
		}
	}
}

// MeasureSeveral with a horizon of one iteration under turns (a JointStats
// whose Horizon is 1): a job's period is undefined (PeriodSeconds 0), and
// the accounting must not report zero iteration times for it.
func TestTurnsReviewMeasureSeveralOneIteration(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	jobs := []Job{{Name: "a", Graph: mlp}, {Name: "b", Graph: mlp}}
	st := JointStats{Mode: Joint, Horizon: 1, Turns: true, StartOffsets: []float64{0, 0}}
	sr, err := MeasureSeveral(p, jobs, []*Plan{nil, nil}, &st, false)
	if err != nil {
		t.Fatal(err)
	}
	for j, sj := range sr.Jobs {
		if sj.IterationSeconds <= 0 || sj.VanillaIterationSeconds <= 0 {
			t.Errorf("horizon 1, turns: job %d measured %.9fs per iteration (vanilla %.9fs)", j, sj.IterationSeconds, sj.VanillaIterationSeconds)
		}
	}
}
