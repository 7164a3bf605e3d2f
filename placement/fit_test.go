package placement

import (
	"fmt"
	"strings"
	"testing"
)

const gib = int64(1) << 30

func TestFitBestFit(t *testing.T) {
	gpus := []FitGPU{
		{ID: "a", Capacity: 80 * gib, Jobs: []FitJob{{ID: "x", Min: 60 * gib, Vanilla: 70 * gib}}},
		{ID: "b", Capacity: 80 * gib},
		{ID: "c", Capacity: 80 * gib, Jobs: []FitJob{{ID: "y", Min: 50 * gib, Vanilla: 60 * gib}}},
	}
	tests := []struct {
		name         string
		min, vanilla int64
		want         string
	}{
		// Where everyone keeps its vanilla peak, the tightest such GPU.
		{"tightest at vanilla", 5 * gib, 8 * gib, "a"},
		{"next at vanilla", 5 * gib, 15 * gib, "c"},
		{"only the empty GPU has room at vanilla", 15 * gib, 30 * gib, "b"},
		// Nowhere at vanilla: squeeze into the tightest free budget.
		{"tightest at minimum", 15 * gib, 85 * gib, "a"},
		{"next at minimum", 25 * gib, 85 * gib, "c"},
		{"empty at minimum", 40 * gib, 85 * gib, "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Fit(gpus, FitRequest{ID: "j", Demand: Demand{Min: tc.min, Vanilla: tc.vanilla}})
			if !d.OK || d.ID != tc.want {
				t.Fatalf("got %+v, want %s", d, tc.want)
			}
			if want := gpus[d.Index].Free() - tc.min; d.Leftover != want {
				t.Fatalf("leftover %d, want the free budget left, %d", d.Leftover, want)
			}
		})
	}
}

// With room at vanilla peaks on an empty GPU, jobs spread instead of
// crowding one GPU under memory scheduling; once no GPU has that room they
// squeeze in at their minimum budgets, best fit (keeping the most room on
// the other GPU for a large job).
func TestFitSpreadsThenSqueezes(t *testing.T) {
	gpus := []FitGPU{{ID: "a", Capacity: 80 * gib}, {ID: "b", Capacity: 80 * gib}}
	var got []string
	for i := 0; i < 4; i++ {
		r := FitRequest{ID: fmt.Sprint(i), Demand: Demand{Min: 20 * gib, Vanilla: 50 * gib}}
		d := Fit(gpus, r)
		if !d.OK {
			t.Fatalf("job %d: %s", i, d.Reason)
		}
		gpus[d.Index].Jobs = append(gpus[d.Index].Jobs, FitJob{ID: r.ID, Min: r.Demand.Min, Vanilla: r.Demand.Vanilla})
		got = append(got, d.ID)
	}
	if s := strings.Join(got, ","); s != "a,b,a,a" {
		t.Fatalf("placed on %s, want a,b,a,a", s)
	}
}

func TestFitWaitsWithReason(t *testing.T) {
	gpus := []FitGPU{
		{ID: "a", Capacity: 16 * gib, Jobs: []FitJob{{ID: "x", Min: 10 * gib, Vanilla: 12 * gib}}},
		{ID: "b", Capacity: 16 * gib, Down: true},
	}
	d := Fit(gpus, FitRequest{ID: "j", Tolerance: 0.1, Demand: Demand{Min: 91 * gib / 10, Vanilla: 12 * gib}})
	if d.OK {
		t.Fatalf("placed: %+v", d)
	}
	if want := "needs ≥ 9.10 GiB at 10% tolerance; largest free is 6.00 GiB"; d.Reason != want {
		t.Fatalf("reason %q, want %q", d.Reason, want)
	}
	if d := Fit(nil, FitRequest{}); d.OK || !strings.Contains(d.Reason, "no GPU") {
		t.Fatalf("empty cluster: %+v", d)
	}
}

