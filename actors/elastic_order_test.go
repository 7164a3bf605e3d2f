package actors

import (
	"strings"
	"testing"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/placement"
)

// Every split orderRange allows keeps the global batch in the job's range,
// and it never adds micro-steps: over every small range, GPU count and
// allocation, each micro-batch in lo..hi gives a global batch in min..max,
// the micro-steps are at most the allocation's, and the range is empty
// only when no count of micro-steps up to the allocation's has a whole
// micro-batch (a range narrower than the GPU count has none).
func TestOrderRangeKeepsBatchInRange(t *testing.T) {
	for bmin := 1; bmin <= 24; bmin++ {
		for bmax := bmin; bmax <= 24; bmax++ {
			j := &elasticJob{min: bmin, max: bmax}
			for n := 1; n <= 5; n++ {
				for local := 1; local <= 12; local++ {
					for acc := 0; acc <= 8; acc++ {
						a := placement.Allocation{PerNode: []int{n}, LocalBatch: local, AccumSteps: acc}
						per, accum, lo, hi := orderRange(j, a)
						if accum > acc || accum < 0 {
							t.Fatalf("range %d–%d, %v: %d extra micro-steps", bmin, bmax, a, accum)
						}
						if lo > hi {
							for k := 0; k <= acc; k++ {
								if l, h := microRange(max(1, (bmin+n-1)/n), bmax/n, k); l <= h {
									t.Fatalf("range %d–%d, %v: empty, but %d micro-steps of %d..%d fit", bmin, bmax, a, k+1, l, h)
								}
							}
							continue
						}
						for m := lo; m <= hi; m++ {
							if g := global(m, accum, n); g < bmin || g > bmax {
								t.Fatalf("range %d–%d, %v: micro-batch %d in %d steps gives %d (per %d, range %d..%d)", bmin, bmax, a, m, accum+1, g, per, lo, hi)
							}
						}
					}
				}
			}
		}
	}
}

// moreSteps, on an MLP whose minimum budget grows with the batch: a batch
// of exactly 4096 with room for about 1500 per micro-step runs in 4
// micro-steps of 1024 (3 would need 1365.3 each); one of exactly 1000 in 8 of
// 125; one that would need 16 micro-steps runs in 8 and shrinks; one whose
// allocation already has 8 gets no more; and nothing is split where not
// even one sample fits. ElasticConfig.MaxMicroSteps caps the split: at 4,
// the batch of 1000 (which needs 8) is not split and the one that needs 16
// runs in 4 and shrinks further; at 1 nothing is split.
func TestOrderMoreSteps(t *testing.T) {
	loop := func(steps int) *elasticLoop {
		l, err := newElasticLoop(ElasticConfig{MaxMicroSteps: steps}, NewZooPredictor(DefaultPlanner()), quiet)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := loop(0)
	if l.cfg.MaxMicroSteps != DefaultMaxMicroSteps {
		t.Fatalf("default MaxMicroSteps %d, want %d", l.cfg.MaxMicroSteps, DefaultMaxMicroSteps)
	}
	loops := map[int]*elasticLoop{0: l, 4: loop(4), 1: loop(1)}
	if _, err := newElasticLoop(ElasticConfig{MaxMicroSteps: -1}, NewZooPredictor(DefaultPlanner()), quiet); err == nil || !strings.Contains(err.Error(), "max micro-steps -1: must be ≥ 1") {
		t.Fatalf("MaxMicroSteps -1: err %v", err)
	}
	spec := &pb.JobSpec{Model: "mlp", Kind: "train", Batch: 4096, Tolerance: 0.2}
	job := func(bmin, bmax int) *elasticJob {
		return &elasticJob{spec: spec, min: bmin, max: bmax, devType: testGPU}
	}
	need := func(b int) int64 {
		d, ok := l.demand(job(1, b), b)
		if !ok {
			t.Fatalf("no demand at batch %d", b)
		}
		return d.MinBudget
	}
	upTo := func(b int) func(*pb.Demand) bool {
		free := need(b)
		return func(d *pb.Demand) bool { return d.MinBudget <= free }
	}
	for _, c := range []struct {
		name                 string
		steps                int // ElasticConfig.MaxMicroSteps (0: default)
		bmin, bmax, per, acc int
		fitsUpTo             int
		ok                   bool
		k, micro             int
	}{
		{"4096 exactly", 0, 4096, 4096, 4096, 0, 1700, true, 3, 1024},
		{"1000 exactly", 0, 1000, 1000, 1000, 0, 150, true, 7, 125},
		{"capped at 8 steps", 0, 1024, 4096, 4096, 0, 256, true, 7, 256},
		{"8 steps already", 0, 1024, 8192, 8192, 7, 256, false, 0, 0},
		{"4096 exactly, at most 4", 4, 4096, 4096, 4096, 0, 1700, true, 3, 1024},
		{"1000 exactly, at most 4", 4, 1000, 1000, 1000, 0, 150, false, 0, 0},
		{"capped at 4 steps", 4, 1024, 4096, 4096, 0, 256, true, 3, 256},
		{"4096 exactly, at most 1", 1, 4096, 4096, 4096, 0, 1700, false, 0, 0},
		{"at most 1, policy's own 4", 1, 1024, 4096, 4096, 3, 512, false, 0, 0},
	} {
		l := loops[c.steps]
		j := job(c.bmin, c.bmax)
		fits := upTo(c.fitsUpTo)
		perLo, perHi := perRange(j, 1)
		lo, hi := microRange(perLo, perHi, c.acc)
		most := l.largestFitting(j, lo, hi, fits)
		k, lo2, hi2, m, ok := l.moreSteps(j, 1, c.per, c.acc, lo, most, fits)
		if ok != c.ok {
			t.Fatalf("%s: ok %v, want %v (k %d, range %d..%d, m %d)", c.name, ok, c.ok, k, lo2, hi2, m)
		}
		if !ok {
			continue
		}
		micro := orderMicro(c.per, k, lo2, hi2, m)
		if k != c.k || micro != c.micro || !fits(mustDemand(t, l, j, m)) || !fits(mustDemand(t, l, j, micro)) {
			t.Fatalf("%s: %d micro-steps of %d (largest fitting %d), want %d of %d", c.name, k+1, micro, m, c.k+1, c.micro)
		}
		if g := global(micro, k, 1); g < c.bmin || g > c.bmax {
			t.Fatalf("%s: batch %d outside %d–%d", c.name, g, c.bmin, c.bmax)
		}
	}
	free := need(1) - 1
	j := job(1024, 4096)
	if _, _, _, m, ok := l.moreSteps(j, 1, 4096, 0, 1024, 0, func(d *pb.Demand) bool { return d.MinBudget <= free }); ok || m != 0 {
		t.Fatalf("split where not even one sample fits: m %d, ok %v", m, ok)
	}
}

func mustDemand(t *testing.T, l *elasticLoop, j *elasticJob, b int) *pb.Demand {
	t.Helper()
	d, ok := l.demand(j, b)
	if !ok {
		t.Fatalf("no demand at batch %d", b)
	}
	return d
}
