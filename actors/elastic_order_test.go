package actors

import (
	"fmt"
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

// bytesPredictor makes a micro-batch of b samples need b bytes of minimum
// budget, so a GPU with f bytes free fits micro-batches up to f.
type bytesPredictor struct{}

func (bytesPredictor) Predict(s *pb.JobSpec, _ string) (*Prediction, error) {
	return &Prediction{Demand: &pb.Demand{MinBudget: int64(s.Batch), IterationSeconds: 1}}, nil
}

// boundOne runs elasticLoop.bound for one job of global batch range
// bmin–bmax, holding n/gpu0 at bmin in one step, on a node of 4 GPUs with
// free bytes each (bytesPredictor: room for micro-batches up to free), and
// returns its order's bound.
func boundOne(t *testing.T, steps, bmin, bmax int, a placement.Allocation, free int64) *orderBound {
	t.Helper()
	l, err := newElasticLoop(ElasticConfig{MaxMicroSteps: steps}, bytesPredictor{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	var gpus []placement.FitGPU
	for i := 0; i < 4; i++ {
		g := placement.FitGPU{ID: fmt.Sprintf("n/gpu%d", i), Node: "n", DeviceType: testGPU, Capacity: free}
		if i == 0 {
			g.Jobs = []placement.FitJob{{ID: "j", Min: 1}}
		}
		gpus = append(gpus, g)
	}
	j := &elasticJob{id: "j", spec: &pb.JobSpec{Model: "mlp", Kind: "train"}, min: bmin, max: bmax, batch: bmin,
		free: free, devType: testGPU, gpus: []string{"n/gpu0"}}
	r := &elasticRound{cluster: placement.ClusterState{Nodes: []placement.Node{{Name: "n", GPUs: 4}}},
		jobs: map[string]*elasticJob{"j": j}, gpus: gpus, busy: map[string]bool{}}
	l.bound(r, map[string]placement.Allocation{"j": a})
	if j.to == nil || j.to.err != nil {
		t.Fatalf("range %d–%d, %v: no bound (%+v)", bmin, bmax, a, j.to)
	}
	return j.to
}

// A split the job's range allows with fewer micro-steps than the fewest
// whose even share fits is taken, not refused (found by review: moreSteps
// only searched upwards from that count, so a range of 9–15 with room for
// 2 per micro-step was refused, though 7 × 2 = 14 fits: 8 micro-steps
// leave no whole micro-batch in the range); and more micro-steps within
// the cap keep a small batch whole (range 1–3 at 3 per GPU with room for
// 2: 3 × 1, where the first split that fit gave 2 × 1).
func TestBoundSplitsWithinRange(t *testing.T) {
	for _, c := range []struct {
		name          string
		steps         int // MaxMicroSteps (0: default 8)
		bmin, bmax, n int
		local, acc    int
		free          int64
		micro, accum  int
	}{
		{"range 9–15, 1×15, room for 2", 0, 9, 15, 1, 15, 0, 2, 2, 6},
		{"range 9–15, 1×5 in 3 steps, room for 2", 0, 9, 15, 1, 5, 2, 2, 2, 6},
		{"range 4097–4103, 1×4103, room for 586", 0, 4097, 4103, 1, 4103, 0, 586, 586, 6},
		{"cap 4, range 9–14, 2×7, room for 2", 4, 9, 14, 2, 7, 0, 2, 2, 2},
		{"range 1–3, 1×3, room for 2", 0, 1, 3, 1, 3, 0, 2, 1, 2},
	} {
		a := placement.Allocation{PerNode: []int{c.n}, LocalBatch: c.local, AccumSteps: c.acc}
		b := boundOne(t, c.steps, c.bmin, c.bmax, a, c.free)
		if b.maxLocal == 0 || b.micro != c.micro || b.accum != c.accum || !b.moreSteps {
			t.Errorf("%s: %d micro-steps of %d (largest fitting %d, more steps %v), want %d of %d",
				c.name, b.accum+1, b.micro, b.maxLocal, b.moreSteps, c.accum+1, c.micro)
		}
	}
}

// Over every small range, GPU count, allocation, room and cap, the split
// moreSteps picks fits, stays in the job's range and within the cap, and
// no split it may use (more micro-steps than the allocation's, up to the
// cap, any micro-batch that fits in the range) comes closer to the
// allocation's samples per GPU; it reports none only when no such split
// exists.
func TestMoreStepsClosestSplit(t *testing.T) {
	loops := map[int]*elasticLoop{}
	for _, steps := range []int{1, 2, 4, 8} {
		l, err := newElasticLoop(ElasticConfig{MaxMicroSteps: steps}, bytesPredictor{}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		loops[steps] = l
	}
	spec := &pb.JobSpec{Model: "mlp", Kind: "train"}
	for steps, l := range loops {
		for bmin := 1; bmin <= 16; bmin++ {
			for bmax := bmin; bmax <= 16; bmax++ {
				j := &elasticJob{spec: spec, min: bmin, max: bmax, devType: testGPU}
				for n := 1; n <= 3; n++ {
					for local := 1; local <= 8; local++ {
						for acc := 0; acc <= 3; acc++ {
							a := placement.Allocation{PerNode: []int{n}, LocalBatch: local, AccumSteps: acc}
							per, accum, lo, hi := orderRange(j, a)
							if lo > hi {
								continue
							}
							for room := 0; room < orderMicro(per, accum, lo, hi, 0); room++ {
								fits := func(d *pb.Demand) bool { return d.MinBudget <= int64(room) }
								most := l.largestFitting(j, lo, hi, fits)
								k, lo2, hi2, m, ok := l.moreSteps(j, n, per, accum, lo, most, fits)
								name := fmt.Sprintf("cap %d, range %d–%d, %v, room %d", steps, bmin, bmax, a, room)
								if m != room {
									t.Fatalf("%s: largest fitting %d", name, m)
								}
								// The closest any usable split comes.
								bestGap := -1
								perLo, perHi := perRange(j, n)
								for s := accum + 1; s <= max(accum, steps-1); s++ {
									sl, sh := microRange(perLo, perHi, s)
									for mb := sl; mb <= min(sh, room); mb++ {
										if g := abs(mb*(s+1) - per); bestGap < 0 || g < bestGap {
											bestGap = g
										}
									}
								}
								if ok != (bestGap >= 0) {
									t.Fatalf("%s: ok %v, but the closest usable split is %d away", name, ok, bestGap)
								}
								if !ok {
									continue
								}
								micro := orderMicro(per, k, lo2, hi2, m)
								g := global(micro, k, n)
								if micro > room || g < bmin || g > bmax || k <= accum || k > max(accum, steps-1) {
									t.Fatalf("%s: %d micro-steps of %d = %d", name, k+1, micro, g)
								}
								if gap := abs(micro*(k+1) - per); gap != bestGap {
									t.Fatalf("%s: %d micro-steps of %d are %d from %d per GPU; a split %d away exists", name, k+1, micro, gap, per, bestGap)
								}
							}
						}
					}
				}
			}
		}
	}
}

func abs(x int) int { return max(x, -x) }
