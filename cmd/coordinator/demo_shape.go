package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/workload"
)

// demoShape is the in-process cluster demo and bench live start: nodes
// nodes of gpusPerNode simulated GPUs of one device profile.
type demoShape struct {
	nodes, gpusPerNode int
	device             string
	// placement is the coordinator's placement strategy (--placement).
	placement placement.Strategy
}

// defaultDemoShape is the demo's cluster: two nodes of two simulated
// H100s, small enough to start in a second and to show jobs sharing GPUs.
var defaultDemoShape = demoShape{nodes: 2, gpusPerNode: 2, device: "h100-80gb"}

// Limits of --nodes and --gpus-per-node: every node is a gossip member and
// a set of device actors in this process, and the planner plans every
// GPU's jobs in wall time beside them.
const (
	maxDemoNodes       = 16
	maxDemoGPUsPerNode = 8
)

// register adds --nodes, --gpus-per-node and --device to fl, with s's
// values as defaults.
func (s *demoShape) register(fl *pflag.FlagSet) {
	fl.IntVar(&s.nodes, "nodes", s.nodes, fmt.Sprintf("nodes in the in-process cluster (1 to %d)", maxDemoNodes))
	fl.IntVar(&s.gpusPerNode, "gpus-per-node", s.gpusPerNode, fmt.Sprintf("simulated GPUs per node (1 to %d)", maxDemoGPUsPerNode))
	fl.StringVar(&s.device, "device", s.device, "device profile of every simulated GPU ("+strings.Join(gpu.ProfileNames(), ", ")+")")
}

// profile checks the shape and returns its device profile; an error names
// the flag and what it accepts.
func (s demoShape) profile() (gpu.Profile, error) {
	if s.nodes < 1 || s.nodes > maxDemoNodes {
		return gpu.Profile{}, fmt.Errorf("--nodes %d: want 1 to %d nodes", s.nodes, maxDemoNodes)
	}
	if s.gpusPerNode < 1 || s.gpusPerNode > maxDemoGPUsPerNode {
		return gpu.Profile{}, fmt.Errorf("--gpus-per-node %d: want 1 to %d GPUs per node", s.gpusPerNode, maxDemoGPUsPerNode)
	}
	p, err := gpu.LookupProfile(s.device)
	if err != nil {
		return gpu.Profile{}, fmt.Errorf("--device: %w", err)
	}
	return p, nil
}

// gpus is the cluster's GPU count.
func (s demoShape) gpus() int { return s.nodes * s.gpusPerNode }

// String describes the shape, "2 nodes × 2 simulated h100-80gb", and a
// placement other than the default ("…, placement spread").
func (s demoShape) String() string {
	out := fmt.Sprintf("%d %s × %d simulated %s", s.nodes, workload.Plural(s.nodes, "node"), s.gpusPerNode, s.device)
	if s.placement != "" && s.placement != placement.BinPack {
		out += ", placement " + string(s.placement)
	}
	return out
}

// gpuOrder is a demo GPU's place in node order: "node-2/gpu1" before
// "node-10/gpu0" (a name of another form sorts first, by its text).
func gpuOrder(id string) string {
	var n, k int
	if _, err := fmt.Sscanf(id, "node-%d/gpu%d", &n, &k); err != nil {
		return id
	}
	return fmt.Sprintf("\xff%06d/%06d", n, k)
}
