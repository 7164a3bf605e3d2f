package gpu_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

func zooGraphs(model string, batch int, dtype string) (*workload.Graph, error) {
	return zoo.Build(model, workload.Train, batch, zoo.Options{DType: dtype})
}

// synthetic is a measurement made by the fit's own model with known
// figures: the fit must give them back.
func synthetic(t *testing.T, truth gpu.Profile, runs []struct {
	model string
	batch int
}) *gpu.Measurement {
	t.Helper()
	m := &gpu.Measurement{Schema: 1, Date: "2026-01-02T03:04:05Z"}
	m.Device.Name = "Test GPU"
	for _, n := range []int64{64 << 10, 1 << 20, 16 << 20, 256 << 20} {
		m.Copies.H2D = append(m.Copies.H2D, gpu.CopyPoint{Bytes: n, Seconds: truth.CopyLatency + float64(n)/truth.H2DBandwidth})
		m.Copies.D2H = append(m.Copies.D2H, gpu.CopyPoint{Bytes: n, Seconds: truth.CopyLatency + float64(n)/truth.D2HBandwidth})
	}
	for _, r := range runs {
		g, err := zooGraphs(r.model, r.batch, "fp32")
		if err != nil {
			t.Fatal(err)
		}
		var mat, oth float64
		for i := range g.Ops {
			op := &g.Ops[i]
			if workload.MatrixKind(op.Kind) {
				mat += op.FLOPs/(truth.Peak(op.DType)*truth.ComputeEfficiency) + truth.LaunchOverhead + truth.MatrixOpOverhead
			} else {
				oth += op.MemBytes/(truth.MemBandwidth*truth.MemoryEfficiency) + truth.LaunchOverhead
			}
		}
		// Two profiled iterations: the fit divides by them.
		m.Models = append(m.Models, gpu.ModelRun{Model: r.model, Mode: "fp32", Batch: r.batch, IterationSeconds: 1.2 * (mat + oth),
			ProfiledIterations: 2, Kernels: []gpu.KernelRow{
				{Name: "sm90_xmma_fprop_implicit_gemm_f32", Count: 2, Seconds: 2 * mat},
				{Name: "void at::native::vectorized_elementwise_kernel<4>", Count: 2, Seconds: 2 * oth},
			}})
	}
	return m
}

func TestCalibrateRecoversProfile(t *testing.T) {
	truth := gpu.MustProfile("h200-141gb")
	truth.ComputeEfficiency, truth.MemoryEfficiency = 0.5, 0.7
	truth.LaunchOverhead, truth.MatrixOpOverhead = 3e-6, 20e-6
	truth.H2DBandwidth, truth.D2HBandwidth, truth.CopyLatency = 40e9, 45e9, 8e-6
	m := synthetic(t, truth, []struct {
		model string
		batch int
	}{{"vgg16", 16}, {"resnet50", 16}, {"densenet121", 8}, {"resnet50", 4}})
	c, err := gpu.Calibrate(m, gpu.MustProfile("h200-141gb"), zooGraphs)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Profile
	near := func(name string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s: fitted %g, want %g (±%g)", name, got, want, tol)
		}
	}
	near("compute_efficiency", p.ComputeEfficiency, 0.5, 0.002)
	near("memory_efficiency", p.MemoryEfficiency, 0.7, 0.002)
	near("launch_overhead", p.LaunchOverhead, 3e-6, 0.2e-6)
	near("matrix_op_overhead", p.MatrixOpOverhead, 20e-6, 0.3e-6)
	near("h2d_bandwidth", p.H2DBandwidth, 40e9, 0.1e9)
	near("d2h_bandwidth", p.D2HBandwidth, 45e9, 0.1e9)
	near("copy_latency", p.CopyLatency, 8e-6, 0.2e-6)
	if p.PeakFLOPS["fp32"] != 67e12 || p.MemBandwidth != 4.8e12 || p.Name != "h200-141gb" {
		t.Errorf("the fit changed the base's peaks or name: %+v", p)
	}
	if !strings.Contains(p.Source, "Test GPU, 2026-01-02") {
		t.Errorf("source %q does not say what it was fitted to", p.Source)
	}
	for _, r := range c.Rows {
		if e := r.PredictedFitted()/r.MeasuredBusy() - 1; math.Abs(e) > 0.01 {
			t.Errorf("%s b%d: fitted prediction off by %.2f%% on a measurement made by the model", r.Model, r.Batch, 100*e)
		}
	}
}

