package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/transport"
)

func init() {
	var f clientFlags
	c := &cobra.Command{
		Use:   "status [JOB]",
		Short: "Show one job (state, GPU, budget, progress, why it waits) or a cluster summary",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				var r actors.JobRecord
				if err := f.call(transport.VerbStatus, actors.JobRequest{Job: args[0]}, &r); err != nil {
					return err
				}
				if err := checkJob(transport.VerbStatus, &r); err != nil {
					return err
				}
				if f.json {
					return printJSON(r)
				}
				printJob(&r)
				return nil
			}
			var s actors.StatusReply
			if err := f.call(transport.VerbStatus, actors.JobRequest{}, &s); err != nil {
				return err
			}
			if f.json {
				return printJSON(s)
			}
			fmt.Printf("jobs: %s\n", strings.Join(actors.SortedStates(s.Jobs), ", "))
			fmt.Printf("nodes: %d\n", len(s.Nodes))
			for _, g := range s.GPUs {
				down := ""
				if g.Down {
					down = " (down)"
				}
				jobs := "no jobs"
				if len(g.Jobs) > 0 {
					jobs = "jobs " + strings.Join(g.Jobs, ", ")
				}
				fmt.Printf("  %-16s %-10s reserved %10s of %10s  %s%s\n", g.ID, g.DeviceType, gib(g.Reserved), gib(g.Capacity), jobs, down)
			}
			return nil
		},
	}
	addClientFlags(c, &f)
	rootCmd.AddCommand(c)
}

func printJob(r *actors.JobRecord) {
	fmt.Printf("job %s (%s): %s\n", r.ID, r.Spec.Name, r.State)
	if r.Reason != "" {
		fmt.Printf("  reason:    %s\n", r.Reason)
	}
	fmt.Printf("  model:     %s %s batch %d, priority %d, tolerance %.0f%%\n", r.Spec.Model, r.Spec.Kind, r.Spec.Batch.Max, r.Spec.Priority, r.Spec.Tolerance*100)
	if r.Batch > 0 && (r.Batch != r.Spec.Batch.Max || r.Accum > 0) {
		steps := ""
		if r.Accum > 0 {
			steps = fmt.Sprintf(" in %d gradient-accumulation micro-steps per iteration", r.Accum+1)
		}
		fmt.Printf("  batch now: %d (elastic)%s\n", r.Batch, steps)
	}
	switch gpus := r.AllGPUs(); {
	case len(gpus) > 1:
		fmt.Printf("  gpus:      %s (%d data-parallel replicas at batch %d each; gradient sync %.2f ms/iteration)\n",
			strings.Join(gpus, ", "), len(gpus), r.Batch/(len(gpus)*(r.Accum+1)), r.SyncSeconds*1000)
		for _, rp := range r.Replicas {
			fmt.Printf("             %-16s budget %s\n", rp.GPU, gib(rp.Budget))
		}
	case len(gpus) == 1:
		fmt.Printf("  gpu:       %s\n", gpus[0])
	}
	if r.MinBudget > 0 {
		fmt.Printf("  memory:    needs ≥ %s, vanilla peak %s, budget %s (%d revision(s))\n", gib(r.MinBudget), gib(r.VanillaPeak), gib(r.Budget), r.Resizes)
	}
	fmt.Printf("  progress:  %d/%d iterations", r.Iteration, r.Total)
	if r.IterSeconds > 0 {
		fmt.Printf(", %.1f ms/iteration, peak %s, swapped %s/iteration", r.IterSeconds*1000, gib(r.PeakBytes), gib(r.SwappedBytes))
	}
	fmt.Println()
	if r.State == actors.StateRunning && r.IterSeconds == 0 && r.PeakBytes > 0 {
		// Its plan runs (it has a peak) but gives it no time: iteration
		// time 0 is how the device reports a starved job.
		fmt.Printf("  starved:   a higher-priority job on its GPU leaves its kernels no gap; no progress until the GPU's jobs change\n")
	}
	if r.Attempt > 0 {
		fmt.Printf("  requeued:  %d time(s)\n", r.Attempt)
	}
}
