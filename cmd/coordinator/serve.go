package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
)

func init() {
	var cfg actors.CoordinatorConfig
	var verbose bool
	elasticEvery := seconds(actors.DefaultElasticInterval * float64(time.Second))
	var waitPlans seconds
	moveCost := seconds(placement.DefaultMoveCost * float64(time.Second))
	var intraGBs, interGBs float64
	var ones onesFlag
	var security transport.SecurityFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the coordinator daemon (embedded NATS with JetStream unless --nats-url is given)",
		Long: `Run the coordinator: it keeps job specs, states and progress checkpoints in a
JetStream key-value bucket, places jobs by predicted peak memory, tracks nodes by
gossip, publishes events on gpusched.events.> and answers gpusched.api.<verb>.

Nodes join with: node --coordinator <--listen> --join <--gossip> --gpus sim:4`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lvl := slog.LevelInfo
			if verbose {
				lvl = slog.LevelDebug
			}
			cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			cfg.Elastic.Interval = time.Duration(elasticEvery).Seconds()
			// 0 on the command line means free moves (as simulate's
			// --move-cost 0); the config's 0 is the default.
			cfg.Elastic.MoveCost = placement.PolicyMoveCost(time.Duration(moveCost).Seconds())
			cfg.Elastic.ONES = placement.ONESTuning(ones)
			cfg.Elastic.PlanWait = planWait(waitPlans, elasticEvery, cfg.Elastic.TimeScale)
			// Every flag problem at once (one line each), as a spec
			// file's are, rather than one per attempt.
			// --ones is checked against a known --policy only.
			onesErr := checkPolicy("serve", cfg.Elastic.Policy)
			if onesErr == nil {
				onesErr = checkONESFlag("serve", cfg.Elastic.Policy, cfg.Elastic.ONES)
			}
			var problems []error
			for _, err := range []error{
				checkElastic("serve", cfg.Elastic.TimeScale, elasticEvery),
				onesErr,
				checkLinks("serve", intraGBs, interGBs),
			} {
				if err != nil {
					problems = append(problems, err)
				}
			}
			if cfg.Elastic.MaxMicroSteps < 1 {
				problems = append(problems, fmt.Errorf("serve: --max-micro-steps %d: must be at least 1 (1: a move onto GPUs with less room shrinks the batch instead of splitting it)", cfg.Elastic.MaxMicroSteps))
			}
			if moveCost < 0 {
				problems = append(problems, fmt.Errorf("serve: --move-cost %v: must not be negative (0: moves are free)", time.Duration(moveCost)))
			}
			cfg.Elastic.IntraNodeBandwidth, cfg.Elastic.InterNodeBandwidth = intraGBs*1e9, interGBs*1e9
			sec, err := security.Load()
			if err != nil {
				problems = append(problems, fmt.Errorf("serve: %w", err))
			}
			if len(problems) > 0 {
				return errors.Join(problems...)
			}
			cfg.TLS, cfg.GossipKey = sec.TLS, sec.GossipKey
			co, err := actors.StartCoordinator(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, serveReadyLine(co.NATSURL(), co.Address(), co.GossipAddr(), co.MetricsAddr, co.Recovered))
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			<-sig
			co.Stop()
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", "gpusched-data", "directory for the embedded NATS server's JetStream store")
	f.StringVar(&cfg.NATSURL, "nats-url", "", "use this external NATS server (with JetStream) instead of embedding one")
	f.StringVar(&cfg.NATSListen, "nats-listen", "127.0.0.1:4222", "client address of the embedded NATS server")
	f.StringVar(&cfg.NATSToken, "nats-token", os.Getenv(transport.NATSTokenEnv), "token NATS clients must give to the embedded server (and that the coordinator gives to --nats-url's); prefer the environment variable "+transport.NATSTokenEnv+", which other users cannot read in the process list")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7600", "actor (protoactor remote) address, host:port, also told to nodes; an empty or 0.0.0.0 host (:7600) listens on every interface and needs --advertise")
	f.StringVar(&cfg.Gossip, "gossip", "127.0.0.1:7946", "gossip (memberlist) address nodes join, host:port; an empty or 0.0.0.0 host needs --advertise")
	f.StringVar(&cfg.Cluster, "cluster", transport.DefaultCluster, "cluster name nodes join with (node --cluster); gossip of other clusters is ignored, so two clusters on one network never merge")
	f.StringVar(&cfg.Advertise, "advertise", "", "IP address nodes reach the coordinator at, told to them with the --listen and --gossip ports; required when either listens on every interface, e.g. --listen :7600 --gossip :7946 --advertise 10.0.0.5")
	f.StringVar(&cfg.Metrics, "metrics", "", "serve Prometheus /metrics on this address (e.g. :9090)")
	transport.AddSecurityFlags(f, &security)
	f.BoolVar(&verbose, "verbose", false, "debug logging")
	f.StringVar(&cfg.Elastic.Policy, "policy", "ones", "elastic policy the coordinator runs every --elastic-interval: "+strings.Join(placement.PolicyNames, ", "))
	f.Var(&ones, "ones", onesFlagHelp)
	registerPlacement(f, &cfg.Placement)
	f.Var(&waitPlans, "plan-wait", planWaitHelp)
	f.Var(&elasticEvery, "elastic-interval", "job time between elastic rounds (seconds or a duration; 0 disables them)")
	f.Float64Var(&cfg.Elastic.TimeScale, "time-scale", 100, "the nodes' --time-scale: job seconds per wall second, which paces --elastic-interval")
	f.Var(&moveCost, "move-cost", "job time a moved elastic job makes no progress (checkpoint and restart; seconds or a duration; 0: moves are free). A resize in place costs nothing")
	f.IntVar(&cfg.Elastic.MaxMicroSteps, "max-micro-steps", actors.DefaultMaxMicroSteps, "most micro-steps per iteration an elastic order is split into to keep the policy's batch on GPUs with less room (1: shrink the batch instead)")
	f.Float64Var(&intraGBs, "intra-node-gbs", actors.DefaultIntraNodeBandwidth/1e9, "all-reduce bandwidth between replicas on one node, GB/s")
	f.Float64Var(&interGBs, "inter-node-gbs", actors.DefaultInterNodeBandwidth/1e9, "all-reduce bandwidth between replicas on different nodes, GB/s")
	rootCmd.AddCommand(c)
}

