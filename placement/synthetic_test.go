package placement

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeWorkload(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "w.csv")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWorkloadZooNames: a zoo model (or alias) is accepted under its
// canonical name; a measured application wins over a zoo alias; an unknown
// name is an error listing the measured applications and the zoo models.
func TestWorkloadZooNames(t *testing.T) {
	apps := Apps{"const": constApp("const", 1, 100), "bert": constApp("bert", 1, 100)}
	p := writeWorkload(t, "name,time,application,num_replicas,batch_size\na,0,ResNet-50,1,1\nb,0,bert,1,1\nc,0,gpt2,1,1\n")
	w, err := LoadWorkload(p, apps)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{w[0].App, w[1].App, w[2].App}; strings.Join(got, " ") != "resnet50 bert gpt2-small" {
		t.Errorf("applications %v, want resnet50 bert gpt2-small", got)
	}
	p = writeWorkload(t, "name,time,application,num_replicas,batch_size\na,0,resnet,1,1\n")
	_, err = LoadWorkload(p, apps)
	want := p + `:2: field application: unknown application "resnet" (measured: bert, const; zoo models, simulated from the cost model: bert-base, densenet121, gpt2-small, inception-v3, inception-v4, mlp, resnet50, vgg16)`
	if err == nil || err.Error() != "workload "+want {
		t.Errorf("error %v\nwant workload %s", err, want)
	}
	if _, err := LoadWorkload(p, Apps{}); err == nil || !strings.Contains(err.Error(), "(measured: none loaded; pass --apps DIR; zoo models") {
		t.Errorf("no measured profiles: %v", err)
	}
	// A zoo job without its synthetic profile is a clear simulate error.
	_, err = Simulate(apps, []WorkloadJob{{Name: "a", App: "resnet50", Replicas: 1, Batch: 1}}, NewFIFO(), SimConfig{Nodes: 1, GPUsPerNode: 1})
	if err == nil || !strings.Contains(err.Error(), `no profile for application "resnet50"`) || !strings.Contains(err.Error(), "placement/zooapps") {
		t.Errorf("simulate without the zoo profile: %v", err)
	}
}

func toySynthetic() SyntheticApp {
	return SyntheticApp{
		Name: "toy", BaseBatch: 4, MaxBatch: 40, MinLocal: 1, MaxLocal: 16,
		NoiseScale: 12, DatasetSize: 400, Epochs: 2,
		Step: func(nodes, replicas int, local float64) (float64, float64) {
			sync := 0.5 * float64(nodes-1)
			return 0.01*local + sync, sync
		},
	}
}

