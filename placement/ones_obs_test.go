package placement

import (
	"math"
	"testing"
)

// obsJob is a job of application "a" running on 2 GPUs of one node at
// per-GPU batch 8, reporting step time step there (and 0.6 s on one GPU,
// a shape it ran before).
func obsJob(id string, step float64) JobState {
	return JobState{ID: id, App: "a", BaseBatch: 8, MinBatch: 8, MaxBatch: 64, MinLocal: 8, MaxLocal: 8, Target: 1e6, Restarts: 1,
		Current: Allocation{PerNode: []int{2}, LocalBatch: 8},
		Observed: []Observation{
			{Nodes: 1, GPUs: 1, LocalBatch: 8, StepTime: 0.6},
			{Nodes: 1, GPUs: 2, LocalBatch: 8, StepTime: step},
		}}
}

// predictedStep is the step time ONES's rate predicts for application
// "a" on gpus GPUs of one node at per-GPU batch 8: the inverse of the rate
// of a job whose progress per iteration is 1.
func predictedStep(o *ONES, gpus int) float64 {
	ctx := &onesCtx{o: o}
	j := &onesJob{s: &JobState{BaseBatch: 8 * gpus}, priorNoise: 1e12, model: o.models["a"].m, seen: o.models["a"].seen}
	return 1 / ctx.rate(j, 1, gpus, 8)
}

// TestONESFollowsChangedStepTime: a job's reported step time at its shape
// doubles (a new neighbour, a memory plan that swaps more) and stays there;
// within a few calls ONES predicts the new time, and when it falls back
// the prediction follows again. The shape it no longer reports changes
// for keeps its time.
func TestONESFollowsChangedStepTime(t *testing.T) {
	o := NewONES(ONESConfig{Seed: 1})
	if got := predictedStep(o, 2); got != 1 {
		t.Fatalf("nothing learned: predicted step %v, want the unit step", got)
	}
	call := func(step float64) { o.learn([]JobState{obsJob("x", step)}) }
	for k := 0; k < 3; k++ {
		call(1)
	}
	if got := predictedStep(o, 2); math.Abs(got-1) > 1e-9 {
		t.Fatalf("after reports of 1 s: predicted %v", got)
	}
	for k := 1; k <= 6; k++ {
		call(2)
		if got := predictedStep(o, 2); k >= 3 && math.Abs(got-2) > 0.05*2 {
			t.Errorf("%d calls after the step time doubled to 2 s ONES predicts %v s", k, got)
		}
	}
	for k := 1; k <= 6; k++ {
		call(1)
		if got := predictedStep(o, 2); k >= 3 && math.Abs(got-1) > 0.05 {
			t.Errorf("%d calls after the step time fell back to 1 s ONES predicts %v s", k, got)
		}
	}
	if got := predictedStep(o, 1); math.Abs(got-0.6) > 1e-9 {
		t.Errorf("one GPU: predicted %v, want the unchanged 0.6 s", got)
	}
}

// TestONESStepTimeOutlier: one garbled report (300× the job's time, within
// the live loop's 1000× plausibility guard) among steady ones, from the
// job itself or from a second job at the same shape, does not move the
// prediction; nor do small wobbles below the refit threshold, which leave
// the model as fitted.
func TestONESStepTimeOutlier(t *testing.T) {
	o := NewONES(ONESConfig{Seed: 1})
	check := func(when string) {
		t.Helper()
		if got := predictedStep(o, 2); math.Abs(got-1) > 0.05 {
			t.Errorf("%s: ONES predicts %v s, want about 1 s", when, got)
		}
	}
	for _, step := range []float64{1, 1.01, 300, 0.99, 1, 1.02, 1} {
		o.learn([]JobState{obsJob("x", step)})
		check("after one report of 300 s among reports of about 1 s")
	}
	o.learn([]JobState{obsJob("x", 1.01), obsJob("y", 1)})
	o.learn([]JobState{obsJob("x", 1.01), obsJob("y", 1.02)})
	o.learn([]JobState{obsJob("x", 300), obsJob("y", 0.99)})
	o.learn([]JobState{obsJob("x", 1.01), obsJob("y", 1)})
	check("after one report of 300 s from one of two jobs")
	if got := o.models["a"].seen[[2]int{1, 2}][0].StepTime; got != 1 {
		t.Errorf("the model holds %v s for the shape after reports within 5%% of 1 s; want the first, 1 s, without a refit", got)
	}
}

// TestONESConstantReportsKeepFirst: jobs whose reports never change keep
// the application's first report per shape, even when a later job reports
// a somewhat different constant time there (the simulator, where a shape's
// GPUs can be split over its nodes in more than one way, each with its own
// measured time): ONES only follows a time once a job's reports for it
// change, so the simulator's decisions are as before.
func TestONESConstantReportsKeepFirst(t *testing.T) {
	o := NewONES(ONESConfig{Seed: 1})
	o.learn([]JobState{obsJob("x", 1)})
	for k := 0; k < 10; k++ {
		o.learn([]JobState{obsJob("x", 1), obsJob("y", 1.08), obsJob("z", 1.08)})
	}
	if got := o.models["a"].seen[[2]int{1, 2}][0].StepTime; got != 1 {
		t.Errorf("the model holds %v s; want the first report, 1 s", got)
	}
}

// An iteration of accum+1 micro-steps synchronises once (AccumIterTime),
// and MicroStepTime recovers the micro-step's time from the iteration's:
// 4 micro-steps of 0.5 s with 0.1 s of synchronisation take
// 0.5 + 3 × 0.4 = 1.7 s.
func TestMicroStepTimeInvertsAccumIterTime(t *testing.T) {
	if it := AccumIterTime(0.5, 0.1, 3); math.Abs(it-1.7) > 1e-12 {
		t.Fatalf("4 micro-steps take %g s, want 1.7", it)
	}
	for _, c := range []struct {
		step, sync float64
		accum      int
	}{{0.5, 0.1, 3}, {0.2, 0, 0}, {1.3, 0.4, 5}, {0.05, 0.05, 2}} {
		if got := MicroStepTime(AccumIterTime(c.step, c.sync, c.accum), c.sync, c.accum); math.Abs(got-c.step) > 1e-12 {
			t.Errorf("%+v: micro-step %g s, want %g", c, got, c.step)
		}
	}
}
