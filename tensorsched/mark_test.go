package tensorsched

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// simFigures is everything a simulation result reports, copied out of the
// simulator's buffers.
type simFigures struct {
	Peak, FirstPeak               int64
	PeakIdx, AllIdx               int
	PeakTime, AllTime, T0, Span   float64
	FirstJobPeak                  []int64
	Events                        []simEvent
	H2D, D2H                      []copySpan
	Err                           string
	IterSeconds, First, LastEnd   []float64
	JobPeak                       []int64
	JobPeakIdx                    []int
	JobPeakT, Stall, RecSecs      []float64
	JobAllPeak                    []int64
	Starts, Ends, RecStarts, Base [][]float64
}

func figuresOf(r *simResult, iters int) simFigures {
	f := simFigures{Peak: r.peak, FirstPeak: r.firstPeak, PeakIdx: r.peakIdx, AllIdx: r.allIdx,
		PeakTime: r.peakTime, AllTime: r.allTime, T0: r.t0, Span: r.makespan,
		FirstJobPeak: append([]int64(nil), r.firstJobPeak...), Events: append([]simEvent(nil), r.events...),
		H2D: append([]copySpan(nil), r.h2d...), D2H: append([]copySpan(nil), r.d2h...)}
	if r.err != nil {
		f.Err = r.err.Error()
	}
	for _, sj := range r.jobs {
		f.IterSeconds = append(f.IterSeconds, sj.iterSeconds())
		f.First, f.LastEnd = append(f.First, sj.first), append(f.LastEnd, sj.lastEnd)
		f.JobPeak, f.JobPeakIdx, f.JobPeakT = append(f.JobPeak, sj.peak), append(f.JobPeakIdx, sj.peakIdx), append(f.JobPeakT, sj.peakT)
		f.Stall, f.RecSecs, f.JobAllPeak = append(f.Stall, sj.stall), append(f.RecSecs, sj.recSecs), append(f.JobAllPeak, sj.allPeak)
		var base []float64
		for k := 0; k < iters; k++ {
			it := &sj.its[k]
			f.Starts = append(f.Starts, append([]float64(nil), it.start...))
			f.Ends = append(f.Ends, append([]float64(nil), it.end...))
			f.RecStarts = append(f.RecStarts, append([]float64(nil), it.recStart...))
			base = append(base, it.base, it.first, it.lastEnd)
		}
		f.Base = append(f.Base, base)
	}
	return f
}

// markCase is one of the co-located job sets the marked-run tests plan:
// joint plans from their start offsets (three ResNet-50s, H100),
// sum-of-peaks' plans with recomputes for five models of different
// lengths, and the five without plans (plans nil).
type markCase struct {
	name  string
	p     gpu.Profile
	jobs  []Job // with their start offsets
	plans []*Plan
}

