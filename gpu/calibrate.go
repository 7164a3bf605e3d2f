package gpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/gpusched/gpusched/workload"
)

// Measurement is what gpu/calibration/measure.py writes on a real GPU: copy
// bandwidths by size, ceilings, launch costs, and for each model and mode
// one training iteration's wall time, peak memory and kernels.
type Measurement struct {
	Schema int    `json:"schema"`
	Date   string `json:"date"`
	Device struct {
		Name             string `json:"name"`
		TotalMemoryBytes int64  `json:"total_memory_bytes"`
		Capability       string `json:"capability"`
		Torch            string `json:"torch"`
		CUDA             string `json:"cuda"`
		NvidiaSMI        string `json:"nvidia_smi"`
	} `json:"device"`
	Copies struct {
		H2D           []CopyPoint `json:"h2d"`
		D2H           []CopyPoint `json:"d2h"`
		Bidirectional struct {
			BytesEachWay     int64   `json:"bytes_each_way"`
			BandwidthEachWay float64 `json:"bandwidth_each_way"`
		} `json:"bidirectional"`
	} `json:"copies"`
	Ceilings struct {
		D2DBandwidth float64            `json:"d2d_bandwidth"`
		Matmul       map[string]float64 `json:"matmul"`
	} `json:"ceilings"`
	Launch struct {
		EagerSeconds float64 `json:"eager_seconds_per_launch"`
		GraphSeconds float64 `json:"graph_seconds_per_kernel"`
	} `json:"launch"`
	Models []ModelRun `json:"models"`
	Errors []struct {
		Section string `json:"section"`
		Error   string `json:"error"`
	} `json:"errors"`
}

// CopyPoint is one pinned copy size and its median time.
type CopyPoint struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// ModelRun is one model's measured training iteration in one mode (fp32:
// no tf32 anywhere; tf32: cuDNN and matrix multiplies in tf32).
type ModelRun struct {
	Model              string      `json:"model"`
	Mode               string      `json:"mode"`
	Batch              int         `json:"batch"`
	Params             int64       `json:"params"`
	IterationSeconds   float64     `json:"iteration_seconds"`
	ResidentBytes      int64       `json:"resident_bytes"`
	PeakAllocatedBytes int64       `json:"peak_allocated_bytes"`
	ProfiledIterations int         `json:"profiled_iterations"`
	Kernels            []KernelRow `json:"kernels"`
	WithCopies         *struct {
		IterationSeconds float64 `json:"iteration_seconds"`
		H2DBandwidth     float64 `json:"h2d_bandwidth"`
		D2HBandwidth     float64 `json:"d2h_bandwidth"`
	} `json:"with_copies"`
}

// KernelRow is one kernel name's count and total seconds over the profiled
// iterations, written as [name, count, seconds].
type KernelRow struct {
	Name    string
	Count   int
	Seconds float64
}

