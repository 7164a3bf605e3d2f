package placement

import "testing"

// TestSimulateBatchBelowBase: a workload may ask for a batch below its
// application's base batch (LoadWorkload takes any positive batch). fifo
// and tiresias run it as asked, and the simulator's check used to reject
// that as a global batch below the range [B0, max]: the job's own batch
// widens the range downwards as a larger one widens it upwards.
// Found by FuzzSimulateRandomWorkload.
func TestSimulateBatchBelowBase(t *testing.T) {
	apps := Apps{"hand": boundApp(t)} // B0 4, per-GPU batch ≤ 16
	w := []WorkloadJob{
		{Name: "small", Time: 0, App: "hand", Replicas: 2, Batch: 2},
		{Name: "one", Time: 0, App: "hand", Replicas: 1, Batch: 1},
	}
	for _, name := range PolicyNames {
		p, err := NewPolicy(name, PolicyOptions{Seed: 1, Interval: 60})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Simulate(apps, w, p, SimConfig{Nodes: 1, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if RunsAsRequested(p) {
			for _, j := range r.PerJob {
				if want := map[string]int{"small": 2, "one": 1}[j.Name]; j.LastBatch != want {
					t.Errorf("%s: job %s ran at batch %d, want its requested %d", name, j.Name, j.LastBatch, want)
				}
			}
		}
	}
}
