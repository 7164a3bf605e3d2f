package tensorsched

// Review checks of jobs taking turns by keys (Job.TurnKeys): the planner's
// simulator against the executor for random key sets, the turn order
// against an independent oracle, aborts, marked runs, edge cases,
// validation and the several-job accounting.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// pacedKeys returns random key sets for n jobs of kind k: ties, equal
// keys, single keys, keys shorter and longer than the run, empty slices,
// zero and negative keys.
func pacedKeys(r *rand.Rand, kind, n, iters int) [][]float64 {
	keys := make([][]float64, n)
	for j := range keys {
		switch kind {
		case 0: // no keys: round robin
			return nil
		case 1: // small integers: many ties, any length
			l := r.IntN(iters + 4)
			ks := make([]float64, l)
			v := float64(r.IntN(3))
			for k := range ks {
				v += float64(r.IntN(3))
				ks[k] = v
			}
			keys[j] = ks
		case 2: // every key of every job equal
			l := 1 + r.IntN(iters+2)
			keys[j] = slices.Repeat([]float64{7}, l)
		case 3: // one key each, ties across jobs
			keys[j] = []float64{float64(1 + r.IntN(3))}
		case 4: // short keys, far apart
			l := 1 + r.IntN(2)
			ks := make([]float64, l)
			v := 0.0
			for k := range ks {
				v += 1 + 10*r.Float64()
				ks[k] = v
			}
			keys[j] = ks
		case 5: // empty but not nil: key k
			keys[j] = []float64{}
		case 6: // mixed: empty and long
			if r.IntN(2) == 0 {
				keys[j] = []float64{}
			} else {
				ks := make([]float64, iters+2)
				for k := range ks {
					ks[k] = float64(k) * (0.5 + r.Float64())
				}
				slices.Sort(ks)
				keys[j] = ks
			}
		case 7: // zero and negative keys
			l := 1 + r.IntN(3)
			ks := make([]float64, l)
			v := -float64(r.IntN(4))
			for k := range ks {
				ks[k] = v
				v += float64(r.IntN(2))
			}
			keys[j] = ks
		}
	}
	return keys
}

// oracleKey is the key of iteration k of a job with keys ks as Job.TurnKeys
// documents it, written independently of turnKey.
func oracleKey(ks []float64, k int) float64 {
	switch {
	case len(ks) == 0:
		return float64(k)
	case k < len(ks):
		return ks[k]
	}
	last := ks[len(ks)-1]
	spacing := ks[0] // one key: the spacing from 0
	if len(ks) > 1 {
		spacing = (last - ks[0]) / float64(len(ks)-1)
	}
	return last + float64(k-len(ks)+1)*spacing
}

// oracleOrder is the order of the turns of jobs with keys over iters
// iterations each: the least next key, the earlier job on ties.
func oracleOrder(keys [][]float64, n, iters int) []int {
	done := make([]int, n)
	var order []int
	for {
		best := -1
		var bk float64
		for j := 0; j < n; j++ {
			if done[j] >= iters {
				continue
			}
			var ks []float64
			if keys != nil {
				ks = keys[j]
			}
			if k := oracleKey(ks, done[j]); best < 0 || k < bk {
				best, bk = j, k
			}
		}
		if best < 0 {
			return order
		}
		order = append(order, best)
		done[best]++
	}
}

func withKeys(jobs []Job, keys [][]float64) []Job {
	out := append([]Job(nil), jobs...)
	for j := range out {
		out[j].TurnKeys = nil
		if keys != nil {
			out[j].TurnKeys = keys[j]
		}
	}
	return out
}