// UnmarshalJSON reads [name, count, seconds].
func (k *KernelRow) UnmarshalJSON(b []byte) error {
	var a []json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil || len(a) != 3 {
		return fmt.Errorf("kernel row %s: want [name, count, seconds]", clip(string(b)))
	}
	if err := json.Unmarshal(a[0], &k.Name); err != nil {
		return fmt.Errorf("kernel row %s: name must be a string", clip(string(b)))
	}
	if err := json.Unmarshal(a[1], &k.Count); err != nil {
		return fmt.Errorf("kernel row %s: count must be a whole number", clip(string(b)))
	}
	if err := json.Unmarshal(a[2], &k.Seconds); err != nil {
		return fmt.Errorf("kernel row %s: seconds must be a number", clip(string(b)))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// matrixKernel names the kernels of convolutions and matrix products, and
// the layout transforms and filter flips cuDNN runs for them: their time is
// what the cost model's matrix ops stand for.
var matrixKernel = regexp.MustCompile(`(?i)gemm|xmma|conv|dgrad|wgrad|fprop|implicit|cutlass|winograd|fft|nchwToNhwc|nhwcToNchw|gemv|splitKreduce|cudnn::detail|scalePacked|flip_filter`)

// MatrixKernel reports whether a measured kernel belongs to a matrix product.
func MatrixKernel(name string) bool { return matrixKernel.MatchString(name) }

// ReadMeasurement reads a measure.py file and checks what it holds
// (ValidateRuns; Calibrate asks for the rest).
func ReadMeasurement(path string) (*Measurement, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Measurement
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not a measurement written by gpu/calibration/measure.py: %w", path, err)
	}
	if err := m.ValidateRuns(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// Validate reports every figure the fit needs that is missing or impossible:
// ValidateRuns' checks, two copy sizes each way and at least one fp32 run.
func (m *Measurement) Validate() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, fmt.Errorf("%s: %s", field, msg)) }
	if err := m.ValidateRuns(); err != nil {
		errs = append(errs, err)
	}
	for _, c := range []struct {
		dir string
		pts []CopyPoint
	}{{"copies.h2d", m.Copies.H2D}, {"copies.d2h", m.Copies.D2H}} {
		if len(c.pts) < 2 {
			bad(c.dir, "needs at least two copy sizes to fit bandwidth and latency")
		}
	}
	if countFitted(m.Models) == 0 {
		bad("models", "no fp32 run: the fit reads fp32 iterations (run measure.py with --modes fp32)")
	}
	return errors.Join(errs...)
}

// ValidateRuns checks what is there — the schema, each copy point and each
// model run — without asking for what only a fit needs, so that a file of
// tf32 runs alone can be predicted (--held-out).
func (m *Measurement) ValidateRuns() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, fmt.Errorf("%s: %s", field, msg)) }
	if m.Schema != 1 {
		bad("schema", fmt.Sprintf("got %d; this build reads schema 1 (rerun gpu/calibration/measure.py from this checkout)", m.Schema))
	}
	for _, c := range []struct {
		dir string
		pts []CopyPoint
	}{{"copies.h2d", m.Copies.H2D}, {"copies.d2h", m.Copies.D2H}} {
		for i, p := range c.pts {
			if p.Bytes <= 0 || !(p.Seconds > 0) || math.IsInf(p.Seconds, 0) {
				bad(fmt.Sprintf("%s[%d]", c.dir, i), "bytes and seconds must be > 0")
			}
		}
	}
	for i, r := range m.Models {
		f := fmt.Sprintf("models[%d] (%s %s)", i, r.Model, r.Mode)
		if r.Mode != "fp32" && r.Mode != "tf32" {
			bad(f+".mode", "must be fp32 or tf32")
		}
		if r.Batch <= 0 {
			bad(f+".batch", "must be > 0")
		}
		if r.ProfiledIterations <= 0 {
			bad(f+".profiled_iterations", "must be > 0")
		}
		if !(r.IterationSeconds > 0) {
			bad(f+".iteration_seconds", "must be > 0")
		}
		var mat, other float64
		for _, k := range r.Kernels {
			if k.Count < 0 || !(k.Seconds >= 0) {
				bad(f+".kernels", fmt.Sprintf("kernel %q: count and seconds must be >= 0", clip(k.Name)))
			}
			if MatrixKernel(k.Name) {
				mat += k.Seconds
			} else {
				other += k.Seconds
			}
		}
		if mat <= 0 || other <= 0 {
			bad(f+".kernels", "needs both matrix-product and other kernels (was the profiler on?)")
		}
	}
	return errors.Join(errs...)
}

// CalibrationRow compares one measured iteration with the cost model's
// prediction, before (the base profile) and after the fit. Kernel times are
// the device's busy time; wall time also holds the framework's host gaps.
type CalibrationRow struct {
	Model              string  `json:"model"`
	Mode               string  `json:"mode"`
	Batch              int     `json:"batch"`
	MeasuredWall       float64 `json:"measured_wall_s"`
	MeasuredMatrix     float64 `json:"measured_matrix_s"`
	MeasuredOther      float64 `json:"measured_other_s"`
	PredictedBase      float64 `json:"predicted_base_s"`
	PredictedMatrix    float64 `json:"predicted_matrix_s"`
	PredictedOther     float64 `json:"predicted_other_s"`
	MeasuredPeakBytes  int64   `json:"measured_peak_bytes"`
	PredictedPeakBytes int64   `json:"predicted_peak_bytes,omitempty"`
	Fitted             bool    `json:"fitted"`
}

