package actors

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

// A move still being applied keeps its targets from other jobs' orders: the
// round's snapshot still shows the moving job where it was, so the policy may
// hand its targets to another job, whose order then landed beside the move
// when it ended (seen on 4 × 4: two jobs on one node's GPUs while another
// node stood idle).
func TestElasticInFlightTargetsTaken(t *testing.T) {
	bound := func(inflight bool, b placement.Allocation) *orderBound {
		t.Helper()
		l, err := newElasticLoop(ElasticConfig{}, bytesPredictor{}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		var gpus []placement.FitGPU
		for _, n := range []string{"n", "m"} {
			for i := 0; i < 4; i++ {
				g := placement.FitGPU{ID: fmt.Sprintf("%s/gpu%d", n, i), Node: n, DeviceType: testGPU, Capacity: 1 << 30}
				switch g.ID {
				case "n/gpu0":
					g.Jobs = []placement.FitJob{{ID: "a", Min: 1}}
				case "n/gpu1":
					g.Jobs = []placement.FitJob{{ID: "b", Min: 1}}
				}
				gpus = append(gpus, g)
			}
		}
		job := func(id, gpu string) *elasticJob {
			return &elasticJob{id: id, spec: &pb.JobSpec{Model: "mlp", Kind: "train"}, min: 1, max: 64, batch: 4,
				free: 1 << 30, devType: testGPU, gpus: []string{gpu}}
		}
		ja, jb := job("a", "n/gpu0"), job("b", "n/gpu1")
		one := placement.Allocation{PerNode: []int{1, 0}, LocalBatch: 4}
		r := &elasticRound{cluster: placement.ClusterState{Nodes: []placement.Node{{Name: "n", GPUs: 4}, {Name: "m", GPUs: 4}}},
			jobs: map[string]*elasticJob{"a": ja, "b": jb}, gpus: gpus, busy: map[string]bool{}, inflight: map[string]string{},
			states: []placement.JobState{{ID: "a", Current: one}, {ID: "b", Current: one}}}
		if inflight {
			// a's move from n/gpu0 to n/gpu2 and n/gpu3 is being applied.
			r.inflight["n/gpu2"], r.inflight["n/gpu3"] = "a", "a"
		}
		l.bound(r, map[string]placement.Allocation{"a": one, "b": b})
		return jb.to
	}
	three := placement.Allocation{PerNode: []int{3, 0}, LocalBatch: 4}
	if b := bound(false, three); b == nil || b.err != nil || strings.Join(b.gpus, ",") != "n/gpu1,n/gpu2,n/gpu3" {
		t.Fatalf("nothing in flight: b's order on three of n's GPUs: %+v, want n/gpu1,n/gpu2,n/gpu3", b)
	}
	if b := bound(true, three); b == nil || b.err == nil || !strings.Contains(b.err.Error(), "in flight") {
		t.Errorf("a's move to n/gpu2,n/gpu3 in flight: b's order on three of n's GPUs: %+v, want refused naming the move in flight", b)
	}
	if b := bound(true, placement.Allocation{PerNode: []int{1, 2}, LocalBatch: 4}); b == nil || b.err != nil || strings.Join(b.gpus, ",") != "n/gpu1,m/gpu0,m/gpu1" {
		t.Errorf("a's move in flight: b's order on n/gpu1 and two of m's GPUs: %+v, want n/gpu1,m/gpu0,m/gpu1", b)
	}
}

// An order counts as in flight only while it was decided for the job's
// attempt and GPUs as they still are, and for at most inFlightFor answer
// timeouts (a job actor that ignores an order publishes nothing).
func TestElasticInFlight(t *testing.T) {
	l, err := newElasticLoop(ElasticConfig{AnswerTimeout: time.Second}, bytesPredictor{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	rec := &JobRecord{ID: "j", GPU: "n/gpu0", Attempt: 2}
	sent := refusedChange{gpus: []string{"n/gpu1", "n/gpu2"}, batch: 8, attempt: 2, from: []string{"n/gpu0"}, at: t0}
	for _, c := range []struct {
		name    string
		attempt int
		from    []string
		after   time.Duration
		want    bool
	}{
		{"as sent, just now", 2, []string{"n/gpu0"}, 0, true},
		{"as sent, just under three timeouts", 2, []string{"n/gpu0"}, 3*time.Second - time.Millisecond, true},
		{"as sent, three timeouts on", 2, []string{"n/gpu0"}, 3 * time.Second, false},
		{"another attempt", 1, []string{"n/gpu0"}, 0, false},
		{"decided for other GPUs", 2, []string{"n/gpu3"}, 0, false},
	} {
		o := sent
		o.attempt, o.from = c.attempt, c.from
		l.sent = map[string]refusedChange{"j": o}
		if _, got := l.inFlight(rec, t0.Add(c.after)); got != c.want {
			t.Errorf("%s: in flight %v, want %v", c.name, got, c.want)
		}
		if _, kept := l.sent["j"]; c.after >= 3*time.Second && kept {
			t.Errorf("%s: an expired order is still remembered as sent", c.name)
		}
	}
}

// An iteration time measured while another elastic training job ran on one
// of the job's GPUs reaches the policy marked Shared (ONES fits no step
// time to it: the loop starts such jobs elsewhere when the policy says,
// and a shape measured beside them and then left was never corrected).
// Beside a job the policy does not place (here a fixed training job) the
// time is how fast the job runs there for good, and is not marked.
func TestElasticObservesSharedGPUs(t *testing.T) {
	for _, c := range []struct {
		name     string
		neighbor string // spec of the job beside it on n1/gpu0 ("": none)
		shared   bool
	}{
		{"alone", "", false},
		{"beside an elastic job", elasticMLP("b", 1000), true},
		{"beside a fixed job", "name: b\nmodel: mlp\nkind: train\nbatch: 1024\niterations: 1000\n", false},
	} {
		l, err := newElasticLoop(ElasticConfig{Policy: "fifo"}, NewZooPredictor(DefaultPlanner()), quiet)
		if err != nil {
			t.Fatal(err)
		}
		pol := &recordStates{}
		l.policy = pol
		rec := elasticRecord(t, "a", []string{"n1/gpu0", "n1/gpu1"})
		rec.Batch, rec.IterSeconds, rec.SyncSeconds = 4096, 1.3, 0.1
		gpus := []placement.FitGPU{{ID: "n1/gpu0", Node: "n1", Capacity: 80 << 30, Jobs: []placement.FitJob{{ID: "a"}}},
			{ID: "n1/gpu1", Node: "n1", Capacity: 80 << 30, Jobs: []placement.FitJob{{ID: "a"}}}}
		recs := map[string]*JobRecord{"a": rec}
		if c.neighbor != "" {
			spec, err := workload.ParseSpec([]byte(c.neighbor))
			if err != nil {
				t.Fatal(err)
			}
			recs["b"] = &JobRecord{ID: "b", Spec: *spec, State: StateRunning, GPU: "n1/gpu0", GPUs: []string{"n1/gpu0"}, Seq: 1}
			gpus[0].Jobs = append(gpus[0].Jobs, placement.FitJob{ID: "b"})
		}
		co := &coordActor{elastic: l, gpuGen: map[string]uint64{},
			nodes: map[string]*nodeEntry{"n1": {info: NodeInfo{Name: "n1", State: "alive", GPUs: 2}}}, gpus: gpus, recs: recs}
		co.elasticObserve(rec)
		l.schedule(co.elasticSnapshot())
		var got *placement.Observation
		for i := range pol.states {
			if pol.states[i].ID == "a" && len(pol.states[i].Observed) == 1 {
				got = &pol.states[i].Observed[0]
			}
		}
		if got == nil {
			t.Fatalf("%s: the policy saw no observation of a: %+v", c.name, pol.states)
		}
		if got.Shared != c.shared || got.GPUs != 2 {
			t.Errorf("%s: observation %+v, want shared %v on 2 GPUs", c.name, *got, c.shared)
		}
	}
}

// The round's snapshot shows the policy a job whose order is in flight
// (elasticLoop.sent, as applyElastic records it) where the order takes it,
// at the order's batch, and keeps every target from other jobs' orders;
// the job as it is once it runs on other GPUs than those the order was
// decided for, or when a target is down (the targets are still kept).
func TestElasticSnapshotInFlight(t *testing.T) {
	for _, c := range []struct {
		name     string
		from     []string
		down     bool // n1/gpu1 down
		inflight map[string]string
		gpus     []string // r.jobs["a"].gpus
		batch    int
		current  int // GPUs in the policy's Current
	}{
		{"decided for the job as it is", []string{"n1/gpu0"}, false, map[string]string{"n1/gpu0": "a", "n1/gpu1": "a"}, []string{"n1/gpu1", "n1/gpu0"}, 2048, 2},
		{"decided for other GPUs", []string{"n1/gpu1"}, false, map[string]string{}, []string{"n1/gpu0"}, 4096, 1},
		{"a target down", []string{"n1/gpu0"}, true, map[string]string{"n1/gpu0": "a", "n1/gpu1": "a"}, []string{"n1/gpu0"}, 4096, 1},
	} {
		l, err := newElasticLoop(ElasticConfig{Policy: "ones"}, NewZooPredictor(DefaultPlanner()), quiet)
		if err != nil {
			t.Fatal(err)
		}
		rec := elasticRecord(t, "a", []string{"n1/gpu0"})
		rec.Batch = 4096
		co := &coordActor{elastic: l, gpuGen: map[string]uint64{},
			nodes: map[string]*nodeEntry{"n1": {info: NodeInfo{Name: "n1", State: "alive", GPUs: 2}}},
			gpus: []placement.FitGPU{{ID: "n1/gpu0", Node: "n1", Capacity: 80 << 30, Jobs: []placement.FitJob{{ID: "a"}}},
				{ID: "n1/gpu1", Node: "n1", Capacity: 80 << 30, Down: c.down}},
			recs: map[string]*JobRecord{"a": rec}}
		// The order's primary is n1/gpu1: the snapshot keeps its order.
		o := co.changeNow([]string{"n1/gpu1", "n1/gpu0"}, 2048, 0)
		o.attempt, o.from, o.at, o.seq, o.targets = rec.Attempt, c.from, time.Now(), 1, []string{"n1/gpu1", "n1/gpu0"}
		l.sent["a"] = o
		r := co.elasticSnapshot()
		if r == nil || len(r.states) != 1 {
			t.Fatalf("%s: round %+v", c.name, r)
		}
		if !maps.Equal(r.inflight, c.inflight) {
			t.Errorf("%s: in flight %v, want %v", c.name, r.inflight, c.inflight)
		}
		j, st := r.jobs["a"], r.states[0]
		if !slices.Equal(j.gpus, c.gpus) || j.batch != c.batch || st.Current.NumGPUs() != c.current || st.Batch != c.batch {
			t.Errorf("%s: job on %v at batch %d, policy sees %s at %d; want %v at %d, %d GPUs", c.name, j.gpus, j.batch, st.Current, st.Batch, c.gpus, c.batch, c.current)
		}
	}
}

// An order applyElastic sends is tracked with what the loop needs to know
// it is in flight (its sequence number, targets, the job's attempt and
// GPUs it was decided for); while it is, the next round shows the job at
// its targets and sends it nothing else; the job actor's orderDropped for
// another order changes nothing, and for this one ends it, so the next
// round sees the job where it runs again. (A job actor that undid a change
// because it restarted meanwhile published no event, and its next orders
// waited three answer timeouts.)
func TestElasticOrderInFlightUntilDropped(t *testing.T) {
	c, clock, rec := reviewCoord(t, 2)
	c.metrics = NewCoordinatorMetrics()
	l := c.elastic
	two := map[string]placement.Allocation{"j": {PerNode: []int{2}, LocalBatch: 2048}}
	round := func(allocs map[string]placement.Allocation) (*elasticRound, *sendCtx, int) {
		t.Helper()
		r := c.elasticSnapshot()
		if r == nil || len(r.states) != 1 {
			t.Fatalf("round: %+v", r)
		}
		l.bound(r, allocs)
		l.rounds++
		ctx := &sendCtx{}
		return r, ctx, c.applyElastic(ctx, &elasticResult{owner: c, round: r, allocs: allocs})
	}
	_, ctx, n := round(two)
	if n != 1 || len(ctx.sent) != 1 {
		t.Fatalf("%d orders, %d messages; want the move onto both GPUs", n, len(ctx.sent))
	}
	m, ok := ctx.sent[0].(*reconfigure)
	if !ok || m.seq == 0 {
		t.Fatalf("sent %T %+v, want a numbered reconfigure", ctx.sent[0], ctx.sent[0])
	}
	o, ok := l.sent["j"]
	names := make([]string, len(m.targets))
	for i, tg := range m.targets {
		names[i] = tg.gpu
	}
	if !ok || o.seq != m.seq || !slices.Equal(o.targets, names) || !slices.Equal(o.from, []string{"n1/gpu0"}) ||
		o.attempt != rec.Attempt || o.batch != 4096 || o.at.IsZero() {
		t.Fatalf("order recorded as %+v; want seq %d, targets %v, from n1/gpu0, attempt %d, batch 4096, a send time", o, m.seq, names, rec.Attempt)
	}

	// In flight: the policy sees the job on both GPUs; an allocation that
	// keeps it there orders nothing and is not counted; one back to one
	// GPU orders nothing either (the job actor would ignore it), counted
	// as in_flight.
	// Its attained service counts the one GPU it runs on until the move
	// lands: 60 s of job time accrue 60 GPU-s, not 120.
	base := c.elasticSnapshot().states[0].Attained
	clock.advance(600 * time.Millisecond)
	if got := c.elasticSnapshot().states[0].Attained - base; math.Abs(got-60) > 1e-6 {
		t.Fatalf("in flight from one GPU to two: %.6g GPU-s in 60 s, want 60", got)
	}
	inFlight := func() float64 {
		return gaugeValue(t, c.metrics.Registry, "gpusched_elastic_not_applied_total", string(NotAppliedInFlight))
	}
	r, ctx, n := round(two)
	if got := r.states[0].Current.NumGPUs(); got != 2 || n != 0 || len(ctx.sent) != 0 || inFlight() != 0 {
		t.Fatalf("in flight, kept at its targets: policy saw %d GPUs, %d orders, %g counted in flight; want 2 GPUs, no order, none counted", got, n, inFlight())
	}
	r, ctx, n = round(map[string]placement.Allocation{"j": {PerNode: []int{1}, LocalBatch: 4096}})
	if got := r.states[0].Current.NumGPUs(); got != 2 || n != 0 || len(ctx.sent) != 0 || inFlight() != 1 {
		t.Fatalf("in flight, moved back: policy saw %d GPUs, %d orders, %g counted in flight; want 2 GPUs, no order, one counted", got, n, inFlight())
	}
	c.onElastic(nil, &orderDropped{job: "j", seq: m.seq + 1, why: "another order"})
	if _, ok := l.sent["j"]; !ok {
		t.Fatal("a drop of another order ended the one in flight")
	}
	c.onElastic(nil, &orderDropped{job: "j", seq: m.seq, why: "undone"})
	if _, ok := l.sent["j"]; ok {
		t.Fatal("the order is still in flight after its drop")
	}
	r, _, _ = round(nil)
	if j := r.jobs["j"]; !slices.Equal(j.gpus, []string{"n1/gpu0"}) || j.batch != 4096 || len(r.inflight) != 0 {
		t.Fatalf("after the drop the round saw the job on %v at batch %d (in flight: %v), want on n1/gpu0 at 4096, nothing in flight", j.gpus, j.batch, r.inflight)
	}
}

// A move that lands between a round's snapshot and its apply: the policy
// decided for the job at its targets, where it now runs, so the round's
// order goes out, decided for the targets (the job actor would refuse one
// decided for the GPUs it left as stale).
func TestElasticMoveLandsBeforeApply(t *testing.T) {
	c, _, rec := reviewCoord(t, 2)
	l := c.elastic
	two := map[string]placement.Allocation{"j": {PerNode: []int{2}, LocalBatch: 2048}}
	r := c.elasticSnapshot()
	l.bound(r, two)
	l.rounds++
	if n := c.applyElastic(&sendCtx{}, &elasticResult{owner: c, round: r, allocs: two}); n != 1 {
		t.Fatalf("%d orders, want the move onto both GPUs", n)
	}
	targets := l.sent["j"].targets
	half := map[string]placement.Allocation{"j": {PerNode: []int{2}, LocalBatch: 1024}}
	r = c.elasticSnapshot()
	l.bound(r, half)
	l.rounds++
	// The move lands: the record is at the targets and batch, and the
	// resized event ends the order.
	rec.GPU, rec.GPUs, rec.Batch = targets[0], slices.Clone(targets), 4096
	c.elasticRefused(&transport.Event{Type: transport.EvResized, Job: "j", Batch: 4096, GPUIDs: targets})
	ctx := &sendCtx{}
	if n := c.applyElastic(ctx, &elasticResult{owner: c, round: r, allocs: half}); n != 1 || len(ctx.sent) != 1 {
		t.Fatalf("%d orders after the move landed, want the resize to 1024 per GPU", n)
	}
	if m := ctx.sent[0].(*reconfigure); !sameSet(m.from, targets) || m.fromBatch != 4096 || m.batch != 1024 {
		t.Fatalf("order %+v, want decided for the job on %v at 4096, ordering 1024 per GPU", m, targets)
	}
}

// An in-place resize in flight is shown at its new batch on the same GPUs:
// an allocation keeping that batch orders nothing and is not counted; one
// at another batch waits for it (in_flight), also while the record has no
// batch yet (placed, no progress reported: the record's batch is 0 until
// the resize or a report sets it).
func TestElasticResizeInFlight(t *testing.T) {
	for _, recBatch := range []int{4096, 0} {
		c, _, rec := reviewCoord(t, 1)
		c.metrics = NewCoordinatorMetrics()
		rec.Batch = recBatch
		l := c.elastic
		round := func(local int) (*elasticRound, int) {
			t.Helper()
			allocs := map[string]placement.Allocation{"j": {PerNode: []int{1}, LocalBatch: local}}
			r := c.elasticSnapshot()
			l.bound(r, allocs)
			l.rounds++
			return r, c.applyElastic(&sendCtx{}, &elasticResult{owner: c, round: r, allocs: allocs})
		}
		if _, n := round(2048); n != 1 {
			t.Fatalf("record batch %d: %d orders, want the resize to 2048", recBatch, n)
		}
		inFlight := func() float64 {
			return gaugeValue(t, c.metrics.Registry, "gpusched_elastic_not_applied_total", string(NotAppliedInFlight))
		}
		r, n := round(2048)
		if j := r.jobs["j"]; n != 0 || inFlight() != 0 || j.batch != 2048 || !slices.Equal(j.gpus, []string{"n1/gpu0"}) {
			t.Fatalf("record batch %d, kept at 2048: %d orders, %g in flight, job at %d on %v; want none, none, 2048 on n1/gpu0", recBatch, n, inFlight(), j.batch, j.gpus)
		}
		if _, n := round(1024); n != 0 || inFlight() != 1 {
			t.Fatalf("record batch %d, changed to 1024: %d orders, %g in flight; want none, one", recBatch, n, inFlight())
		}
	}
}

// The job actor answers an order it does not apply, and publishes nothing
// for, with an orderDropped naming the order: decided for another attempt,
// sent while another change is being applied, or asking for what the job
// already runs.
func TestJobActorDropsOrder(t *testing.T) {
	for _, c := range []struct {
		name     string
		attempt  int
		settling int
		batch    int // per GPU
		dropped  bool
	}{
		{"another attempt", 1, 0, 2048, true},
		{"another change in flight", 0, 1, 2048, true},
		{"as the job runs", 0, 0, 4096, true},
		{"not running", 0, 0, 2048, true},
	} {
		rec := elasticRecord(t, "j", []string{"n1/gpu0"})
		rec.Batch, rec.Node = 4096, "n1"
		if c.name == "not running" {
			rec.State = StatePending
		}
		j := &jobActor{id: "j", log: quiet, rec: rec, coord: actor.NewPID("coord:1", "coordinator"), life: &jobLife{settling: c.settling},
			reps: []*replica{{gpu: "n1/gpu0", node: "n1", pid: actor.NewPID("n1:1", "dev0")}}}
		ctx := &sendCtx{}
		j.onReconfigure(ctx, &reconfigure{batch: c.batch, targets: []target{{gpu: "n1/gpu0", node: "n1"}}, attempt: c.attempt,
			from: []string{"n1/gpu0"}, fromBatch: 4096, seq: 9})
		var got *orderDropped
		for _, msg := range ctx.sent {
			if d, ok := msg.(*orderDropped); ok {
				got = d
			}
		}
		if got == nil || got.seq != 9 || got.job != "j" || got.why == "" || len(ctx.sent) != 1 {
			t.Errorf("%s: sent %v, want only an orderDropped for order 9 saying why", c.name, ctx.sent)
		}
	}
}
