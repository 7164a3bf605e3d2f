package actors

import (
	"testing"

	"github.com/gpusched/gpusched/actors/pb"
)

// BenchmarkDevicePlanDemoSet times one planning of five of the demo's jobs
// on one H100 (GPT-2 b32, VGG16 b256, Inception-v3 b192, DenseNet-121 b128,
// BERT b256 at their arbitrated budgets: budgets, TENSILE's joint and
// sum-of-peaks tries, the checking runs, the kernel dispatcher), as a
// device plans them when they are placed together. cold: a new planner
// (empty PlanMemo) each time; again: the same set planned again with the
// planner that planned it (as after a re-plan that changed no budget).
//
//	go test ./actors/ -run '^$' -bench BenchmarkDevicePlanDemoSet -benchtime 3x
func BenchmarkDevicePlanDemoSet(b *testing.B) {
	specs := []*pb.JobSpec{
		{Id: "gpt2-b", Model: "gpt2-small", Kind: "train", Batch: 32, Priority: 2, Tolerance: .25},
		{Id: "vgg16-a", Model: "vgg16", Kind: "train", Batch: 256, Priority: 5, Tolerance: .2},
		{Id: "inception-a", Model: "inception-v3", Kind: "train", Batch: 192, Priority: 2, Tolerance: .25},
		{Id: "densenet-a", Model: "densenet121", Kind: "train", Batch: 128, Priority: 1, Tolerance: .25},
		{Id: "bert-b", Model: "bert-base", Kind: "train", Batch: 256, Priority: 2, Tolerance: .25},
	}
	d := newTestDevice(b, "h100-80gb")
	var snap []planJob
	for _, s := range specs {
		pred, err := d.cfg.Predictor.Predict(s, d.cfg.Profile.Name)
		if err != nil {
			b.Fatal(err)
		}
		snap = append(snap, planJob{id: s.Id, spec: s, demand: pred.Demand, pred: pred})
	}
	check := func(out *planDone) {
		if len(out.jobs) != len(snap) || out.err != nil {
			b.Fatalf("planned %d of %d jobs: %v", len(out.jobs), len(snap), out.err)
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			d.cfg.Planner = DefaultPlanner()
			check(d.plan(snap, "bench"))
		}
	})
	b.Run("again", func(b *testing.B) {
		d.cfg.Planner = DefaultPlanner()
		check(d.plan(snap, "bench"))
		for b.Loop() {
			check(d.plan(snap, "bench"))
		}
	})
}
