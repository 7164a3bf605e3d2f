package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// --nodes, --gpus-per-node and --device shape demo's cluster; bad values
// are refused before anything starts, naming the flag.
func TestDemoShapeFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "0"}, "--nodes 0: want 1 to 16 nodes"},
		{[]string{"--nodes", "17"}, "--nodes 17"},
		{[]string{"--gpus-per-node", "0"}, "--gpus-per-node 0: want 1 to 8 GPUs per node"},
		{[]string{"--gpus-per-node", "9"}, "--gpus-per-node 9"},
		{[]string{"--device", "h100"}, `--device: unknown device profile "h100"`},
	} {
		for _, cmd := range [][]string{{"demo"}, {"bench", "live", "--out", t.TempDir()}} {
			_, _, err := runCoordinator(t, append(cmd, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v %v: error %v, want one containing %q", cmd, c.args, err, c.want)
			}
		}
	}
	if _, _, err := runCoordinator(t, "bench", "live", "--policies", "fifo,tiresias", "--ones", "hold=3", "--out", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "--ones hold=3 applies to policy ones") {
		t.Errorf("bench live --ones without ones: error %v", err)
	}
}

// demo starts the nodes and GPUs it is asked for, of the device asked for,
// and places jobs by the strategy asked for.
func TestDemoClusterShape(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a coordinator and three nodes in this process")
	}
	spec := filepath.Join(t.TempDir(), "jobs.yaml")
	jobs := "jobs:\n  - {name: a, model: mlp, kind: train, batch: 8, iterations: 20}\n  - {name: b, model: mlp, kind: train, batch: 8, iterations: 20}\n"
	if err := os.WriteFile(spec, []byte(jobs), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := runWithinToFile(t, 2*time.Minute, "demo", "--file", spec, "--nodes", "3", "--gpus-per-node", "1", "--device", "v100-16gb", "--placement", "spread", "--limit", "60s", "--json")
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, b)
	}
	var rep DemoReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("demo --json: %v\n%s", err, b)
	}
	var names []string
	for _, g := range rep.GPUs {
		names = append(names, g.GPU)
		if g.Capacity > 17<<30 || g.Capacity < 15<<30 {
			t.Errorf("GPU %s has %d bytes, want a v100-16gb's", g.GPU, g.Capacity)
		}
	}
	if got := strings.Join(names, ","); got != "node-1/gpu0,node-2/gpu0,node-3/gpu0" {
		t.Errorf("GPUs %s, want one on each of three nodes", got)
	}
	if rep.States["completed"] != 2 {
		t.Errorf("states %v, want both jobs completed", rep.States)
	}
	if rep.Nodes != 3 || rep.GPUsPerNode != 1 || rep.Device != "v100-16gb" || rep.Placement != "spread" {
		t.Errorf("report's cluster %d × %d %s, placement %q; want 3 × 1 v100-16gb, spread", rep.Nodes, rep.GPUsPerNode, rep.Device, rep.Placement)
	}
	// Both fit at their vanilla peaks on one GPU: binpack would put them
	// together, spread on two.
	if len(rep.Jobs) != 2 || rep.Jobs[0].GPU == "" || rep.Jobs[0].GPU == rep.Jobs[1].GPU {
		t.Errorf("jobs %+v: want them on two GPUs under --placement spread", rep.Jobs)
	}
}

// The ONES settings go to the ones runs only (the other policies refuse
// them), and the GPUs are listed in node order.
func TestBenchLiveOnesForAndGPUOrder(t *testing.T) {
	f := &benchLiveFlags{}
	if err := f.ones.Set("hold=2"); err != nil {
		t.Fatal(err)
	}
	if got := f.onesFor("ones").String(); got != "hold=2" {
		t.Errorf("onesFor(ones) = %q, want hold=2", got)
	}
	for _, p := range []string{"fifo", "tiresias"} {
		if !f.onesFor(p).Empty() {
			t.Errorf("onesFor(%s) = %q, want none", p, f.onesFor(p))
		}
	}
	ids := []string{"node-10/gpu0", "node-2/gpu1", "node-2/gpu0", "node-1/gpu3"}
	slices.SortFunc(ids, func(a, b string) int { return strings.Compare(gpuOrder(a), gpuOrder(b)) })
	if got := strings.Join(ids, ","); got != "node-1/gpu3,node-2/gpu0,node-2/gpu1,node-10/gpu0" {
		t.Errorf("GPU order %s", got)
	}
}

// --plan-wait: a positive value as given, 0 one round's wall time (the
// interval over the time scale, at least a millisecond), negative no
// limit; no limit with the loop off.
func TestPlanWaitFlag(t *testing.T) {
	s := seconds(time.Second)
	for _, c := range []struct {
		flag, every seconds
		scale       float64
		want        time.Duration
	}{
		{2 * s, 60 * s, 100, 2 * time.Second},
		{0, 60 * s, 100, 600 * time.Millisecond},
		{0, 60 * s, 1, time.Minute},
		{0, 60 * s, 1e9, time.Millisecond},
		{-1, 60 * s, 100, 0},
		{0, 0, 100, 0},
	} {
		if got := planWait(c.flag, c.every, c.scale); got != c.want {
			t.Errorf("planWait(%v, %v, %g) = %v, want %v", time.Duration(c.flag), time.Duration(c.every), c.scale, got, c.want)
		}
	}
}
