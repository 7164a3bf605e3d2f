package placement

import (
	"fmt"
	"math"
	"testing"
)

// checkGPUTime checks a run's GPU-time split against its results and
// events; "" if they agree. No part is negative; the parts add up to
// GPUs × makespan; training and restarting are what utilisation counts as
// held; and restarting is, for every start, resumption, grow, shrink or
// move, its GPUs × the move cost or, if the job's GPUs change again
// sooner (a move cost longer than the interval), the time until then (a
// job cannot complete while it restarts; a batch change on the same GPUs
// does not end a restart).
func checkGPUTime(evs []SimEvent, r *SimResult, moveCost float64) string {
	g := r.GPUTime
	total := float64(r.GPUs) * r.Makespan / 3600
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	switch {
	case g.Training < 0 || g.Restarting < 0 || g.IdleWaiting < -1e-9 || g.IdleNoneWaiting < 0:
		return fmt.Sprintf("a negative part: %+v", g)
	case !near(g.Training+g.Restarting+g.IdleWaiting+g.IdleNoneWaiting, total):
		return fmt.Sprintf("parts %+v add up to %v GPU-hours, not %d GPUs × %v s", g, g.Training+g.Restarting+g.IdleWaiting+g.IdleNoneWaiting, r.GPUs, r.Makespan)
	case total > 0 && !near((g.Training+g.Restarting)/total, r.Utilisation):
		return fmt.Sprintf("held %v of %v GPU-hours, utilisation %v", g.Training+g.Restarting, total, r.Utilisation)
	}
	want := 0.0
	open := map[string]SimEvent{} // each job's restart in progress
	for _, e := range evs {
		if o, ok := open[e.Job]; ok && e.Kind != EventBatch {
			want += float64(o.ToGPUs) * math.Min(moveCost, e.T-o.T) / 3600
			delete(open, e.Job)
		}
		switch e.Kind {
		case EventStart, EventResume, EventGrow, EventShrink, EventMove:
			open[e.Job] = e
		}
	}
	if len(open) > 0 {
		return fmt.Sprintf("restarts never ended: %v", open)
	}
	if !near(g.Restarting, want) {
		return fmt.Sprintf("restarting %v GPU-hours; the restart events hold %v", g.Restarting, want)
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

	// fifo on one node of two GPUs: a arrives at 0 and holds one GPU to
	// 130 (30 restarting); b arrives at 30, waits for the decision at 60
	// beside the idle GPU (30 idle with a job waiting), and holds it from
	// 60 to 190 (30 restarting). Idle with none waiting: the second GPU
	// before b arrives (30) and the first after a completes (60).
	midEvs, mid := eventsOf(t, apps, []WorkloadJob{
		{Name: "a", Time: 0, App: "const", Replicas: 1, Batch: 1},
		{Name: "b", Time: 30, App: "const", Replicas: 1, Batch: 1},
	}, NewFIFO(), cfg)

	// A 90 s move cost on a 60 s interval: the job starts on one GPU at 0
	// and grows to two at 60, before its first restart ends (60 GPU-s
	// restarting), restarts there to 150 (180) and trains its 70 units
	// (one a second: the constant application's iterations do not depend
	// on the batch) to 220 on two GPUs (140 GPU-s). One GPU is idle, with
	// none waiting, from 0 to 60.
	two := Allocation{PerNode: []int{2}, LocalBatch: 1}
	longEvs, long := eventsOf(t, Apps{"const": constApp("const", 1, 70)},
		[]WorkloadJob{{Name: "j", Time: 0, App: "const", Replicas: 1, Batch: 1}},
		scriptedPolicy{0: {"j": Allocation{PerNode: []int{1}, LocalBatch: 1}}, 60: {"j": two}, 120: {"j": two}, 180: {"j": two}},
		SimConfig{Nodes: 1, GPUsPerNode: 2, Interval: 60, MoveCost: 90})

	for _, c := range []struct {
		name string
		evs  []SimEvent
		r    *SimResult
		want [4]float64 // training, (re)starting, idle with jobs waiting, idle with none (GPU-seconds)
	}{
		{"fifo", fifoEvs, fifo, [4]float64{400, 120, 100, 0}},
		{"tiresias", tirEvs, tir, [4]float64{400, 240, 40, 0}},
		{"scripted", scrEvs, scr, [4]float64{1210, 210, 240, 3300}},
		{"mid-interval arrival", midEvs, mid, [4]float64{200, 60, 30, 90}},
		{"move cost past the interval", longEvs, long, [4]float64{140, 240, 0, 60}},
	} {
		g := c.r.GPUTime
		got := [4]float64{g.Training, g.Restarting, g.IdleWaiting, g.IdleNoneWaiting}
		for k := range got {
			if math.Abs(got[k]*3600-c.want[k]) > 1e-6 {
				t.Errorf("%s: GPU time %v GPU-s, want %v", c.name, [4]float64{got[0] * 3600, got[1] * 3600, got[2] * 3600, got[3] * 3600}, c.want)
				break
			}
		}
		moveCost := 30.0
		if c.r == long {
			moveCost = 90
		}
		if msg := checkGPUTime(c.evs, c.r, moveCost); msg != "" {
			t.Errorf("%s: %s", c.name, msg)
		}
	}
}
