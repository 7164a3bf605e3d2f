package placement

import (
	"fmt"
	"math"
	"reflect"
	"testing"
)

// scriptedPolicy answers each decision time with a fixed set of
// allocations (none: every job waits).
type scriptedPolicy map[float64]map[string]Allocation

func (scriptedPolicy) Name() string { return "scripted" }
func (p scriptedPolicy) Schedule(now float64, _ ClusterState, _ []JobState) map[string]Allocation {
	return p[now]
}

// eventsOf simulates w under p and returns the events in the order told.
func eventsOf(t *testing.T, apps Apps, w []WorkloadJob, p Policy, cfg SimConfig) ([]SimEvent, *SimResult) {
	t.Helper()
	var evs []SimEvent
	cfg.OnEvent = func(e SimEvent) { evs = append(evs, e) }
	r, err := Simulate(apps, w, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return evs, r
}

// TestSimEventsEveryKind: one job of 1000 one-second iterations on two
// nodes of two GPUs (60 s interval, 30 s restart), run by a script: it
// starts on one GPU at t=0 (30 s restart, 30 units by t=60), grows to
// two at 60 (60 by 120), changes its batch on the same GPUs at 120 (no
// restart: 120 by 180), moves to the other node at 180 (150 by 240),
// accumulates two micro-steps there at 240 (a batch change, global batch
// 8; an iteration of two micro-steps takes 2 s: 180 by 300), shrinks to
// one GPU at 300 (210 by 360), is preempted at 360, resumes at 420 and
// completes at 420 + 30 + 790 = 1240. Five of the events restart it: four
// restarts after its start.
func TestSimEventsEveryKind(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 1000)}
	w := []WorkloadJob{{Name: "j", Time: 0, App: "const", Replicas: 1, Batch: 1}}
	one := Allocation{PerNode: []int{1, 0}, LocalBatch: 1}
	two := Allocation{PerNode: []int{2, 0}, LocalBatch: 1}
	twoB := Allocation{PerNode: []int{2, 0}, LocalBatch: 2}
	other := Allocation{PerNode: []int{0, 2}, LocalBatch: 2}
	accum := Allocation{PerNode: []int{0, 2}, LocalBatch: 2, AccumSteps: 1}
	last := Allocation{PerNode: []int{0, 1}, LocalBatch: 2}
	p := scriptedPolicy{
		0: {"j": one}, 60: {"j": two}, 120: {"j": twoB}, 180: {"j": other}, 240: {"j": accum},
		300: {"j": last}, 360: {}, 420: {"j": one},
	}
	for t0 := 480.0; t0 <= 1260; t0 += 60 {
		p[t0] = map[string]Allocation{"j": one}
	}
	evs, r := eventsOf(t, apps, w, p, SimConfig{Nodes: 2, GPUsPerNode: 2, Interval: 60, MoveCost: 30})
	ev := func(t float64, kind string, from, to int, pl string, nodes, batch, local, acc int, prog float64) SimEvent {
		return SimEvent{T: t, Job: "j", App: "const", Kind: kind, FromGPUs: from, ToGPUs: to, Placement: pl, Nodes: nodes,
			Batch: batch, LocalBatch: local, AccumSteps: acc, Progress: prog}
	}
	want := []SimEvent{
		ev(0, EventStart, 0, 1, "1", 1, 1, 1, 0, 0),
		ev(60, EventGrow, 1, 2, "2", 1, 2, 1, 0, 0.03),
		ev(120, EventBatch, 2, 2, "2", 1, 4, 2, 0, 0.06),
		ev(180, EventMove, 2, 2, "2", 1, 4, 2, 0, 0.12),
		ev(240, EventBatch, 2, 2, "2", 1, 8, 2, 1, 0.15),
		ev(300, EventShrink, 2, 1, "1", 1, 2, 2, 0, 0.18),
		ev(360, EventPreempt, 1, 0, "", 0, 0, 0, 0, 0.21),
		ev(420, EventResume, 0, 1, "1", 1, 1, 1, 0, 0.21),
		ev(1240, EventComplete, 1, 0, "", 0, 1, 1, 0, 1),
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d:\n%+v", len(evs), len(want), evs)
	}
	for i := range want {
		g := evs[i]
		g.Progress = math.Round(g.Progress*1e9) / 1e9
		if math.Abs(g.T-want[i].T) < 1e-9 {
			g.T = want[i].T
		}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("event %d: %+v\nwant      %+v", i, evs[i], want[i])
		}
	}
	if j := r.PerJob[0]; j.Restarts != 4 || math.Abs(j.Completion-1240) > 1e-9 {
		t.Errorf("restarts %d, completion %v; want 4 and 1240", j.Restarts, j.Completion)
	}
}

