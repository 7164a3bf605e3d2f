package main

import (
	"errors"
	"strings"
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
	if err := warmPredictions(countingPredictor{}, specs, "h100-80gb", &out, 0); err != nil {
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
	if err := warmPredictions(countingPredictor{}, specs, "h100-80gb", &out, time.Hour); err != nil || out.Len() != 0 {
		t.Errorf("within the first interval: %v, progress %q; want nothing written", err, out.String())
	}
	if err := warmPredictions(countingPredictor{fail: "b"}, specs, "h100-80gb", &out, time.Hour); err == nil || !strings.Contains(err.Error(), "predict b: no such model") {
		t.Errorf("failed prediction: %v, want an error naming job b", err)
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
