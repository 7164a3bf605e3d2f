package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

type calibrateFlags struct {
	measured, base, name, out string
	heldOut                   []string
	json                      bool
}

func init() {
	var f calibrateFlags
	c := &cobra.Command{
		Use:   "calibrate --measured FILE.json [--base PROFILE] [--name NAME] [--out PROFILE.yaml] [--json]",
		Short: "Fit a device profile to what gpu/calibration/measure.py measured on a real GPU",
		Long: `Fits a device profile's efficiencies, launch and matrix-op overheads and copy
bandwidth and latency to a measurement written by gpu/calibration/measure.py
(PyTorch on the GPU: copies by size, and one training iteration of each zoo
model with every kernel's time), and prints how well the base and the fitted
profile predict each measured iteration. The base profile gives the peaks
(the spec sheet's); without --base, the built-in profile matching the
measured GPU's name and memory.`,
		Example: `  coordinator calibrate --measured gpu/calibration/h200-2026-11-28.json
  coordinator calibrate --measured m.json --base h100-80gb --name h100-mine --out h100-mine.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCalibrate(cmd.OutOrStdout(), f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.measured, "measured", "", "JSON file written by gpu/calibration/measure.py (required)")
	fl.StringVar(&f.base, "base", "", "profile whose peaks and memory the fit keeps (default: the built-in one matching the measured GPU)")
	fl.StringVar(&f.name, "name", "", "name of the fitted profile (default: the base's)")
	fl.StringVar(&f.out, "out", "", "also write the fitted profile to this YAML file (for --profiles)")
	fl.StringSliceVar(&f.heldOut, "held-out", nil, "more measurements (other batch sizes, say) to predict with the fitted profile, not fit to (repeatable)")
	fl.BoolVar(&f.json, "json", false, "print the fit and every row as JSON")
	rootCmd.AddCommand(c)
}

func printCalibrationRows(w io.Writer, rows []gpu.CalibrationRow) {
	fmt.Fprintf(w, "%-13s %-4s %5s %9s %9s %9s %9s %9s %9s %8s %10s %10s\n", "model", "mode", "batch", "wall ms", "busy ms", "matrix", "other", "base ms", "fit ms", "fit err", "peak GiB", "ours GiB")
	for _, r := range rows {
		mark := ""
		if !r.Fitted {
			mark = " (not fitted)"
		}
		fmt.Fprintf(w, "%-13s %-4s %5d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %+7.1f%% %10.2f %10.2f%s\n", r.Model, r.Mode, r.Batch,
			r.MeasuredWall*1e3, r.MeasuredBusy()*1e3, r.MeasuredMatrix*1e3, r.MeasuredOther*1e3, r.PredictedBase*1e3,
			r.PredictedFitted()*1e3, 100*(r.PredictedFitted()/r.MeasuredBusy()-1),
			float64(r.MeasuredPeakBytes)/(1<<30), float64(r.PredictedPeakBytes)/(1<<30), mark)
	}
}

func runCalibrate(w io.Writer, f calibrateFlags) error {
	if f.measured == "" {
		return fmt.Errorf("--measured is required: the JSON file gpu/calibration/measure.py wrote on the GPU")
	}
	m, err := gpu.ReadMeasurement(f.measured)
	if err != nil {
		return err
	}
	base := f.base
	if base == "" {
		base = gpu.MatchProfile(m.Device.Name, m.Device.TotalMemoryBytes)
		if base == "" {
			return fmt.Errorf("no built-in profile matches the measured %q (%s): pass --base with the profile whose spec-sheet peaks are this GPU's", m.Device.Name, gpu.FormatBytes(m.Device.TotalMemoryBytes))
		}
	}
	bp, err := gpu.LookupProfile(base)
	if err != nil {
		return fmt.Errorf("--base: %w", err)
	}
	// Each graph is built once: the fit, the held-out rows and the vanilla
	// peaks below read the same ones.
	built := map[string]*workload.Graph{}
	graphs := func(model string, batch int, dtype string) (*workload.Graph, error) {
		key := fmt.Sprintf("%s/%d/%s", model, batch, dtype)
		if g, ok := built[key]; ok {
			return g, nil
		}
		g, err := zoo.Build(model, workload.Train, batch, zoo.Options{DType: dtype})
		if err == nil {
			built[key] = g
		}
		return g, err
	}
	c, err := gpu.Calibrate(m, bp, graphs)
	if err != nil {
		return err
	}
	if f.name != "" {
		c.Profile.Name = f.name
	}
	for _, h := range f.heldOut {
		hm, err := gpu.ReadMeasurement(h)
		if err != nil {
			return fmt.Errorf("--held-out: %w", err)
		}
		rows, err := c.Predict(hm, bp, graphs)
		if err != nil {
			return fmt.Errorf("--held-out %s: %w", h, err)
		}
		c.HeldOut = append(c.HeldOut, rows...)
	}
	// The vanilla peak beside the measured one: the cost model's memory
	// accounting checked against the framework's allocator.
	for _, rows := range [][]gpu.CalibrationRow{c.Rows, c.HeldOut} {
		for i := range rows {
			r := &rows[i]
			g, err := graphs(r.Model, r.Batch, r.Mode)
			if err != nil {
				return err
			}
			van, err := tensorsched.Execute(gpu.NewSim(unbounded(c.Profile), gpu.SimOptions{}), []tensorsched.Job{{Graph: g}}, tensorsched.ExecOptions{})
			if err != nil {
				return fmt.Errorf("%s %s b%d: vanilla run: %w", r.Model, r.Mode, r.Batch, err)
			}
			r.PredictedPeakBytes = van.PeakBytes
		}
	}
	y, err := yaml.Marshal(c.Profile)
	if err != nil {
		return err
	}
	if f.out != "" {
		if err := os.WriteFile(f.out, y, 0o644); err != nil {
			return err
		}
	}
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(c)
	}
	fmt.Fprintf(w, "measured on %s (%s), base profile %s\n\n", m.Device.Name, m.Date, bp.Name)
	printCalibrationRows(w, c.Rows)
	if len(c.HeldOut) > 0 {
		fmt.Fprintf(w, "\nheld out (%s), predicted with the fitted profile:\n", strings.Join(f.heldOut, ", "))
		printCalibrationRows(w, c.HeldOut)
	}
	fmt.Fprintf(w, "\nbusy: the kernels' time per iteration (matrix products and the rest); wall also holds the framework's host gaps.\n")
	fmt.Fprintf(w, "both copy directions at once: %.1f GB/s each way (the sim gives each engine its own bandwidth)\n", c.BidirectionalBandwidth/1e9)
	for _, k := range []string{"fp32", "tf32", "bf16"} {
		if v := c.MatmulFLOPS[k]; v > 0 {
			fmt.Fprintf(w, "8192³ matmul %s: %.1f TFLOP/s (peak %.1f)\n", k, v/1e12, bp.Peak(k)/1e12)
		}
	}
	if c.D2DBandwidth > 0 {
		fmt.Fprintf(w, "device copy: %.2f TB/s read + write (peak %.2f)\n", c.D2DBandwidth/1e12, bp.MemBandwidth/1e12)
	}
	fmt.Fprintf(w, "\nfitted profile:\n%s", y)
	return nil
}
