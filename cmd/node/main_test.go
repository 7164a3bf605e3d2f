package main

import (
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// TestNVMLProfile: the GPUs NVML finds get --device's profile when it is
// given (before, --gpus nvml ignored --device while its own error told the
// user to pass it, so an H100 PCIe card could not be used at all), else the
// profile matching their name and memory; no match and mixed models are
// errors that name --device.
func TestNVMLProfile(t *testing.T) {
	pcie := gpu.Discovered{Name: "NVIDIA H100 PCIe", MemoryBytes: 81559 << 20}
	sxm := gpu.Discovered{Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 81559 << 20, Profile: "h100-80gb"}
	if p, err := nvmlProfile([]gpu.Discovered{pcie, pcie}, "a100-40gb", true); err != nil || p.Name != "a100-40gb" {
		t.Fatalf("H100 PCIe with --device a100-40gb: %q, %v; want the a100-40gb profile", p.Name, err)
	}
	if p, err := nvmlProfile([]gpu.Discovered{sxm}, "h100-80gb", false); err != nil || p.Name != "h100-80gb" {
		t.Fatalf("H100 SXM without --device: %q, %v; want the matched h100-80gb", p.Name, err)
	}
	for _, c := range []struct {
		found []gpu.Discovered
		want  string
	}{
		{[]gpu.Discovered{pcie}, "no built-in device profile matches \"NVIDIA H100 PCIe\""},
		{[]gpu.Discovered{sxm, pcie}, "different GPU models"},
		{nil, "NVML found no GPUs"},
	} {
		_, err := nvmlProfile(c.found, "h100-80gb", false)
		if err == nil || !strings.Contains(err.Error(), c.want) || len(c.found) > 0 && !strings.Contains(err.Error(), "--device") {
			t.Errorf("%d GPUs: error %v, want one containing %q and naming --device", len(c.found), err, c.want)
		}
	}
	if _, err := nvmlProfile([]gpu.Discovered{pcie}, "no-such-gpu", true); err == nil {
		t.Error("--device no-such-gpu was accepted")
	}
}