// Random key sets on zoo and random graphs, vanilla and planned: the
// simulator's turns follow the documented order, and the executor agrees
// with the simulator on every figure (reviewCompare), over 1 to 9
// iterations.
func TestPacedTurnsReviewRandomKeysParity(t *testing.T) {
	zp := gpu.MustProfile("rtx2080ti-11gb")
	zoo := []*workload.Graph{buildGraph(t, "mlp", 8), buildGraph(t, "resnet50", 4), buildGraph(t, "mlp", 2)}
	zooJobs := map[float64][]Job{}
	for _, tol := range []float64{0, 0.2} {
		zooJobs[tol] = reviewTurnJobs(t, zp, zoo, tol)
	}
	orders := 0
	for seed := uint64(1); seed <= 48; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		kind := int(seed % 8)
		var jobs []Job
		p := zp
		what := ""
		if seed%3 == 0 {
			src := newFuzzSource(seed+500, nil)
			gs := make([]*workload.Graph, 2+src.Intn(2))
			for j := range gs {
				gs[j] = genGraph(src)
			}
			p = fuzzProfile(src)
			jobs = reviewTurnJobs(t, p, gs, float64(seed%2)*0.2)
			what = "fuzz"
		} else {
			tol := float64(seed%2) * 0.2
			n := 2 + r.IntN(2)
			jobs = zooJobs[tol][:n]
			what = "zoo"
		}
		for _, iters := range []int{1, 2, 3, 5, 9} {
			keys := pacedKeys(r, kind, len(jobs), iters)
			kj := withKeys(jobs, keys)
			name := fmt.Sprintf("seed %d %s kind %d keys %v", seed, what, kind, keys)
			if got, ok := turnOrderDistinct(t, p, kj, iters); ok {
				orders++
				if want := oracleOrder(keys, len(jobs), iters); !slices.Equal(got, want) {
					t.Errorf("%s iters %d: simulator's turns %v, documented order %v", name, iters, got, want)
				}
			}
			reviewCompare(t, name, p, kj, iters)
		}
	}
	t.Logf("%d turn orders checked against the oracle", orders)
}

// The simulator's early abort under keyed turns agrees with full runs.
func TestPacedTurnsReviewAbort(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	gs := []*workload.Graph{buildGraph(t, "mlp", 8), buildGraph(t, "resnet50", 4), buildGraph(t, "mlp", 2)}
	jobs := reviewTurnJobs(t, p, gs, 0.2)
	for kind := 1; kind < 8; kind++ {
		r := rand.New(rand.NewPCG(uint64(kind), 7))
		reviewAbort(t, p, withKeys(jobs, pacedKeys(r, kind, len(jobs), 8)))
	}
}

// Marked runs under keyed turns: each part equals its own run, on the
// executor (executeMarked) and the simulator (runMarked).
func TestPacedTurnsReviewMarked(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	gs := []*workload.Graph{buildGraph(t, "resnet50", 4), buildGraph(t, "mlp", 8)}
	base := reviewTurnJobs(t, p, gs, 0.2)
	for _, keys := range [][][]float64{{{1, 2, 3}, {2.5}}, {{0}, {0}}, {{5, 5, 5, 9}, {1, 1}}} {
		jobs := withKeys(base, keys)
		for _, mark := range []int{1, 3} {
			checkMarkedEqualsSeparate(t, fmt.Sprintf("keys %v mark %d", keys, mark), p, jobs, mark, 7)
			m, err := newModel(jobs, p)
			if err != nil {
				t.Fatal(err)
			}
			var sp, lp [2]int64
			lr := m.sim.runMarked(reviewActs(jobs), mark, 7, func(r *simResult) { sp = [2]int64{r.peak, r.firstPeak} })
			if lr.err != nil {
				t.Fatal(lr.err)
			}
			lp = [2]int64{lr.peak, lr.firstPeak}
			for _, c := range []struct {
				iters int
				got   [2]int64
			}{{mark, sp}, {7, lp}} {
				f, err := newModel(jobs, p)
				if err != nil {
					t.Fatal(err)
				}
				fr, err := f.sim.steadyN(reviewActs(jobs), c.iters)
				if err != nil {
					t.Fatal(err)
				}
				if want := [2]int64{fr.peak, fr.firstPeak}; c.got != want {
					t.Errorf("keys %v: runMarked's %d-iteration part %v, its own run %v", keys, c.iters, c.got, want)
				}
			}
		}
	}
}