func TestFitHighPriorityCoLocation(t *testing.T) {
	gpus := []FitGPU{
		{ID: "a", Capacity: 80 * gib, Jobs: []FitJob{{ID: "hp", Min: 20 * gib, Vanilla: 50 * gib, Priority: 7}}},
	}
	// Both high: 50 + 40 > 80 at vanilla peaks -> wait.
	d := Fit(gpus, FitRequest{ID: "j", Priority: 5, Tolerance: 0.1, Demand: Demand{Min: 20 * gib, Vanilla: 40 * gib}})
	if d.OK || !strings.Contains(d.Reason, "high-priority") {
		t.Fatalf("high next to high: %+v", d)
	}
	// Both fit at vanilla -> allowed.
	d = Fit(gpus, FitRequest{ID: "j", Priority: 9, Demand: Demand{Min: 10 * gib, Vanilla: 30 * gib}})
	if !d.OK {
		t.Fatalf("fits at vanilla but refused: %+v", d)
	}
	// Low priority may share with a high-priority job.
	d = Fit(gpus, FitRequest{ID: "j", Priority: 1, Demand: Demand{Min: 20 * gib, Vanilla: 40 * gib}})
	if !d.OK {
		t.Fatalf("low next to high refused: %+v", d)
	}
	// With a free GPU, the high-priority job goes there instead of waiting.
	gpus = append(gpus, FitGPU{ID: "b", Capacity: 80 * gib})
	d = Fit(gpus, FitRequest{ID: "j", Priority: 5, Demand: Demand{Min: 20 * gib, Vanilla: 40 * gib}})
	if !d.OK || d.ID != "b" {
		t.Fatalf("got %+v, want b", d)
	}
}

func TestFitPerType(t *testing.T) {
	gpus := []FitGPU{
		{ID: "small", DeviceType: "v100-16gb", Capacity: 16 * gib},
		{ID: "big", DeviceType: "h100-80gb", Capacity: 80 * gib},
	}
	// Only the big GPU holds the job at its vanilla peak there.
	r := FitRequest{Demand: Demand{Min: 20 * gib, Vanilla: 30 * gib},
		PerType: map[string]Demand{"v100-16gb": {Min: 12 * gib, Vanilla: 30 * gib}}}
	if d := Fit(gpus, r); !d.OK || d.ID != "big" {
		t.Fatalf("%+v", d)
	}
	// Each type's own demand decides: at its v100 peak the job fits the
	// small GPU more tightly.
	r.PerType["v100-16gb"] = Demand{Min: 12 * gib, Vanilla: 14 * gib}
	if d := Fit(gpus, r); !d.OK || d.ID != "small" {
		t.Fatalf("%+v", d)
	}
	// Nowhere at vanilla: the minimum of each type decides.
	r.PerType["v100-16gb"] = Demand{Min: 12 * gib, Vanilla: 30 * gib}
	r.Demand.Vanilla = 90 * gib
	if d := Fit(gpus, r); !d.OK || d.ID != "small" {
		t.Fatalf("%+v", d)
	}
}

func TestFitOrder(t *testing.T) {
	type j struct {
		p   int
		seq uint64
	}
	js := []j{{1, 1}, {7, 3}, {7, 2}, {0, 0}}
	FitOrder(js, func(x j) int { return x.p }, func(x j) uint64 { return x.seq })
	got := fmt.Sprint(js)
	if got != "[{7 2} {7 3} {1 1} {0 0}]" {
		t.Fatal(got)
	}
}

func TestArbitrate(t *testing.T) {
	tests := []struct {
		name string
		cap  int64
		asks []BudgetAsk
		want []int64
		err  bool
	}{
		{"all at max", 100, []BudgetAsk{{Min: 10, Max: 40}, {Min: 20, Max: 50}}, []int64{40, 50}, false},
		{"priority first", 100, []BudgetAsk{{Min: 10, Max: 60, Priority: 1}, {Min: 20, Max: 70, Priority: 8}}, []int64{30, 70}, false},
		{"proportional", 100, []BudgetAsk{{Min: 10, Max: 70}, {Min: 10, Max: 130}}, []int64{37, 63}, false},
		{"minimums too big", 100, []BudgetAsk{{Min: 60, Max: 70}, {Min: 50, Max: 60}}, nil, true},
		{"bad range", 100, []BudgetAsk{{Min: 60, Max: 50}}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Arbitrate(tc.cap, tc.asks)
			if (err != nil) != tc.err {
				t.Fatalf("err %v", err)
			}
			if tc.err {
				return
			}
			var sum int64
			for i := range got {
				sum += got[i]
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
			if sum > tc.cap {
				t.Fatalf("sum %d > capacity %d", sum, tc.cap)
			}
		})
	}
}