// MeasuredBusy is the row's measured kernel time per iteration.
func (r CalibrationRow) MeasuredBusy() float64 { return r.MeasuredMatrix + r.MeasuredOther }

// PredictedFitted is the fitted profile's predicted iteration time.
func (r CalibrationRow) PredictedFitted() float64 { return r.PredictedMatrix + r.PredictedOther }

// Calibration is a fitted profile and how well it predicts each run.
type Calibration struct {
	Profile Profile          `json:"profile"`
	Rows    []CalibrationRow `json:"rows"`
	// HeldOut are rows of other measurements predicted, not fitted.
	HeldOut []CalibrationRow `json:"held_out,omitempty"`
	// Figures the cost model does not use, reported beside the fit.
	BidirectionalBandwidth float64            `json:"bidirectional_bandwidth_each_way,omitempty"`
	MatmulFLOPS            map[string]float64 `json:"matmul_flops,omitempty"`
	D2DBandwidth           float64            `json:"d2d_bandwidth,omitempty"`
}

// GraphFor builds the training graph of a measured model at a batch size in
// a precision ("fp32" or "tf32"); the caller supplies it (the zoo), so that
// this package does not depend on the model builders.
type GraphFor func(model string, batch int, dtype string) (*workload.Graph, error)

// Calibrate fits base's efficiencies, launch and matrix-op overheads and
// copy figures to a measurement; base keeps its name, memory and peaks
// (the spec sheet's). The fit:
//
//   - copies: t = latency + bytes / bandwidth over the measured sizes, least
//     squares on log time, per direction (one latency, the larger);
//   - other kernels (every kernel not of a matrix product) against the
//     graph's non-matrix ops: time = bytes / (bandwidth × memory_efficiency)
//     plus ops × launch_overhead;
//   - matrix kernels against the graph's matrix ops: time = flops / (peak ×
//     compute_efficiency) plus ops × (launch_overhead + matrix_op_overhead);
//
// each least squares on log time over the fp32 runs, on a grid. tf32 runs
// are predicted, not fitted.
func Calibrate(m *Measurement, base Profile, graphs GraphFor) (*Calibration, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := base.Validate(); err != nil {
		return nil, err
	}
	runs, err := loadRuns(m, base, graphs)
	if err != nil {
		return nil, err
	}
	fitted := func(r calRun) bool { return fittedMode(r.r.Mode) }

	for i, r := range runs {
		if fitted(r) && (r.nMat == 0 || r.nOther == 0) {
			return nil, fmt.Errorf("models[%d] (%s %s): its graph has %v matrix products and %v other ops; the fit needs both", i, r.r.Model, r.r.Mode, r.nMat, r.nOther)
		}
	}
	var edges []string
	// fitWork fits measured ≈ work / efficiency + ops × fixed over the
	// fitted runs, the fixed time per op up to maxFixed.
	fitWork := func(names string, maxFixed float64, of func(calRun) (work, ops, measured float64)) (float64, float64) {
		e, l, edge := fit2(0.02, 1, 0.002, 0, maxFixed, 0.1e-6, func(e, l float64) float64 {
			var sq float64
			for _, r := range runs {
				if fitted(r) {
					w, n, m := of(r)
					sq += sqLog((w/e + n*l) / m)
				}
			}
			return sq
		})
		if edge {
			edges = append(edges, fmt.Sprintf("%s reached the end of the range searched (efficiency 0.02–1, fixed time 0–%.0f µs; got %.3f, %.1f µs)", names, maxFixed*1e6, e, l*1e6))
		}
		return e, l
	}
	// Other kernels: memory efficiency and launch overhead.
	me, launch := fitWork("memory_efficiency and launch_overhead", 200e-6, func(r calRun) (float64, float64, float64) { return r.bytes, r.nOther, r.oth })
	// Matrix kernels: compute efficiency and the fixed time per product.
	ce, fixed := fitWork("compute_efficiency and matrix_op_overhead", 500e-6, func(r calRun) (float64, float64, float64) { return r.flops, r.nMat, r.mat })
	// Rounded to the grid's steps, so that the figures read as fitted.
	p := clone(base)
	p.MemoryEfficiency = roundTo(me, 1e-3)
	p.LaunchOverhead = roundTo(launch, 1e-7)
	p.ComputeEfficiency = roundTo(ce, 1e-3)
	p.MatrixOpOverhead = roundTo(math.Max(0, fixed-launch), 1e-7)
	h2dBW, h2dLat, h2dEdge := fitCopies(m.Copies.H2D)
	d2hBW, d2hLat, d2hEdge := fitCopies(m.Copies.D2H)
	if h2dEdge || d2hEdge {
		edges = append(edges, "copy bandwidth and copy_latency reached the end of the range searched (0.5–2× the largest copy's rate, latency up to 100 µs)")
	}
	if len(edges) > 0 {
		return nil, fmt.Errorf("the fit is not trustworthy: %s; check that the base profile %s (--base) has this GPU's peaks and memory bandwidth and that the measurement is whole", strings.Join(edges, "; "), base.Name)
	}
	p.H2DBandwidth, p.D2HBandwidth = roundTo(h2dBW, 1e7), roundTo(d2hBW, 1e7)
	p.CopyLatency = roundTo(math.Max(h2dLat, d2hLat), 1e-7)
	p.Source = fmt.Sprintf("calibrated on an %s, %s (%s, CUDA %s): fitted to %d fp32 training iterations and %d+%d copy sizes",
		m.Device.Name, dateOnly(m.Date), m.Device.Torch, m.Device.CUDA, countFitted(m.Models), len(m.Copies.H2D), len(m.Copies.D2H))
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("fitted profile: %w", err)
	}

	c := &Calibration{Profile: p, BidirectionalBandwidth: m.Copies.Bidirectional.BandwidthEachWay,
		MatmulFLOPS: m.Ceilings.Matmul, D2DBandwidth: m.Ceilings.D2DBandwidth}
	for _, r := range runs {
		c.Rows = append(c.Rows, r.row(base, p, fitted(r)))
	}
	return c, nil
}

