package gpu

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/workload"
)

func TestBuiltinProfilesValid(t *testing.T) {
	want := []string{"a100-40gb", "h100-80gb", "h200-141gb", "rtx2080ti-11gb", "v100-16gb"}
	got := ProfileNames()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("profiles %v, want %v", got, want)
	}
	for _, n := range want {
		p := MustProfile(n)
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	r := MustProfile("rtx2080ti-11gb")
	if r.H2DBandwidth != 12.5e9 || r.D2HBandwidth != 13.4e9 {
		t.Errorf("rtx2080ti PCIe 3 figures changed: %v %v", r.H2DBandwidth, r.D2HBandwidth)
	}
}

func TestLookupUnknownProfile(t *testing.T) {
	_, err := LookupProfile("tpu-v9")
	if !errors.Is(err, ErrUnknownProfile) || !strings.Contains(err.Error(), "h100-80gb") {
		t.Fatalf("want unknown-profile error listing known ones, got %v", err)
	}
}

// A near miss ("h100" for "h100-80gb") gets a suggestion; the error does
// not point at a YAML file, which only `coordinator plan --profiles` reads
// (node, simulate and bench know only the built-in profiles).
func TestLookupUnknownProfileSuggests(t *testing.T) {
	for typed, want := range map[string]string{"h100": "h100-80gb", "A100-40GB": "a100-40gb", "v100-16g": "v100-16gb", "rtx2080ti": "rtx2080ti-11gb"} {
		_, err := LookupProfile(typed)
		if err == nil || !strings.Contains(err.Error(), `did you mean "`+want+`"?`) {
			t.Errorf("LookupProfile(%q) = %v, want a suggestion of %q", typed, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "YAML") {
			t.Errorf("LookupProfile(%q) = %v: names a YAML file that most commands cannot read", typed, err)
		}
	}
	if _, err := LookupProfile("tpu-v9"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("LookupProfile(tpu-v9) = %v, want no suggestion", err)
	}
}

func TestLookupReturnsCopy(t *testing.T) {
	p := MustProfile("h100-80gb")
	p.PeakFLOPS["fp32"] = 1
	if MustProfile("h100-80gb").PeakFLOPS["fp32"] == 1 {
		t.Fatal("mutating a looked-up profile changed the built-in one")
	}
}

func TestCostModel(t *testing.T) {
	p := Profile{
		Name: "unit", MemoryBytes: 1, PeakFLOPS: map[string]float64{"fp32": 100, "fp16": 400},
		MemBandwidth: 10, H2DBandwidth: 4, D2HBandwidth: 5, LaunchOverhead: 0.5,
		ComputeEfficiency: 0.5, MemoryEfficiency: 0.5,
	}
	cases := []struct {
		name string
		op   workload.Op
		want float64
	}{
		{"compute bound", workload.Op{FLOPs: 1000, MemBytes: 10}, 0.5 + 1000/50.0},
		{"memory bound", workload.Op{FLOPs: 10, MemBytes: 100}, 0.5 + 100/5.0},
		{"fp16 peak", workload.Op{FLOPs: 1000, DType: "fp16"}, 0.5 + 1000/200.0},
		{"unknown precision falls back to fp32", workload.Op{FLOPs: 1000, DType: "fp8"}, 0.5 + 1000/50.0},
		{"measured wins", workload.Op{FLOPs: 1e9, MeasuredSeconds: 0.25}, 0.25},
	}
	for _, c := range cases {
		if got := p.OpSeconds(&c.op); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if p.H2DSeconds(8) != 2 || p.D2HSeconds(10) != 2 {
		t.Errorf("copy times: %v %v", p.H2DSeconds(8), p.D2HSeconds(10))
	}
}

func TestParseProfilesYAML(t *testing.T) {
	good := `
- name: l4-24gb
  memory_bytes: 24000000000
  peak_flops: {fp32: 30.3e12, bf16: 121e12}
  mem_bandwidth: 300e9
  h2d_bandwidth: 25e9
  d2h_bandwidth: 25e9
  launch_overhead: 5e-6
`
	ps, err := ParseProfiles([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Name != "l4-24gb" || ps[0].ComputeEfficiency != 0.6 || ps[0].Peak("bf16") != 121e12 {
		t.Fatalf("parsed %+v", ps)
	}
	bad := `
name: broken
memory_bytes: -1
peak_flops: {fp32: 0}
mem_bandwidth: 1
h2d_bandwidth: 0
d2h_bandwidth: 1
compute_efficiency: 2
`
	_, err = ParseProfiles([]byte(bad))
	if err == nil {
		t.Fatal("bad profile accepted")
	}
	for _, field := range []string{"memory_bytes", "peak_flops.fp32", "h2d_bandwidth", "compute_efficiency"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
	if _, err := ParseProfiles([]byte("name: [")); err == nil || !strings.Contains(err.Error(), "YAML") {
		t.Errorf("malformed YAML: %v", err)
	}
}

func TestLoadProfilesRegisters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	y := "name: test-gpu-1gb\nmemory_bytes: 1073741824\npeak_flops: {fp32: 1e12}\nmem_bandwidth: 1e11\nh2d_bandwidth: 1e10\nd2h_bandwidth: 1e10\n"
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadProfiles(path); err != nil {
		t.Fatal(err)
	}
	defer func() {
		userMu.Lock()
		delete(userProfiles, "test-gpu-1gb")
		userMu.Unlock()
	}()
	p, err := LookupProfile("test-gpu-1gb")
	if err != nil || p.MemoryBytes != 1<<30 {
		t.Fatalf("registered profile: %+v, %v", p, err)
	}
}

func TestMatchProfile(t *testing.T) {
	for _, c := range []struct {
		name string
		mem  int64
		want string
	}{
		{"NVIDIA H100 80GB HBM3", 81559 * mib, "h100-80gb"},
		{"NVIDIA A100-SXM4-40GB", 40536 * mib, "a100-40gb"},
		{"NVIDIA A100-SXM4-80GB", 81920 * mib, ""},
		{"Tesla V100-SXM2-16GB", 16160 * mib, "v100-16gb"},
		{"NVIDIA GeForce RTX 2080 Ti", 11019 * mib, "rtx2080ti-11gb"},
		{"NVIDIA L4", 23034 * mib, ""},
		// Only the part whose figures the profile has: h100-80gb is the
		// H100 SXM5 (67 TFLOP/s fp32, 3.35 TB/s), v100-16gb the V100 SXM2
		// (15.7 TFLOP/s); the H100 PCIe (51 TFLOP/s, 2.0 TB/s), H100 NVL
		// (94 GB) and V100 PCIe (14 TFLOP/s) are slower and match none. The
		// A100 40GB PCIe has the SXM4's peaks and bandwidth and matches.
		{"NVIDIA H100 PCIe", 81559 * mib, ""},
		{"NVIDIA H100 NVL", 95830 * mib, ""},
		{"Tesla V100-PCIE-16GB", 16160 * mib, ""},
		{"NVIDIA A100-PCIE-40GB", 40536 * mib, "a100-40gb"},
		// The H200 SXM as NVML and PyTorch name it on the machine that
		// calibrated h200-141gb; the H200 NVL (600 W, lower peaks) is not it.
		{"NVIDIA H200", 143771 * mib, "h200-141gb"},
		{"NVIDIA H200", 143156 * mib, "h200-141gb"},
		{"NVIDIA H200 NVL", 143771 * mib, ""},
		{"NVIDIA GH200 144G HBM3e", 143771 * mib, ""},
	} {
		if got := MatchProfile(c.name, c.mem); got != c.want {
			t.Errorf("MatchProfile(%q, %d MiB) = %q, want %q", c.name, c.mem/mib, got, c.want)
		}
	}
}

func TestDiscoverWithoutDriverFailsClearly(t *testing.T) {
	gpus, err := Discover()
	if err == nil {
		t.Skipf("NVML present: found %d GPUs", len(gpus))
	}
	if !strings.Contains(err.Error(), "sim:N") {
		t.Fatalf("error should suggest simulated GPUs: %v", err)
	}
}

// TestParseProfilesRejectsNonFiniteAndUnknown: YAML's .nan and .inf are
// numbers that every "> 0" check used to let through, a misspelt field was
// silently zero, and an empty document registered nothing without a word.
func TestParseProfilesRejectsNonFiniteAndUnknown(t *testing.T) {
	const base = "name: x\nmemory_bytes: 1073741824\npeak_flops: {fp32: 1e12, bf16: 2e12}\nh2d_bandwidth: 1e10\nd2h_bandwidth: 1e10\n"
	cases := []struct{ yaml, want string }{
		{base + "mem_bandwidth: .nan\n", "mem_bandwidth"},
		{base + "mem_bandwidth: .inf\n", "mem_bandwidth"},
		{base + "mem_bandwidth: 1e11\nlaunch_overhead: .nan\n", "launch_overhead"},
		{base + "mem_bandwidth: 1e11\ncompute_efficiency: .nan\n", "compute_efficiency"},
		{strings.Replace(base, "bf16: 2e12", "bf16: .inf", 1) + "mem_bandwidth: 1e11\n", "peak_flops.bf16"},
		{base + "mem_bandwidth: 1e11\nlaunch_overhed: 5e-6\n", "launch_overhed"},
		{strings.Replace(base, "bf16: 2e12", "bf61: 2e12", 1) + "mem_bandwidth: 1e11\n", "peak_flops.bf61: unknown precision; the cost model reads fp32, tf32, bf16, fp16 (fp64, fp8, int8, int4 are accepted"},
		{"- " + strings.ReplaceAll(strings.TrimSpace(base), "\n", "\n  ") + "\n  mem_bandwith: 1e11\n", "mem_bandwith"},
		{"", "no profile"},
	}
	for i, c := range cases {
		_, err := ParseProfiles([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: error %v, want it to name %q", i, err, c.want)
		}
	}
	if _, err := ParseProfiles([]byte(base + "mem_bandwidth: 1e11\n")); err != nil {
		t.Errorf("good profile: %v", err)
	}
	// Several bad precisions are reported in the same order every time.
	many := "name: x\nmemory_bytes: 1\nmem_bandwidth: 1\nh2d_bandwidth: 1\nd2h_bandwidth: 1\npeak_flops: {fp32: 1, bf16: -1, fp16: -1, tf32: -1, a: -1, b: -1}\n"
	_, first := ParseProfiles([]byte(many))
	for i := 0; i < 10; i++ {
		if _, err := ParseProfiles([]byte(many)); err == nil || err.Error() != first.Error() {
			t.Fatalf("error changed between runs:\n%v\n%v", first, err)
		}
	}
}

// TestUserProfilesAreCopiesAndSafeToShare: a looked-up user profile is a
// copy like a built-in one, and lookups may run while profiles load.
func TestUserProfilesAreCopiesAndSafeToShare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	y := "name: test-gpu-2gb\nmemory_bytes: 2147483648\npeak_flops: {fp32: 1e12}\nmem_bandwidth: 1e11\nh2d_bandwidth: 1e10\nd2h_bandwidth: 1e10\n"
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() {
		userMu.Lock()
		delete(userProfiles, "test-gpu-2gb")
		userMu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			_, _ = LookupProfile("test-gpu-2gb")
			_ = ProfileNames()
		}
	}()
	for i := 0; i < 50; i++ {
		if _, err := LoadProfiles(path); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	p := MustProfile("test-gpu-2gb")
	p.PeakFLOPS["fp32"] = 1
	if q := MustProfile("test-gpu-2gb"); q.PeakFLOPS["fp32"] != 1e12 {
		t.Fatalf("changing a looked-up profile changed the registry: fp32 = %v", q.PeakFLOPS["fp32"])
	}
}

// An efficiency written as 0 is a wrong figure (every op would take
// forever), not a missing one: it was replaced by the default (0.6 or 0.8)
// without a word. Only an absent efficiency takes the default.
func TestParseProfilesRefusesZeroEfficiency(t *testing.T) {
	const base = "name: x\nmemory_bytes: 1073741824\npeak_flops: {fp32: 1e12}\nmem_bandwidth: 1e11\nh2d_bandwidth: 1e10\nd2h_bandwidth: 1e10\n"
	for _, field := range []string{"compute_efficiency", "memory_efficiency"} {
		for _, y := range []string{
			base + field + ": 0\n",
			"- " + strings.ReplaceAll(strings.TrimSpace(base), "\n", "\n  ") + "\n  " + field + ": 0.0\n",
		} {
			ps, err := ParseProfiles([]byte(y))
			if err == nil || !strings.Contains(err.Error(), field) {
				t.Errorf("%s: 0: got %+v, error %v; want an error naming %s", field, ps, err, field)
			}
		}
	}
	ps, err := ParseProfiles([]byte(base))
	if err != nil || ps[0].ComputeEfficiency != 0.6 || ps[0].MemoryEfficiency != 0.8 {
		t.Errorf("absent efficiencies: %+v, %v; want the defaults 0.6 and 0.8", ps, err)
	}
}

// A file of several YAML documents (separated by ---) registered the first
// document's profiles and dropped the rest without a word. Every document
// is read; empty ones hold nothing.
func TestParseProfilesReadsEveryDocument(t *testing.T) {
	prof := func(name string) string {
		return "name: " + name + "\nmemory_bytes: 1073741824\npeak_flops: {fp32: 1e12}\nmem_bandwidth: 1e11\nh2d_bandwidth: 1e10\nd2h_bandwidth: 1e10\n"
	}
	list := "- " + strings.ReplaceAll(strings.TrimSpace(prof("c")), "\n", "\n  ") + "\n"
	ps, err := ParseProfiles([]byte("---\n" + prof("a") + "---\n---\n" + prof("b") + "---\n" + list))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Fatalf("parsed profiles %v, want a,b,c", names)
	}
	// A bad profile in a later document is reported, not skipped.
	_, err = ParseProfiles([]byte(prof("a") + "---\n" + strings.Replace(prof("b"), "memory_bytes: 1073741824", "memory_bytes: 0", 1)))
	if err == nil || !strings.Contains(err.Error(), `profile "b": memory_bytes`) {
		t.Fatalf("bad second document: error %v, want it to name profile \"b\": memory_bytes", err)
	}
	for _, y := range []string{"", "---\n", "~\n---\n~\n"} {
		if _, err := ParseProfiles([]byte(y)); err == nil || !strings.Contains(err.Error(), "no profile") {
			t.Errorf("%q: error %v, want \"no profile\"", y, err)
		}
	}
}

// Two profiles of one name in a file were both accepted, and registering
// them kept whichever came last: the other's figures were lost silently.
func TestParseProfilesRefusesDuplicateNames(t *testing.T) {
	prof := func(name, mem string) string {
		return "- name: " + name + "\n  memory_bytes: " + mem + "\n  peak_flops: {fp32: 1e12}\n  mem_bandwidth: 1e11\n  h2d_bandwidth: 1e10\n  d2h_bandwidth: 1e10\n"
	}
	for _, y := range []string{
		prof("x", "1073741824") + prof("x", "2147483648"),
		prof("x", "1073741824") + "---\n" + prof("y", "1073741824") + prof("x", "2147483648"),
	} {
		ps, err := ParseProfiles([]byte(y))
		if err == nil || !strings.Contains(err.Error(), `profile "x": name: used twice`) {
			t.Errorf("got %d profiles, error %v; want it to say profile \"x\": name: used twice", len(ps), err)
		}
	}
}
