package actors

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gpusched/gpusched/actors/pb"
)

// A round of the elastic loop bounds every job's batch by its memory
// demand at the per-GPU batches it asks about (maxBatch, bound), and a
// batch nothing asked about before is a TENSILE MinBudget search: seconds
// of wall time each. With ElasticConfig.PlanWait set, a round waits for
// such a prediction until its deadline, then decides with the demands
// already known: a batch whose demand is not known fits when a larger
// known batch fits, and does not when a smaller known one does not
// (demands grow with the batch, as largestFitting assumes). An order whose
// bound that cannot decide waits for the next round (NotAppliedPlanning);
// the prediction goes on in the background, one at a time, for the rounds
// after. Before, the demo's first round on two nodes of four GPUs took
// 10.5 s of wall time (1050 s of job time at its scale) while five jobs
// shared one GPU and six stood idle.

// errPlanning is the bound of an order that waits for a prediction.
var errPlanning = errors.New("its memory bound waits for a prediction in progress (the next round decides it)")

// planAhead holds the elastic loop's predictions by spec (less its batch)
// and per-GPU batch, and the ones in progress.
type planAhead struct {
	pred Predictor
	mu   sync.Mutex
	done map[string]map[int]aheadResult // base key → batch → result
	busy map[string]chan struct{}       // full key → closed when done
	sem  chan struct{}                  // one background prediction at a time
}

type aheadResult struct {
	d  *pb.Demand
	ok bool // false: the prediction failed
}

// Demand states of lookup.
const (
	demandKnown = iota
	demandFailed
	demandUnknown // still being predicted at the deadline
)

func newPlanAhead(pred Predictor) *planAhead {
	return &planAhead{pred: pred, done: map[string]map[int]aheadResult{}, busy: map[string]chan struct{}{}, sem: make(chan struct{}, 1)}
}

// baseKey is demandKey without the batch.
func baseKey(s *pb.JobSpec, devType string) string {
	return fmt.Sprintf("%s|%s|%s|%d|%d|%s|%s|%g", s.Model, s.Kind, s.Dtype, s.Seq, s.ParamChunkBytes, s.Optimizer, devType, s.Tolerance)
}

// record keeps a prediction's result.
func (p *planAhead) record(base string, batch int, d *pb.Demand, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done[base] == nil {
		p.done[base] = map[int]aheadResult{}
	}
	p.done[base][batch] = aheadResult{d: d, ok: ok}
}

// predict predicts s now (blocking) and records the result.
func (p *planAhead) predict(s *pb.JobSpec, devType string) (*pb.Demand, bool) {
	pr, err := p.pred.Predict(s, devType)
	ok := err == nil && pr != nil && pr.Demand != nil
	var d *pb.Demand
	if ok {
		d = pr.Demand
	}
	p.record(baseKey(s, devType), int(s.Batch), d, ok)
	return d, ok
}

// lookup is s's demand: known, failed, or unknown when its prediction (in
// the background from now, if not already) has not ended by deadline.
func (p *planAhead) lookup(s *pb.JobSpec, devType string, deadline time.Time) (*pb.Demand, int) {
	base, batch, key := baseKey(s, devType), int(s.Batch), demandKey(s, devType)
	p.mu.Lock()
	if r, ok := p.done[base][batch]; ok {
		p.mu.Unlock()
		return r.state()
	}
	ch, running := p.busy[key]
	if !running {
		ch = make(chan struct{})
		p.busy[key] = ch
		go func() {
			p.sem <- struct{}{}
			p.predict(s, devType)
			<-p.sem
			p.mu.Lock()
			delete(p.busy, key)
			p.mu.Unlock()
			close(ch)
		}()
	}
	p.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		return nil, demandUnknown
	}
	p.mu.Lock()
	r := p.done[base][batch]
	p.mu.Unlock()
	return r.state()
}

func (r aheadResult) state() (*pb.Demand, int) {
	if !r.ok {
		return nil, demandFailed
	}
	return r.d, demandKnown
}

// envelope is what the known demands of s's spec (any batch) say of fits
// at batch: decided when a larger known batch fits (then so does batch) or
// a smaller known one does not (then neither does batch); upper is the
// demand of the smallest known batch above batch (nil: none).
func (p *planAhead) envelope(s *pb.JobSpec, devType string, batch int, fits func(*pb.Demand) bool) (yes, decided bool, upper *pb.Demand) {
	p.mu.Lock()
	known := p.done[baseKey(s, devType)]
	batches := make([]int, 0, len(known))
	for b, r := range known {
		if r.ok {
			batches = append(batches, b)
		}
	}
	sort.Ints(batches)
	var lower *pb.Demand
	for _, b := range batches {
		switch {
		case b < batch:
			lower = known[b].d
		case b > batch && upper == nil:
			upper = known[b].d
		}
	}
	p.mu.Unlock()
	switch {
	case upper != nil && fits(upper):
		return true, true, upper
	case lower != nil && !fits(lower):
		return false, true, upper
	}
	return false, false, upper
}