// The built-in h200-141gb figures, and those h100-80gb-from-h200.yaml
// carries over, are what the committed measurement fits to, and the fit predicts each fp32 iteration's kernel time
// within 20%.
func TestCalibrateCommittedMeasurement(t *testing.T) {
	m, err := gpu.ReadMeasurement(filepath.Join("calibration", "h200-2026-11-28.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := gpu.MatchProfile(m.Device.Name, m.Device.TotalMemoryBytes); got != "h200-141gb" {
		t.Fatalf("MatchProfile(%q) = %q, want h200-141gb", m.Device.Name, got)
	}
	c, err := gpu.Calibrate(m, gpu.MustProfile("h200-141gb"), zooGraphs)
	if err != nil {
		t.Fatal(err)
	}
	carried, err := os.ReadFile(filepath.Join("calibration", "h100-80gb-from-h200.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h100, err := gpu.ParseProfiles(carried)
	if err != nil {
		t.Fatal(err)
	}
	if h100[0].MemBandwidth != gpu.MustProfile("h100-80gb").MemBandwidth || h100[0].MemoryBytes != gpu.MustProfile("h100-80gb").MemoryBytes {
		t.Errorf("h100-80gb-from-h200.yaml: memory and bandwidth are not the h100-80gb spec sheet's: %+v", h100[0])
	}
	for _, b := range []gpu.Profile{gpu.MustProfile("h200-141gb"), h100[0]} {
		name := b.Name
		f := c.Profile
		if b.ComputeEfficiency != f.ComputeEfficiency || b.MemoryEfficiency != f.MemoryEfficiency ||
			b.LaunchOverhead != f.LaunchOverhead || b.MatrixOpOverhead != f.MatrixOpOverhead ||
			b.H2DBandwidth != f.H2DBandwidth || b.D2HBandwidth != f.D2HBandwidth || b.CopyLatency != f.CopyLatency {
			t.Errorf("built-in %s differs from the fit of the committed measurement:\nbuilt-in %+v\nfitted   %+v", name, b, f)
		}
	}
	fitted := 0
	for _, r := range c.Rows {
		if !r.Fitted {
			continue
		}
		fitted++
		if e := r.PredictedFitted()/r.MeasuredBusy() - 1; math.Abs(e) > 0.2 {
			t.Errorf("%s %s: predicted %.2f ms, measured %.2f ms busy (%+.1f%%)", r.Model, r.Mode, r.PredictedFitted()*1e3, r.MeasuredBusy()*1e3, 100*e)
		}
	}
	if fitted != 5 {
		t.Errorf("%d fp32 rows fitted, want the five models", fitted)
	}
}

func TestReadMeasurementErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ name, body, want string }{
		{"garbled", `{"schema": 1,`, "not a measurement written by gpu/calibration/measure.py"},
		{"schema", `{"schema": 2}`, "schema: got 2"},
		{"copies", `{"schema": 1}`, "copies.h2d: needs at least two copy sizes"},
		{"kernel row", `{"schema": 1, "models": [{"model": "vgg16", "kernels": [["gemm", "two", 1.0]]}]}`, "count must be a whole number"},
		{"no fp32", `{"schema": 1, "copies": {"h2d": [{"bytes": 1, "seconds": 1}, {"bytes": 2, "seconds": 2}], "d2h": [{"bytes": 1, "seconds": 1}, {"bytes": 2, "seconds": 2}]},
			"models": [{"model": "vgg16", "mode": "tf32", "batch": 16, "profiled_iterations": 1, "iteration_seconds": 0.01, "kernels": [["gemm", 1, 0.005], ["relu", 1, 0.001]]}]}`, "models: no fp32 run"},
		{"no profiler", `{"schema": 1, "models": [{"model": "vgg16", "mode": "fp32", "batch": 16, "profiled_iterations": 1, "iteration_seconds": 0.01, "kernels": []}]}`, "needs both matrix-product and other kernels"},
		{"mode", `{"schema": 1, "models": [{"model": "vgg16", "mode": "fp64", "batch": 0}]}`, "models[0] (vgg16 fp64).mode: must be fp32 or tf32"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := gpu.ReadMeasurement(p)
		if err == nil {
			err = m.Validate() // what only a fit needs
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestMatrixKernel(t *testing.T) {
	for name, want := range map[string]bool{
		"sm80_xmma_fprop_implicit_gemm_f32f32":              true,
		"void cudnn::detail::dgrad_engine<float, 512>":      true,
		"void wgrad_alg0_engine<float, 128>":                true,
		"void cudnn::engines_precompiled::nchwToNhwcKernel": true,
		"void cudnn::bn_bw_1C11_singleread<float, 512>":     false,
		"void at::native::vectorized_elementwise_kernel<4>": false,
		"void at::native::multi_tensor_apply_kernel<adam>":  false,
		"Memset (Device)": false,
	} {
		if got := gpu.MatrixKernel(name); got != want {
			t.Errorf("MatrixKernel(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCostModelOverheads(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	conv := workload.Op{Kind: "conv2d_bwd_data", FLOPs: 1e9, MemBytes: 1e6}
	relu := workload.Op{Kind: "relu", FLOPs: 1e6, MemBytes: 1e8}
	c0, r0, h0, d0 := p.OpSeconds(&conv), p.OpSeconds(&relu), p.H2DSeconds(1<<20), p.D2HSeconds(1<<20)
	p.MatrixOpOverhead, p.CopyLatency = 30e-6, 10e-6
	if got := p.OpSeconds(&conv); math.Abs(got-(c0+30e-6)) > 1e-12 {
		t.Errorf("conv with matrix overhead: %g, want %g", got, c0+30e-6)
	}
	if got := p.OpSeconds(&relu); got != r0 {
		t.Errorf("relu took the matrix overhead: %g, want %g", got, r0)
	}
	if got := p.H2DSeconds(1 << 20); math.Abs(got-(h0+10e-6)) > 1e-12 {
		t.Errorf("H2D with latency: %g, want %g", got, h0+10e-6)
	}
	if got := p.D2HSeconds(1 << 20); math.Abs(got-(d0+10e-6)) > 1e-12 {
		t.Errorf("D2H with latency: %g, want %g", got, d0+10e-6)
	}
}

func TestParseProfilesOverheadFields(t *testing.T) {
	base := "name: x\nmemory_bytes: 1000000000\npeak_flops: {fp32: 1e12}\nmem_bandwidth: 1e11\nh2d_bandwidth: 1e10\nd2h_bandwidth: 1e10\nlaunch_overhead: 5e-6\n"
	ps, err := gpu.ParseProfiles([]byte(base + "matrix_op_overhead: 30e-6\ncopy_latency: 1e-5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].MatrixOpOverhead != 30e-6 || ps[0].CopyLatency != 1e-5 {
		t.Errorf("parsed %+v", ps[0])
	}
	_, err = gpu.ParseProfiles([]byte(base + "matrix_op_overhead: -1\ncopy_latency: .nan\n"))
	for _, want := range []string{"matrix_op_overhead: must be a finite number >= 0 seconds", "copy_latency: must be a finite number >= 0 seconds"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}

// A base profile whose peaks are not the measured GPU's drives the fit to
// the end of its range: refused, naming the base, rather than a profile
// that is off by half.
func TestCalibrateWrongBaseRefused(t *testing.T) {
	m, err := gpu.ReadMeasurement(filepath.Join("calibration", "h200-2026-11-28.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = gpu.Calibrate(m, gpu.MustProfile("a100-40gb"), zooGraphs)
	if err == nil || !strings.Contains(err.Error(), "not trustworthy") || !strings.Contains(err.Error(), "a100-40gb (--base)") {
		t.Errorf("fit against a100-40gb: error %v, want the fit refused naming the base", err)
	}
	// Copies far from the grid's reach: 150 µs of latency.
	truth := gpu.MustProfile("h200-141gb")
	truth.CopyLatency = 150e-6
	s := synthetic(t, truth, []struct {
		model string
		batch int
	}{{"resnet50", 4}})
	if _, err := gpu.Calibrate(s, gpu.MustProfile("h200-141gb"), zooGraphs); err == nil || !strings.Contains(err.Error(), "copy_latency reached the end") {
		t.Errorf("150 µs copy latency: error %v, want the copy fit refused", err)
	}
}

// A held-out file needs only valid runs: tf32 alone, no copies.
func TestPredictTF32Only(t *testing.T) {
	m, err := gpu.ReadMeasurement(filepath.Join("calibration", "h200-2026-11-28.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := gpu.Calibrate(m, gpu.MustProfile("h200-141gb"), zooGraphs)
	if err != nil {
		t.Fatal(err)
	}
	held := *m
	held.Models = nil
	for _, r := range m.Models {
		if r.Mode == "tf32" {
			held.Models = append(held.Models, r)
		}
	}
	held.Copies.H2D, held.Copies.D2H = nil, nil
	rows, err := c.Predict(&held, gpu.MustProfile("h200-141gb"), zooGraphs)
	if err != nil || len(rows) != 5 {
		t.Fatalf("tf32-only held-out: %d rows, error %v", len(rows), err)
	}
}

// Every problem is reported, in the same order every time.
func TestMeasurementErrorsInOrder(t *testing.T) {
	m := &gpu.Measurement{Schema: 1}
	first := m.Validate().Error()
	for i := 0; i < 20; i++ {
		if got := m.Validate().Error(); got != first {
			t.Fatalf("error text changed between calls:\n%s\n---\n%s", first, got)
		}
	}
	if !strings.Contains(first, "copies.h2d") || strings.Index(first, "copies.h2d") > strings.Index(first, "copies.d2h") {
		t.Errorf("want copies.h2d reported before copies.d2h:\n%s", first)
	}
}
