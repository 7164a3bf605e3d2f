package actors

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/placement"
)

// gatedPredictor is bytesPredictor (demand = the batch, in bytes) that
// holds every batch not in ready until release is closed, and counts the
// predictions of each batch.
type gatedPredictor struct {
	ready   map[int32]bool
	release chan struct{}
	mu      sync.Mutex
	calls   map[int32]int
}

func (p *gatedPredictor) Predict(s *pb.JobSpec, _ string) (*Prediction, error) {
	p.mu.Lock()
	p.calls[s.Batch]++
	p.mu.Unlock()
	if !p.ready[s.Batch] {
		<-p.release
	}
	return &Prediction{Demand: &pb.Demand{MinBudget: int64(s.Batch), IterationSeconds: 1}}, nil
}

// roundOf is a round of one job "j" holding n/gpu0 at a per-GPU batch of
// cur, batch range 1–max, on a node of four GPUs of capacity free (the
// demand of a batch is the batch in bytes).
func roundOf(cur, maxBatch int, free int64) (*elasticRound, *elasticJob) {
	var gpus []placement.FitGPU
	for i := 0; i < 4; i++ {
		g := placement.FitGPU{ID: fmt.Sprintf("n/gpu%d", i), Node: "n", DeviceType: testGPU, Capacity: free}
		if i == 0 {
			g.Jobs = []placement.FitJob{{ID: "j", Min: int64(cur)}}
		}
		gpus = append(gpus, g)
	}
	j := &elasticJob{id: "j", spec: &pb.JobSpec{Model: "mlp", Kind: "train", Batch: int32(cur)}, min: 1, max: maxBatch, batch: cur,
		free: free, devType: testGPU, gpus: []string{"n/gpu0"}}
	return &elasticRound{cluster: placement.ClusterState{Nodes: []placement.Node{{Name: "n", GPUs: 4}}},
		jobs: map[string]*elasticJob{"j": j}, gpus: gpus, busy: map[string]bool{}}, j
}

