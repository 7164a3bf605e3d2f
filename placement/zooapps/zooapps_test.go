package zooapps

import (
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

func newBuilder(t *testing.T, recipes map[string]Recipe) *Builder {
	t.Helper()
	b, err := New(Config{Device: gpu.MustProfile("h100-80gb"), Recipes: recipes})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStepAndSyncShape: compute time grows with the per-GPU batch and is
// the cost model's time of the zoo graph; synchronisation is the ring
// all-reduce of the parameter bytes (ResNet-50's published 25,557,032 fp32
// parameters), zero on one GPU, and grows with the node count.
func TestStepAndSyncShape(t *testing.T) {
	b := newBuilder(t, nil)
	a, err := b.App("ResNet-50") // an alias resolves to the canonical name
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "resnet50" || !a.Synthetic() {
		t.Fatalf("app %q synthetic=%v, want resnet50, true", a.Name, a.Synthetic())
	}
	prev := 0.0
	for _, l := range []int{1, 8, 32, 128, 512} {
		s, y := a.StepTime([]int{1}, float64(l))
		if y != 0 {
			t.Errorf("one GPU at batch %d: sync %v, want 0", l, y)
		}
		if !(s > prev) {
			t.Errorf("step at batch %d = %v, not above %v at the previous batch", l, s, prev)
		}
		g, err := zoo.Build("resnet50", workload.Train, l, zoo.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if want := gpu.MustProfile("h100-80gb").GraphSeconds(g); s != want {
			t.Errorf("step at batch %d = %v, cost model says %v", l, s, want)
		}
		prev = s
	}
	// A fractional batch lies between its neighbours.
	s32, _ := a.StepTime([]int{1}, 32)
	s33, _ := a.StepTime([]int{1}, 33)
	if mid, _ := a.StepTime([]int{1}, 32.25); math.Abs(mid-(s32+0.25*(s33-s32))) > 1e-15 {
		t.Errorf("batch 32.25: %v, want a quarter of the way from %v to %v", mid, s32, s33)
	}

	bytes, err := b.GradientBytes("resnet50")
	if err != nil {
		t.Fatal(err)
	}
	if bytes != 4*25557032 {
		t.Fatalf("gradient bytes %d, want 4 × 25,557,032", bytes)
	}
	ring := func(r int, bw float64) float64 { return 2 * float64(r-1) / float64(r) * float64(bytes) / bw }
	cases := []struct {
		counts []int
		want   float64
	}{
		{[]int{4}, ring(4, DefaultNetwork.IntraNode)},
		{[]int{2, 2}, ring(4, DefaultNetwork.InterNode)},
		{[]int{4, 4}, ring(8, DefaultNetwork.InterNode)},
		{[]int{4, 4, 4, 4}, ring(16, DefaultNetwork.InterNode)},
		{[]int{4, 0, 4, 4, 4}, ring(16, DefaultNetwork.InterNode)}, // an empty node is not in the ring
	}
	prevSync := 0.0
	for _, c := range cases {
		s, y := a.StepTime(c.counts, 64)
		if math.Abs(y-c.want) > 1e-15 {
			t.Errorf("%v: sync %v, want %v", c.counts, y, c.want)
		}
		if s64, _ := a.StepTime([]int{1}, 64); math.Abs(s-(s64+y)) > 1e-15 {
			t.Errorf("%v: step %v is not compute %v + sync %v", c.counts, s, s64, y)
		}
		if !(y >= prevSync) {
			t.Errorf("%v: sync %v fell below %v with more nodes", c.counts, y, prevSync)
		}
		prevSync = y
	}
	if y1, _ := b.SyncSeconds("resnet50", 1, 4); !(y1 < prevSync) {
		t.Errorf("one node %v not below four nodes %v", y1, prevSync)
	}
}

// TestMaxLocalFitsMemory: the largest per-GPU batch fits the device's
// memory and one more does not; a device too small for batch 1 is a clear
// error.
func TestMaxLocalFitsMemory(t *testing.T) {
	b, err := New(Config{Device: gpu.MustProfile("h100-80gb"), Memory: Vanilla})
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.MaxLocal("gpt2-small")
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Device().MemoryBytes
	p, _ := b.VanillaPeak("gpt2-small", m)
	p1, _ := b.VanillaPeak("gpt2-small", m+1)
	if !(p <= mem && p1 > mem) {
		t.Fatalf("max local %d: peak %d at it, %d one above, memory %d", m, p, p1, mem)
	}
	// The mlp fits far beyond its recipe's MaxBatch: capped there.
	if m, err := b.MaxLocal("mlp"); err != nil || m != 32*Recipes["mlp"].BaseBatch {
		t.Errorf("mlp max local %d (%v), want the recipe's MaxBatch %d", m, err, 32*Recipes["mlp"].BaseBatch)
	}
	tiny := gpu.MustProfile("h100-80gb")
	tiny.Name, tiny.MemoryBytes = "tiny-1gb", 1<<30
	for _, mem := range MemoryModels {
		bt, err := New(Config{Device: tiny, Memory: mem, Tolerance: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bt.App("vgg16"); err == nil || !strings.Contains(err.Error(), "does not fit on tiny-1gb even at batch 1") {
			t.Errorf("vgg16 on 1 GiB, memory %s: error %v", mem, err)
		}
	}
}

// TestTensileWidensMaxLocal: on an 11 GB device, TENSILE's minimum budget
// at 10% lets a zoo model run a per-GPU batch strictly above the largest
// whose vanilla peak fits; the bound is a batch whose minimum budget fits
// with the next one's failing; batches up to the vanilla bound run at the
// cost model's time, and those above it pay ExtraTime, at most the
// tolerance.
func TestTensileWidensMaxLocal(t *testing.T) {
	dev := gpu.MustProfile("rtx2080ti-11gb")
	for _, model := range []string{"gpt2-small", "vgg16"} {
		van, err := New(Config{Device: dev, Memory: Vanilla})
		if err != nil {
			t.Fatal(err)
		}
		ten, err := New(Config{Device: dev, Memory: Tensile, Tolerance: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		vm, err := van.MaxLocal(model)
		if err != nil {
			t.Fatal(err)
		}
		tm, err := ten.MaxLocal(model)
		if err != nil {
			t.Fatal(err)
		}
		if vm2, _ := ten.VanillaMaxLocal(model); vm2 != vm {
			t.Errorf("%s: vanilla bound %d from the TENSILE builder, %d from the vanilla one", model, vm2, vm)
		}
		if p, _ := van.VanillaPeak(model, vm+1); p <= dev.MemoryBytes {
			t.Errorf("%s: vanilla peak at %d (%d) fits %d: the vanilla bound %d is too low", model, vm+1, p, dev.MemoryBytes, vm)
		}
		if !(tm > vm) {
			t.Fatalf("%s on %s: TENSILE bound %d, vanilla %d: want it strictly larger", model, dev.Name, tm, vm)
		}
		if m, err := ten.MinBudget(model, tm); err != nil || m > dev.MemoryBytes {
			t.Errorf("%s: minimum budget at the bound %d is %d (%v), memory %d", model, tm, m, err, dev.MemoryBytes)
		}
		r, _ := ten.Recipe(model)
		if tm < r.MaxBatch {
			if m, err := ten.MinBudget(model, tm+1); err == nil && m <= dev.MemoryBytes {
				t.Errorf("%s: minimum budget at %d (%d) still fits %d: the bound %d is too low", model, tm+1, m, dev.MemoryBytes, tm)
			}
		}
		a, err := ten.App(model)
		if err != nil {
			t.Fatal(err)
		}
		if a.MaxLocal != tm {
			t.Errorf("%s: app MaxLocal %d, want %d", model, a.MaxLocal, tm)
		}
		for _, l := range []int{vm, tm} {
			c, _ := ten.ComputeSeconds(model, l)
			x, err := ten.ExtraTime(model, l)
			if err != nil {
				t.Fatal(err)
			}
			step, _ := a.StepTime([]int{1}, float64(l))
			if l == vm && (x != 0 || step != c) {
				t.Errorf("%s at the vanilla bound %d: extra %v, step %v, compute %v: want no extra time", model, l, x, step, c)
			}
			if l == tm && !(x > 0 && x <= 0.1 && math.Abs(step-c*(1+x)) < 1e-12*step) {
				t.Errorf("%s at the TENSILE bound %d: extra %v, step %v, compute %v: want step = compute·(1+extra), 0 < extra ≤ 10%%", model, l, x, step, c)
			}
		}
		t.Logf("%s on %s: per-GPU batch ≤ %d vanilla, ≤ %d TENSILE at 10%%", model, dev.Name, vm, tm)
	}
}

// maxLocalPolicy records the largest per-GPU batch a policy gives each job.
type maxLocalPolicy struct {
	placement.Policy
	local map[string]int
}

func (p *maxLocalPolicy) Schedule(now float64, c placement.ClusterState, js []placement.JobState) map[string]placement.Allocation {
	as := p.Policy.Schedule(now, c, js)
	for id, a := range as {
		if a.NumGPUs() > 0 {
			p.local[id] = max(p.local[id], a.LocalBatch)
		}
	}
	return as
}

// TestONESUsesTensileBatches: with TENSILE's bound, ONES runs gpt2-small
// jobs on an 11 GB device at per-GPU batches the vanilla peak does not
// allow, never above the TENSILE bound (the simulator also rejects any
// allocation above the job's MaxLocal); with the vanilla bound it stays at
// or below the vanilla one.
func TestONESUsesTensileBatches(t *testing.T) {
	const model = "gpt2-small"
	r := Recipes[model]
	r.Epochs, r.DatasetSize = 1, 2000*r.BaseBatch
	var jobs []placement.WorkloadJob
	for i := 0; i < 6; i++ {
		jobs = append(jobs, placement.WorkloadJob{Name: fmt.Sprint("gpt2-", i), Time: float64(30 * i), App: model, Replicas: 1, Batch: r.BaseBatch})
	}
	run := func(mem MemoryModel) (vm, tm int, local map[string]int, res *placement.SimResult) {
		b, err := New(Config{Device: gpu.MustProfile("rtx2080ti-11gb"), Memory: mem, Tolerance: 0.1, Recipes: map[string]Recipe{model: r}})
		if err != nil {
			t.Fatal(err)
		}
		apps := placement.Apps{}
		if _, err := b.AddTo(apps, jobs); err != nil {
			t.Fatal(err)
		}
		pol := &maxLocalPolicy{Policy: placement.NewONES(placement.ONESConfig{Seed: 1}), local: map[string]int{}}
		res, err = placement.Simulate(apps, jobs, pol, placement.SimConfig{Nodes: 2, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
		if err != nil {
			t.Fatal(err)
		}
		vm, _ = b.VanillaMaxLocal(model)
		return vm, apps[model].MaxLocal, pol.local, res
	}
	vm, tm, local, res := run(Tensile)
	beyond := 0
	for id, l := range local {
		if l > tm {
			t.Errorf("TENSILE: job %s ran at per-GPU batch %d above the bound %d", id, l, tm)
		}
		if l > vm {
			beyond++
		}
	}
	if beyond == 0 {
		t.Errorf("TENSILE: no job ran above the vanilla bound %d (bound %d): per-job largest batches %v", vm, tm, local)
	}
	_, vtm, vlocal, vres := run(Vanilla)
	if vtm != vm {
		t.Errorf("vanilla bound %d, want %d", vtm, vm)
	}
	for id, l := range vlocal {
		if l > vm {
			t.Errorf("vanilla: job %s ran at per-GPU batch %d above the bound %d", id, l, vm)
		}
	}
	t.Logf("per-GPU batch ≤ %d vanilla, ≤ %d TENSILE; %d of %d jobs above the vanilla bound; avg JCT %.0f s TENSILE, %.0f s vanilla; largest batches %v",
		vm, tm, beyond, len(jobs), res.AvgJCT, vres.AvgJCT, local)
}

// TestProgressModel: the synthetic app's progress follows the noise-scale
// model: NoiseScale of its gradient statistics is Bnoise; Gain(B) is
// B(Bnoise+B0)/(B0(Bnoise+B)); a fixed-batch run needs Iterations(B)
// iterations at validated batches; the target is Epochs·DatasetSize/B0.
func TestProgressModel(t *testing.T) {
	b := newBuilder(t, map[string]Recipe{"bert-base": {DatasetSize: 1000, Epochs: 4, BaseBatch: 10, MaxBatch: 100, NoiseScale: 90}})
	a, err := b.App("bert-base")
	if err != nil {
		t.Fatal(err)
	}
	if a.Target() != 4*1000/10 || a.EpochProgress(1) != 100 {
		t.Fatalf("target %v epoch 1 %v, want 400 and 100", a.Target(), a.EpochProgress(1))
	}
	for _, batch := range []float64{10, 20, 40, 55, 80, 100} {
		sqr, vr := a.GradStats(batch, 2)
		if n := placement.NoiseScale(sqr, vr, 10); math.Abs(n-90) > 1e-12 {
			t.Errorf("batch %v: noise scale %v, want 90", batch, n)
		}
		want := batch * (90 + 10) / (10 * (90 + batch))
		if g := a.Gain(batch, 2); math.Abs(g-want) > 1e-12 {
			t.Errorf("batch %v: gain %v, want %v", batch, g, want)
		}
	}
	for _, batch := range []float64{10, 20, 40, 80, 100} { // B0·2^k and MaxBatch
		want := 400 / (batch * 100 / (10 * (90 + batch)))
		if its := a.Iterations(batch); math.Abs(its-want) > 1e-9 {
			t.Errorf("batch %v: %v iterations, want %v", batch, its, want)
		}
	}
}

// TestZooHandChecked: two zoo jobs under FIFO on 2 nodes × 4 GPUs, 60 s
// interval, 30 s restart; completion times from the cost model's numbers
// and the closed-form large-batch model, computed here independently of
// the simulator.
//
// r1 (arrives at 0) runs 2 GPUs on node 0 at batch 256 (128 per GPU),
// synchronising over NVLink-class links; it starts at 0 and completes at
// 30 + T1·(compute(128) + sync(1 node, 2)) / gain(256). r2 (arrives at 10)
// wants all 8 GPUs and waits for r1 (FIFO does not back-fill); it starts at
// the first interval boundary after r1 completes and runs at batch 1024 (128
// per GPU) over 2 nodes.
func TestZooHandChecked(t *testing.T) {
	const d, epochs, b0, bn = 128000, 3, 128, 6400
	b := newBuilder(t, map[string]Recipe{"resnet50": {DatasetSize: d, Epochs: epochs, BaseBatch: b0, NoiseScale: bn}})
	apps := placement.Apps{}
	jobs := []placement.WorkloadJob{
		{Name: "r1", Time: 0, App: "resnet50", Replicas: 2, Batch: 256},
		{Name: "r2", Time: 10, App: "resnet50", Replicas: 8, Batch: 1024},
	}
	if added, err := b.AddTo(apps, jobs); err != nil || !reflect.DeepEqual(added, []string{"resnet50"}) {
		t.Fatalf("added %v, %v", added, err)
	}
	res, err := placement.Simulate(apps, jobs, placement.NewFIFO(), placement.SimConfig{Nodes: 2, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
	if err != nil {
		t.Fatal(err)
	}
	compute, err := b.ComputeSeconds("resnet50", 128)
	if err != nil {
		t.Fatal(err)
	}
	bytes := float64(4 * 25557032)
	target := float64(epochs * d / b0) // base-batch iterations
	gain := func(batch float64) float64 { return batch * (bn + b0) / (b0 * (bn + batch)) }
	t1 := 30 + target/gain(256)*(compute+2*(1.0/2)*bytes/100e9)
	start2 := math.Ceil(t1/60) * 60
	t2 := start2 + 30 + target/gain(1024)*(compute+2*(7.0/8)*bytes/12.5e9)
	want := map[string][2]float64{"r1": {0, t1}, "r2": {start2, t2}}
	for _, j := range res.PerJob {
		w := want[j.Name]
		if j.Start != w[0] || math.Abs(j.Completion-w[1]) > 1e-9*w[1] {
			t.Errorf("%s: start %v completion %.9f, want start %v completion %.9f", j.Name, j.Start, j.Completion, w[0], w[1])
		}
	}
	// The figures, for a reader checking them by hand: compute(128) is the
	// cost model's 0.1067 s on an h100-80gb.
	if math.Abs(compute-0.1067) > 0.0005 {
		t.Errorf("resnet50 at 128 on h100-80gb: %.4f s, the documented 0.1067 s changed", compute)
	}
	t.Logf("r1 completes at %.3f s, r2 starts at %.0f s and completes at %.3f s", t1, start2, t2)
}

// shortRecipes shrinks every recipe to a few epochs of a small data set so
// that a mixed workload simulates quickly.
func shortRecipes() map[string]Recipe {
	rs := map[string]Recipe{}
	for k, r := range Recipes {
		r.Epochs, r.DatasetSize = 2, 50*r.BaseBatch*(1+len(k)%3)
		rs[k] = r
	}
	return rs
}

// TestMixedWorkloadAllPolicies: measured applications and zoo models in
// one workload run under every policy; every job completes, and the same
// seed gives the same schedule.
func TestMixedWorkloadAllPolicies(t *testing.T) {
	d, err := placement.FindDataDir(".")
	if err != nil {
		t.Skipf("measured profiles not available (%v)", err)
	}
	apps, err := placement.LoadApps(filepath.Join(d, "apps"))
	if err != nil {
		t.Fatal(err)
	}
	wl, err := placement.LoadWorkload(filepath.Join("..", "..", "examples", "zoo-workload.csv"), apps)
	if err != nil {
		t.Fatal(err)
	}
	measured, err := placement.LoadWorkload(filepath.Join(d, "workloads", "workload-1.csv"), apps)
	if err != nil {
		t.Fatal(err)
	}
	wl = append(wl, measured[:12]...)
	b := newBuilder(t, shortRecipes())
	if _, err := b.AddTo(apps, wl); err != nil {
		t.Fatal(err)
	}
	for _, name := range placement.PolicyNames {
		run := func() *placement.SimResult {
			p, err := placement.NewPolicy(name, placement.PolicyOptions{Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			r, err := placement.Simulate(apps, wl, p, placement.SimConfig{Nodes: 4, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return r
		}
		r1, r2 := run(), run()
		if len(r1.PerJob) != len(wl) {
			t.Fatalf("%s: %d results for %d jobs", name, len(r1.PerJob), len(wl))
		}
		zooJobs := 0
		for _, j := range r1.PerJob {
			if !(j.Completion > j.Arrival) || j.Start < j.Arrival {
				t.Errorf("%s: job %s arrival %v start %v completion %v", name, j.Name, j.Arrival, j.Start, j.Completion)
			}
			if apps[j.App].Synthetic() {
				zooJobs++
			}
		}
		if zooJobs != 12 {
			t.Errorf("%s: %d zoo jobs, want 12", name, zooJobs)
		}
		if !reflect.DeepEqual(r1.PerJob, r2.PerJob) || !reflect.DeepEqual(r1.Timeline, r2.Timeline) {
			t.Errorf("%s: same seed, different results", name)
		}
		t.Logf("%-8s avg JCT %6.0f s makespan %6.0f s restarts %d", name, r1.AvgJCT, r1.Makespan, r1.Restarts)
	}
}

// TestConfigErrors: bad configuration names the field and the fix.
func TestConfigErrors(t *testing.T) {
	h := gpu.MustProfile("h100-80gb")
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Device: h, Network: Network{InterNode: -1}}, "field Network.InterNode: -1 must be a finite bandwidth > 0"},
		{Config{Device: h, Recipes: map[string]Recipe{"resnet": {}}}, `field Recipes: unknown model "resnet" (zoo models: bert-base`},
		{Config{Device: h, Recipes: map[string]Recipe{"vgg16": {DatasetSize: 10, Epochs: 0, BaseBatch: 8}}}, "recipe vgg16: field Epochs: 0 must be ≥ 1"},
		{Config{Device: h, Recipes: map[string]Recipe{"mlp": {DatasetSize: 10, Epochs: 1, BaseBatch: 8, MaxBatch: 4}}}, "recipe mlp: field MaxBatch: 4 must be ≥ BaseBatch (8)"},
		{Config{}, "memory_bytes"},
		{Config{Device: h, Memory: "swap"}, `field Memory: unknown memory model "swap" (want tensile or vanilla)`},
		{Config{Device: h, Tolerance: -0.1}, "field Tolerance: -0.1 must be a finite fraction ≥ 0"},
	}
	for i, c := range cases {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: error %v, want it to contain %q", i, err, c.want)
		}
	}
	b := newBuilder(t, nil)
	if _, err := b.App("resnet"); err == nil || !strings.Contains(err.Error(), `unknown zoo model "resnet"`) {
		t.Errorf("unknown model: %v", err)
	}
}

// BenchmarkBuildAllApps: a fresh builder's eight synthetic applications
// (graph builds for the per-GPU batch search and the base batch's step).
func BenchmarkBuildAllApps(b *testing.B) {
	for i := 0; i < b.N; i++ {
		bl, err := New(Config{Device: gpu.MustProfile("h100-80gb")})
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range zoo.Models() {
			a, err := bl.App(m)
			if err != nil {
				b.Fatal(err)
			}
			a.StepTime([]int{1}, float64(a.BaseBatch))
		}
	}
}

// An ImageNet-size zoo model alone on an idle 64-GPU cluster must leave its
// first node under ONES: its cross-node configurations are faster (the ring
// all-reduce of 32 MB of gradients costs milliseconds), and a throughput
// prior that predicts otherwise would keep it on 4 GPUs for its whole run.
func TestONESScalesZooJobAcrossNodes(t *testing.T) {
	b := newBuilder(t, map[string]Recipe{"densenet121": {DatasetSize: 1281167, Epochs: 3, BaseBatch: 64, NoiseScale: 3200}})
	apps := placement.Apps{}
	jobs := []placement.WorkloadJob{{Name: "d", Time: 0, App: "densenet121", Replicas: 4, Batch: 256}}
	if _, err := b.AddTo(apps, jobs); err != nil {
		t.Fatal(err)
	}
	pol := placement.NewONES(placement.ONESConfig{Seed: 1})
	res, err := placement.Simulate(apps, jobs, pol, placement.SimConfig{Nodes: 16, GPUsPerNode: 4, Interval: 60, MoveCost: 30})
	if err != nil {
		t.Fatal(err)
	}
	if g := res.PerJob[0].MaxGPUs; g <= 4 {
		t.Errorf("densenet121 alone on 64 GPUs held at most %d GPUs; want more than one node's 4", g)
	}
	t.Logf("max GPUs %d, JCT %.0f s, restarts %d", res.PerJob[0].MaxGPUs, res.PerJob[0].JCT, res.PerJob[0].Restarts)
}