// calRun is one measured iteration with its graph, the graph's work at
// efficiency 1 on the base's peaks, and the measured kernel time split.
type calRun struct {
	r            ModelRun
	g            *workload.Graph
	flops, bytes float64 // seconds at efficiency 1
	nMat, nOther float64
	mat, oth     float64 // measured seconds per iteration
}

func loadRuns(m *Measurement, base Profile, graphs GraphFor) ([]calRun, error) {
	var runs []calRun
	for _, r := range m.Models {
		g, err := graphs(r.Model, r.Batch, r.Mode)
		if err != nil {
			return nil, fmt.Errorf("models: %s %s: %w", r.Model, r.Mode, err)
		}
		c := calRun{r: r, g: g}
		for i := range g.Ops {
			op := &g.Ops[i]
			if workload.MatrixKind(op.Kind) {
				c.flops += op.FLOPs / base.Peak(op.DType)
				c.nMat++
			} else {
				c.bytes += op.MemBytes / base.MemBandwidth
				c.nOther++
			}
		}
		for _, k := range r.Kernels {
			if MatrixKernel(k.Name) {
				c.mat += k.Seconds
			} else {
				c.oth += k.Seconds
			}
		}
		n := float64(r.ProfiledIterations)
		c.mat /= n
		c.oth /= n
		runs = append(runs, c)
	}
	return runs, nil
}

