package tensorsched

import (
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/gpusched/gpusched/gpu"
)

// PlanMemo remembers the plans of jobs planned alone (the solo plans joint
// mode starts from, and sum-of-peaks' plans), so that planning a job to the
// same target again costs a lookup. A GPU's jobs are planned again and
// again with most of them at the budgets they had: the runtime tries joint
// mode and then sum-of-peaks, each at the given budgets and then with the
// one job whose run broke its budget planned tighter, raises a job and
// plans the set again, and re-plans when a neighbour leaves. Planning is
// deterministic, so a remembered plan is the plan. Keys hold the job's
// name (errors name it), fingerprints of its graph and of the device
// profile (graphFingerprint, profileFingerprint: what a plan depends on),
// the target and how it was planned; a job with measured op times
// (Job.Seconds) is not remembered. The least recently used entries are
// forgotten beyond the memo's size. Safe for concurrent use. Plans from it
// are shared: callers must not modify them (no caller does: copies of a
// job already share one plan).
type PlanMemo struct {
	cache        *lru.Cache[soloKey, soloPlan]
	hits, misses atomic.Int64
}

// NewPlanMemo returns a memo of at most size solo plans (size ≥ 1).
func NewPlanMemo(size int) *PlanMemo {
	c, err := lru.New[soloKey, soloPlan](max(1, size))
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &PlanMemo{cache: c}
}

// Stats returns how many lookups found a plan and how many planned it.
func (m *PlanMemo) Stats() (hits, misses int64) { return m.hits.Load(), m.misses.Load() }

type soloKey struct {
	name          string
	graph, device uint64
	t             Target
	refine        bool
	stall         bool // the fallback that waits on copies (planStalling)
}

// soloPlan is what the callers of planSolo read of its planner.
type soloPlan struct {
	ok    bool     // a plan was made (planSolo returned a planner)
	wins  []window // the planner's windows (joint mode's warm start)
	keep  []int32  // its keep table (nil: it keeps nothing)
	plans []*Plan  // its output
	st    PlanStats
	err   error
}

// solo is planSolo(job, p, t, refine) through the memo (m may be nil: no
// memo).
func (m *PlanMemo) solo(job Job, p gpu.Profile, t Target, refine bool) soloPlan {
	plan := func() soloPlan {
		pl, st, err := planSolo(job, p, t, refine)
		if pl == nil {
			return soloPlan{st: st, err: err}
		}
		return soloPlan{ok: true, wins: pl.wins, keep: pl.keepOf(0), plans: pl.output(), st: st, err: err}
	}
	return m.lookup(job, p, soloKey{t: t, refine: refine}, plan)
}

// stalling is planStalling(job, p, t.Budget, t.Tolerance, van) through the
// memo, for the job solo planned with refinement to t (van: that plan's
// stats, which the same key determines). ok is false when no waiting plan
// fits either.
func (m *PlanMemo) stalling(job Job, p gpu.Profile, t Target, van PlanStats) (sp soloPlan) {
	plan := func() soloPlan {
		pl, st, ok := planStalling(job, p, t.Budget, t.Tolerance, van)
		if !ok {
			return soloPlan{}
		}
		return soloPlan{ok: true, plans: []*Plan{pl}, st: st}
	}
	return m.lookup(job, p, soloKey{t: t, refine: true, stall: true}, plan)
}

// lookup returns the memo's entry for job under k (its target and how it
// is planned; lookup fills in the job's and device's parts), calling plan
// and remembering its result when there is none. Jobs the memo does not
// cover (m nil, a fixed plan, a budget of their own, a start offset,
// measured op times) are planned every time.
func (m *PlanMemo) lookup(job Job, p gpu.Profile, k soloKey, plan func() soloPlan) soloPlan {
	if m == nil || job.Plan != nil || job.Budget != 0 || job.StartOffset != 0 || len(job.Seconds) > 0 {
		return plan()
	}
	k.name, k.graph, k.device = job.Name, graphFingerprint(job.Graph), profileFingerprint(p)
	if v, ok := m.cache.Get(k); ok {
		m.hits.Add(1)
		return v
	}
	m.misses.Add(1)
	v := plan()
	m.cache.Add(k, v)
	return v
}
