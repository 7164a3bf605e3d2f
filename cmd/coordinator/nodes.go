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
		Use:   "nodes",
		Short: "List nodes (gossip state, address, GPUs) and each GPU's memory: used, budgeted, high-water",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var r actors.NodesReply
			if err := f.call(transport.VerbNodes, struct{}{}, &r); err != nil {
				return err
			}
			for i, n := range r.Nodes {
				for k, d := range n.Devices {
					if d == nil {
						return badReply(transport.VerbNodes, "nodes[%d].devices[%d] is null", i, k)
					}
				}
			}
			if f.json {
				return printJSON(r)
			}
			for _, n := range r.Nodes {
				fmt.Printf("%s  %s  actors %s  gossip %s  %d × %s\n", n.Name, n.State, n.Address, n.Gossip, n.GPUs, n.DeviceType)
				if n.Error != "" {
					fmt.Printf("  unreachable: %s\n", n.Error)
				}
				for _, d := range n.Devices {
					fmt.Printf("  %-14s budgeted %10s  used %10s  high-water %10s  of %10s  jobs %d  plan v%d\n",
						d.Gpu, gib(d.Budgeted), gib(d.UsedBytes), gib(d.HighWater), gib(d.Capacity), len(d.Jobs), d.PlanVersion)
				}
			}
			return nil
		},
	}
	addClientFlags(c, &f)
	rootCmd.AddCommand(c)
}
