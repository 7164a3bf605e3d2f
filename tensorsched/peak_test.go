package tensorsched

import (
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// zeroFreeGraph ends its iteration freeing an empty tensor before a large
// one, at the instant the next iteration's input arrives:
//
//	op0: z (0 B), y (1000 B) = f(x (input, 100 B))   1 s
//	op1: l (4 B) = loss(z, y)                         1 s
//
// Frees come before allocations at equal times, the empty one's too: at
// t = 2 y and l go before the next x arrives, so the peak is op0's
// x + y = 1100 B, not 1104 B.
func zeroFreeGraph() (*workload.Graph, []float64) {
	return &workload.Graph{
		Model: "zerofree", Kind: workload.Train, Batch: 1,
		Tensors: []workload.Tensor{
			{ID: 0, Name: "x", Bytes: 100, Kind: workload.Input},
			{ID: 1, Name: "z", Bytes: 0, Kind: workload.Activation},
			{ID: 2, Name: "y", Bytes: 1000, Kind: workload.Activation},
			{ID: 3, Name: "l", Bytes: 4, Kind: workload.Activation},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "f", Kind: "split", Inputs: []int{0}, Outputs: []int{1, 2}, Phase: workload.Forward},
			{ID: 1, Name: "loss", Kind: "nll_loss", Inputs: []int{1, 2}, Outputs: []int{3}, Phase: workload.Forward},
		},
	}, []float64{1, 1}
}

// TestAnalyzePeakEmptyFree holds the planner's simulator to the executor's
// order of memory events when an empty tensor is freed: the merge took a
// free of 0 B for an allocation, so the frees behind it in its stream came
// after other streams' allocations at the same time (the next iteration's
// inputs), and the predicted peak (one job's, and two co-located jobs'
// high-water mark) was above the measured one.
func TestAnalyzePeakEmptyFree(t *testing.T) {
	g, secs := zeroFreeGraph()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	p := testProfile(1<<20, 1e9)
	for _, jobs := range [][]Job{
		{{Name: "a", Graph: g, Seconds: secs}},
		{{Name: "a", Graph: g, Seconds: secs}, {Name: "b", Graph: g, Seconds: secs, StartOffset: 0.5}},
	} {
		rep, err := AnalyzePeak(jobs, p)
		if err != nil {
			t.Fatal(err)
		}
		dev := gpu.NewSim(p, gpu.SimOptions{})
		res, err := Execute(dev, jobs, ExecOptions{Check: true})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Bytes != res.PeakBytes || rep.RunPeakBytes != dev.HighWater() {
			t.Errorf("%d jobs: predicted peak %d (whole run %d), executor %d (%d)", len(jobs), rep.Bytes, rep.RunPeakBytes, res.PeakBytes, dev.HighWater())
		}
		for j := range jobs {
			if rep.JobPeaks[j] != res.Jobs[j].PeakBytes {
				t.Errorf("%d jobs: job %d: predicted peak %d, executor %d", len(jobs), j, rep.JobPeaks[j], res.Jobs[j].PeakBytes)
			}
		}
		if len(jobs) == 1 && res.PeakBytes != 1100 {
			t.Errorf("executor peak %d, want 1100 (x + y)", res.PeakBytes)
		}
	}
}
