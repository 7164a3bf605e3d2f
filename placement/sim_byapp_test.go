package placement

import (
	"math"
	"reflect"
	"testing"
)

// TestByApp: per-application figures by hand. a: JCTs 100 and 300, waits
// 10 and 30, 7200 and 3600 GPU-seconds, 1 and 2 restarts; b: one job of
// 500 s, wait 0, 1800 GPU-seconds. Over the 3 jobs a adds 400/3 s to the
// average and b 500/3, so b comes first.
func TestByApp(t *testing.T) {
	jobs := []JobResult{
		{Name: "a1", App: "a", Arrival: 0, Start: 10, JCT: 100, GPUSeconds: 7200, Restarts: 1},
		{Name: "b1", App: "b", Arrival: 5, Start: 5, JCT: 500, GPUSeconds: 1800},
		{Name: "a2", App: "a", Arrival: 20, Start: 50, JCT: 300, GPUSeconds: 3600, Restarts: 2},
	}
	got := ByApp(jobs)
	want := []AppStats{
		{App: "b", Jobs: 1, AvgJCT: 500, Share: 500.0 / 3, AvgWait: 0, GPUHours: 0.5},
		{App: "a", Jobs: 2, AvgJCT: 200, Share: 400.0 / 3, AvgWait: 20, GPUHours: 3, Restarts: 3},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ByApp = %+v, want %+v", got, want)
	}
	// Equal shares: by name.
	tie := ByApp([]JobResult{{Name: "z", App: "z", JCT: 10}, {Name: "y", App: "y", JCT: 10}})
	if len(tie) != 2 || tie[0].App != "y" || tie[1].App != "z" {
		t.Errorf("equal shares ordered %+v, want y then z", tie)
	}
	if ByApp(nil) != nil {
		t.Errorf("ByApp(nil) = %+v, want none", ByApp(nil))
	}
}

// TestSimulatePerApp: the hand-checked FIFO run with j3 of a second
// application. j1 (2 GPUs) ends at 130; j2 and j3 start at the decision at
// 180 and end at 310, j3 having arrived at 10. So "const" has JCTs 130 and
// 310, waits 0 and 180, and 2×130 + 130 GPU-seconds; "other" one job of
// 300 s that waited 170 s on 130 GPU-seconds. The shares add up to the
// average JCT.
func TestSimulatePerApp(t *testing.T) {
	apps, w := handWorkload()
	apps["other"] = constApp("other", 1, 100)
	w[2].App = "other"
	r, err := Simulate(apps, w, NewFIFO(), SimConfig{Nodes: 1, GPUsPerNode: 2, Interval: 60, MoveCost: 30})
	if err != nil {
		t.Fatal(err)
	}
	want := []AppStats{
		{App: "const", Jobs: 2, AvgJCT: 220, Share: 440.0 / 3, AvgWait: 90, GPUHours: 390.0 / 3600},
		{App: "other", Jobs: 1, AvgJCT: 300, Share: 100, AvgWait: 170, GPUHours: 130.0 / 3600},
	}
	if len(r.PerApp) != len(want) {
		t.Fatalf("PerApp = %+v, want %+v", r.PerApp, want)
	}
	sum := 0.0
	for k, a := range r.PerApp {
		w := want[k]
		if a.App != w.App || a.Jobs != w.Jobs || a.Restarts != w.Restarts ||
			math.Abs(a.AvgJCT-w.AvgJCT) > 1e-9 || math.Abs(a.Share-w.Share) > 1e-9 ||
			math.Abs(a.AvgWait-w.AvgWait) > 1e-9 || math.Abs(a.GPUHours-w.GPUHours) > 1e-9 {
			t.Errorf("PerApp[%d] = %+v, want %+v", k, a, w)
		}
		sum += a.Share
	}
	if math.Abs(sum-r.AvgJCT) > 1e-9 {
		t.Errorf("shares add up to %v, average JCT %v", sum, r.AvgJCT)
	}
}
