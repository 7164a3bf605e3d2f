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

// A bad --gpus or --device is refused naming the flag and what to type:
// "--gpus 4" (a count, as Slurm's --gpus takes) suggests sim:4, and an
// unknown --device names the flag and the likely profile.
func TestParseGPUsErrorsNameTheFix(t *testing.T) {
	for _, c := range []struct {
		gpus, device string
		want         []string
	}{
		{"4", "h100-80gb", []string{"--gpus", "sim:4"}},
		{"0", "h100-80gb", []string{"--gpus", "sim:N"}},
		{"sim:0", "h100-80gb", []string{"--gpus", "1..64"}},
		{"sim:2", "h100", []string{"--device", `"h100"`, `did you mean "h100-80gb"?`}},
	} {
		_, _, err := parseGPUs(c.gpus, c.device, true)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("--gpus %s --device %s: error %v, want it to contain %q", c.gpus, c.device, err, w)
			}
		}
	}
}

// node takes only flags: a stray argument ("node sim:4") is named with
// --help, not reported as cobra's `unknown command "sim:4" for "node"`.
func TestNodeStrayArgumentNamed(t *testing.T) {
	out, err := runNode("sim:4")
	for _, w := range []string{"node takes no arguments, only flags", `"sim:4"`, "--help"} {
		if err == nil || !strings.Contains(string(out), w) {
			t.Errorf("node sim:4: err %v, output %q, want it to contain %q", err, out, w)
		}
	}
}

// --time-scale is checked before anything starts and must be > 0, as on
// serve (whose --time-scale must match the nodes'): 0 was taken as real
// time here but refused there, and -1 was reported only after dialing the
// coordinator.
func TestNodeTimeScaleChecked(t *testing.T) {
	for _, v := range []string{"0", "-1", "NaN"} {
		out, err := runNode("--name", "n", "--coordinator", "127.0.0.1:1", "--join", "127.0.0.1:1", "--time-scale", v)
		if err == nil || !strings.Contains(string(out), "--time-scale "+v) || !strings.Contains(string(out), "1 is real time") || strings.Contains(string(out), "cannot reach") {
			t.Errorf("--time-scale %s: err %v, output %q; want it refused naming the flag before dialing", v, err, out)
		}
	}
}

// Every flag problem is reported in one run, one "error:" line each, as a
// spec file's problems are: it took five runs to learn of these five.
func TestNodeFlagProblemsReportedTogether(t *testing.T) {
	out, err := runNode("--name", "a b", "--gpus", "sim:0", "--time-scale", "-1", "--tls-cert", "c.pem")
	if err == nil {
		t.Fatalf("node started with four bad flags:\n%s", out)
	}
	want := []string{
		`error: bad --name "a b"`,
		"error: --join is required",
		"error: --time-scale -1:",
		"error: missing --tls-key and --tls-ca",
		`error: bad --gpus "sim:0"`,
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("output %q lacks %q", out, w)
		}
	}
	if n := strings.Count(string(out), "error:"); n != len(want) {
		t.Errorf("%d error lines, want %d:\n%s", n, len(want), out)
	}
}
