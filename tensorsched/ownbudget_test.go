package tensorsched

import (
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// The runtime plans a GPU's jobs in sum-of-peaks mode (its second try
// after joint) with each job's own budget, arbitrated from the jobs'
// MinBudget answers, and the sum of those budgets as the total. Each job
// must be planned to its own budget:
//   - not to a share of the total in proportion to vanilla peaks: VGG16's
//     minimum is most of its peak (fc1's Adam step alone holds 1.5 GiB),
//     so beside BERT (minimum a quarter of its peak) its proportional
//     share is below anything it can reach, and the plan failed although
//     each budget was reachable;
//   - as MinBudget planned it when the cheaper several-job solo planner
//     misses it: DenseNet-121 at its 25 % minimum (277 MiB) stopped at
//     508 MiB.
func TestSumOfPeaksPlansJobsToTheirOwnBudgets(t *testing.T) {
	if raceEnabled {
		t.Skip("plans jobs to their own budgets one after another: 28 s under the race detector")
	}
	p := gpu.MustProfile("h100-80gb")
	type spec struct {
		model string
		batch int
		tol   float64
	}
	for _, c := range []struct {
		name string
		jobs []spec
	}{
		{"VGG16 beside BERT", []spec{{"vgg16", 16, 0}, {"bert-base", 64, 0.25}}},
		{"DenseNet-121 at its minimum", []spec{{"densenet121", 16, 0.25}, {"bert-base", 64, 0.25}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var jobs []Job
			var total int64
			for _, s := range c.jobs {
				g, err := zoo.Build(s.model, workload.Train, s.batch, zoo.Options{})
				if err != nil {
					t.Fatal(err)
				}
				mn, _, err := MinBudget(g, p, s.tol)
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, Job{Name: s.model, Graph: g, Budget: mn})
				total += mn
			}
			_, st, err := PlanJobs(jobs, p, SumOfPeaks, Target{Budget: total})
			if err != nil {
				t.Fatalf("sum-of-peaks at the jobs' own budgets (total %s): %v", gpu.FormatBytes(total), err)
			}
			for i, j := range jobs {
				if st.JobAlonePeakBytes[i] > j.Budget {
					t.Errorf("%s planned to peak at %s alone, over its own budget %s", j.Name, gpu.FormatBytes(st.JobAlonePeakBytes[i]), gpu.FormatBytes(j.Budget))
				}
			}
			if st.ReservedBytes > total {
				t.Errorf("reserved %s, over the total %s", gpu.FormatBytes(st.ReservedBytes), gpu.FormatBytes(total))
			}
		})
	}
}
