package tensorsched

import (
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
