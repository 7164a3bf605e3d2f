package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// TestSimulateZooBandwidthUnits: --intra-node-gbs and --inter-node-gbs are
// GB/s (1e9 bytes/s) and reach the ring all-reduce: one resnet50 job
// under fifo completes, by hand, at 30 s (the move cost) + target/gain ×
// (compute(local) + 2(r−1)/r · 4·25,557,032 bytes / bandwidth), with the
// intra-node link on one node, the inter-node one across nodes, and no
// synchronisation on one GPU whatever the bandwidths.
func TestSimulateZooBandwidthUnits(t *testing.T) {
	const epochs, d, b0, bn = 90, 1281167.0, 128.0, 6400.0
	bytes := 4 * 25557032.0
	target := epochs * d / b0
	gain := func(b float64) float64 { return b * (bn + b0) / (b0 * (bn + b)) }
	compute := func(l int) float64 {
		g, err := zoo.Build("resnet50", workload.Train, l, zoo.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return gpu.MustProfile("h100-80gb").GraphSeconds(g)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		replicas, batch, gpusPerNode int
		flags                        []string
		bw                           float64 // bytes/s; 0: one GPU
	}{
		{4, 512, 4, []string{"--intra-node-gbs", "50", "--inter-node-gbs", "1"}, 50e9},
		{8, 1024, 4, []string{"--intra-node-gbs", "50", "--inter-node-gbs", "6.25"}, 6.25e9},
		{1, 128, 4, []string{"--intra-node-gbs", "1e-6", "--inter-node-gbs", "1e-6"}, 0},
	} {
		wl := filepath.Join(dir, "w.csv")
		csv := "name,time,application,num_replicas,batch_size\nr,0,resnet50," + strconv.Itoa(c.replicas) + "," + strconv.Itoa(c.batch) + "\n"
		if err := os.WriteFile(wl, []byte(csv), 0o644); err != nil {
			t.Fatal(err)
		}
		res, _ := simulateJSON(t, append([]string{"--workload", wl, "--policy", "fifo", "--memory", "vanilla",
			"--gpus", "8", "--gpus-per-node", strconv.Itoa(c.gpusPerNode)}, c.flags...)...)
		r := float64(c.replicas)
		sync := 0.0
		if c.bw > 0 {
			sync = 2 * (r - 1) / r * bytes / c.bw
		}
		want := 30 + target/gain(float64(c.batch))*(compute(c.batch/c.replicas)+sync)
		if got := res.PerJob[0].Completion; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%d GPUs, batch %d, %v: completion %.6f s, want %.6f s", c.replicas, c.batch, c.flags, got, want)
		}
	}
}

// TestSimulateToleranceRange: --tolerance is a job's tolerance as the live
// runtime takes it, 0%–100%; "10" (1000%, meant as 10%) is refused with
// the fix, as a job spec refuses it, rather than silently widening the
// TENSILE bound with plans no job could ask for.
func TestSimulateToleranceRange(t *testing.T) {
	wl := writeWorkload(t, "m,0,mlp,1,128")
	for _, c := range []struct {
		tol, want string
	}{
		{"10", `simulate: --tolerance "10": want 0%–100% (for 10 percent write "10%")`},
		{"150%", `simulate: --tolerance "150%": want 0%–100%`},
		{"1.0001", `simulate: --tolerance "1.0001": want 0%–100%`},
	} {
		_, _, err := runCoordinator(t, "simulate", "--workload", wl, "--policy", "fifo", "--json", "--tolerance", c.tol)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--tolerance %s: error %v, want it to contain %q", c.tol, err, c.want)
		}
	}
	for _, tol := range []string{"0", "0%", "100%", "1", "0.3"} {
		if _, _, err := runCoordinator(t, "simulate", "--workload", wl, "--policy", "fifo", "--json", "--tolerance", tol); err != nil {
			t.Errorf("--tolerance %s: %v", tol, err)
		}
	}
}

// TestSimulateHelpDescribesExtraTime: the help says what a batch above the
// vanilla bound is charged (zooapps.ExtraTime: the least tolerance level at
// which the minimum budget of the grid batch at or above it fits), not the
// whole tolerance.
func TestSimulateHelpDescribesExtraTime(t *testing.T) {
	out, _, err := runCoordinator(t, "simulate", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "charged the whole\ntolerance") || strings.Contains(out, "whole tolerance") || !strings.Contains(out, "least tolerance level") {
		t.Errorf("simulate --help misdescribes the extra time of a TENSILE plan:\n%s", out)
	}
}
