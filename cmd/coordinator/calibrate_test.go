package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

const committedMeasurement = "../../gpu/calibration/h200-2026-11-28.json"

func TestCalibrateCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mine.yaml")
	var w bytes.Buffer
	if err := runCalibrate(&w, calibrateFlags{measured: committedMeasurement, name: "h200-mine", out: out}); err != nil {
		t.Fatal(err)
	}
	s := w.String()
	for _, want := range []string{"base profile h200-141gb", "resnet50      fp32", "densenet121   tf32", "(not fitted)", "both copy directions at once: 43.9 GB/s", "name: h200-mine"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := gpu.ParseProfiles(b)
	if err != nil {
		t.Fatalf("--out wrote a profile --profiles refuses: %v\n%s", err, b)
	}
	if b := gpu.MustProfile("h200-141gb"); ps[0].Name != "h200-mine" || ps[0].ComputeEfficiency != b.ComputeEfficiency || ps[0].MatrixOpOverhead != b.MatrixOpOverhead {
		t.Errorf("written profile %+v, want h200-141gb's fitted figures under the name h200-mine", ps[0])
	}

	w.Reset()
	if err := runCalibrate(&w, calibrateFlags{measured: committedMeasurement, json: true}); err != nil {
		t.Fatal(err)
	}
	var c gpu.Calibration
	if err := json.Unmarshal(w.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != 10 || c.Rows[0].PredictedPeakBytes <= 0 || c.Rows[0].MeasuredPeakBytes <= 0 {
		t.Errorf("JSON rows: %+v", c.Rows)
	}

	// Other batch sizes are predicted with the batch-16 fit, not fitted to.
	w.Reset()
	held := []string{"../../gpu/calibration/h200-2026-11-28-b8.json", "../../gpu/calibration/h200-2026-11-28-b32.json"}
	if err := runCalibrate(&w, calibrateFlags{measured: committedMeasurement, heldOut: held, json: true}); err != nil {
		t.Fatal(err)
	}
	var h gpu.Calibration
	if err := json.Unmarshal(w.Bytes(), &h); err != nil {
		t.Fatal(err)
	}
	if len(h.HeldOut) != 10 || h.Profile.ComputeEfficiency != c.Profile.ComputeEfficiency || h.Profile.MatrixOpOverhead != c.Profile.MatrixOpOverhead {
		t.Fatalf("held out: %d rows (want 10), profile %+v (want the batch-16 fit %+v)", len(h.HeldOut), h.Profile, c.Profile)
	}
	batches := map[int]int{}
	for _, r := range h.HeldOut {
		batches[r.Batch]++
		if r.Fitted || r.PredictedPeakBytes <= 0 || r.PredictedFitted() <= 0 {
			t.Errorf("held-out row %+v", r)
		}
	}
	if batches[8] != 5 || batches[32] != 5 {
		t.Errorf("held-out batches %v, want five rows each of 8 and 32", batches)
	}
}

func TestCalibrateCommandErrors(t *testing.T) {
	var w bytes.Buffer
	for _, c := range []struct {
		f    calibrateFlags
		want string
	}{
		{calibrateFlags{}, "--measured is required"},
		{calibrateFlags{measured: committedMeasurement, base: "h300"}, "--base: unknown device profile"},
		{calibrateFlags{measured: "no-such-file.json"}, "no such file"},
		{calibrateFlags{measured: committedMeasurement, heldOut: []string{"no-such-file.json"}}, "--held-out: open no-such-file.json"},
	} {
		err := runCalibrate(&w, c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want it to contain %q", c.f, err, c.want)
		}
	}
}
