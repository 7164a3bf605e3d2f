package placement

import (
	"maps"
	"math"
	"slices"
	"testing"
)

func nearRel(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(math.Abs(b), 1e-12) }

// TestStepShapeComputeCurve: the compute curve is the median compute time
// over the shapes reported at each per-GPU batch (the lower of two),
// linear between them and, beyond them, the nearest end scaled by the
// model's line; with nothing reported it is the line.
func TestStepShapeComputeCurve(t *testing.T) {
	seen := map[[2]int][]Observation{
		{1, 1}: {{Nodes: 1, GPUs: 1, LocalBatch: 32, StepTime: 0.05}, {Nodes: 1, GPUs: 1, LocalBatch: 256, StepTime: 0.2}},
		{1, 2}: {{Nodes: 1, GPUs: 2, LocalBatch: 32, StepTime: 0.07, SyncTime: 0.03}, {Nodes: 1, GPUs: 2, LocalBatch: 64, StepTime: 0.1, SyncTime: 0.02}},
	}
	sh := newStepShape(seen)
	want := []compPt{{32, 0.04}, {64, 0.08}, {256, 0.2}}
	if len(sh.comp) != len(want) {
		t.Fatalf("compute curve %v, want %v", sh.comp, want)
	}
	for i := range want {
		if sh.comp[i].l != want[i].l || !nearRel(sh.comp[i].c, want[i].c, 1e-12) {
			t.Fatalf("compute curve %v, want %v", sh.comp, want)
		}
	}
	line := ThroughputModel{Known: true, A: 0.01, B: 0.001}
	j := &onesJob{model: line, step: sh}
	for _, c := range []struct{ l, want float64 }{
		{32, 0.04},
		{48, 0.06},                   // halfway from 32 to 64
		{160, 0.08 + 0.5*(0.2-0.08)}, // halfway from 64 to 256
		{512, 0.2 * 0.522 / 0.266},   // beyond: the line's ratio
		{16, 0.04 * 0.026 / 0.042},   // below: the line's ratio
		{256, 0.2},
	} {
		if got := j.computeAt(c.l); !nearRel(got, c.want, 1e-12) {
			t.Errorf("computeAt(%v) = %v, want %v", c.l, got, c.want)
		}
	}
	bare := &onesJob{model: line}
	if got := bare.computeAt(100); !nearRel(got, line.Compute(100), 1e-12) {
		t.Errorf("nothing reported: computeAt(100) = %v, want the line's %v", got, line.Compute(100))
	}
}

// overlapReports returns reports at per-GPU batches ls of a shape whose
// all-reduce takes a seconds and overlaps compute 0.01 + 0.001 l by
// exponent g.
func overlapReports(nodes, gpus int, a, g float64, ls ...int) []Observation {
	var obs []Observation
	for _, l := range ls {
		c := 0.01 + 0.001*float64(l)
		s := overlapStep(c, a, g)
		obs = append(obs, Observation{Nodes: nodes, GPUs: gpus, LocalBatch: l, StepTime: s, SyncTime: s - c})
	}
	return obs
}

// TestFitGamma: the exponent that generated the reports is the one
// chosen; 1 where no shape has two reports.
func TestFitGamma(t *testing.T) {
	for _, g := range overlapGammas {
		seen := map[[2]int][]Observation{
			{1, 4}:  overlapReports(1, 4, 0.05, g, 16, 64, 256),
			{4, 16}: overlapReports(4, 16, 0.3, g, 32, 128),
			{2, 8}:  overlapReports(2, 8, 0.2, g, 64),
		}
		if got := fitGamma(seen); got != g {
			t.Errorf("reports made with γ = %v: fitGamma = %v", g, got)
		}
	}
	single := map[[2]int][]Observation{{1, 4}: overlapReports(1, 4, 0.05, 2.5, 64), {2, 8}: overlapReports(2, 8, 0.2, 2.5, 16)}
	if got := fitGamma(single); got != 1 {
		t.Errorf("one report per shape: fitGamma = %v, want 1", got)
	}
	if got := fitGamma(nil); got != 1 {
		t.Errorf("no reports: fitGamma = %v, want 1", got)
	}
}