// TestSimEventsTiresias: the events of TestTiresiasPreemptsAndResumes'
// schedule, in order: j1 starts at 0; at 60 it is preempted (30 units
// done) and j2 and j3 start; at 180 j1 resumes and j2 and j3 are
// preempted (90 done); j1 completes at 280; j2 and j3 resume at 300 and
// complete at 340.
func TestSimEventsTiresias(t *testing.T) {
	apps, w := handWorkload()
	evs, _ := eventsOf(t, apps, w, NewTiresias(TiresiasConfig{Thresholds: []float64{100}}),
		SimConfig{Nodes: 1, GPUsPerNode: 2, Interval: 60, MoveCost: 30})
	type short struct {
		T        float64
		Job      string
		Kind     string
		Progress float64
	}
	var got []short
	for _, e := range evs {
		got = append(got, short{math.Round(e.T*1e6) / 1e6, e.Job, e.Kind, math.Round(e.Progress*1e6) / 1e6})
	}
	want := []short{
		{0, "j1", EventStart, 0},
		{60, "j1", EventPreempt, 0.3}, {60, "j2", EventStart, 0}, {60, "j3", EventStart, 0},
		{180, "j1", EventResume, 0.3}, {180, "j2", EventPreempt, 0.9}, {180, "j3", EventPreempt, 0.9},
		{280, "j1", EventComplete, 1},
		{300, "j2", EventResume, 0.9}, {300, "j3", EventResume, 0.9},
		{340, "j2", EventComplete, 1}, {340, "j3", EventComplete, 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n%+v\nwant\n%+v", got, want)
	}
}

// TestSimEventsAgreeWithResults: on workload 2's first 40 jobs under
// ONES, the events agree with the per-job results (checkEvents) and with
// the GPU-time split (checkGPUTime), and some of them are resizes.
func TestSimEventsAgreeWithResults(t *testing.T) {
	apps, d := loadData(t)
	w := loadWorkload(t, apps, d, 2)[:40]
	p, err := NewPolicy("ones", PolicyOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	evs, r := eventsOf(t, apps, w, p, SimConfig{Nodes: 4, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
	if msg := checkEvents(evs, r); msg != "" {
		t.Fatal(msg)
	}
	if msg := checkGPUTime(evs, r, 30); msg != "" {
		t.Fatal(msg)
	}
	if g := r.GPUTime; !(g.Training > 0 && g.Restarting > 0) {
		t.Errorf("GPU time %+v: no training or no restarting on a run with resizes", g)
	}
	resized := 0
	for _, e := range evs {
		if e.Kind == EventGrow || e.Kind == EventShrink {
			resized++
		}
	}
	if resized == 0 {
		t.Error("no grow or shrink events: the check saw no resizes")
	}
}

// checkEvents checks a simulation's events against its per-job results;
// "" if they agree. Times never go back; each job starts once, at its
// start time, and completes once, at its completion time, with progress 1;
// its restarts are its start, resume, grow, shrink and move events less
// the start; each event's GPUs before are the GPUs after the job's event
// before it, and its kind matches the change (a grow has more GPUs after,
// a batch change as many and the same batch nowhere else); progress never
// falls.
func checkEvents(evs []SimEvent, r *SimResult) string {
	type state struct {
		gpus, restarts int
		prog, start    float64
		done           float64
		kinds          map[string]int
	}
	st := map[string]*state{}
	last := math.Inf(-1)
	for _, e := range evs {
		if e.T < last-1e-9 {
			return fmt.Sprintf("event %+v told after one at t=%v", e, last)
		}
		last = e.T
		s := st[e.Job]
		if s == nil {
			s = &state{start: math.NaN(), done: math.NaN(), kinds: map[string]int{}}
			st[e.Job] = s
		}
		if e.FromGPUs != s.gpus || e.Progress < s.prog-1e-12 {
			return fmt.Sprintf("%+v: the job held %d GPUs at progress %v before", e, s.gpus, s.prog)
		}
		ok := true
		switch e.Kind {
		case EventStart, EventResume:
			ok = e.FromGPUs == 0 && e.ToGPUs > 0 && (e.Kind == EventStart) == (s.kinds[EventStart] == 0)
		case EventGrow:
			ok = e.ToGPUs > e.FromGPUs && e.FromGPUs > 0
		case EventShrink:
			ok = e.ToGPUs < e.FromGPUs && e.ToGPUs > 0
		case EventMove, EventBatch:
			ok = e.ToGPUs == e.FromGPUs && e.ToGPUs > 0
		case EventPreempt, EventComplete:
			ok = e.ToGPUs == 0 && e.FromGPUs > 0 && e.Placement == "" && e.Nodes == 0
		default:
			ok = false
		}
		if !ok || (e.ToGPUs > 0 && (e.Nodes < 1 || e.Batch != e.ToGPUs*e.LocalBatch*(e.AccumSteps+1))) {
			return fmt.Sprintf("%+v: not a %s (%d GPUs before, %v starts)", e, e.Kind, s.gpus, s.kinds[EventStart])
		}
		s.gpus, s.prog = e.ToGPUs, e.Progress
		s.kinds[e.Kind]++
		switch e.Kind {
		case EventStart:
			s.start = e.T
		case EventComplete:
			s.done = e.T
		}
		if e.Kind != EventBatch && e.Kind != EventPreempt && e.Kind != EventComplete {
			s.restarts++
		}
	}
	if len(st) != len(r.PerJob) {
		return fmt.Sprintf("events for %d jobs, results for %d", len(st), len(r.PerJob))
	}
	for _, j := range r.PerJob {
		s := st[j.Name]
		if s == nil {
			return fmt.Sprintf("%s: no events", j.Name)
		}
		if s.start != j.Start || s.done != j.Completion || s.restarts-1 != j.Restarts || s.kinds[EventStart] != 1 || s.kinds[EventComplete] != 1 || s.prog != 1 {
			return fmt.Sprintf("%s: events start %v complete %v restarts %d kinds %v progress %v; results start %v complete %v restarts %d",
				j.Name, s.start, s.done, s.restarts-1, s.kinds, s.prog, j.Start, j.Completion, j.Restarts)
		}
	}
	return ""
}

// TestSimEventsCompletionsInTimeOrder: two jobs start at t=0 on one GPU
// each (30 s restart); the first listed completes at 30+85 = 115 s, the
// second at 30+75 = 105 s, in the same interval: the second's completion
// is told first.
func TestSimEventsCompletionsInTimeOrder(t *testing.T) {
	apps := Apps{"long": constApp("long", 1, 85), "short": constApp("short", 1, 75)}
	w := []WorkloadJob{
		{Name: "a", Time: 0, App: "long", Replicas: 1, Batch: 1},
		{Name: "b", Time: 0, App: "short", Replicas: 1, Batch: 1},
	}
	evs, _ := eventsOf(t, apps, w, NewFIFO(), SimConfig{Nodes: 1, GPUsPerNode: 2, Interval: 60, MoveCost: 30})
	var got []string
	for _, e := range evs {
		got = append(got, e.Job+" "+e.Kind)
	}
	want := []string{"a start", "b start", "b complete", "a complete"}
	if !reflect.DeepEqual(got, want) || math.Abs(evs[2].T-105) > 1e-9 || math.Abs(evs[3].T-115) > 1e-9 {
		t.Errorf("events %v at %v, %v; want %v at 105 and 115", got, evs[2].T, evs[3].T, want)
	}
}