// TestSyntheticApp: a synthetic application's step time is its function's
// (measured placements play no part), and a run at any validated batch
// completes at the iterations Iterations reports, as for measured ones.
func TestSyntheticApp(t *testing.T) {
	a, err := NewSyntheticApp(toySynthetic())
	if err != nil {
		t.Fatal(err)
	}
	if s, y := a.StepTime([]int{2, 0, 2}, 8); s != 0.58 || y != 0.5 {
		t.Errorf("2 nodes at 8: step %v sync %v, want 0.58 and 0.5", s, y)
	}
	if got := a.IterTime([]int{1}, 8, 2); math.Abs(got-3*0.08) > 1e-15 {
		t.Errorf("iteration with 2 accumulation steps %v, want 0.24", got)
	}
	if want := []int{4, 8, 16, 32, 40}; !equalInts(a.valBatch, want) {
		t.Errorf("validated batches %v, want %v", a.valBatch, want)
	}
	for _, b := range a.valBatch {
		its := a.gainIterations(float64(b))
		if want := a.Iterations(float64(b)); math.Abs(its-want) > 1e-9*want {
			t.Errorf("batch %d: %v iterations, Iterations says %v", b, its, want)
		}
		// Samples read: Epochs·DatasetSize·(Bnoise+B)/(Bnoise+B0).
		if want := 2 * 400 * (12 + float64(b)) / (12 + 4); math.Abs(its*float64(b)-want) > 1e-9*want {
			t.Errorf("batch %d: %v samples, want %v", b, its*float64(b), want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSyntheticAppErrors(t *testing.T) {
	cases := []struct {
		edit func(*SyntheticApp)
		want string
	}{
		{func(s *SyntheticApp) { s.BaseBatch = 0 }, "application toy: field BaseBatch: 0 must be ≥ 1"},
		{func(s *SyntheticApp) { s.MaxBatch = 2 }, "field MaxBatch: 2 must be ≥ BaseBatch (4)"},
		{func(s *SyntheticApp) { s.MaxLocal = 0 }, "field MaxLocal: per-GPU batch range [1, 0]"},
		{func(s *SyntheticApp) { s.NoiseScale = math.NaN() }, "field NoiseScale: NaN must be a finite number of samples > 0"},
		{func(s *SyntheticApp) { s.DatasetSize = 0 }, "field DatasetSize: 0 must be"},
		{func(s *SyntheticApp) { s.Epochs = -1 }, "field Epochs: -1 must be ≥ 1"},
		{func(s *SyntheticApp) { s.Step = nil }, "field Step: nil"},
	}
	for i, c := range cases {
		s := toySynthetic()
		c.edit(&s)
		if _, err := NewSyntheticApp(s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: error %v, want it to contain %q", i, err, c.want)
		}
	}
}

// A synthetic (cost-model) application's step times reach ONES as the
// job's prior (JobState.Prior), as the live loop gives them: compute
// through one GPU's steps at the smallest and largest per-GPU batch,
// synchronisation as lines within a node and across nodes through the
// application's own times at their ends. A measured application gets
// none: its step times are what ONES learns.
func TestSyntheticStepPrior(t *testing.T) {
	app, err := NewSyntheticApp(toySynthetic())
	if err != nil {
		t.Fatal(err)
	}
	p := app.StepPrior(4, 4)
	if p == nil || !p.Known {
		t.Fatalf("prior %+v, want one", p)
	}
	for _, l := range []float64{1, 16} {
		if want, _ := app.shape(1, 1, l); math.Abs(p.Compute(l)-want) > 1e-12 {
			t.Errorf("prior's compute at %v: %v, want %v", l, p.Compute(l), want)
		}
	}
	for _, c := range [][2]int{{1, 2}, {1, 4}, {2, 2}, {4, 16}} {
		if _, want := app.shape(c[0], c[1], 16); math.Abs(p.Sync(c[0], c[1])-want) > 1e-12 {
			t.Errorf("prior's sync on %d GPUs of %d nodes: %v, want %v", c[1], c[0], p.Sync(c[0], c[1]), want)
		}
	}
	if q := constApp("c", 1, 10).StepPrior(4, 4); q != nil {
		t.Errorf("a measured application's prior %+v, want none", q)
	}
	// Simulate hands it to the policy with each job of the application.
	apps := Apps{"toy": app, "const": constApp("const", 1, 10)}
	rec := &simRecord{inner: NewFIFO()}
	if _, err := Simulate(apps, []WorkloadJob{{Name: "a", App: "toy", Replicas: 1, Batch: 4}, {Name: "b", App: "const", Replicas: 1, Batch: 1}},
		rec, SimConfig{Nodes: 4, GPUsPerNode: 4}); err != nil {
		t.Fatal(err)
	}
	if got := rec.prior["a"]; got == nil || *got != *p {
		t.Errorf("the toy job's prior in the policy's view: %+v, want %+v", got, p)
	}
	if got, seen := rec.prior["b"]; !seen || got != nil {
		t.Errorf("the measured job's prior in the policy's view: %+v (seen %v), want none", got, seen)
	}
}

// simRecord schedules as inner and keeps each job's prior as seen.
type simRecord struct {
	inner Policy
	prior map[string]*ThroughputModel
}

func (r *simRecord) Name() string { return "record" }
func (r *simRecord) Schedule(now float64, c ClusterState, jobs []JobState) map[string]Allocation {
	if r.prior == nil {
		r.prior = map[string]*ThroughputModel{}
	}
	for _, j := range jobs {
		r.prior[j.ID] = j.Prior
	}
	return r.inner.Schedule(now, c, jobs)
}

// With a node's link slower than the network, the prior's cross-node line
// stays at or under the application's own sync for rings of one GPU per
// node as for wider ones (a line to the whole cluster's ring alone, which
// crosses the slow link, overshot the narrow rings).
func TestSyntheticStepPriorSlowNodeLink(t *testing.T) {
	s := toySynthetic()
	const intra, inter = 1.0, 12.5 // GB/s
	s.Step = func(nodes, replicas int, local float64) (float64, float64) {
		bw := intra
		switch {
		case nodes > 1 && replicas == nodes:
			bw = inter
		case nodes > 1:
			bw = min(intra, inter)
		}
		sync := 0.0
		if replicas > 1 {
			sync = 2 * float64(replicas-1) / float64(replicas) / bw
		}
		return 0.01*local + sync, sync
	}
	app, err := NewSyntheticApp(s)
	if err != nil {
		t.Fatal(err)
	}
	p := app.StepPrior(8, 4)
	for _, c := range [][2]int{{2, 2}, {3, 3}, {8, 8}, {2, 4}, {4, 8}, {8, 32}} {
		if _, want := app.shape(c[0], c[1], 16); p.Sync(c[0], c[1]) > want*(1+1e-12) {
			t.Errorf("%d GPUs on %d nodes: prior's sync %v above the application's %v", c[1], c[0], p.Sync(c[0], c[1]), want)
		}
	}
}