// checkElastic checks the elastic loop's flags of serve and demo. A
// --time-scale of 0 is refused rather than taken as the loop's default: the
// nodes read 0 as real time, so the rounds would run at another pace than
// the jobs.
func checkElastic(cmd string, scale float64, every seconds) error {
	var errs []error
	if !(scale > 0) || math.IsInf(scale, 0) {
		errs = append(errs, fmt.Errorf("%s: --time-scale %v: must be a finite number of job seconds per wall second > 0 (1 is real time)", cmd, scale))
	}
	if every < 0 {
		errs = append(errs, fmt.Errorf("%s: --elastic-interval %v: must not be negative (0 disables the elastic rounds)", cmd, time.Duration(every)))
	}
	return errors.Join(errs...)
}

// checkPolicy checks an elastic --policy name.
func checkPolicy(cmd, policy string) error {
	if !slices.Contains(placement.PolicyNames, policy) {
		return fmt.Errorf("%s: --policy: unknown policy %q (want one of %s)", cmd, policy, strings.Join(placement.PolicyNames, ", "))
	}
	return nil
}

// serveReadyLine is the line serve prints once the coordinator is up.
func serveReadyLine(natsURL, actorsAddr, gossip, metrics string, recovered int) string {
	line := fmt.Sprintf("coordinator ready: NATS %s, actors %s, gossip %s", transport.RedactURL(natsURL), actorsAddr, gossip)
	if metrics != "" {
		line += fmt.Sprintf(", metrics http://%s/metrics", metrics)
	}
	return line + fmt.Sprintf(" (%d unfinished job(s) recovered)", recovered)
}