// Edge cases: keys on one job taking turns (no turns), on jobs one of
// which has no ops (no turns, no deadlock), and over one iteration.
func TestPacedTurnsReviewEdgeCases(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	mlp := buildGraph(t, "mlp", 8)
	res := buildGraph(t, "resnet50", 4)
	empty := &workload.Graph{Model: "empty", Kind: workload.Train, Batch: 1}
	one := []Job{{Name: "a", Graph: res, Turns: true, TurnKeys: []float64{3, 4}}}
	for _, iters := range []int{1, 2, 4} {
		reviewCompare(t, "one job with keys", p, one, iters)
	}
	noOps := []Job{
		{Name: "a", Graph: mlp, Turns: true, TurnKeys: []float64{5}},
		{Name: "b", Graph: empty, Turns: true, TurnKeys: []float64{1}},
		{Name: "c", Graph: res, Turns: true, TurnKeys: []float64{1}},
	}
	for _, iters := range []int{1, 2, 4} {
		reviewCompare(t, "a job without ops", p, noOps, iters)
	}
	// One iteration: each job once, in key order.
	jobs := []Job{
		{Name: "a", Graph: mlp, Turns: true, TurnKeys: []float64{9}},
		{Name: "b", Graph: res, Turns: true, TurnKeys: []float64{1}},
		{Name: "c", Graph: mlp, Turns: true, TurnKeys: []float64{9}},
	}
	if got, want := turnOrder(t, p, jobs, 1), []int{1, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("one iteration: turns %v, want %v", got, want)
	}
	reviewCompare(t, "one iteration", p, jobs, 1)
}

// Validation: every malformed key set is refused by the executor and the
// planner with an error naming Job.TurnKeys.
func TestPacedTurnsReviewValidation(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	g := buildGraph(t, "mlp", 8)
	tk := func(ks ...float64) []float64 { return ks }
	for _, c := range []struct {
		name string
		jobs []Job
	}{
		{"partial (empty vs nil)", []Job{{Graph: g, Turns: true, TurnKeys: []float64{}}, {Graph: g, Turns: true}}},
		{"partial, three jobs", []Job{{Graph: g, Turns: true, TurnKeys: tk(1)}, {Graph: g, Turns: true, TurnKeys: tk(1)}, {Graph: g, Turns: true}}},
		{"NaN first", []Job{{Graph: g, Turns: true, TurnKeys: tk(math.NaN())}, {Graph: g, Turns: true, TurnKeys: tk(1)}}},
		{"+Inf", []Job{{Graph: g, Turns: true, TurnKeys: tk(1, math.Inf(1))}, {Graph: g, Turns: true, TurnKeys: tk(1)}}},
		{"-Inf", []Job{{Graph: g, Turns: true, TurnKeys: tk(math.Inf(-1))}, {Graph: g, Turns: true, TurnKeys: tk(1)}}},
		{"decreasing", []Job{{Graph: g, Turns: true, TurnKeys: tk(1, 2, 1.5)}, {Graph: g, Turns: true, TurnKeys: tk(1)}}},
		{"keys without turns", []Job{{Graph: g}, {Graph: g, TurnKeys: tk(1)}}},
		{"empty keys without turns", []Job{{Graph: g, TurnKeys: []float64{}}, {Graph: g}}},
		{"one job, NaN", []Job{{Graph: g, Turns: true, TurnKeys: tk(math.NaN())}}},
		{"one job, keys without turns", []Job{{Graph: g, TurnKeys: tk(1)}}},
	} {
		_, eerr := Execute(gpu.NewSim(p, gpu.SimOptions{}), c.jobs, ExecOptions{})
		_, perr := AnalyzePeak(c.jobs, p)
		for who, err := range map[string]error{"executor": eerr, "planner": perr} {
			if err == nil || !strings.Contains(err.Error(), "Job.TurnKeys") {
				t.Errorf("%s: %s: %v, want an error naming Job.TurnKeys", c.name, who, err)
			}
		}
	}
	// MeasureSeveral: keys for the wrong number of jobs.
	jobs := []Job{{Name: "a", Graph: g}, {Name: "b", Graph: g}}
	st := &JointStats{Mode: Joint, StartOffsets: []float64{0, 0}, Turns: true, TurnKeys: [][]float64{{1}}}
	if _, err := MeasureSeveral(p, jobs, []*Plan{nil, nil}, st, false); err == nil {
		t.Errorf("MeasureSeveral with 1 job's keys for 2 jobs: no error")
	}
}

// pacedMix is the five-model mix joint mode plans to take turns by keys.
func pacedMix(t *testing.T) []Job {
	var jobs []Job
	for i, model := range []string{"vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"} {
		jobs = append(jobs, Job{Name: fmt.Sprintf("%s#%d", model, i), Graph: buildGraph(t, model, 2)})
	}
	return jobs
}

