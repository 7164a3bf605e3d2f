package main

import (
	"github.com/spf13/pflag"

	"github.com/gpusched/gpusched/placement"
)

// strategyFlag is --placement: how the coordinator places a job among the
// GPUs with room for it (placement.Strategy), checked when it is parsed.
type strategyFlag placement.Strategy

func (s *strategyFlag) String() string { return string(*s) }

func (s *strategyFlag) Type() string { return "binpack|spread" }

func (s *strategyFlag) Set(v string) error {
	st, err := placement.ParseStrategy(v)
	if err != nil {
		return err
	}
	*s = strategyFlag(st)
	return nil
}

// registerPlacement adds --placement to fl, writing to s (default binpack).
func registerPlacement(fl *pflag.FlagSet, s *placement.Strategy) {
	*s = placement.BinPack
	fl.Var((*strategyFlag)(s), "placement", "how the coordinator places a job it starts among the GPUs with room for it: binpack (the tightest fit: jobs share GPUs, large holes stay free) or spread (the GPU running the fewest jobs); the elastic loop picks its orders' GPUs itself, least loaded first")
}