// With PlanWait set, a round's bound does not wait for a prediction past
// its deadline: a batch below one whose known demand fits is taken to fit
// (demands grow with the batch), and an order the known demands cannot
// decide waits for a later round (errPlanning), the prediction going on
// in the background; once it has ended, a round decides from it. Without
// PlanWait the round waits for it, as before.
func TestElasticPlanWait(t *testing.T) {
	// The job runs at 64 per GPU; only 64 and 1 are predicted at once.
	p := &gatedPredictor{ready: map[int32]bool{64: true, 1: true}, release: make(chan struct{}), calls: map[int32]int{}}
	l, err := newElasticLoop(ElasticConfig{Policy: "fifo", PlanWait: 20 * time.Millisecond}, p, quiet)
	if err != nil {
		t.Fatal(err)
	}
	// Learned: 64 fits a GPU of 100 bytes.
	l.ahead.predict(&pb.JobSpec{Model: "mlp", Kind: "train", Batch: 64}, testGPU)
	l.ahead.predict(&pb.JobSpec{Model: "mlp", Kind: "train", Batch: 1}, testGPU)

	// Split over two GPUs at 32 each: 32 < 64 fits by the envelope,
	// without waiting for its own prediction.
	r, j := roundOf(64, 64, 100)
	l.deadline = time.Now().Add(l.cfg.PlanWait)
	start := time.Now()
	l.bound(r, map[string]placement.Allocation{"j": {PerNode: []int{2}, LocalBatch: 32}})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("bound waited %v for a held prediction", took)
	}
	if j.to == nil || j.to.err != nil || j.to.micro != 32 || len(j.to.gpus) != 2 || j.to.needs != 64 {
		t.Fatalf("split order: bound %+v; want 2 GPUs at 32 each, reserving 64 (the known larger batch's demand)", j.to)
	}

	// A split the known demands decide is not held back by the batches
	// above it that the bound's search asks about (range up to 256 on
	// GPUs of 1000: 65–256 are being predicted).
	r, j = roundOf(64, 256, 1000)
	l.deadline = time.Now().Add(l.cfg.PlanWait)
	l.bound(r, map[string]placement.Allocation{"j": {PerNode: []int{2}, LocalBatch: 32}})
	if j.to == nil || j.to.err != nil || j.to.micro != 32 {
		t.Fatalf("split order with unknown batches above it: bound %+v; want 2 GPUs at 32 each", j.to)
	}
	// A job running at a batch not predicted yet (96, an order decided
	// from other batches) whose allocation keeps it as it runs: nothing to
	// order and nothing to wait for, though 96 is undecided.
	r, j = roundOf(96, 256, 200)
	l.deadline = time.Now().Add(l.cfg.PlanWait)
	l.bound(r, map[string]placement.Allocation{"j": {PerNode: []int{1}, LocalBatch: 96}})
	if j.to == nil || j.to.err != nil || !j.to.unchanged(j) {
		t.Fatalf("unchanged allocation at an unknown batch: bound %+v; want no order and no wait", j.to)
	}

	// Grow the batch to 96 per GPU on one GPU of 200: nothing known above
	// 64 fits it or not, so the order waits for the next round.
	r, j = roundOf(64, 96, 200)
	l.deadline = time.Now().Add(l.cfg.PlanWait)
	l.bound(r, map[string]placement.Allocation{"j": {PerNode: []int{1}, LocalBatch: 96}})
	if j.to == nil || !errors.Is(j.to.err, errPlanning) {
		t.Fatalf("order above the known batches: bound %+v; want it to wait for its prediction (errPlanning)", j.to)
	}

	// The predictions end; the next round decides 96 from its own.
	close(p.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.ahead.mu.Lock()
		busy := len(l.ahead.busy)
		l.ahead.mu.Unlock()
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("background predictions did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r, j = roundOf(64, 96, 200)
	l.deadline = time.Now().Add(10 * time.Second) // any prediction left ends well within it
	l.bound(r, map[string]placement.Allocation{"j": {PerNode: []int{1}, LocalBatch: 96}})
	if j.to == nil || j.to.err != nil || j.to.micro != 96 || j.to.needs != 96 {
		t.Fatalf("order after the predictions: bound %+v; want 96 per GPU, reserving 96", j.to)
	}
	p.mu.Lock()
	for b, n := range p.calls {
		if n != 1 {
			t.Errorf("batch %d predicted %d times, want once (in the background, then remembered)", b, n)
		}
	}
	p.mu.Unlock()

	// Without a deadline the bound waits for the prediction.
	p2 := &gatedPredictor{ready: map[int32]bool{}, release: make(chan struct{}), calls: map[int32]int{}}
	l2, err := newElasticLoop(ElasticConfig{Policy: "fifo"}, p2, quiet)
	if err != nil {
		t.Fatal(err)
	}
	r, j = roundOf(64, 96, 200)
	done := make(chan struct{})
	go func() {
		l2.bound(r, map[string]placement.Allocation{"j": {PerNode: []int{1}, LocalBatch: 96}})
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("bound without PlanWait returned before its predictions ended")
	case <-time.After(50 * time.Millisecond):
	}
	close(p2.release)
	<-done
	if j.to == nil || j.to.err != nil || j.to.micro != 96 {
		t.Fatalf("bound without PlanWait: %+v; want 96 per GPU", j.to)
	}
	if _, err := newElasticLoop(ElasticConfig{PlanWait: -time.Second}, p2, quiet); err == nil {
		t.Error("a negative PlanWait was accepted")
	}
}

// A stopped coordinator's queued background predictions are dropped, not
// run for no one; the one in progress ends.
func TestPlanAheadClose(t *testing.T) {
	p := &gatedPredictor{ready: map[int32]bool{}, release: make(chan struct{}), calls: map[int32]int{}}
	a := newPlanAhead(p)
	spec := func(b int32) *pb.JobSpec { return &pb.JobSpec{Model: "mlp", Kind: "train", Batch: b} }
	soon := time.Now().Add(10 * time.Millisecond)
	// 8 starts (and is held in the predictor); 16 and 32 queue behind it.
	for _, b := range []int32{8, 16, 32} {
		if _, st := a.lookup(spec(b), testGPU, soon); st != demandUnknown {
			t.Fatalf("batch %d: state %d, want unknown while held", b, st)
		}
	}
	// Once one of them is in the predictor, the coordinator stops.
	for wait := time.Now().Add(10 * time.Second); ; {
		p.mu.Lock()
		n := p.calls[8] + p.calls[16] + p.calls[32]
		p.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(wait) {
			t.Fatal("no background prediction started")
		}
		time.Sleep(time.Millisecond)
	}
	a.close()
	if _, st := a.lookup(spec(64), testGPU, time.Now().Add(time.Second)); st != demandUnknown {
		t.Errorf("a lookup after close: state %d, want unknown at once", st)
	}
	close(p.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.mu.Lock()
		busy := len(a.busy)
		a.mu.Unlock()
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("background predictions did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	started := 0
	for _, b := range []int32{8, 16, 32} {
		started += p.calls[b]
	}
	if started != 1 || p.calls[64] != 0 {
		t.Errorf("predictions run: %v; want only the one in progress at close", p.calls)
	}
}
