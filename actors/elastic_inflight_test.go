package actors

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/placement"
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

// The round's snapshot turns the order in flight (elasticLoop.sent, as
// applyElastic records it) into the GPUs no other order takes: its targets
// the job does not hold yet; none once the job runs on other GPUs than
// those it was decided for.
func TestElasticSnapshotInFlight(t *testing.T) {
	for _, c := range []struct {
		name string
		from []string
		want map[string]string
	}{
		{"decided for the job as it is", []string{"n1/gpu0"}, map[string]string{"n1/gpu1": "a"}},
		{"decided for other GPUs", []string{"n1/gpu1"}, map[string]string{}},
	} {
		l, err := newElasticLoop(ElasticConfig{Policy: "fifo"}, NewZooPredictor(DefaultPlanner()), quiet)
		if err != nil {
			t.Fatal(err)
		}
		rec := elasticRecord(t, "a", []string{"n1/gpu0"})
		rec.Batch = 4096
		co := &coordActor{elastic: l, gpuGen: map[string]uint64{},
			nodes: map[string]*nodeEntry{"n1": {info: NodeInfo{Name: "n1", State: "alive", GPUs: 2}}},
			gpus: []placement.FitGPU{{ID: "n1/gpu0", Node: "n1", Capacity: 80 << 30, Jobs: []placement.FitJob{{ID: "a"}}},
				{ID: "n1/gpu1", Node: "n1", Capacity: 80 << 30}},
			recs: map[string]*JobRecord{"a": rec}}
		o := co.changeNow([]string{"n1/gpu0", "n1/gpu1"}, 4096, 0)
		o.attempt, o.from, o.at = rec.Attempt, c.from, time.Now()
		l.sent["a"] = o
		r := co.elasticSnapshot()
		if r == nil {
			t.Fatalf("%s: no round", c.name)
		}
		if !maps.Equal(r.inflight, c.want) {
			t.Errorf("%s: in flight %v, want %v", c.name, r.inflight, c.want)
		}
	}
}
