package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/workload/zoo"
)

func init() {
	var device, out, policies, tolerance, copiesModel, models, batches, paramChunk string
	var copies int
	var jsonOut, equalMemory, equalTime, residentStart, fused, spread bool
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Reproduce TENSILE's memory experiments: MSR, EOR and CBR of every policy",
		Long: `bench memory runs, on the simulated device, each of vgg16, inception-v3,
inception-v4, resnet50 and densenet121 alone at batch 16; 1-4 copies of one model;
a batch sweep (2, 4, 8, 16, 32); and the five models together at batch 2 -- under
every policy (none, vdnn-all, vdnn-conv, checkpoint, capuchin, tensile; several-job
rows plan tensile both joint and sum-of-peaks). Every run goes through the
executor's correctness checker. It writes DIR/memory.md, DIR/memory.csv and a plot
DIR/memory-<model>.png per model (memory over one iteration, vanilla against each
scheduled policy at batch 16). --models, --batches and --copies narrow it for a
quick run.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := gpu.LookupProfile(device)
			if err != nil {
				return fmt.Errorf("--device: %w", err)
			}
			graph, err := graphOptions(paramChunk, fused, spread)
			if err != nil {
				return err
			}
			o := tensorsched.MemBenchOptions{Device: p, CopiesModel: copiesModel, MaxCopies: copies, ResidentStart: residentStart,
				Graph:    graph,
				Progress: func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), s) }}
			if _, ok := zoo.Canonical(copiesModel); !ok {
				return fmt.Errorf("--copies-model %q: unknown model (known: %s)", copiesModel, strings.Join(zoo.Models(), ", "))
			}
			if copies < 1 {
				return fmt.Errorf("--copies %d: want at least 1", copies)
			}
			for _, m := range strings.Split(models, ",") {
				m = strings.TrimSpace(m)
				if m == "" {
					continue
				}
				if _, ok := zoo.Canonical(m); !ok {
					return fmt.Errorf("--models: %q is not a model (known: %s)", m, strings.Join(zoo.Models(), ", "))
				}
				o.Models = append(o.Models, m)
			}
			if len(o.Models) == 0 {
				return fmt.Errorf("--models %q: name at least one model, e.g. %s", models, strings.Join(tensorsched.BenchModels, ","))
			}
			for _, b := range strings.Split(batches, ",") {
				b = strings.TrimSpace(b)
				if b == "" {
					continue
				}
				n, err := strconv.Atoi(b)
				if err != nil || n < 1 {
					return fmt.Errorf("--batches: %q is not a batch size (want positive integers, e.g. 2,4,8,16,32)", b)
				}
				o.Batches = append(o.Batches, n)
			}
			if len(o.Batches) == 0 {
				return fmt.Errorf("--batches %q: name at least one batch size, e.g. 2,4,8,16,32", batches)
			}
			for _, pol := range strings.Split(policies, ",") {
				pol = strings.TrimSpace(pol)
				if pol == "" {
					continue
				}
				if pol != tensorsched.PolicyTensile {
					if _, err := tensorsched.LookupBaseline(pol); err != nil {
						return fmt.Errorf("--policies: %q is not a policy (known: %s)", pol, strings.Join(policyNames(), ", "))
					}
				}
				o.Policies = append(o.Policies, pol)
			}
			if len(o.Policies) == 0 {
				return fmt.Errorf("--policies %q: name at least one policy, e.g. %s", policies, strings.Join(policyNames(), ","))
			}
			if tolerance != "" && tolerance != "paper" {
				t, err := parseTolerance("--tolerance", tolerance, false)
				if err != nil {
					return fmt.Errorf("%w; or paper", err)
				}
				if t == 0 {
					return fmt.Errorf("--tolerance %q: want paper, a percentage (30%%) or a fraction (0.3) above 0", tolerance)
				}
				o.Tolerance = t
			}
			o.Several = planJobsTensile
			o.EqualMemory, o.EqualTime = equalMemory, equalTime
			rows, err := tensorsched.RunMemoryBench(o)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if err := writeFile(filepath.Join(out, "memory.md"), func(f *os.File) error {
				return tensorsched.WriteMemBenchMarkdown(f, p.Name+graphOptionsLabel(o.Graph), rows)
			}); err != nil {
				return err
			}
			if err := writeFile(filepath.Join(out, "memory.csv"), func(f *os.File) error { return tensorsched.WriteMemBenchCSV(f, rows) }); err != nil {
				return err
			}
			for _, m := range o.Models {
				van, sched, order := plotSeries(rows, m)
				if van == nil {
					continue
				}
				path := filepath.Join(out, "memory-"+m+".png")
				if err := tensorsched.PlotMemory(path, fmt.Sprintf("%s, batch 16, %s", m, p.Name), van, sched, order); err != nil {
					return err
				}
			}
			failed := 0
			for _, r := range rows {
				if strings.HasPrefix(r.Check, "FAILED") {
					failed++
				}
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rows); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (memory.md, memory.csv, memory-<model>.png): %d rows\n", out, len(rows))
			}
			if failed > 0 {
				return fmt.Errorf("%d runs failed the correctness checker (see %s)", failed, filepath.Join(out, "memory.md"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&device, "device", "rtx2080ti-11gb", "device profile ("+strings.Join(gpu.ProfileNames(), ", ")+")")
	f.StringVar(&out, "out", "./out/bench-memory", "output directory")
	f.BoolVar(&jsonOut, "json", false, "print the rows as JSON on stdout")
	f.BoolVar(&fused, "fused-optimizer", false, "build every graph with each Adam update inside backward, right after its parameter's last use (as plan --fused-optimizer)")
	f.BoolVar(&spread, "spread-optimizer", false, "build every graph with a chunked weight's Adam updates spread over the rest of backward (as plan --spread-optimizer; implies --fused-optimizer)")
	f.StringVar(&paramChunk, "param-chunk", "", "build every graph with linear weights above this size in row chunks (as plan --param-chunk; e.g. 64MiB)")
	f.BoolVar(&residentStart, "resident-start", false, "plan tensile with every parameter and optimizer state tensor on the device from the start (default: those it swaps across iterations start on the host)")
	f.BoolVar(&equalMemory, "equal-memory", true, "also plan tensile to fit each baseline's reserved memory and compare CBR at equal memory (false: skip, faster)")
	f.BoolVar(&equalTime, "equal-time", true, "also plan tensile for the least peak within each baseline's extra time and compare CBR at equal time (false: skip, faster)")
	f.StringVar(&policies, "policies", strings.Join(policyNames(), ","), "comma-separated policies to run")
	f.StringVar(&tolerance, "tolerance", "paper", "tensile's tolerated extra time: paper (the EOR TENSILE reports per model) or a value such as 30%")
	f.StringVar(&copiesModel, "copies-model", "resnet50", "model of the copies experiment")
	f.IntVar(&copies, "copies", 4, "run the copies experiment with 1 to this many copies")
	f.StringVar(&models, "models", strings.Join(tensorsched.BenchModels, ","), "comma-separated models of the single, batch-sweep and mix experiments (the mix needs two or more)")
	f.StringVar(&batches, "batches", "2,4,8,16,32", "comma-separated batch sizes of the batch sweep")
	benchCmd.AddCommand(cmd)
}

func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plotSeries picks model m's memory timelines for its plot: vanilla and
// each policy's own row of the single-model experiment, in row order
// (not the equal-memory and equal-time comparison rows, which are
// tensile's too). van is nil when the rows have no such timeline.
func plotSeries(rows []tensorsched.MemBenchRow, m string) (van []tensorsched.MemSample, sched map[string][]tensorsched.MemSample, order []string) {
	sched = map[string][]tensorsched.MemSample{}
	for _, r := range rows {
		if r.Experiment != "single" || r.Workload != m || r.Scheduled == nil || r.Comparison() {
			continue
		}
		van = r.Vanilla
		if r.Policy != "none" {
			sched[r.Policy] = r.Scheduled
			order = append(order, r.Policy)
		}
	}
	return van, sched, order
}
