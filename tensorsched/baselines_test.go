package tensorsched

import (
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// TestBaselinesPassChecker runs every baseline on every zoo model (training,
// batch 16) on two devices with the correctness checker, and checks that
// every baseline that plans anything saves memory (the MLP excepted: its
// peak is its parameters and optimizer state). On the five CNNs of
// TENSILE's evaluation it also checks the shape of each method: vDNN-all,
// which offloads every saved activation and waits for each offload, saves
// at least half the peak where activations dominate it (all but VGG16,
// whose peak is mostly parameters, optimizer state and weight gradients);
// checkpointing recomputes each segment once, so it costs well under one
// extra iteration.
func TestBaselinesPassChecker(t *testing.T) {
	cnn := map[string]bool{}
	for _, m := range BenchModels {
		cnn[m] = true
	}
	for _, dev := range []string{"rtx2080ti-11gb", "h100-80gb"} {
		p := gpu.MustProfile(dev)
		big := withUnboundedMemory(p)
		for _, m := range zoo.Models() {
			g, err := zoo.Build(m, workload.Train, 16, zoo.Options{})
			if err != nil {
				t.Fatal(err)
			}
			van, err := Execute(gpu.NewSim(big, gpu.SimOptions{}), []Job{{Graph: g}}, ExecOptions{Check: true})
			if err != nil {
				t.Fatalf("%s %s vanilla: %v", dev, m, err)
			}
			for _, name := range BaselineNames() {
				b, _ := LookupBaseline(name)
				plan := b(g, p)
				if plan.Policy != name {
					t.Errorf("%s: plan policy %q", name, plan.Policy)
				}
				res, err := Execute(gpu.NewSim(big, gpu.SimOptions{}), []Job{{Graph: g, Plan: plan}}, ExecOptions{Check: true})
				if err != nil {
					t.Errorf("%s %s %s: %v", dev, m, name, err)
					continue
				}
				j := res.Jobs[0]
				mt := ComputeMetrics(van.Jobs[0].PeakBytes, j.PeakBytes, van.Jobs[0].IterationSeconds, j.IterationSeconds)
				t.Logf("%-14s %-13s %-10s actions %4d  MSR %.3f  EOR %.3f  CBR %6.2f  swapped %s  recomputed %d",
					dev, m, name, len(plan.Actions), mt.MSR, mt.EOR, mt.CBR, gpu.FormatBytes(j.SwappedOutBytes), j.RecomputedOps)
				if len(plan.Actions) > 0 && mt.MSR <= 0 && m != "mlp" {
					t.Errorf("%s %s %s: %d actions but no memory saved (peak %d, vanilla %d)", dev, m, name, len(plan.Actions), j.PeakBytes, van.Jobs[0].PeakBytes)
				}
				if name == "none" && (mt.MSR != 0 || mt.EOR != 0) {
					t.Errorf("%s %s none: MSR %v EOR %v, want 0", dev, m, mt.MSR, mt.EOR)
				}
				if !cnn[m] {
					continue
				}
				if name == "vdnn-all" && m != "vgg16" && mt.MSR < 0.5 {
					t.Errorf("%s %s vdnn-all: MSR %.3f, want at least 0.5", dev, m, mt.MSR)
				}
				if name == "checkpoint" && (mt.EOR > 0.6 || mt.MSR < 0.1) {
					t.Errorf("%s %s checkpoint: MSR %.3f EOR %.3f, want MSR at least 0.1 at EOR at most 0.6", dev, m, mt.MSR, mt.EOR)
				}
			}
		}
	}
}

// TestCheckpointRecomputesEachSegmentOnce: every recompute of the
// checkpoint plan re-runs a forward op; every dropped activation is
// recomputed exactly once; and a segment comes back at one point, so there
// are far fewer recompute points than dropped tensors.
func TestCheckpointRecomputesEachSegmentOnce(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	for _, m := range BenchModels {
		g, err := zoo.Build(m, workload.Train, 16, zoo.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lt := g.Lifetimes()
		plan := PlanCheckpoint(g, p)
		recomputed := map[int]int{}
		points := map[int]bool{}
		var dropped []int
		for _, a := range plan.Actions {
			switch a.Kind {
			case Recompute:
				if d := lt[a.Tensor].Def; g.Ops[d].Phase != workload.Forward {
					t.Errorf("%s: recompute of tensor %d re-runs %s op %d", m, a.Tensor, g.Ops[d].Phase, d)
				}
				recomputed[a.Tensor]++
				points[a.Before] = true
			case Drop:
				dropped = append(dropped, a.Tensor)
			default:
				t.Errorf("%s: checkpoint plans a %s", m, a.Kind)
			}
		}
		for _, d := range dropped {
			if recomputed[d] != 1 {
				t.Errorf("%s: dropped tensor %d (%s) recomputed %d times, want once", m, d, g.Tensors[d].Name, recomputed[d])
			}
		}
		if len(points) < 2 || 2*len(points) > len(dropped) {
			t.Errorf("%s: %d dropped tensors come back at %d points; want segments", m, len(dropped), len(points))
		}
	}
}

// TestBaselinesColocated runs every baseline on co-located jobs (three
// copies of ResNet-50 at batch 16, the five CNNs together at batch 2) with
// the checker: one job's recomputes and frees interleave with the others'
// ops on the shared engines, and every plan must still run correctly and
// save memory.
func TestBaselinesColocated(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	big := withUnboundedMemory(p)
	cases := []struct {
		name   string
		models []string
		batch  int
	}{
		{"resnet50 x3", []string{"resnet50", "resnet50", "resnet50"}, 16},
		{"five CNNs", BenchModels, 2},
	}
	for _, c := range cases {
		jobs := make([]Job, len(c.models))
		for i, m := range c.models {
			g, err := zoo.Build(m, workload.Train, c.batch, zoo.Options{})
			if err != nil {
				t.Fatal(err)
			}
			jobs[i] = Job{Graph: g}
		}
		van, err := Execute(gpu.NewSim(big, gpu.SimOptions{}), jobs, ExecOptions{Check: true})
		if err != nil {
			t.Fatalf("%s vanilla: %v", c.name, err)
		}
		for _, name := range BaselineNames() {
			b, _ := LookupBaseline(name)
			run := append([]Job(nil), jobs...)
			for i := range run {
				run[i].Plan = b(run[i].Graph, p)
			}
			res, err := Execute(gpu.NewSim(big, gpu.SimOptions{}), run, ExecOptions{Check: true})
			if err != nil {
				t.Errorf("%s %s: %v", c.name, name, err)
				continue
			}
			mt := ComputeMetrics(van.PeakBytes, res.PeakBytes, van.Seconds, res.Seconds)
			t.Logf("%-11s %-10s MSR %.3f EOR %.3f", c.name, name, mt.MSR, mt.EOR)
			if name != "none" && mt.MSR <= 0 {
				t.Errorf("%s %s: MSR %.3f, want memory saved", c.name, name, mt.MSR)
			}
		}
	}
}
