package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/transport"
)

// The memory oracle ONES gets: the largest batch whose TENSILE minimum
// budget fits the free budget, which is larger than the largest batch whose
// vanilla peak fits.
func TestElasticOracleTENSILEWidens(t *testing.T) {
	pred := NewZooPredictor(DefaultPlanner())
	l, err := newElasticLoop(ElasticConfig{Interval: 60}, pred, quiet)
	if err != nil {
		t.Fatal(err)
	}
	spec := &pb.JobSpec{Id: "j-1", Model: "resnet50", Kind: "train", Batch: 256, BaseBatch: 256, Iterations: 10, Tolerance: 0.1, Gpus: 1}
	j := &elasticJob{id: "j-1", spec: spec, min: 16, max: 256, batch: 256, free: 6 << 30, devType: "h100-80gb"}
	byMin, byVanilla := l.maxBatch(j)
	t.Logf("6 GiB free: batch ≤ %d with TENSILE, ≤ %d at vanilla peak", byMin, byVanilla)
	if byMin <= byVanilla {
		t.Fatalf("TENSILE does not widen the choice: %d vs %d", byMin, byVanilla)
	}
	demand := func(b int) *pb.Demand {
		s := proto.Clone(spec).(*pb.JobSpec)
		s.Batch = int32(b)
		p, err := pred.Predict(s, "h100-80gb")
		if err != nil {
			t.Fatal(err)
		}
		return p.Demand
	}
	if demand(byMin).MinBudget > j.free || (byMin < j.max && demand(byMin+1).MinBudget <= j.free) {
		t.Fatalf("batch %d is not the largest that fits %d bytes", byMin, j.free)
	}
	if demand(byVanilla).VanillaPeak > j.free || demand(byVanilla+1).VanillaPeak <= j.free {
		t.Fatalf("batch %d is not the largest whose vanilla peak fits", byVanilla)
	}
	if _, err := newElasticLoop(ElasticConfig{Policy: "nosuch"}, pred, quiet); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

// startElasticCluster is startCluster with the coordinator's elastic loop on.
func startElasticCluster(t *testing.T, nodes, gpus int, device string, scale float64, ec ElasticConfig) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: DefaultPlanner()}
	t.Cleanup(tc.stop)
	co, err := StartCoordinator(CoordinatorConfig{DataDir: tc.dataDir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0",
		Gossip: "127.0.0.1:0", Log: quiet, Predictor: NewZooPredictor(tc.planner), Elastic: ec})
	if err != nil {
		t.Fatal(err)
	}
	tc.co = co
	if tc.nc, err = transport.Connect(co.NATSURL(), "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.nc.Subscribe(transport.AllEvents, func(m *nats.Msg) {
		if e, err := transport.ParseEvent(m.Data); err == nil {
			tc.mu.Lock()
			tc.events = append(tc.events, e)
			tc.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	_ = tc.nc.Flush()
	for i := 0; i < nodes; i++ {
		tc.addNode(fmt.Sprintf("n%d", i+1), gpus, device, scale)
	}
	return tc
}

// warmElastic fills tensorsched's process-wide MinBudget cache for the
// batches the oracle's binary search visits on an empty h100, so that a
// round's timing does not depend on planning speed (slow under -race).
func warmElastic(t *testing.T, spec *pb.JobSpec, lo, hi int) {
	t.Helper()
	l, err := newElasticLoop(ElasticConfig{}, NewZooPredictor(DefaultPlanner()), quiet)
	if err != nil {
		t.Fatal(err)
	}
	p := gpu.MustProfile("h100-80gb")
	l.maxBatch(&elasticJob{spec: spec, min: lo, max: hi, free: p.MemoryBytes, devType: p.Name})
}

const elasticSpec = "name: el\nmodel: resnet50\nkind: train\nbatch: {min: 16, max: 128}\ngpus: {min: 1, max: 2}\niterations: 3000\npriority: 1\ntolerance: 0.1\n"

// An elastic job on a two-node cluster: a round of the live ONES loop
// resizes it to a batch inside its range, the device re-plans at the new
// batch, and the job completes. The round is run on demand once the job has
// reported an iteration time, so the policy's input is the same every run.
func TestElasticResize(t *testing.T) {
	const scale = 100
	warmElastic(t, &pb.JobSpec{Model: "resnet50", Kind: "train", Batch: 128, Tolerance: 0.1}, 16, 128)
	tc := startElasticCluster(t, 2, 1, "h100-80gb", scale, ElasticConfig{Policy: "ones", TimeScale: scale, Seed: 1})
	id := tc.submit(elasticSpec)[0].ID
	tc.waitFor(30*time.Second, "a measured iteration time", func() bool {
		r := tc.job(id)
		return r.State == StateRunning && r.IterSeconds > 0 && r.Batch == 128
	})
	orders, err := tc.co.RunElasticRound()
	if err != nil || orders != 1 {
		t.Fatalf("elastic round: %d orders, %v", orders, err)
	}
	var rs []transport.Event
	tc.waitFor(30*time.Second, "a resized event with a batch", func() bool {
		rs = nil
		for _, e := range tc.eventsOf(id, transport.EvResized) {
			if e.Batch > 0 {
				rs = append(rs, e)
			}
		}
		return len(rs) > 0
	})
	e := rs[0]
	t.Logf("resized %d → %d (gpus %d → %d), plan %d, min budget %s: %s", e.OldBatch, e.Batch, e.OldGPUs, e.GPUs, e.PlanVersion, gpu.FormatBytes(e.MinBudget), e.Reason)
	if e.OldBatch != 128 || e.Batch < 16 || e.Batch >= 128 || e.GPUs != 1 {
		t.Errorf("bad resize %+v", e)
	}
	started := tc.eventsOf(id, transport.EvStarted)
	if len(started) == 0 || e.PlanVersion <= started[0].PlanVersion || e.MinBudget <= 0 || e.MinBudget >= started[0].MinBudget {
		t.Errorf("the device did not re-plan for the smaller batch: %+v after %+v", e, started)
	}
	r := tc.waitState(id, StateCompleted, 60*time.Second)
	if r.Iteration != r.Total || r.Batch != e.Batch {
		t.Fatalf("completed at %d of %d, batch %d", r.Iteration, r.Total, r.Batch)
	}
	var after int
	for _, p := range tc.eventsOf(id, transport.EvProgress) {
		if p.Seq > e.Seq {
			after++
		}
	}
	t.Logf("%d progress events after the resize; final iteration time %.4f s at batch %d", after, r.IterSeconds, r.Batch)
}

// The periodic loop runs rounds on its own while an elastic job runs.
func TestElasticLoopPeriodic(t *testing.T) {
	const scale = 100
	warmElastic(t, &pb.JobSpec{Model: "resnet50", Kind: "train", Batch: 128, Tolerance: 0.1}, 16, 128)
	tc := startElasticCluster(t, 1, 1, "h100-80gb", scale, ElasticConfig{Policy: "ones", Interval: 5, TimeScale: scale, Seed: 1})
	id := tc.submit(elasticSpec)[0].ID
	tc.waitFor(30*time.Second, "an elastic round", func() bool {
		n, err := tc.co.ElasticRounds()
		return err == nil && n >= 2
	})
	tc.waitState(id, StateCompleted, 60*time.Second)
}
