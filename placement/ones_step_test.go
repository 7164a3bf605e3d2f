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
	// Only sync-free one-GPU shapes with two reports: every exponent
	// predicts them exactly, and the smallest, 1, is the answer.
	alone := map[[2]int][]Observation{{1, 1}: overlapReports(1, 1, 0, 1, 16, 64), {1, 4}: overlapReports(1, 4, 0.05, 2.5, 64)}
	if got := fitGamma(alone); got != 1 {
		t.Errorf("sync-free reports only: fitGamma = %v, want 1", got)
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
	// A line unlike the reports' compute: extrapolation follows the curve.
	line := ThroughputModel{Known: true, A: 0, B: 0.0012}
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

// TestUnseenShapeStep: a shape with no report is the compute curve, micro-
// steps repeating it, plus the model's synchronisation, added; with no
// curve it is the model's own iteration time, to the bit.
func TestUnseenShapeStep(t *testing.T) {
	seen := map[[2]int][]Observation{{1, 4}: overlapReports(1, 4, 0.05, 2, 16, 32, 64)}
	line := ThroughputModel{Known: true, A: 0, B: 0.0012, Inter0: 0.2, Inter1: 0.01}
	j := &onesJob{s: &JobState{BaseBatch: 1, SampleProgress: true}, model: line, step: newStepShape(seen), seen: seen,
		micro: 32, steps: 2, minLocal: 1}
	c32 := 0.01 + 0.001*32
	got := (&onesCtx{}).rate(j, 2, 8, 64) // 2 × 32 per GPU on 8 GPUs over 2 nodes
	if want := float64(8*64) / (2*c32 + line.Sync(2, 8)); !nearRel(got, want, 1e-12) {
		t.Errorf("unseen shape: rate %v, want %v (the curve's compute, not the line's %v)", got, want, line.Compute(32))
	}
	bare := &onesJob{s: j.s, model: line, micro: 32, steps: 2, minLocal: 1}
	if got, want := (&onesCtx{}).rate(bare, 2, 8, 64), float64(8*64)/line.IterTime(2, 8, 32, 1); got != want {
		t.Errorf("no curve: rate %v, want the model's %v exactly", got, want)
	}
}

// TestStepShapeDegenerateReports: a report whose synchronisation is its
// whole step or, by rounding, more (the live loop clamps the sync it
// measures to the step, and a micro-step's share of it may then come out
// an ulp above) has no compute: predictions from it stay finite and
// positive, and it does not keep fitGamma from fractional exponents.
func TestStepShapeDegenerateReports(t *testing.T) {
	// The live loop's micro-step of an iteration all synchronisation.
	sync := 0.1
	step := MicroStepTime(sync, sync, 5)
	if !(step < sync) {
		t.Logf("MicroStepTime(%v, %v, 5) = %v, not below the sync here", sync, sync, step)
	}
	bad := Observation{Nodes: 1, GPUs: 2, LocalBatch: 8, StepTime: step, SyncTime: sync}
	zero := Observation{Nodes: 1, GPUs: 1, LocalBatch: 8, StepTime: step, SyncTime: step}
	seen := map[[2]int][]Observation{
		{1, 2}:  append([]Observation{bad}, overlapReports(1, 2, 0.05, 2.5, 64)...),
		{1, 1}:  {zero},
		{2, 8}:  overlapReports(2, 8, 0.2, 2.5, 16, 64, 128),
		{4, 16}: overlapReports(4, 16, 0.3, 2.5, 32, 128),
	}
	sh := newStepShape(seen)
	if sh.gamma != 2.5 {
		t.Errorf("γ = %v with one degenerate report among overlap ones of 2.5", sh.gamma)
	}
	for _, p := range sh.comp {
		if !(p.c > 0) {
			t.Errorf("compute curve %v at %v: want positive", p.c, p.l)
		}
	}
	line := ThroughputModel{Known: true, A: 0, B: 0.0012, Intra0: 0.01}
	j := &onesJob{s: &JobState{BaseBatch: 1, SampleProgress: true}, model: line, step: sh, seen: seen, micro: 256, steps: 1, minLocal: 1}
	for _, c := range [][3]int{{1, 2, 4}, {1, 2, 32}, {1, 1, 4}, {1, 1, 16}, {1, 4, 8}} {
		rt := (&onesCtx{}).rate(j, c[0], c[1], c[2])
		if math.IsNaN(rt) || math.IsInf(rt, 0) || rt <= 0 {
			t.Errorf("rate on %d GPUs over %d nodes at %d per GPU: %v", c[1], c[0], c[2], rt)
		}
	}
}
