package tensorsched

import (
	"math"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// The scheduler re-plans on every event that changes what fits, and only then.
func TestSchedulerReplans(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	s := NewScheduler(p, Joint, 0.2)
	a := buildGraph(t, "resnet50", 8)
	b := buildGraph(t, "mlp", 64)
	van := execute(t, p, []Job{{Graph: a}})
	steps := []struct {
		name   string
		do     func() (bool, error)
		replan bool
	}{
		{"add a", func() (bool, error) { return true, s.AddJob("a", a, van.PeakBytes*3/4) }, true},
		{"add b", func() (bool, error) { return true, s.AddJob("b", b, 0) }, true},
		{"same budget", func() (bool, error) { return false, s.SetBudget("a", van.PeakBytes*3/4) }, false},
		{"budget", func() (bool, error) { return true, s.SetBudget("a", van.PeakBytes*2/3) }, true},
		{"iteration as predicted", func() (bool, error) {
			return s.ReportIteration("a", nil, p.GraphSeconds(a))
		}, false},
		{"iteration twice as slow", func() (bool, error) {
			return s.ReportIteration("a", nil, 2*p.GraphSeconds(a))
		}, true},
		{"new batch", func() (bool, error) { return true, s.SetBatch("b", buildGraph(t, "mlp", 128)) }, true},
		// The same batch again (a graph built anew): no re-plan.
		{"same batch", func() (bool, error) { return false, s.SetBatch("b", buildGraph(t, "mlp", 128)) }, false},
		{"remove b", func() (bool, error) { return true, s.RemoveJob("b") }, true},
	}
	for _, st := range steps {
		before := s.Replans()
		reported, err := st.do()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := s.Replans() > before; got != st.replan || (reported != got) {
			t.Errorf("%s: replanned %v (reported %v), want %v", st.name, got, reported, st.replan)
		}
		// What the scheduler hands the device runs within every budget.
		jobs := s.Jobs()
		if _, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), jobs, ExecOptions{Check: true}); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	// A job's measured profile survives SetBatch with its own graph: a's
	// iteration was reported twice as slow above.
	_, ja := s.find("a")
	measured := ja.prof.Measured
	if err := s.SetBatch("a", buildGraph(t, "resnet50", 8)); err != nil || ja.prof.Measured != measured || measured == 0 {
		t.Errorf("SetBatch to the same batch: err %v, measured iterations %d → %d; want the profile kept", err, measured, ja.prof.Measured)
	}
	if _, ok := s.Plans()["a"]; !ok || len(s.Plans()) != 1 {
		t.Errorf("plans %v", s.Plans())
	}
	if err := s.AddJob("a", a, 0); err == nil {
		t.Error("adding a job twice should fail")
	}
	if err := s.RemoveJob("nope"); err == nil {
		t.Error("removing an unknown job should fail")
	}
}

// A change the scheduler cannot plan at all (a broken graph, an unknown
// mode) fails and leaves the scheduler as it was: the job that could not
// be added is not on the GPU, the old graph and mode stay, and the jobs
// keep planning.
func TestSchedulerFailedChangeLeavesStateAlone(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	s := NewScheduler(p, Joint, 0.2)
	a := buildGraph(t, "mlp", 64)
	if err := s.AddJob("a", a, 0); err != nil {
		t.Fatal(err)
	}
	broken := a.Clone()
	broken.Ops[0].Inputs = append(broken.Ops[0].Inputs, len(broken.Tensors)) // no such tensor
	planA := s.Plans()["a"]
	if err := s.AddJob("b", broken, 0); err == nil {
		t.Fatal("adding a job with a broken graph should fail")
	}
	if n := len(s.Jobs()); n != 1 {
		t.Errorf("after a failed AddJob the scheduler holds %d jobs, want 1", n)
	}
	if s.Err() != nil {
		t.Errorf("after a failed AddJob, Err = %v, want the last plan's (nil)", s.Err())
	}
	if err := s.AddJob("b", buildGraph(t, "mlp", 32), 0); err != nil {
		t.Errorf("adding b with a good graph after the failed attempt: %v", err)
	}
	if err := s.SetBatch("a", broken); err == nil {
		t.Fatal("a broken graph should fail")
	}
	if jobs := s.Jobs(); jobs[0].Graph != a {
		t.Error("a failed SetBatch replaced the job's graph")
	}
	if err := s.SetMode(Mode(9)); err == nil {
		t.Fatal("an unknown mode should fail")
	}
	if s.Mode() != Joint {
		t.Errorf("after a failed SetMode the mode is %v, want %v", s.Mode(), Joint)
	}
	if err := s.SetBudget("a", 1<<40); err != nil {
		t.Errorf("re-planning after the failed changes: %v", err)
	}
	if s.Plans()["a"] == nil || planA == nil {
		t.Error("job a lost its plan")
	}
	if _, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), s.Jobs(), ExecOptions{Check: true}); err != nil {
		t.Error(err)
	}
}

// A measured iteration time is compared with the iteration time the plan
// predicted for the job, co-located with the others (their kernels share
// the compute engine) and with the plan's stalls: an iteration that runs
// exactly as planned changes nothing and triggers no re-plan, and one 70 %
// slower than planned (the moving average: 35 %) does.
func TestSchedulerReportIterationAsPlanned(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	s := NewScheduler(p, Joint, 0.2)
	for _, name := range []string{"a", "b"} {
		if err := s.AddJob(name, buildGraph(t, "mlp", 64), 0); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	res, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), s.Jobs(), ExecOptions{Check: true, Iterations: st.Horizon})
	if err != nil {
		t.Fatal(err)
	}
	for j, name := range []string{"a", "b"} {
		before := s.Jobs()[j].Seconds
		measured := res.Jobs[j].IterationSeconds
		replanned, err := s.ReportIteration(name, nil, measured)
		if err != nil {
			t.Fatal(err)
		}
		if replanned {
			t.Errorf("job %s ran as planned (%.6fs, predicted %.6fs, op times add up to %.6fs) and was re-planned",
				name, measured, st.JobIterationSeconds[j], sum(before))
		}
		if after := s.Jobs()[j].Seconds; math.Abs(sum(after)/sum(before)-1) > 1e-6 {
			t.Errorf("job %s ran as planned, but its op times moved from %.6fs to %.6fs", name, sum(before), sum(after))
		}
	}
	replans := s.Replans()
	replanned, err := s.ReportIteration("a", nil, 1.7*s.Stats().JobIterationSeconds[0])
	if err != nil || !replanned || s.Replans() != replans+1 {
		t.Errorf("an iteration 70%% slower than planned: replanned %v, err %v", replanned, err)
	}
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}