func markCases(t *testing.T) []markCase {
	t.Helper()
	mix := []string{"vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"}
	var out []markCase
	for _, c := range []struct {
		name  string
		dev   string
		mode  Mode
		noPl  bool
		jobs  []string
		batch int
	}{
		{"3x resnet50 joint", "h100-80gb", Joint, false, []string{"resnet50", "resnet50", "resnet50"}, 16},
		{"mix sum-of-peaks", "rtx2080ti-11gb", SumOfPeaks, false, mix, 2},
		{"mix vanilla", "rtx2080ti-11gb", SumOfPeaks, true, mix, 2},
	} {
		p := gpu.MustProfile(c.dev)
		var jobs []Job
		for i, m := range c.jobs {
			jobs = append(jobs, Job{Name: fmt.Sprintf("%s#%d", m, i), Graph: buildGraph(t, m, c.batch)})
		}
		plans, st, err := PlanJobs(jobs, p, c.mode, Target{Tolerance: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		jobs = st.Apply(jobs, nil)
		if c.noPl {
			plans = nil
		}
		out = append(out, markCase{c.name, p, jobs, plans})
	}
	return out
}

// A marked run (one pass: the horizon's figures at the mark, then on to the
// check run) reports exactly what the two runs it replaces report, though
// the long run's first iterations differ from the short run's (in the
// short run the jobs that end early leave the engines to the others).
// Cases: joint plans from their start offsets (three ResNet-50s, H100),
// sum-of-peaks' plans with recomputes for five models of different
// lengths, and the five without plans.
func TestRunMarkedEqualsTwoRuns(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans co-located jobs and compares runs on one goroutine (skipped with -short and -race: 25 s under the race detector)")
	}
	parted := 0
	for _, c := range markCases(t) {
		p, jobs, plans := c.p, c.jobs, c.plans
		m, err := newModel(jobs, p)
		if err != nil {
			t.Fatal(err)
		}
		acts := make([][]Action, len(jobs))
		for j := range plans {
			acts[j] = plans[j].Actions
		}
		for _, it := range [][2]int{{jointHorizon, jointCheckIterations}, {1, 3}} {
			mark, iters := it[0], it[1]
			short := figuresOf(m.sim.run(acts, mark), mark)
			long := figuresOf(m.sim.run(acts, iters), iters)
			if mark == jointHorizon {
				for j, sj := range m.sim.res.jobs {
					// The long run timed at the mark, as a naive mark would.
					if x := (sj.its[mark-1].lastEnd - sj.its[0].first) / float64(mark); x != short.IterSeconds[j] {
						parted++
					}
				}
			}
			var atMark simFigures
			called := 0
			r := m.sim.runMarked(acts, mark, iters, func(r *simResult) {
				called++
				atMark = figuresOf(r, mark)
			})
			gotLong := figuresOf(r, iters)
			if called != 1 {
				t.Fatalf("%s: atMark called %d times", c.name, called)
			}
			if !reflect.DeepEqual(atMark, short) {
				t.Errorf("%s: at the mark (%d of %d iterations) the figures differ from a %d-iteration run: peak %d/%d, run peak %d/%d, iteration seconds %v/%v",
					c.name, mark, iters, mark, atMark.Peak, short.Peak, atMark.FirstPeak, short.FirstPeak, atMark.IterSeconds, short.IterSeconds)
			}
			if !reflect.DeepEqual(gotLong, long) {
				t.Errorf("%s: the marked run's %d-iteration figures differ from a separate run: peak %d/%d, run peak %d/%d, iteration seconds %v/%v",
					c.name, iters, gotLong.Peak, long.Peak, gotLong.FirstPeak, long.FirstPeak, gotLong.IterSeconds, long.IterSeconds)
			}
		}
	}
	if parted == 0 {
		t.Error("in no case does the long run's horizon differ from the short run: the cases do not exercise the fork")
	}
}

// A marked run on the executor reports exactly what the two runs it
// replaces in MeasureSeveral report (every figure, op time and timeline
// sample, with the checker on, and the devices' high-water marks), and
// fails where they fail: the short run on a device one byte smaller than
// its high-water mark, the long run where it outgrows the short one.
func TestExecuteMarkedEqualsTwoRuns(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans co-located jobs and compares runs on one goroutine (skipped with -short and -race: 24 s under the race detector)")
	}
	longFails := 0
	for _, c := range markCases(t) {
		p, jobs := c.p, append([]Job(nil), c.jobs...)
		for j := range c.plans {
			jobs[j].Plan = c.plans[j]
		}
		mark, iters := jointHorizon, jointCheckIterations
		opt := ExecOptions{Check: true, Iterations: iters, RecordTimeline: true}
		sopt := opt
		sopt.Iterations = mark
		separate := func(capacity int64) (short, long *Result, shortHigh, longHigh int64, shortErr, longErr error) {
			q := withUnboundedMemory(p)
			if capacity > 0 {
				q.MemoryBytes = capacity
			}
			s := gpu.NewSim(q, gpu.SimOptions{})
			if short, shortErr = Execute(s, jobs, sopt); shortErr != nil {
				return
			}
			shortHigh = s.HighWater()
			l := gpu.NewSim(q, gpu.SimOptions{})
			if long, longErr = Execute(l, jobs, opt); longErr == nil {
				longHigh = l.HighWater()
			}
			return
		}
		marked := func(capacity int64) (markedRun, error, error) {
			q := withUnboundedMemory(p)
			if capacity > 0 {
				q.MemoryBytes = capacity
			}
			return executeMarked(gpu.NewSim(q, gpu.SimOptions{}), jobs, opt, mark)
		}
		short, long, shortHigh, longHigh, _, _ := separate(0)
		mr, shortErr, longErr := marked(0)
		if shortErr != nil || longErr != nil {
			t.Fatalf("%s: %v, %v", c.name, shortErr, longErr)
		}
		if !reflect.DeepEqual(mr.short, short) || mr.shortHigh != shortHigh {
			t.Errorf("%s: at the mark: device peak %d/%d, high-water %d/%d, jobs %+v / %+v", c.name, mr.short.PeakBytes, short.PeakBytes, mr.shortHigh, shortHigh, mr.short.Jobs[0], short.Jobs[0])
		}
		if !reflect.DeepEqual(mr.long, long) || mr.longHigh != longHigh {
			t.Errorf("%s: the long run: device peak %d/%d, high-water %d/%d", c.name, mr.long.PeakBytes, long.PeakBytes, mr.longHigh, longHigh)
		}
		if short.Jobs[len(jobs)-1].RunSeconds == long.Jobs[len(jobs)-1].RunSeconds && c.name != "3x resnet50 joint" {
			t.Logf("%s: the last job's first %d iterations end as in the long run", c.name, mark)
		}
		// Failures: the same error from the same run.
		caps := []int64{shortHigh - 1}
		if longHigh > shortHigh {
			caps = append(caps, shortHigh)
			longFails++
		}
		for _, capacity := range caps {
			_, _, _, _, se, le := separate(capacity)
			_, mse, mle := marked(capacity)
			str := func(err error) string {
				if err == nil {
					return ""
				}
				return err.Error()
			}
			if str(se) != str(mse) || str(le) != str(mle) || (se == nil && le == nil) {
				t.Errorf("%s on %d bytes: short run %v / marked %v; long run %v / marked %v", c.name, capacity, se, mse, le, mle)
			}
		}
	}
	if longFails == 0 {
		t.Log("no case outgrows its horizon's high-water mark over the check run: the long run's failure is not exercised")
	}
}