// row compares a run with base's and p's predictions.
func (r calRun) row(base, p Profile, fitted bool) CalibrationRow {
	row := CalibrationRow{Model: r.r.Model, Mode: r.r.Mode, Batch: r.r.Batch, MeasuredWall: r.r.IterationSeconds,
		MeasuredMatrix: r.mat, MeasuredOther: r.oth, MeasuredPeakBytes: r.r.PeakAllocatedBytes,
		PredictedBase: base.GraphSeconds(r.g), Fitted: fitted}
	for i := range r.g.Ops {
		op := &r.g.Ops[i]
		if workload.MatrixKind(op.Kind) {
			row.PredictedMatrix += p.OpSeconds(op)
		} else {
			row.PredictedOther += p.OpSeconds(op)
		}
	}
	return row
}

// Predict predicts another measurement's iterations (other batch sizes,
// say) with the fitted profile, without fitting to them: rows to judge the
// fit by.
func (c *Calibration) Predict(m *Measurement, base Profile, graphs GraphFor) ([]CalibrationRow, error) {
	if err := m.ValidateRuns(); err != nil {
		return nil, err
	}
	runs, err := loadRuns(m, base, graphs)
	if err != nil {
		return nil, err
	}
	var rows []CalibrationRow
	for _, r := range runs {
		rows = append(rows, r.row(base, c.Profile, false))
	}
	return rows, nil
}

// fittedMode says which runs the fit reads: fp32 ones (tf32 runs are
// predicted only).
func fittedMode(mode string) bool { return mode == "fp32" }

func countFitted(rs []ModelRun) int {
	n := 0
	for _, r := range rs {
		if fittedMode(r.Mode) {
			n++
		}
	}
	return n
}

func dateOnly(s string) string {
	if i := strings.IndexByte(s, 'T'); i > 0 {
		return s[:i]
	}
	return s
}

// roundTo rounds x to a whole number of steps, through the step's
// reciprocal when it is below 1 so that 0.364 prints as 0.364.
func roundTo(x, step float64) float64 {
	if step < 1 {
		inv := math.Round(1 / step)
		return math.Round(x*inv) / inv
	}
	return math.Round(x/step) * step
}

func sqLog(ratio float64) float64 {
	if !(ratio > 0) {
		return math.Inf(1)
	}
	l := math.Log(ratio)
	return l * l
}

// fit2 is a grid search for the (a, b) minimising f, a over [a0, a1] in
// steps of da and b over [b0, b1] in steps of db; ties go to the smaller
// values, so the result is the same on every machine. edge says the best a
// lies on either end of its range or the best b on its upper end: the true
// minimum may lie outside, and the fit is not to be trusted.
func fit2(a0, a1, da, b0, b1, db float64, f func(a, b float64) float64) (a, b float64, edge bool) {
	bestA, bestB, best := a0, b0, math.Inf(1)
	na := int(math.Round((a1-a0)/da)) + 1
	nb := int(math.Round((b1-b0)/db)) + 1
	for i := 0; i < na; i++ {
		a := a0 + float64(i)*da
		for j := 0; j < nb; j++ {
			b := b0 + float64(j)*db
			if v := f(a, b); v < best {
				best, bestA, bestB = v, a, b
			}
		}
	}
	edge = bestA <= a0+da/2 || bestA >= a0+float64(na-1)*da-da/2 || bestB >= b0+float64(nb-1)*db-db/2
	return bestA, bestB, edge
}

// fitCopies fits t = latency + bytes / bandwidth to the copy sizes: the
// bandwidth on a grid of 0.1% steps around the largest size's, the latency
// in 0.1 µs steps up to 100 µs.
func fitCopies(pts []CopyPoint) (bw, lat float64, edge bool) {
	pts = append([]CopyPoint(nil), pts...)
	sort.Slice(pts, func(i, j int) bool { return pts[i].Bytes < pts[j].Bytes })
	big := pts[len(pts)-1]
	ref := float64(big.Bytes) / big.Seconds
	f, l, edge := fit2(0.5, 2, 0.001, 0, 100e-6, 0.1e-6, func(f, l float64) float64 {
		var sq float64
		for _, p := range pts {
			sq += sqLog((l + float64(p.Bytes)/(ref*f)) / p.Seconds)
		}
		return sq
	})
	return ref * f, l, edge
}
