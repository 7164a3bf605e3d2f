package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/workload"
)

// countingPredictor answers every prediction, failing for one job name.
type countingPredictor struct{ fail string }

func (c countingPredictor) Predict(spec *pb.JobSpec, _ string) (*actors.Prediction, error) {
	if spec.GetName() == c.fail {
		return nil, errors.New("no such model")
	}
	return &actors.Prediction{}, nil
}

// The demo's prediction phase (seconds of TENSILE searches) reports how
// many jobs are done as it goes, throttled to one line per interval and
// none for the last (the demo's own line follows), and names a job whose
// prediction failed.
func TestWarmPredictionsShowsProgress(t *testing.T) {
	specs := []workload.Spec{{Name: "a", Model: "mlp"}, {Name: "b", Model: "mlp"}, {Name: "c", Model: "mlp"}}
	var out strings.Builder
	if err := warmPredictions(countingPredictor{}, specs, "h100-80gb", 80<<30, &out, 0); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  1/3 predicted (", "  2/3 predicted ("} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress %q lacks %q", out.String(), want)
		}
	}
	if strings.Contains(out.String(), "3/3") {
		t.Errorf("progress %q reports the last job; the caller's summary line does", out.String())
	}
	out.Reset()
	if err := warmPredictions(countingPredictor{}, specs, "h100-80gb", 80<<30, &out, time.Hour); err != nil || out.Len() != 0 {
		t.Errorf("within the first interval: %v, progress %q; want nothing written", err, out.String())
	}
	if err := warmPredictions(countingPredictor{fail: "b"}, specs, "h100-80gb", 80<<30, &out, time.Hour); err == nil || !strings.Contains(err.Error(), "predict b: no such model") {
		t.Errorf("failed prediction: %v, want an error naming job b", err)
	}
}

// batchPredictor answers every prediction with a demand of 1 MiB per
// sample and records the batches it was asked about, per job name.
type batchPredictor struct {
	mu    sync.Mutex
	asked map[string][]int32
}

func (b *batchPredictor) Predict(spec *pb.JobSpec, _ string) (*actors.Prediction, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked[spec.GetName()] = append(b.asked[spec.GetName()], spec.Batch)
	d := int64(spec.Batch) << 20
	return &actors.Prediction{Demand: &pb.Demand{MinBudget: d, VanillaPeak: d}}, nil
}

// For an elastic training job the demo also plans the elastic loop's
// memory bounds before it submits (the first round planned them and held
// every later round up): batches below the spec's (its largest) are
// predicted, down to what its searches visit; a job of one batch is
// predicted at that batch only.
func TestWarmPredictionsElasticBounds(t *testing.T) {
	specs, err := workload.ParseSpecs([]byte("jobs:\n" +
		"  - {name: el, model: mlp, kind: train, batch: {min: 32, max: 256}, iterations: 10}\n" +
		"  - {name: fixed, model: mlp, kind: train, batch: 64, iterations: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	pred := &batchPredictor{asked: map[string][]int32{}}
	if err := warmPredictions(pred, specs, "h100-80gb", 100<<20, io.Discard, time.Hour); err != nil {
		t.Fatal(err)
	}
	el, fixed := pred.asked["el"], pred.asked["fixed"]
	if len(fixed) != 1 || fixed[0] != 64 {
		t.Errorf("fixed job predicted at %v, want [64]", fixed)
	}
	// 100 MiB holds 100 samples: the searches end at 100.
	if len(el) < 3 || slices.Max(el) > 256 || !slices.Contains(el, 100) || !slices.Contains(el, 101) || slices.Min(el) >= 32 {
		t.Errorf("elastic job predicted at %v, want its searches over 1…256 ending at 100", el)
	}
}

// The demo's re-budget lines name jobs as its other lines do; an id it
// did not submit, and words that merely look like one, stay.
func TestWithJobNames(t *testing.T) {
	names := map[string]string{"j-1": "gpt2-a", "j-12": "resnet50-a"}
	for in, want := range map[string]string{
		"job j-1 joined": "job gpt2-a joined",
		"job j-12 left (requeued); job j-1 joined": "job resnet50-a left (requeued); job gpt2-a joined",
		"jobs j-1 and j-99 completed":              "jobs gpt2-a and j-99 completed",
		"obj-1 and j-1x":                           "obj-1 and j-1x",
	} {
		if got := withJobNames(in, names); got != want {
			t.Errorf("withJobNames(%q) = %q, want %q", in, got, want)
		}
	}
}

// The demo's average completion counts completed jobs only, in job time.
func TestAvgCompletion(t *testing.T) {
	jobs := []DemoJob{{State: "completed", CompletedAfter: 2}, {State: "completed", CompletedAfter: 4}, {State: "failed", CompletedAfter: 100}, {State: "running"}}
	if got := avgCompletion(jobs, 60); got != 180 {
		t.Errorf("average completion %g, want (2+4)/2 × 60 = 180", got)
	}
	if got := avgCompletion(jobs[2:], 60); got != 0 {
		t.Errorf("average completion with none completed: %g, want 0", got)
	}
}
