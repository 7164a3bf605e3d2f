package fikit

// MaxPriority is the highest priority level; levels run from 0 (least
// important) to MaxPriority, ten in all.
const MaxPriority = 9

// Candidate is one job's next kernel, ready to launch.
type Candidate struct {
	Job      int     // caller's job index, carried through
	Priority int     // the job's priority, 0..MaxPriority
	Pred     float64 // predicted duration, seconds
	Ready    float64 // when it became ready (earlier wins ties)
}

// Top is the state of the highest-priority active jobs (those at the highest
// priority among jobs that have not completed) when the engine is free.
type Top struct {
	// Priority is that highest active priority.
	Priority int
	// Remaining is the predicted idle time left before one of those jobs
	// has a kernel ready (0 while unknown, or during a measurement phase:
	// then nothing of lower priority may start).
	Remaining float64
}

// Dispatcher is FIKIT's launch decision for one GPU. It holds no state
// besides its configuration, so one value serves any number of decisions.
type Dispatcher struct {
	// Margin is how far a low-priority kernel may be predicted to overrun
	// the remaining gap, as a fraction of that gap: a kernel fits when
	// Pred <= Remaining × (1 + Margin). 0 (the default) allows no overrun.
	Margin float64
}

// Decide picks the kernel to launch now on a free engine, returning its index
// in c, or -1 to leave the engine idle.
//
//   - A kernel at or above top.Priority launches at once: the highest
//     priority first, then the earliest ready.
//   - Otherwise the high-priority jobs are idle: among kernels predicted to
//     fit the remaining gap, the highest priority wins, and within a level
//     the best fit (the longest kernel that fits), then the earliest ready.
//   - A kernel predicted to overrun the gap by more than the margin, or
//     whose prediction is NaN, never starts.
//
// Decide does not allocate.
func (d Dispatcher) Decide(c []Candidate, top Top) int {
	best := -1
	for i := range c {
		if c[i].Priority < top.Priority {
			continue
		}
		if best < 0 || c[i].Priority > c[best].Priority ||
			(c[i].Priority == c[best].Priority && c[i].Ready < c[best].Ready) {
			best = i
		}
	}
	if best >= 0 {
		return best
	}
	limit := top.Remaining * (1 + d.Margin)
	if !(limit > 0) {
		return -1
	}
	for i := range c {
		ci := &c[i]
		if !(ci.Pred <= limit) { // NaN: not known to fit
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &c[best]
		switch {
		case ci.Priority > b.Priority:
			best = i
		case ci.Priority < b.Priority:
		case ci.Pred > b.Pred:
			best = i
		case ci.Pred == b.Pred && ci.Ready < b.Ready:
			best = i
		}
	}
	return best
}
