package gpu

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Discovered describes one physical GPU found through NVML.
type Discovered struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Name        string `json:"name"`
	MemoryBytes int64  `json:"memory_bytes"`
	// Profile is the built-in profile that best matches Name ("" if none).
	Profile string `json:"profile"`
}

// Discover lists the GPUs on this machine through NVML. NVML is loaded at
// run time, so this builds everywhere; on a machine without the NVIDIA
// driver it returns an error that says so and suggests simulated GPUs.
func Discover() (gpus []Discovered, err error) {
	defer func() {
		// go-nvml panics in some builds when the library is missing.
		if r := recover(); r != nil {
			gpus, err = nil, fmt.Errorf("NVML unavailable (%v): no NVIDIA driver on this machine; use --gpus sim:N", r)
		}
	}()
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML init failed: %s; is the NVIDIA driver installed? use --gpus sim:N for simulated GPUs", nvml.ErrorString(ret))
	}
	defer func() { _ = nvml.Shutdown() }()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device count: %s", nvml.ErrorString(ret))
	}
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d: %s", i, nvml.ErrorString(ret))
		}
		name, _ := d.GetName()
		uuid, _ := d.GetUUID()
		mem, ret := d.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d memory: %s", i, nvml.ErrorString(ret))
		}
		gpus = append(gpus, Discovered{Index: i, UUID: uuid, Name: name, MemoryBytes: int64(mem.Total), Profile: MatchProfile(name, int64(mem.Total))})
	}
	return gpus, nil
}

// MatchProfile maps an NVML device name and memory size to a built-in
// profile name, or "" when none matches. A part whose figures differ from
// the profile's is not matched: h100-80gb is the H100 SXM5 (the PCIe card
// has 51 TFLOP/s fp32 and 2.0 TB/s, the NVL 94 GB), v100-16gb the V100
// SXM2 (the PCIe card has 14 TFLOP/s fp32), h200-141gb the H200 SXM over
// PCIe 5 (not the NVL, nor the GH200, whose host link is NVLink-C2C).
func MatchProfile(name string, memBytes int64) string {
	n := strings.ToLower(name)
	gb := memBytes >> 30
	sxm := !strings.Contains(n, "pcie") && !strings.Contains(n, "nvl") && !strings.Contains(n, "fhhl")
	switch {
	case strings.Contains(n, "h100") && sxm && gb <= 80:
		return "h100-80gb"
	case strings.Contains(n, "h200") && !strings.Contains(n, "gh200") && sxm && gb >= 130:
		return "h200-141gb"
	case strings.Contains(n, "a100") && gb <= 48:
		return "a100-40gb"
	case strings.Contains(n, "v100") && sxm && gb <= 20:
		return "v100-16gb"
	case strings.Contains(n, "2080 ti"):
		return "rtx2080ti-11gb"
	}
	return ""
}
