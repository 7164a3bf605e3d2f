package actors

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/workload"
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
//
// The policy's own memory bound (roundOracle) is conservative the same
// way: a batch undecided there counts as not fitting, so the policy may
// see a smaller largest batch than the job has until the prediction ends,
// and decide with it; its orders go out (deferring them would undo the
// point). The reservation of an order at an unknown batch is the demand
// of the nearest larger known one; TENSILE's minimum budget grows with the
// batch to within a few per cent, so it may fall that short. When the
// coordinator stops, the predictions not started yet are dropped (close);
// the one in progress ends on its own.

// planningRounds is how many rounds in a row an order waits for a
// prediction before the wait is logged at info level.
const planningRounds = 5

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
	// closed: the coordinator stopped; predictions not started yet are
	// dropped rather than run for no one.
	closed bool
}

// close drops the background predictions not started yet and starts no
// more: a stopped coordinator's queue would go on using CPU (in bench
// live, during the next run).
func (p *planAhead) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

type aheadResult struct {
	p  *Prediction
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

// record keeps a prediction's result.
func (p *planAhead) record(base string, batch int, pr *Prediction, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done[base] == nil {
		p.done[base] = map[int]aheadResult{}
	}
	p.done[base][batch] = aheadResult{p: pr, ok: ok}
}

// predict predicts s now (blocking) and records the result; a predictor
// that panics counts as failed.
func (p *planAhead) predict(s *pb.JobSpec, devType string) (d *pb.Demand, ok bool) {
	var pr *Prediction
	defer func() {
		if recover() != nil {
			d, ok, pr = nil, false, nil
		}
		p.record(baseKey(s, devType), int(s.Batch), pr, ok)
	}()
	pr, err := p.pred.Predict(s, devType)
	if ok = err == nil && pr != nil && pr.Demand != nil; ok {
		d = pr.Demand
	}
	return d, ok
}

// graph is a graph of s's model at any batch predicted (its parameters
// do not depend on the batch); nil when none is known.
func (p *planAhead) graph(s *pb.JobSpec, devType string) *workload.Graph {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.done[baseKey(s, devType)] {
		if r.ok && r.p.Graph != nil {
			return r.p.Graph
		}
	}
	return nil
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
	if !running && p.closed {
		p.mu.Unlock()
		return nil, demandUnknown
	}
	if !running {
		ch = make(chan struct{})
		p.busy[key] = ch
		go func() {
			p.sem <- struct{}{}
			defer func() {
				<-p.sem
				p.mu.Lock()
				delete(p.busy, key)
				p.mu.Unlock()
				close(ch)
			}()
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if !closed {
				p.predict(s, devType)
			}
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
	return r.p.Demand, demandKnown
}

// envelope is what the known demands of s's spec say of fits at batch:
// its own, if its prediction has ended since it was looked up; else
// decided when a larger known batch fits (then so does batch) or a
// smaller known one does not (then neither does batch). upper and lower
// are the demands of the nearest known batches above and below it (nil:
// none): bounds of its demand, as far as demands grow with the batch
// (TENSILE's minimum budget does, to within a few per cent).
func (p *planAhead) envelope(s *pb.JobSpec, devType string, batch int, fits func(*pb.Demand) bool) (yes, decided bool, upper, lower *pb.Demand) {
	p.mu.Lock()
	known := p.done[baseKey(s, devType)]
	if r, ok := known[batch]; ok {
		p.mu.Unlock()
		if !r.ok {
			return false, true, nil, nil
		}
		return fits(r.p.Demand), true, r.p.Demand, r.p.Demand
	}
	batches := make([]int, 0, len(known))
	for b, r := range known {
		if r.ok {
			batches = append(batches, b)
		}
	}
	sort.Ints(batches)
	for _, b := range batches {
		switch {
		case b < batch:
			lower = known[b].p.Demand
		case b > batch && upper == nil:
			upper = known[b].p.Demand
		}
	}
	p.mu.Unlock()
	switch {
	case upper != nil && fits(upper):
		return true, true, upper, lower
	case lower != nil && !fits(lower):
		return false, true, upper, lower
	}
	return false, false, upper, lower
}
