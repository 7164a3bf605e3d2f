package fikit

import (
	"testing"

	"github.com/gpusched/gpusched/workload"
)

func idGraph() *workload.Graph {
	return &workload.Graph{
		Tensors: []workload.Tensor{
			{ID: 0, Shape: []int{8, 64, 56, 56}, Bytes: 8 * 64 * 56 * 56 * 4},
			{ID: 1, Shape: []int{64, 64, 3, 3}, Bytes: 64 * 64 * 9 * 4, Kind: workload.Param},
			{ID: 2, Shape: []int{8, 64, 56, 56}, Bytes: 8 * 64 * 56 * 56 * 4},
			{ID: 3, Shape: []int{8, 64, 56, 56}, Bytes: 8 * 64 * 56 * 56 * 4},
			{ID: 4, Shape: []int{8, 64, 56, 56}, Bytes: 8 * 64 * 56 * 56 * 2, DType: "fp16"},
			{ID: 5, Bytes: 4096},
			{ID: 6, Bytes: 8192},
		},
		Ops: []workload.Op{
			{ID: 0, Name: "layer1.conv", Kind: "conv2d", Inputs: []int{0, 1}, Outputs: []int{2}, Launch: "grid=(1,784,1) block=(256,1,1)"},
			{ID: 1, Name: "layer2.conv", Kind: "conv2d", Inputs: []int{3, 1}, Outputs: []int{0}, Launch: "grid=(1,784,1) block=(256,1,1)"},
			{ID: 2, Name: "other", Kind: "conv2d", Inputs: []int{0, 1}, Outputs: []int{4}, Launch: "grid=(1,784,1) block=(256,1,1)"},
			{ID: 3, Kind: "conv2d", Inputs: []int{0, 1}, Outputs: []int{2}, Launch: "grid=(1,392,1) block=(256,1,1)"},
			{ID: 4, Kind: "conv2d", Inputs: []int{0, 1}, Outputs: []int{2}, Launch: "grid=(1,784,1) block=(256,1,1)", DType: "tf32"},
			{ID: 5, Kind: "relu", Inputs: []int{0}, Outputs: []int{2}},
			{ID: 6, Kind: "relu", Inputs: []int{5}, Outputs: []int{5}},
			{ID: 7, Kind: "relu", Inputs: []int{6}, Outputs: []int{6}},
		},
	}
}

func TestKernelID(t *testing.T) {
	g := idGraph()
	id := func(i int) uint64 { return KernelID(&g.Ops[i], g) }
	// Same kind, shapes, dtype and launch: the same kernel, whatever the
	// names and tensor ids.
	if id(0) != id(1) {
		t.Error("identical conv kernels got different ids")
	}
	for _, c := range []struct {
		name string
		a, b int
	}{
		{"output dtype", 0, 2}, {"launch configuration", 0, 3}, {"compute dtype", 0, 4},
		{"kind", 0, 5}, {"size of a shapeless tensor", 6, 7},
	} {
		if id(c.a) == id(c.b) {
			t.Errorf("ops %d and %d differ in %s but share an id", c.a, c.b, c.name)
		}
	}
	// "" and "fp32" are the same precision.
	o := g.Ops[0]
	o.DType = "fp32"
	if KernelID(&o, g) != id(0) {
		t.Error(`dtype "" and "fp32" gave different ids`)
	}
	// Stable across runs and platforms: a golden value, checked against an
	// independent FNV-1a of the documented byte layout.
	if got, want := id(0), uint64(0xca09da519188474b); got != want {
		t.Errorf("KernelID changed: got %#x, want %#x", got, want)
	}
}