func FuzzArbitrateNeverExceedsCapacity(f *testing.F) {
	f.Add(int64(1000), int64(10), int64(500), int64(30), int64(900), 3, 4)
	f.Fuzz(func(t *testing.T, cap, min1, max1, min2, max2 int64, p1, p2 int) {
		if cap < 0 || min1 < 0 || min2 < 0 || max1 > 1<<50 || max2 > 1<<50 || cap > 1<<50 {
			return
		}
		asks := []BudgetAsk{{ID: "a", Min: min1, Max: max1, Priority: p1}, {ID: "b", Min: min2, Max: max2, Priority: p2}}
		got, err := Arbitrate(cap, asks)
		if err != nil {
			return
		}
		var sum int64
		for i, b := range got {
			if b < asks[i].Min || b > asks[i].Max {
				t.Fatalf("budget %d outside [%d,%d]", b, asks[i].Min, asks[i].Max)
			}
			sum += b
		}
		if sum > cap {
			t.Fatalf("sum %d > cap %d", sum, cap)
		}
	})
}

// benchCluster builds n GPUs of 80 GiB, each holding a few jobs.
func benchCluster(n int) []FitGPU {
	gpus := make([]FitGPU, n)
	for i := range gpus {
		g := &gpus[i]
		g.ID = fmt.Sprintf("node-%d/gpu%d", i/8, i%8)
		g.Node = fmt.Sprintf("node-%d", i/8)
		g.DeviceType = "h100-80gb"
		g.Capacity = 80 * gib
		for j := 0; j < i%4; j++ {
			g.Jobs = append(g.Jobs, FitJob{ID: fmt.Sprintf("j%d-%d", i, j), Min: int64(8+(i*7+j*3)%12) * gib, Vanilla: 24 * gib, Priority: (i + j) % 10})
		}
	}
	return gpus
}

// BenchmarkFit measures one placement decision (latency per op; the
// inverse is decisions per second) on clusters of 64 and 1024 GPUs.
func BenchmarkFit(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprintf("gpus=%d", n), func(b *testing.B) {
			gpus := benchCluster(n)
			reqs := make([]FitRequest, 64)
			for i := range reqs {
				reqs[i] = FitRequest{ID: fmt.Sprint(i), Priority: i % 10, Tolerance: 0.1,
					Demand: Demand{Min: int64(4+i%20) * gib, Vanilla: int64(10+i%30) * gib}}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d := Fit(gpus, reqs[i%len(reqs)])
				_ = d
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// BenchmarkFitThroughput places jobs one after another until the cluster is
// full, applying each decision, as the coordinator does with a backlog.
func BenchmarkFitThroughput(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprintf("gpus=%d", n), func(b *testing.B) {
			placed := 0
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				gpus := benchCluster(n)
				b.StartTimer()
				for k := 0; ; k++ {
					r := FitRequest{ID: fmt.Sprint(k), Priority: k % 10, Demand: Demand{Min: int64(4+k%20) * gib, Vanilla: int64(10+k%30) * gib}}
					d := Fit(gpus, r)
					if !d.OK {
						break
					}
					gpus[d.Index].Jobs = append(gpus[d.Index].Jobs, FitJob{ID: r.ID, Min: r.Demand.Min, Vanilla: r.Demand.Vanilla, Priority: r.Priority})
					placed++
				}
			}
			b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
		})
	}
}

