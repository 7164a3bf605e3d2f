package zooapps

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
)

// allocCheck wraps a policy and checks every allocation it hands out
// against the per-GPU bound of the job's application.
type allocCheck struct {
	placement.Policy
	t       *testing.T
	bound   map[string]int // app → largest per-GPU batch allowed
	apps    map[string]string
	seen    int
	largest map[string]int
}

func (p *allocCheck) Schedule(now float64, c placement.ClusterState, js []placement.JobState) map[string]placement.Allocation {
	as := p.Policy.Schedule(now, c, js)
	for id, a := range as {
		if a.NumGPUs() == 0 {
			continue
		}
		p.seen++
		app := p.apps[id]
		if a.LocalBatch < 1 || a.LocalBatch > p.bound[app] {
			p.t.Errorf("%s at %v s: job %s (%s) per-GPU batch %d outside [1, %d]", p.Policy.Name(), now, id, app, a.LocalBatch, p.bound[app])
		}
		p.largest[app] = max(p.largest[app], a.LocalBatch)
	}
	return as
}

// TestZooWorkloadBatchesWithinMaxLocal: on a 16 GB device, where the memory
// bounds bind, no decision of fifo, tiresias or ones over the example zoo
// workload gives a job a per-GPU batch above its application's MaxLocal
// (TENSILE's bound with --memory tensile, the vanilla peak's with
// --memory vanilla); the two memory models' applications differ only in
// that bound (and in the plan's extra time above the vanilla bound).
func TestZooWorkloadBatchesWithinMaxLocal(t *testing.T) {
	if raceEnabled {
		t.Skip("plans every zoo model twice: ~4 min under -race; runs in the plain test run")
	}
	wl, err := placement.LoadWorkload(filepath.Join("..", "..", "examples", "zoo-workload.csv"), placement.Apps{})
	if err != nil {
		t.Fatal(err)
	}
	dev := gpu.MustProfile("v100-16gb")
	build := func(mem MemoryModel) (*Builder, placement.Apps) {
		b, err := New(Config{Device: dev, Memory: mem, Tolerance: 0.1, Recipes: shortRecipes()})
		if err != nil {
			t.Fatal(err)
		}
		apps := placement.Apps{}
		if _, err := b.AddTo(apps, wl); err != nil {
			t.Fatal(err)
		}
		return b, apps
	}
	tb, tapps := build(Tensile)
	vb, vapps := build(Vanilla)
	jobApp := map[string]string{}
	for _, j := range wl {
		jobApp[j.Name] = j.App
	}
	for m, ta := range tapps {
		va := vapps[m]
		vm, _ := vb.VanillaMaxLocal(m)
		if va.MaxLocal != vm {
			t.Errorf("%s: vanilla app MaxLocal %d, vanilla bound %d", m, va.MaxLocal, vm)
		}
		if tm, _ := tb.TensileMaxLocal(m); ta.MaxLocal != tm || tm < vm {
			t.Errorf("%s: TENSILE app MaxLocal %d, bound %d, vanilla %d", m, ta.MaxLocal, tm, vm)
		}
		if ta.Target() != va.Target() || ta.BaseBatch != va.BaseBatch || ta.MaxBatch != va.MaxBatch || ta.MinLocal != va.MinLocal {
			t.Errorf("%s: recipes differ between memory models", m)
		}
		for _, l := range []int{1, max(vm/2, 1), vm} {
			for _, counts := range [][]int{{1}, {4}, {4, 4}} {
				s1, y1 := ta.StepTime(counts, float64(l))
				s2, y2 := va.StepTime(counts, float64(l))
				if s1 != s2 || y1 != y2 {
					t.Errorf("%s at %d on %v: step %v/%v TENSILE, %v/%v vanilla", m, l, counts, s1, y1, s2, y2)
				}
			}
			for _, batch := range []float64{float64(ta.BaseBatch), float64(4 * ta.BaseBatch)} {
				if ta.Gain(batch, 0) != va.Gain(batch, 0) {
					t.Errorf("%s: gain at %v differs", m, batch)
				}
			}
		}
	}
	for _, apps := range []placement.Apps{tapps, vapps} {
		bound := map[string]int{}
		for m, a := range apps {
			bound[m] = a.MaxLocal
		}
		for _, name := range placement.PolicyNames {
			p, err := placement.NewPolicy(name, placement.PolicyOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			pc := &allocCheck{Policy: p, t: t, bound: bound, apps: jobApp, largest: map[string]int{}}
			res, err := placement.Simulate(apps, wl, pc, placement.SimConfig{Nodes: 4, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if pc.seen == 0 || len(res.PerJob) != len(wl) {
				t.Fatalf("%s: %d allocations checked, %d of %d jobs", name, pc.seen, len(res.PerJob), len(wl))
			}
			t.Logf("%-8s bounds %v largest %v avg JCT %.0f", name, bound, pc.largest, res.AvgJCT)
		}
	}
}

// TestRingUsesSlowestLink: a ring over several nodes crosses the
// inter-node link and, where a node holds more than one of its GPUs, the
// intra-node link too; it runs at the slower of the links it crosses. With
// PCIe-only nodes (25 GB/s inside a node) on a 50 GB/s network, 8 GPUs on
// 2 nodes synchronise at 25 GB/s, not faster than the same 8 GPUs would on
// one node; 2 GPUs on 2 nodes (one each) cross only the network.
func TestRingUsesSlowestLink(t *testing.T) {
	b, err := New(Config{Device: gpu.MustProfile("h100-80gb"), Memory: Vanilla, Network: Network{IntraNode: 25e9, InterNode: 50e9}})
	if err != nil {
		t.Fatal(err)
	}
	bytes := 4 * 25557032.0 // resnet50's fp32 parameters
	ring := func(r int, bw float64) float64 { return 2 * float64(r-1) / float64(r) * bytes / bw }
	for _, c := range []struct {
		nodes, replicas int
		want            float64
	}{
		{1, 8, ring(8, 25e9)},
		{2, 8, ring(8, 25e9)},
		{4, 8, ring(8, 25e9)},
		{2, 2, ring(2, 50e9)},
		{8, 8, ring(8, 50e9)},
		{1, 1, 0},
	} {
		got, err := b.SyncSeconds("resnet50", c.nodes, c.replicas)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 1e-12*c.want {
			t.Errorf("%d GPUs on %d nodes: sync %v s, want %v s", c.replicas, c.nodes, got, c.want)
		}
	}
	// The default links (inter-node slower) are unchanged: the network.
	d := newBuilder(t, nil)
	if got, _ := d.SyncSeconds("resnet50", 2, 8); math.Abs(got-ring(8, DefaultNetwork.InterNode)) > 1e-12*got {
		t.Errorf("default links, 8 GPUs on 2 nodes: %v s, want %v s", got, ring(8, DefaultNetwork.InterNode))
	}
}

// TestZooAccumulationHandChecked: a gpt2-small job asking for batch 8 on
// one rtx2080ti-11gb, whose vanilla bound is 5 per GPU, runs under fifo as
// 4 per micro-step with one accumulation step (2 micro-steps of
// compute(4), no synchronisation on one GPU); it needs (Bnoise+8)/(Bnoise+B0)
// times the recipe's samples, so it completes, by hand, at 30 s + E·D/8 ·
// (Bn+8)/(Bn+B0) · 2·compute(4).
func TestZooAccumulationHandChecked(t *testing.T) {
	const d, e, b0, bn = 4000, 2, 4, 160.0
	b, err := New(Config{Device: gpu.MustProfile("rtx2080ti-11gb"), Memory: Vanilla,
		Recipes: map[string]Recipe{"gpt2-small": {DatasetSize: d, Epochs: e, BaseBatch: b0, NoiseScale: bn}}})
	if err != nil {
		t.Fatal(err)
	}
	if vm, err := b.MaxLocal("gpt2-small"); err != nil || vm != 5 {
		t.Fatalf("vanilla bound %d (%v), want 5", vm, err)
	}
	apps := placement.Apps{}
	jobs := []placement.WorkloadJob{{Name: "g", App: "gpt2-small", Replicas: 1, Batch: 8}}
	if _, err := b.AddTo(apps, jobs); err != nil {
		t.Fatal(err)
	}
	res, err := placement.Simulate(apps, jobs, placement.NewFIFO(), placement.SimConfig{Nodes: 1, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
	if err != nil {
		t.Fatal(err)
	}
	c4, err := b.ComputeSeconds("gpt2-small", 4)
	if err != nil {
		t.Fatal(err)
	}
	samples := float64(e*d) * (bn + 8) / (bn + b0)
	want := 30 + samples/8*2*c4
	if got := res.PerJob[0].Completion; math.Abs(got-want) > 1e-9*want {
		t.Errorf("completion %.6f s, want %.6f s", got, want)
	}
}
