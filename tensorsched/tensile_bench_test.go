package tensorsched

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// benchJobs builds copies of model's batch-16 training graph as jobs on an
// RTX 2080 Ti.
func benchJobs(b *testing.B, model string, copies int) ([]Job, gpu.Profile) {
	g, err := zoo.Build(model, workload.Train, 16, zoo.Options{})
	if err != nil {
		b.Fatal(err)
	}
	jobs := make([]Job, copies)
	for i := range jobs {
		jobs[i] = Job{Graph: g}
	}
	return jobs, gpu.MustProfile("rtx2080ti-11gb")
}

func benchPlan(b *testing.B, model string, copies int) {
	jobs, p := benchJobs(b, model, copies)
	g := jobs[0].Graph
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if copies == 1 {
			if _, _, err := PlanTensile(g, p, Target{Tolerance: 0.05}); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if _, _, err := planTogether(jobs, p, Target{Tolerance: 0.05}, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanResNet50 plans one ResNet-50 batch-16 training graph.
func BenchmarkPlanResNet50(b *testing.B) { benchPlan(b, "resnet50", 1) }

// BenchmarkPlanDenseNet121 plans one DenseNet-121 batch-16 training graph.
func BenchmarkPlanDenseNet121(b *testing.B) { benchPlan(b, "densenet121", 1) }

// benchPlanBatch plans one model's training graph at batch size batch on
// an RTX 2080 Ti at the MSR table's tolerance for it.
func benchPlanBatch(b *testing.B, model string, batch int) {
	g, err := zoo.Build(model, workload.Train, batch, zoo.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := gpu.MustProfile("rtx2080ti-11gb")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := PlanTensile(g, p, Target{Tolerance: paperTolerance[model]}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanDenseNet121B8 plans DenseNet-121 at batch 8 on an RTX 2080
// Ti at 16 % (the keeping path's longest greedy).
func BenchmarkPlanDenseNet121B8(b *testing.B) { benchPlanBatch(b, "densenet121", 8) }

// BenchmarkPlanInceptionV4 plans Inception-v4 at batch 16 on an RTX 2080
// Ti at 16 %.
func BenchmarkPlanInceptionV4(b *testing.B) { benchPlanBatch(b, "inception-v4", 16) }

// BenchmarkPlanFourJobs plans four co-located ResNet-50 batch-16 training
// jobs jointly.
func BenchmarkPlanFourJobs(b *testing.B) { benchPlan(b, "resnet50", 4) }

func benchPlanJobs(b *testing.B, mode Mode, copies int) {
	benchPlanJobsModel(b, "resnet50", mode, copies)
}

// benchPlanJobsModel plans copies of model's batch-16 training graph on an
// RTX 2080 Ti with PlanJobs in mode at 10 % tolerance.
func benchPlanJobsModel(b *testing.B, model string, mode Mode, copies int) {
	jobs, p := benchJobs(b, model, copies)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := PlanJobs(jobs, p, mode, Target{Tolerance: 0.1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanJobsJoint plans four co-located ResNet-50 batch-16 training
// jobs with PlanJobs in joint mode (offsets, combined-timeline greedy over
// the horizon, the turns candidates, every candidate checked), as the
// scheduler does.
func BenchmarkPlanJobsJoint(b *testing.B) { benchPlanJobs(b, Joint, 4) }

// BenchmarkPlanJobsSumOfPeaks is the same in sum-of-peaks mode.
func BenchmarkPlanJobsSumOfPeaks(b *testing.B) { benchPlanJobs(b, SumOfPeaks, 4) }

// BenchmarkPlanJobsJointInception plans four co-located Inception-v3
// batch-16 training jobs with PlanJobs in joint mode: a model with
// concatenations, which PlanTensile's keeping path applies to (PlanJobs'
// solo plans do not take it yet), as BenchmarkPlanJobsJoint's ResNet-50
// does not.
func BenchmarkPlanJobsJointInception(b *testing.B) { benchPlanJobsModel(b, "inception-v3", Joint, 4) }

// randomWorstSeeds are the FuzzPlanJobsRandomGraphs inputs (seed, no
// data) whose joint plans simulate the most ops of seeds 1 to 2000: three
// jobs each, two random training graphs of 39 to 68 ops and a copy of one
// of them, on an H100 (804, 482) or an RTX 2080 Ti (1353). Each plan runs
// about 400 to 600 simulations of the jobs together over 4 to 40
// iterations (offset trials and their time references, the greedy on the
// combined timeline, the candidates' checks), against a median of about
// 170 over those seeds.
var randomWorstSeeds = []uint64{804, 1353, 482}

// BenchmarkPlanJobsJointRandomWorst plans each of randomWorstSeeds' jobs
// with PlanJobs in joint mode, for the input's target.
func BenchmarkPlanJobsJointRandomWorst(b *testing.B) {
	type input struct {
		jobs []Job
		p    gpu.Profile
		tg   Target
	}
	var in []input
	for _, seed := range randomWorstSeeds {
		jobs, p, tg, _, err := fuzzJobs(newFuzzSource(seed, nil))
		if err != nil {
			b.Fatal(err)
		}
		in = append(in, input{jobs, p, tg})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, x := range in {
			if _, _, err := PlanJobs(x.jobs, x.p, Joint, x.tg); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkSimulateFourJobs simulates four co-located ResNet-50 batch-16
// jobs running their solo TENSILE plans from spread start offsets for the
// joint horizon: the unit of work of joint planning's greedy.
func BenchmarkSimulateFourJobs(b *testing.B) {
	g, err := zoo.Build("resnet50", workload.Train, 16, zoo.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := gpu.MustProfile("rtx2080ti-11gb")
	plan, _, err := PlanTensile(g, p, Target{Tolerance: 0.1})
	if err != nil {
		b.Fatal(err)
	}
	jobs := make([]Job, 4)
	for i := range jobs {
		jobs[i] = Job{Graph: g, StartOffset: 0.015 * float64(i)}
	}
	m, err := newModel(jobs, p)
	if err != nil {
		b.Fatal(err)
	}
	plans := [][]Action{plan.Actions, plan.Actions, plan.Actions, plan.Actions}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.sim.steadyN(plans, jointHorizon); err != nil {
			b.Fatal(err)
		}
	}
}

// runtimeFive is the model and batch of each of the five jobs
// BenchmarkPlanJobsRuntimeFive plans (TestPlanFingerprints records the
// same set).
var runtimeFive = []struct {
	model string
	batch int
}{{"gpt2-small", 32}, {"gpt2-small", 32}, {"bert-base", 32}, {"resnet50", 64}, {"mlp", 64}}

// BenchmarkPlanJobsRuntimeFive plans five co-located jobs on an H100 as the
// runtime's device actor does on every job join or leave: two GPT-2 small
// batch-32 jobs, BERT-base, ResNet-50 and an MLP, each held to its minimum
// budget at 10 % tolerance, jointly within the sum of the budgets.
func BenchmarkPlanJobsRuntimeFive(b *testing.B) {
	p := gpu.MustProfile("h100-80gb")
	var jobs []Job
	var sum int64
	for i, s := range runtimeFive {
		g, err := zoo.Build(s.model, workload.Train, s.batch, zoo.Options{})
		if err != nil {
			b.Fatal(err)
		}
		min, _, err := MinBudget(g, p, 0.1)
		if err != nil {
			b.Fatal(err)
		}
		jobs = append(jobs, Job{Name: fmt.Sprintf("%s-%d", s.model, i), Graph: g, Budget: min})
		sum += min
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := PlanJobs(jobs, p, Joint, Target{Budget: sum}); err != nil && !errors.Is(err, ErrBudget) {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanJobsJointMix plans the five-model mix (VGG-16,
// Inception-v3, Inception-v4, ResNet-50, DenseNet-121 at batch 2) with
// PlanJobs in joint mode on an RTX 2080 Ti at 10 %: jobs of different
// iteration lengths, whose turns are paced by keys (turnKeys, the
// candidates over pacedIterations, the greedy on the paced timeline).
func BenchmarkPlanJobsJointMix(b *testing.B) {
	var jobs []Job
	for _, model := range []string{"vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"} {
		g, err := zoo.Build(model, workload.Train, 2, zoo.Options{})
		if err != nil {
			b.Fatal(err)
		}
		jobs = append(jobs, Job{Name: model, Graph: g})
	}
	p := gpu.MustProfile("rtx2080ti-11gb")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, st, err := PlanJobs(jobs, p, Joint, Target{Tolerance: 0.1}); err != nil || st.TurnKeys == nil {
			b.Fatalf("paced turns %v: %v", st.TurnKeys != nil, err)
		}
	}
}
