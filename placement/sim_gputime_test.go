package placement

import (
	"fmt"
	"math"
	"testing"
)

// checkGPUTime checks a run's GPU-time split against its results and
// events; "" if they agree. No part is negative; the parts add up to
// GPUs × makespan; training and restarting are what utilisation counts as
// held; and, when a restart ends before the next decision (moveCost ≤
// interval, so nothing cuts one short: a job cannot complete while it
// restarts), restarting is every restart event's GPUs × moveCost.
func checkGPUTime(evs []SimEvent, r *SimResult, moveCost, interval float64) string {
	g := r.GPUTime
	total := float64(r.GPUs) * r.Makespan / 3600
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	switch {
	case g.Training < 0 || g.Restarting < 0 || g.IdleWaiting < -1e-9 || g.Idle < 0:
		return fmt.Sprintf("a negative part: %+v", g)
	case !near(g.Training+g.Restarting+g.IdleWaiting+g.Idle, total):
		return fmt.Sprintf("parts %+v add up to %v GPU-hours, not %d GPUs × %v s", g, g.Training+g.Restarting+g.IdleWaiting+g.Idle, r.GPUs, r.Makespan)
	case total > 0 && !near((g.Training+g.Restarting)/total, r.Utilisation):
		return fmt.Sprintf("held %v of %v GPU-hours, utilisation %v", g.Training+g.Restarting, total, r.Utilisation)
	}
	if moveCost <= interval {
		want := 0.0
		for _, e := range evs {
			switch e.Kind {
			case EventStart, EventResume, EventGrow, EventShrink, EventMove:
				want += float64(e.ToGPUs) * moveCost / 3600
			}
		}
		if !near(g.Restarting, want) {
			return fmt.Sprintf("restarting %v GPU-hours; the restart events hold %v", g.Restarting, want)
		}
	}
	return ""
}

// TestSimGPUTimeHandChecked: the GPU-time split of three schedules worked
// out by hand, in GPU-seconds.
//
// fifo on the hand workload (one node of two GPUs, TestFIFOHandChecked):
// j1 holds both GPUs from 0 to 130 (60 restarting, 200 training); j2 and
// j3 one each from 180 to 310 (60 restarting, 200 training). The
// decisions at 0, 60 and 120 leave j2 (and from 60 j3) waiting: the
// interval from 120 to 180 holds 20 of its 120 GPU-seconds, so 100 idle
// with jobs waiting; no GPU is idle otherwise before the makespan, 310.
//
// tiresias (TestTiresiasPreemptsAndResumes): j1 holds both GPUs 0–60 (60
// restarting), j2 and j3 one each 60–180 (60 restarting), j1 both
// 180–280 (60), j2 and j3 one each 300–340 (60): 640 held, 240 of them
// restarting. A job waits after every decision but the one at 300; the
// intervals 180–240 and 240–300 hold 120 + 80 of 240 GPU-seconds: 40 idle
// with jobs waiting, none otherwise (makespan 340: 680 in all).
//
// The scripted job of TestSimEventsEveryKind on 2 × 2 GPUs (makespan
// 1240: 4960): it holds 1420 GPU-seconds, 210 of them restarting after
// its start, grow, move, shrink and resumption (its batch changes are
// free); the decision at 360 preempts it, so that interval's 240 are idle
// with a job waiting, and the other 3300 idle with none.
func TestSimGPUTimeHandChecked(t *testing.T) {
	apps, w := handWorkload()
	cfg := SimConfig{Nodes: 1, GPUsPerNode: 2, Interval: 60, MoveCost: 30}
	fifoEvs, fifo := eventsOf(t, apps, w, NewFIFO(), cfg)
	tirEvs, tir := eventsOf(t, apps, w, NewTiresias(TiresiasConfig{Thresholds: []float64{100}}), cfg)

	one := Allocation{PerNode: []int{1, 0}, LocalBatch: 1}
	p := scriptedPolicy{
		0: {"j": one}, 60: {"j": Allocation{PerNode: []int{2, 0}, LocalBatch: 1}},
		120: {"j": Allocation{PerNode: []int{2, 0}, LocalBatch: 2}}, 180: {"j": Allocation{PerNode: []int{0, 2}, LocalBatch: 2}},
		240: {"j": Allocation{PerNode: []int{0, 2}, LocalBatch: 2, AccumSteps: 1}}, 300: {"j": Allocation{PerNode: []int{0, 1}, LocalBatch: 2}},
		360: {}, 420: {"j": one},
	}
	for t0 := 480.0; t0 <= 1260; t0 += 60 {
		p[t0] = map[string]Allocation{"j": one}
	}
	scrEvs, scr := eventsOf(t, Apps{"const": constApp("const", 1, 1000)},
		[]WorkloadJob{{Name: "j", Time: 0, App: "const", Replicas: 1, Batch: 1}}, p,
		SimConfig{Nodes: 2, GPUsPerNode: 2, Interval: 60, MoveCost: 30})

	for _, c := range []struct {
		name string
		evs  []SimEvent
		r    *SimResult
		want [4]float64 // training, restarting, idle with jobs waiting, idle (GPU-seconds)
	}{
		{"fifo", fifoEvs, fifo, [4]float64{400, 120, 100, 0}},
		{"tiresias", tirEvs, tir, [4]float64{400, 240, 40, 0}},
		{"scripted", scrEvs, scr, [4]float64{1210, 210, 240, 3300}},
	} {
		g := c.r.GPUTime
		got := [4]float64{g.Training, g.Restarting, g.IdleWaiting, g.Idle}
		for k := range got {
			if math.Abs(got[k]*3600-c.want[k]) > 1e-6 {
				t.Errorf("%s: GPU time %v GPU-s, want %v", c.name, [4]float64{got[0] * 3600, got[1] * 3600, got[2] * 3600, got[3] * 3600}, c.want)
				break
			}
		}
		if msg := checkGPUTime(c.evs, c.r, 30, 60); msg != "" {
			t.Errorf("%s: %s", c.name, msg)
		}
	}
}
