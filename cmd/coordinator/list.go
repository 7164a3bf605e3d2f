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
		Use:   "list",
		Short: "List every job with its state, GPU, budget and progress",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var l actors.ListReply
			if err := f.call(transport.VerbList, struct{}{}, &l); err != nil {
				return err
			}
			for i, r := range l.Jobs {
				if r == nil {
					return badReply(transport.VerbList, "jobs[%d] is null", i)
				}
			}
			if f.json {
				return printJSON(l)
			}
			fmt.Printf("%-8s %-20s %-10s %-16s %10s %12s  %s\n", "ID", "NAME", "STATE", "GPUS", "BUDGET", "PROGRESS", "REASON")
			for _, r := range l.Jobs {
				// A job with replicas lists every GPU; BUDGET is its first one's.
				fmt.Printf("%-8s %-20s %-10s %-16s %10s %5d/%-6d  %s\n", r.ID, r.Spec.Name, r.State, strings.Join(r.AllGPUs(), ","), gib(r.Budget), r.Iteration, r.Total, r.Reason)
			}
			return nil
		},
	}
	addClientFlags(c, &f)
	rootCmd.AddCommand(c)
}
