package actors

import (
	"math"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
)

// The live elastic loop's round lifecycle at unit level (no cluster):
// what it learns, the attained service it counts and the backoff of
// unanswered changes. A review in session 37 found each of these wrong;
// each test failed before its fix.

// sendCtx is an actor.Context whose Send records the messages; any other
// method panics (the code under test uses only Send).
type sendCtx struct {
	actor.Context
	sent []any
}

func (c *sendCtx) Send(_ *actor.PID, msg any) { c.sent = append(c.sent, msg) }

// reviewCoord is a coordinator actor with an elastic loop (fifo, virtual
// clock at time scale 100, bytesPredictor) on node n1 of gpus GPUs of
// 80 GiB, running the elastic MLP job "j" on n1/gpu0 at batch 4096.
func reviewCoord(t *testing.T, gpus int) (*coordActor, *virtualClock, *JobRecord) {
	t.Helper()
	clock := &virtualClock{now: time.Now()}
	l, err := newElasticLoop(ElasticConfig{Policy: "fifo", TimeScale: 100, Clock: clock.Now}, bytesPredictor{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	rec := elasticRecord(t, "j", []string{"n1/gpu0"})
	rec.Batch, rec.Node = 4096, "n1"
	c := &coordActor{elastic: l, gpuGen: map[string]uint64{},
		nodes: map[string]*nodeEntry{"n1": {info: NodeInfo{Name: "n1", State: "alive", GPUs: gpus, Address: "n1:1"}}},
		recs:  map[string]*JobRecord{"j": rec},
		pids:  map[string]*actor.PID{"j": actor.NewPID("coord:1", "job-j")}}
	for i := 0; i < gpus; i++ {
		g := placement.FitGPU{ID: GPUName("n1", i), Node: "n1", DeviceType: testGPU, Capacity: 80 << 30}
		if i == 0 {
			g.Jobs = []placement.FitJob{{ID: "j", Min: 4096}}
		}
		c.gpus = append(c.gpus, g)
	}
	return c, clock, rec
}

// A resize (or a move, or a re-placement after a requeue) clears the
// record's iteration time, measured at the old shape, until the devices
// report at the new one; before, the resized update taught the loop that
// old time as the new shape's (elasticObserve keys it by the record's new
// batch and GPUs), and ONES takes the first time it is given for a shape
// as the shape's time. No observation at batch 1024 until an iteration at
// 1024 is measured.
func TestElasticResizeDoesNotTeachOldIterationTime(t *testing.T) {
	c, _, rec := reviewCoord(t, 1)
	l := c.elastic
	rec.IterSeconds, rec.PredSeconds = 1.0, 1.0
	c.elasticObserve(rec) // 4096 on one GPU: 1 s per iteration, measured
	if o, ok := l.obs["j"][obsKey{gpus: 1, nodes: 1, local: 4096}]; !ok || o.step != 1.0 {
		t.Fatalf("measured time at 4096 not learned: %+v", l.obs["j"])
	}
	// The job actor applies an in-place resize to 1024 (as resizeInPlace
	// does once its device accepted) and sends its record.
	j := &jobActor{id: "j", log: quiet, rec: rec.clone(),
		reps: []*replica{{gpu: "n1/gpu0", node: "n1", pid: actor.NewPID("n1:1", "dev0")}}}
	ctx := &sendCtx{}
	j.applied(ctx, &reconfigure{batch: 1024, reason: "review"}, &pb.Demand{MinBudget: 1024, IterationSeconds: 0.25}, 2, 4096, 0,
		[]string{"n1/gpu0"}, "batch 4096 → 1024")
	if len(ctx.sent) != 1 {
		t.Fatalf("applied sent %d messages", len(ctx.sent))
	}
	upd := ctx.sent[0].(*jobUpdate)
	c.elasticObserve(upd.rec)
	if o, ok := l.obs["j"][obsKey{gpus: 1, nodes: 1, local: 1024}]; ok {
		t.Fatalf("the resized update taught %.3g s per micro-step at batch 1024 (the record's IterSeconds %.3g s was measured at 4096); want no observation at 1024 before one is measured there",
			o.step, upd.rec.IterSeconds)
	}
}

// Attained service counts the GPUs a job runs on, not the ones a round
// ordered: when the devices refuse a move from one GPU to two, 60 s on
// its one GPU accrue 60 GPU-s (before, applyElastic counted the ordered
// two from the round on, and nothing undid it).
func TestElasticRefusedMoveNotCountedAsAttained(t *testing.T) {
	c, clock, rec := reviewCoord(t, 2)
	l := c.elastic
	r := c.elasticSnapshot()
	if r == nil || len(r.states) != 1 {
		t.Fatalf("round: %+v", r)
	}
	base := r.states[0].Attained
	allocs := map[string]placement.Allocation{"j": {PerNode: []int{2}, LocalBatch: 2048}}
	l.bound(r, allocs)
	l.rounds++
	ctx := &sendCtx{}
	if n := c.applyElastic(ctx, &elasticResult{owner: c, round: r, allocs: allocs}); n != 1 {
		t.Fatalf("%d orders, want the move onto both GPUs", n)
	}
	// A device refuses the admission: the job keeps running on n1/gpu0.
	c.elasticRefused(&transport.Event{Type: transport.EvResizeRefused, Job: "j", Batch: 4096, OldBatch: 4096,
		GPUs: 2, OldGPUs: 1, GPUIDs: []string{"n1/gpu0", "n1/gpu1"}, OldGPUIDs: []string{"n1/gpu0"}})
	clock.advance(600 * time.Millisecond) // 60 s of job time
	stored := rec.clone()
	c.recordAttained(stored)
	r2 := c.elasticSnapshot()
	got := r2.states[0].Attained - base
	if math.Abs(got-60) > 1e-6 || math.Abs(stored.AttainedGPUSeconds-base-60) > 1e-6 {
		t.Fatalf("after a refused move the job on one GPU accrued %.6g GPU-s in 60 s (stored %.6g), want 60", got, stored.AttainedGPUSeconds-base)
	}
}

// A job whose node is briefly suspect keeps running on its GPU (only a
// dead node's jobs are re-queued): a round that does not list it tells the
// policy it left, but its attained service goes on (before, forget
// stopped it, and the spell was never counted). 120 s on one GPU accrue
// 120 GPU-s.
func TestElasticSuspectNodeKeepsAttainedService(t *testing.T) {
	c, clock, _ := reviewCoord(t, 1)
	r := c.elasticSnapshot()
	if r == nil {
		t.Fatal("no round")
	}
	base := r.states[0].Attained
	c.nodes["n1"].info.State = "suspect"
	c.setDown("n1", true)
	clock.advance(600 * time.Millisecond)
	if r := c.elasticSnapshot(); r != nil {
		t.Fatalf("round with the node suspect listed %d jobs", len(r.states))
	}
	c.nodes["n1"].info.State = "alive"
	c.setDown("n1", false)
	clock.advance(600 * time.Millisecond)
	r = c.elasticSnapshot()
	if r == nil || len(r.states) != 1 {
		t.Fatal("no round after the node is alive again")
	}
	if got := r.states[0].Attained - base; math.Abs(got-120) > 1e-6 {
		t.Fatalf("the job ran 120 s on one GPU through a suspect spell and accrued %.6g GPU-s, want 120", got)
	}
}

// An unanswered change "is held back for the next 1 round, then 2, 4, 8
// and at most 16 rounds with each miss in a row" (README): a miss after the
// same change was applied (and the job has since left it) is a first miss
// again, held back 1 round (before, the record of the earlier miss was
// never cleared and this one counted as the second).
func TestElasticUnansweredMissesResetAfterSuccess(t *testing.T) {
	l, err := newElasticLoop(ElasticConfig{Policy: "fifo"}, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	c := &coordActor{elastic: l, gpuGen: map[string]uint64{}}
	gpus := []string{"n1/gpu0", "n1/gpu1"}
	miss := func() {
		c.elasticRefused(&transport.Event{Type: transport.EvResizeRefused, Job: "j", Batch: 4096, GPUIDs: gpus, Unanswered: true})
	}
	l.rounds = 5
	miss() // first miss: held back round 6, ordered again in round 7
	l.rounds = 7
	if c.refusedAgain("j", gpus, 4096, 0) {
		t.Fatal("not ordered again after one round")
	}
	// Round 7's order is applied (resized: the job runs on both GPUs).
	c.elasticRefused(&transport.Event{Type: transport.EvResized, Job: "j", Batch: 4096, GPUIDs: gpus})
	// Later it shrinks back to n1/gpu0 (it left n1/gpu1), and in round 20
	// the same change is ordered and goes unanswered.
	c.bumpGPU("n1/gpu1")
	l.rounds = 20
	miss()
	held := 0
	for l.rounds = 21; l.rounds <= 40 && c.refusedAgain("j", gpus, 4096, 0); l.rounds++ {
		held++
	}
	if rf := l.refused["j"]; held != 1 {
		t.Fatalf("first miss since the change ran: held back %d rounds (misses %d), want 1", held, rf.misses)
	}
}

// The wall time between rounds is the interval over the time scale, at
// least a millisecond and at most a year: a tiny scale overflowed
// time.Duration, and the wait wrapped to rounds every millisecond.
func TestElasticTickWall(t *testing.T) {
	for _, c := range []struct {
		interval, scale float64
		want            time.Duration
	}{
		{60, 100, 600 * time.Millisecond},
		{60, 1e9, time.Millisecond},
		{60, 1e-9, 365 * 24 * time.Hour},
		{60, 5e-9, 365 * 24 * time.Hour},
		{60, 1e-6, 365 * 24 * time.Hour},
		{60, 1, time.Minute},
	} {
		if got := tickWall(c.interval, c.scale); got != c.want {
			t.Errorf("interval %g s at scale %g: %v, want %v", c.interval, c.scale, got, c.want)
		}
	}
}

// An order decided before an in-place change that the coordinator had not
// yet heard of is not applied: the job actor compares the batch and
// micro-steps the order was decided at with its own, as it compares the
// attempt and GPUs (found by review: it compared only those two).
func TestElasticJobActorRefusesOrderForOldBatch(t *testing.T) {
	rec := elasticRecord(t, "j", []string{"n1/gpu0"})
	rec.Batch, rec.Accum = 2048, 1
	j := &jobActor{id: "j", log: quiet, rec: rec,
		reps: []*replica{{gpu: "n1/gpu0", node: "n1", pid: actor.NewPID("n1:1", "dev0")}}}
	for _, c := range []struct {
		batch, accum int
		stale        bool
	}{{2048, 1, false}, {4096, 0, true}, {2048, 0, true}, {0, 0, false}} {
		m := &reconfigure{attempt: rec.Attempt, from: []string{"n1/gpu0"}, fromBatch: c.batch, fromAccum: c.accum}
		if why := j.staleOrder(m); (why != "") != c.stale {
			t.Errorf("order decided at batch %d in %d micro-steps, job at 2048 in 2: stale %q, want stale %v", c.batch, c.accum+1, why, c.stale)
		}
	}
}

// A refusal keeps its GPUs' generations as they were when the order went
// out: a neighbour that left a target while the order was in flight lifts
// it, as one that leaves afterwards does (found by review: the generations
// were read when the refusal was processed, so the departure in flight was
// taken as already seen and the change stayed blocked).
func TestElasticRefusalKeepsGenerationsOfTheOrder(t *testing.T) {
	c, _, _ := reviewCoord(t, 2)
	l := c.elastic
	r := c.elasticSnapshot()
	allocs := map[string]placement.Allocation{"j": {PerNode: []int{2}, LocalBatch: 2048}}
	l.bound(r, allocs)
	l.rounds++
	if n := c.applyElastic(&sendCtx{}, &elasticResult{owner: c, round: r, allocs: allocs}); n != 1 {
		t.Fatalf("%d orders, want the move onto both GPUs", n)
	}
	gpus := []string{"n1/gpu0", "n1/gpu1"}
	c.bumpGPU("n1/gpu1") // a neighbour leaves n1/gpu1 while the order is in flight
	c.elasticRefused(&transport.Event{Type: transport.EvResizeRefused, Job: "j", Batch: 4096, OldBatch: 4096,
		GPUs: 2, OldGPUs: 1, GPUIDs: gpus, OldGPUIDs: []string{"n1/gpu0"}})
	if c.refusedAgain("j", gpus, 4096, 0) {
		t.Fatal("the change is held back, though a job left n1/gpu1 after the order was sent")
	}
	// Refused again with nothing leaving since: held back.
	l.rounds++
	if n := c.applyElastic(&sendCtx{}, &elasticResult{owner: c, round: r, allocs: allocs}); n != 1 {
		t.Fatalf("%d orders the second time, want 1", n)
	}
	c.elasticRefused(&transport.Event{Type: transport.EvResizeRefused, Job: "j", Batch: 4096, OldBatch: 4096,
		GPUs: 2, OldGPUs: 1, GPUIDs: gpus, OldGPUIDs: []string{"n1/gpu0"}})
	if !c.refusedAgain("j", gpus, 4096, 0) {
		t.Fatal("a change refused with nothing leaving its GPUs since is ordered again")
	}
}