// TestSeenStepOverlap: a shape reported at large per-GPU batches only is
// predicted at a small one from its all-reduce under the fitted overlap
// (exactly, for reports that follow the overlap form), where adding the
// wait reported at the nearest batch would put it 25 % too fast; between
// two reports the prediction stays linear; with γ = 1 it is the additive
// one. Accumulating micro-steps repeats the compute only.
func TestSeenStepOverlap(t *testing.T) {
	const g, a = 2.5, 0.3
	seen := map[[2]int][]Observation{
		{8, 32}: overlapReports(8, 32, a, g, 128, 256),
		{1, 4}:  overlapReports(1, 4, 0.05, g, 16, 32, 64, 128, 256),
	}
	line := ThroughputModel{Known: true, A: 0.01, B: 0.001}
	j := &onesJob{model: line, step: newStepShape(seen)}
	if j.step.gamma != g {
		t.Fatalf("γ = %v, want %v", j.step.gamma, g)
	}
	obs := seen[[2]int{8, 32}]
	c16 := 0.01 + 0.001*16
	truth := overlapStep(c16, a, g)
	step, sync := j.seenStep(obs, 16)
	if !nearRel(step, truth, 1e-9) || !nearRel(sync, truth-c16, 1e-9) {
		t.Errorf("at 16 per GPU: step %v, sync %v; want %v, %v", step, sync, truth, truth-c16)
	}
	additive := obs[0].SyncTime + c16
	if !(additive < 0.75*truth) {
		t.Fatalf("the test's premise: the additive prediction %v is not 25 %% below %v", additive, truth)
	}
	mid, _ := j.seenStep(obs, 192)
	if want := (obs[0].StepTime + obs[1].StepTime) / 2; !nearRel(mid, want, 1e-12) {
		t.Errorf("between reports: %v, want %v", mid, want)
	}
	j.step.gamma = 1
	if step, sync := j.seenStep(obs, 16); !nearRel(step, additive, 1e-12) || !nearRel(sync, obs[0].SyncTime, 1e-12) {
		t.Errorf("γ = 1: step %v, sync %v; want %v, %v", step, sync, additive, obs[0].SyncTime)
	}
	j.step.gamma = g
	// Through rate: an iteration of two micro-steps of 16 on (8, 32)
	// takes the step plus one more compute.
	j.s = &JobState{BaseBatch: 1, SampleProgress: true}
	j.seen = seen
	j.micro, j.steps, j.minLocal = 16, 2, 1
	got := (&onesCtx{}).rate(j, 8, 32, 32)
	if want := float64(32*32) / (truth + c16); !nearRel(got, want, 1e-9) {
		t.Errorf("rate at 2 × 16 per GPU on 32 GPUs: %v, want %v", got, want)
	}
}

// TestONESLearnsStepShape: the compute curve and the overlap exponent come
// from the jobs' reports through learn, by application.
func TestONESLearnsStepShape(t *testing.T) {
	o := NewONES(ONESConfig{Seed: 1})
	obs := append(overlapReports(1, 4, 0.05, 2, 16, 64), overlapReports(2, 8, 0.2, 2, 32, 128)...)
	jobs := []JobState{
		{ID: "a", App: "x", BaseBatch: 1, MinLocal: 1, MaxLocal: 256, Target: 100, Observed: obs,
			Current: Allocation{PerNode: []int{4}, LocalBatch: 64}},
		{ID: "b", App: "y", BaseBatch: 1, MinLocal: 1, MaxLocal: 256, Target: 100, Observed: overlapReports(1, 2, 0.05, 2, 64),
			Current: Allocation{PerNode: []int{2}, LocalBatch: 64}},
	}
	ctx := o.newCtx(0, UniformCluster(4, 4), jobs)
	if g := ctx.jobs[0].step.gamma; g != 2 {
		t.Errorf("application x: γ = %v, want 2", g)
	}
	if g := ctx.jobs[1].step.gamma; g != 1 {
		t.Errorf("application y (one report): γ = %v, want 1", g)
	}
	ls := []float64{}
	for _, p := range ctx.jobs[0].step.comp {
		ls = append(ls, p.l)
	}
	if !slices.Equal(ls, []float64{16, 32, 64, 128}) {
		t.Errorf("application x's compute curve at %v, want 16, 32, 64, 128", ls)
	}
	o.ForgetApp("x")
	if _, ok := o.models["x"]; ok {
		t.Error("ForgetApp kept application x's model")
	}
}

// TestFitGammaOnProfiles: the overlap exponent fitted to each measured
// application's own step times, every placement a shape (the figures the
// stepShape comment quotes).
func TestFitGammaOnProfiles(t *testing.T) {
	apps, _ := loadData(t)
	want := map[string]float64{"bert": 2, "cifar10": 1.5, "deepspeech2": 1, "imagenet": 2.5, "ncf": 1, "yolov3": 1.5}
	for name, g := range want {
		a := apps[name]
		if a == nil {
			t.Fatalf("no %s profile", name)
		}
		seen := map[[2]int][]Observation{}
		k := 0
		add := func(c *curve) {
			for i := range c.local {
				seen[[2]int{k, 0}] = append(seen[[2]int{k, 0}], Observation{LocalBatch: int(c.local[i]), StepTime: c.step[i], SyncTime: c.sync[i]})
			}
			k++
		}
		for _, key := range slices.Sorted(maps.Keys(a.placements)) {
			add(a.placements[key])
		}
		for _, lv := range a.levels {
			for _, c := range lv.curves {
				add(c)
			}
		}
		if got := fitGamma(seen); got != g {
			t.Errorf("%s: γ = %v, want %v", name, got, g)
		}
	}
}
