package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/transport"
)

func init() {
	var f clientFlags
	c := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a job: it stops and its GPU budget goes back to its neighbours",
		Args:  oneArg("JOB", "the id of the job to cancel, as `coordinator list` shows it (e.g. j-1)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r actors.JobRecord
			if err := f.call(transport.VerbCancel, actors.JobRequest{Job: args[0]}, &r); err != nil {
				return err
			}
			if err := checkJob(transport.VerbCancel, &r); err != nil {
				return err
			}
			if f.json {
				return printJSON(r)
			}
			fmt.Printf("cancelling %s (%s, was %s)\n", r.ID, r.Spec.Name, r.State)
			return nil
		},
	}
	addClientFlags(c, &f)
	rootCmd.AddCommand(c)
}
