// Command coordinator is gpusched's coordinator daemon and user CLI.
//
// Every subcommand lives in its own file and registers itself on rootCmd (or
// benchCmd) from an init function, so subcommands can be added independently.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:   "coordinator",
	Short: "gpusched coordinator: packs many deep-learning jobs per GPU and across GPU nodes",
	Long: `gpusched schedules deep-learning jobs on shared GPU clusters.

It plans tensor swapping and recomputation so co-located jobs fit their memory
budgets (TENSILE), fills a high-priority job's idle time with low-priority
kernels (FIKIT), and searches GPU counts and batch sizes across the cluster (ONES).`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Reproducible benchmarks that write tables (markdown, CSV) and plots",
}

func init() { rootCmd.AddCommand(benchCmd) }

// noArgs is cobra.NoArgs with an error that says the command takes only
// flags (cobra's reads `unknown command "resnet50" for "coordinator plan"`).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no arguments, only flags (got %q); see %s --help", cmd.Name(), strings.Join(args, " "), cmd.CommandPath())
	}
	return nil
}

// oneArg is cobra.ExactArgs(1) with an error that names the argument and
// what it is (cobra's reads "accepts 1 arg(s), received 0").
func oneArg(name, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return fmt.Errorf("%s needs %s: %s", cmd.Name(), name, what)
		case len(args) > 1:
			return fmt.Errorf("%s takes one %s, got %d: %s", cmd.Name(), name, len(args), strings.Join(args, " "))
		}
		return nil
	}
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
