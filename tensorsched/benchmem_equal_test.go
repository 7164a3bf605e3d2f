package tensorsched

import (
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// At the memory each baseline reserves, tensile (fit the budget with the
// least extra time) has at least the baseline's CBR, and within the extra
// time each baseline takes, tensile (least peak within that tolerance)
// saves at least as much memory: ResNet-50 and VGG16 alone and two
// ResNet-50s, batch 16, on both devices, every run checked.
func TestEqualMemoryCBR(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans two models under every policy on two devices (skipped with -short and -race)")
	}
	for _, dev := range []string{"rtx2080ti-11gb", "h100-80gb"} {
		pols := append(BaselineNames(), PolicyTensile)
		rows, err := RunMemoryBench(MemBenchOptions{Device: gpu.MustProfile(dev), Models: []string{"resnet50", "vgg16"},
			Batches: []int{16}, MaxCopies: 2, Policies: pols, EqualMemory: true, EqualTime: true})
		if err != nil {
			t.Fatal(err)
		}
		cs := EqualMemoryComparisons(rows)
		// Every baseline row that saved memory has its comparison: 4
		// baselines × (2 single + 2 copies + 2 batch + 1 mix) at most.
		if len(cs) < 20 {
			t.Errorf("%s: %d equal-memory comparisons, want at least 20", dev, len(cs))
		}
		for _, c := range cs {
			b, x := c.Baseline, c.Tensile
			t.Logf("%s %-7s %-14s %-10s reserved %10s: baseline MSR %.3f EOR %.3f CBR %8.2f | tensile %10s MSR %.3f EOR %.3f CBR %8.2f",
				dev, b.Experiment, b.Workload, b.Policy, gpu.FormatBytes(b.Reserved), b.MSR, b.EOR, b.CBR, gpu.FormatBytes(x.Reserved), x.MSR, x.EOR, x.CBR)
			if !strings.HasPrefix(x.Check, "passed") {
				t.Errorf("%s %s %s at %s's memory: %s", dev, b.Experiment, b.Workload, b.Policy, x.Check)
				continue
			}
			if !c.TensileWins() {
				t.Errorf("%s %s %s: tensile at %s's memory (%d B) reserves %d B at CBR %.2f, baseline CBR %.2f",
					dev, b.Experiment, b.Workload, b.Policy, b.Reserved, x.Reserved, x.CBR, b.CBR)
			}
		}
		ts := EqualTimeComparisons(rows)
		if len(ts) != len(cs) {
			t.Errorf("%s: %d equal-time comparisons, want one per equal-memory one (%d)", dev, len(ts), len(cs))
		}
		for _, c := range ts {
			b, x := c.Baseline, c.Tensile
			t.Logf("%s %-7s %-14s %-10s EOR %.3f: baseline MSR %.3f CBR %8.2f | tensile MSR %.3f EOR %.3f CBR %8.2f",
				dev, b.Experiment, b.Workload, b.Policy, b.EOR, b.MSR, b.CBR, x.MSR, x.EOR, x.CBR)
			if !strings.HasPrefix(x.Check, "passed") {
				t.Errorf("%s %s %s within %s's time: %s", dev, b.Experiment, b.Workload, b.Policy, x.Check)
				continue
			}
			// Within the baseline's time tensile saves at least as much
			// (TensileWins checks MSR too): it dominates the baseline,
			// not only on the ratio.
			if !c.TensileWins() {
				t.Errorf("%s %s %s: tensile within %s's EOR %.3f: MSR %.3f EOR %.3f CBR %.2f, baseline MSR %.3f CBR %.2f",
					dev, b.Experiment, b.Workload, b.Policy, b.EOR, x.MSR, x.EOR, x.CBR, b.MSR, b.CBR)
			}
		}
	}
}