// The planner's predicted several-job figures for keyed turns equal
// MeasureSeveral's on the executor (EOR, per-job EOR, reserved bytes,
// MSR), and the reservation covers the run measured.
func TestPacedTurnsReviewMeasureSeveralMatchesPlan(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans the five-model mix")
	}
	for _, dev := range []string{"h100-80gb", "rtx2080ti-11gb"} {
		p := gpu.MustProfile(dev)
		jobs := pacedMix(t)
		plans, st, err := PlanJobs(jobs, p, Joint, Target{Tolerance: jointTolerance[dev]})
		if err != nil && !errors.Is(err, ErrBudget) {
			t.Fatal(err)
		}
		if !st.Turns || st.TurnKeys == nil {
			t.Fatalf("%s: no keyed turns (turns %v)", dev, st.Turns)
		}
		sr, err := MeasureSeveral(p, jobs, plans, &st, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: planned EOR %.5f MSR %.5f reserved %d; measured EOR %.5f MSR %.5f reserved %d", dev, st.EOR, st.MSR, st.ReservedBytes, sr.EOR, sr.MSR, sr.ReservedBytes)
		if !reviewClose(st.EOR, sr.EOR) || st.ReservedBytes != sr.ReservedBytes || !reviewClose(st.MSR, sr.MSR) {
			t.Errorf("%s: planned EOR %.9f MSR %.9f reserved %d; measured EOR %.9f MSR %.9f reserved %d", dev, st.EOR, st.MSR, st.ReservedBytes, sr.EOR, sr.MSR, sr.ReservedBytes)
		}
		for j := range jobs {
			if !reviewClose(st.JobEOR[j], sr.Jobs[j].EOR) {
				t.Errorf("%s job %d: planned EOR %.9f, measured %.9f", dev, j, st.JobEOR[j], sr.Jobs[j].EOR)
			}
		}
		// Runs longer than the check run (the runtime runs on until it
		// plans again): the reservation must still hold.
		for _, iters := range []int{60, 150} {
			sim := gpu.NewSim(withUnboundedMemory(p), gpu.SimOptions{})
			if _, err := Execute(sim, st.Apply(jobs, plans), ExecOptions{Iterations: iters}); err != nil {
				t.Fatal(err)
			}
			hw := sim.HighWater()
			t.Logf("%s %d iterations: high-water %d, reserved %d", dev, iters, hw, st.ReservedBytes)
			if hw > st.ReservedBytes {
				t.Errorf("%s %d iterations: high-water %d over the reservation %d (+%.2f%%)", dev, iters, hw, st.ReservedBytes, 100*float64(hw-st.ReservedBytes)/float64(st.ReservedBytes))
			}
		}
	}
}

// The EOR joint mode reports for keyed turns (over its paced run's steady
// windows) is not below the jobs' long-run extra time: each job's steady
// period with the plans over its steady interleaved period without,
// while every job is still running (as TestPlanJointMixKeepsPaceLongRun
// measures it), averaged as the accounting averages (at no less than 0).
func TestPacedTurnsReviewReportedEORNotBelowLongRun(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans the five-model mix on two devices")
	}
	for _, dev := range []string{"rtx2080ti-11gb", "h100-80gb"} {
		p := gpu.MustProfile(dev)
		jobs := pacedMix(t)
		plans, st, err := PlanJobs(jobs, p, Joint, Target{Tolerance: jointTolerance[dev]})
		if err != nil {
			t.Fatal(err)
		}
		if !st.Turns || st.TurnKeys == nil {
			t.Fatalf("%s: no keyed turns", dev)
		}
		const iters = 150
		inter, _, cut := steadyPaces(t, p, jobs, iters, 0)
		bare, _, _ := steadyPaces(t, p, st.Apply(jobs, nil), iters, cut)
		turns, _, _ := steadyPaces(t, p, st.Apply(jobs, plans), iters, cut)
		var long, bareMean float64
		row := ""
		for j := range jobs {
			x := turns[j] / inter[j]
			long += max(x-1, 0) / float64(len(jobs))
			bareMean += (bare[j]/inter[j] - 1) / float64(len(jobs))
			row += fmt.Sprintf(" %s check %+.4f long %+.4f;", jobs[j].Name, st.JobEOR[j], x-1)
		}
		t.Logf("%s:%s keyed turns without plans, long run %+.4f", dev, row, bareMean)
		if long > st.EOR+0.002 {
			t.Errorf("%s: reported EOR %.4f (check run), long-run EOR %.4f: paced turns report less extra time than they take", dev, st.EOR, long)
		}
	}
}