// Spread takes the GPU with the fewest jobs (then the most room) where
// BinPack takes the tightest; both keep the vanilla tier before squeezing
// and the high-priority rule.
func TestFitSpreadStrategy(t *testing.T) {
	gpus := []FitGPU{
		{ID: "a", Capacity: 80 * gib, Jobs: []FitJob{{ID: "x", Min: 10 * gib, Vanilla: 20 * gib}, {ID: "y", Min: 10 * gib, Vanilla: 20 * gib}}},
		{ID: "b", Capacity: 80 * gib, Jobs: []FitJob{{ID: "z", Min: 50 * gib, Vanilla: 70 * gib, Priority: HighPriority}}},
		{ID: "c", Capacity: 80 * gib, Jobs: []FitJob{{ID: "w", Min: 30 * gib, Vanilla: 30 * gib}}},
		{ID: "d", Capacity: 40 * gib},
	}
	tests := []struct {
		name         string
		min, vanilla int64
		prio         int
		binpack      string
		spread       string
	}{
		// Room at vanilla on all four: binpack takes b (10 GiB left),
		// spread the empty d (fewest jobs).
		{"vanilla room everywhere", 5 * gib, 10 * gib, 0, "b", "d"},
		// Only c has vanilla room (a: 40 + 45 > 80, d: 45 > 40): the
		// vanilla tier goes before d's fewer jobs.
		{"vanilla tier before fewer jobs", 10 * gib, 45 * gib, 0, "c", "c"},
		// Nowhere at vanilla: squeeze; binpack the tightest free budget
		// (b: 30 GiB free), spread the emptiest GPU that holds the minimum.
		{"squeeze", 25 * gib, 90 * gib, 0, "b", "d"},
	}
	for _, tc := range tests {
		for _, s := range []Strategy{"", BinPack, Spread} {
			d := Fit(gpus, FitRequest{ID: "j", Priority: tc.prio, Strategy: s, Demand: Demand{Min: tc.min, Vanilla: tc.vanilla}})
			want := tc.binpack
			if s == Spread {
				want = tc.spread
			}
			if !d.OK || d.ID != want {
				t.Errorf("%s, strategy %q: got %+v, want %s", tc.name, s, d, want)
			}
		}
	}
	// Ties on jobs go to the most room under spread; the high-priority
	// rule keeps a job off the emptier GPU of a high-priority one.
	gpus = []FitGPU{
		{ID: "p", Capacity: 80 * gib, Jobs: []FitJob{{ID: "x", Min: 10 * gib, Vanilla: 20 * gib}}},
		{ID: "q", Capacity: 80 * gib, Jobs: []FitJob{{ID: "y", Min: 10 * gib, Vanilla: 30 * gib}}},
		{ID: "r", Capacity: 80 * gib, Jobs: []FitJob{{ID: "z", Min: 10 * gib, Vanilla: 20 * gib}, {ID: "w", Min: 10 * gib, Vanilla: 20 * gib}}},
	}
	// Vanilla room left: p 50, q 40, r 30 GiB.
	if d := Fit(gpus, FitRequest{ID: "j", Strategy: Spread, Demand: Demand{Min: 5 * gib, Vanilla: 10 * gib}}); d.ID != "p" {
		t.Errorf("spread among one-job GPUs: got %+v, want p (the most room)", d)
	}
	if d := Fit(gpus, FitRequest{ID: "j", Demand: Demand{Min: 5 * gib, Vanilla: 10 * gib}}); d.ID != "r" {
		t.Errorf("binpack: got %+v, want r (the least room)", d)
	}
	gpus = []FitGPU{
		{ID: "h", Capacity: 80 * gib, Jobs: []FitJob{{ID: "x", Min: 10 * gib, Vanilla: 70 * gib, Priority: HighPriority}}},
		{ID: "e", Capacity: 80 * gib, Jobs: []FitJob{{ID: "y", Min: 30 * gib, Vanilla: 40 * gib}, {ID: "z", Min: 30 * gib, Vanilla: 40 * gib}}},
	}
	// Nowhere at vanilla; h has fewer jobs and more free budget (70 GiB
	// against 20), but its job is high-priority and the two do not fit at
	// vanilla there, so both strategies squeeze into e.
	for _, s := range []Strategy{BinPack, Spread} {
		if d := Fit(gpus, FitRequest{ID: "j", Priority: HighPriority, Strategy: s, Demand: Demand{Min: 15 * gib, Vanilla: 90 * gib}}); d.ID != "e" {
			t.Errorf("high priority, %s: got %+v, want e", s, d)
		}
	}
	for _, in := range []string{"", "binpack", "spread", "pack"} {
		s, err := ParseStrategy(in)
		switch {
		case in == "pack" && (err == nil || !strings.Contains(err.Error(), `"pack"`) || !strings.Contains(err.Error(), "binpack or spread")):
			t.Errorf("ParseStrategy(pack): %v", err)
		case in != "pack" && (err != nil || (in == "" && s != BinPack) || (in != "" && string(s) != in)):
			t.Errorf("ParseStrategy(%q) = %q, %v", in, s, err)
		}
	}
}
