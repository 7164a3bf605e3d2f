package main

import (
	"time"

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

// planWaitHelp is --plan-wait's help text.
const planWaitHelp = "most wall time an elastic round waits for memory predictions it has not made before it decides with those known (seconds or a duration; 0: one round's wall time, the interval divided by the time scale; negative: as long as predicting takes)"

// planWait is ElasticConfig.PlanWait for a --plan-wait of flag with rounds
// every interval of job time at scale: flag itself when positive, one
// round's wall time when 0, no limit (0) when negative or the loop is off.
func planWait(flag seconds, interval seconds, scale float64) time.Duration {
	switch {
	case flag > 0:
		return time.Duration(flag)
	case flag < 0 || interval <= 0 || !(scale > 0):
		return 0
	}
	return max(time.Duration(float64(interval)/scale), time.Millisecond)
}

// registerPlacement adds --placement to fl, writing to s (default binpack).
func registerPlacement(fl *pflag.FlagSet, s *placement.Strategy) {
	*s = placement.BinPack
	fl.Var((*strategyFlag)(s), "placement", "how the coordinator places a job it starts among the GPUs with room for it: binpack (the tightest fit: jobs share GPUs, large holes stay free) or spread (the GPU running the fewest jobs); the elastic loop picks its orders' GPUs itself, least loaded first")
}
