package actors

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
)

// needsPlanner is a RoundPlanner whose round holds only when every job
// named in need has at least that budget; otherwise the first such job
// misses its budget. It is named "baselines" so plan does not fall back.
type needsPlanner struct {
	Planner
	need    map[string]int64
	budgets [][]int64 // the budgets of each round, in order
}

func (p *needsPlanner) Name() string { return "baselines" }

func (p *needsPlanner) PlanRound(_ gpu.Profile, jobs []tensorsched.Job) (*tensorsched.Result, error) {
	bs := make([]int64, len(jobs))
	for i, j := range jobs {
		bs[i] = j.Budget
	}
	p.budgets = append(p.budgets, bs)
	res := &tensorsched.Result{}
	for _, j := range jobs {
		if n, ok := p.need[j.Name]; ok && j.Budget < n {
			return nil, &tensorsched.BudgetError{Job: j.Name, Budget: j.Budget, Request: n}
		}
		res.Jobs = append(res.Jobs, tensorsched.JobResult{Name: j.Name, PeakBytes: j.Budget})
	}
	return res, nil
}

// A partial raise is bounded by the room the other jobs' minimums leave;
// once the newest job is left out that room has grown, and the job must
// be free to be raised again (to its vanilla peak, now that it fits)
// rather than keep the smaller minimum and cost another job its place.
// On 100 MiB: a (min 30, peak 60, needs 55), b (min 20, peak 80, priority
// 1) and c (min 30, peak 40, newest). With all three a's peak does not
// fit beside b's and c's minimums; raised to the 50 MiB left it still
// misses, so c is left out. Beside b alone a's peak fits (60 + 20), and
// the plan holds with a at 60 and b at 40: only c is dropped.
func TestDevicePlanRaisesAgainAfterDroppingNewest(t *testing.T) {
	const mib = 1 << 20
	d := newTestDevice(t, testGPU)
	d.cfg.Profile.MemoryBytes = 100 * mib
	np := &needsPlanner{Planner: DefaultPlanner(), need: map[string]int64{"a": 55 * mib}}
	d.cfg.Planner = np
	pred := NewZooPredictor(DefaultPlanner())
	var snap []planJob
	for _, j := range []struct {
		id        string
		min, peak int64
		prio      int32
	}{{"a", 30, 60, 0}, {"b", 20, 80, 1}, {"c", 30, 40, 0}} {
		spec := &pb.JobSpec{Id: j.id, Model: "mlp", Kind: "train", Batch: 512, Tolerance: 0.2, Priority: j.prio}
		p, err := pred.Predict(spec, testGPU)
		if err != nil {
			t.Fatal(err)
		}
		snap = append(snap, planJob{id: j.id, spec: spec, demand: &pb.Demand{MinBudget: j.min * mib, VanillaPeak: j.peak * mib}, pred: p})
	}
	out := d.plan(snap, "test")
	var ids []string
	for _, j := range out.jobs {
		ids = append(ids, fmt.Sprintf("%s=%dMiB", j.id, j.budget/mib))
	}
	if !slices.Equal(out.dropped, []string{"c"}) || len(out.jobs) != 2 {
		t.Fatalf("plan kept %v, dropped %v (rounds' budgets %v); want a and b kept (a at its 60 MiB vanilla peak), only c dropped", ids, out.dropped, np.budgets)
	}
	if out.jobs[0].budget != 60*mib || out.jobs[1].budget != 40*mib {
		t.Fatalf("budgets %v; want a=60MiB b=40MiB", ids)
	}
}