// The comparison pairs rows by experiment, workload, batch and the
// baseline named in BudgetOf, and a win needs the budget met.
func TestEqualMemoryComparisons(t *testing.T) {
	row := func(pol, of string, reserved int64, cbr float64) MemBenchRow {
		return MemBenchRow{Experiment: "single", Workload: "m", Batch: 16, Policy: pol, BudgetOf: of, Reserved: reserved,
			Metrics: Metrics{CBR: cbr}, Check: "passed"}
	}
	other := row("checkpoint", "", 100, 1)
	other.Batch = 8
	rows := []MemBenchRow{
		row("checkpoint", "", 100, 2), other, row("vdnn-all", "", 80, 0.5), row(PolicyTensile, "", 90, 5),
		row(PolicyTensile, "checkpoint", 99, 3), // fits, higher CBR: win
		row(PolicyTensile, "vdnn-all", 81, 9),   // over the budget: loss
		row(PolicyTensile, "capuchin", 50, 9),   // no such baseline row: unpaired
	}
	cs := EqualMemoryComparisons(rows)
	if len(cs) != 2 {
		t.Fatalf("%d comparisons, want 2: %+v", len(cs), cs)
	}
	if cs[0].Baseline.Policy != "checkpoint" || cs[0].Baseline.Batch != 16 || cs[0].Baseline.CBR != 2 || !cs[0].TensileWins() {
		t.Errorf("checkpoint comparison %+v: want the batch-16 row and a win", cs[0])
	}
	if cs[1].Baseline.Policy != "vdnn-all" || cs[1].TensileWins() {
		t.Errorf("vdnn-all comparison %+v: want a loss (tensile over the budget)", cs[1])
	}
	lower := cs[0]
	lower.Tensile.CBR = 1.9
	if lower.TensileWins() {
		t.Errorf("tensile CBR 1.9 against 2 counted as a win")
	}
}

// Equal-time rows pair by TimeOf, not BudgetOf, and a win needs the
// baseline's EOR held (within eorSlack) rather than its memory.
func TestEqualTimeComparisons(t *testing.T) {
	row := func(pol, of string, msr, eor, cbr float64) MemBenchRow {
		return MemBenchRow{Experiment: "single", Workload: "m", Batch: 16, Policy: pol, TimeOf: of, Reserved: 100,
			Metrics: Metrics{MSR: msr, EOR: eor, CBR: cbr}, Check: "passed"}
	}
	budget := row(PolicyTensile, "", 0.9, 0.1, 9)
	budget.BudgetOf, budget.Reserved = "checkpoint", 10
	win := row(PolicyTensile, "checkpoint", 0.6, 0.2+eorSlack/2, 3) // within the slack, more saved, higher CBR
	win.Reserved = 150                                              // reserving more than the baseline's memory does not matter here
	less := row(PolicyTensile, "capuchin", 0.3, 0.1, 3)             // higher CBR but less saved than the baseline: loss
	rows := []MemBenchRow{
		row("checkpoint", "", 0.4, 0.2, 2), row("vdnn-all", "", 0.5, 0.5, 1), row("capuchin", "", 0.4, 0.2, 2), budget,
		win,
		row(PolicyTensile, "vdnn-all", 0.9, 0.5+2*eorSlack, 9), // over the baseline's time: loss
		less,
	}
	cs := EqualTimeComparisons(rows)
	if len(cs) != 3 {
		t.Fatalf("%d comparisons, want 3 (the budget row is not an equal-time one): %+v", len(cs), cs)
	}
	if cs[0].Baseline.Policy != "checkpoint" || !cs[0].TensileWins() {
		t.Errorf("checkpoint comparison %+v: want a win", cs[0])
	}
	if cs[1].Baseline.Policy != "vdnn-all" || cs[1].TensileWins() {
		t.Errorf("vdnn-all comparison %+v: want a loss (tensile over the baseline's EOR)", cs[1])
	}
	if cs[2].Baseline.Policy != "capuchin" || cs[2].TensileWins() {
		t.Errorf("capuchin comparison %+v: want a loss (tensile saves less than the baseline)", cs[2])
	}
	if m := EqualMemoryComparisons(rows); len(m) != 1 || m[0].Tensile.BudgetOf != "checkpoint" {
		t.Errorf("equal-memory comparisons %+v: want only the budget row", m)
	}
}
