// Command node is gpusched's node agent: it finds its GPUs (NVML) or
// simulates them, hosts one device actor per GPU, and joins the cluster.
package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/transport"
)

func main() {
	var (
		name, coordinator, join, gpus, device, listen, gossip, metrics, advertise, cluster string
		scale                                                                              float64
		security                                                                           transport.SecurityFlags
	)
	host, _ := os.Hostname()
	c := &cobra.Command{
		Use:   "node --coordinator HOST:PORT --join HOST:PORT --gpus sim:4 --device h100-80gb",
		Short: "gpusched node agent: one device actor per GPU, simulated or found through NVML",
		Long: `Run a node agent. --gpus sim:N simulates N GPUs of --device's profile, running
iterations on the sim device paced by --time-scale; --gpus nvml finds the GPUs
through NVML (fails clearly on a machine without the NVIDIA driver).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 { // cobra.NoArgs would say `unknown command "sim:4" for "node"`
				return fmt.Errorf("node takes no arguments, only flags (got %q; e.g. --gpus sim:4); see node --help", strings.Join(args, " "))
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every flag problem at once, as a spec file's are, rather than
			// one per attempt.
			var problems []error
			if err := checkName(name); err != nil {
				problems = append(problems, err)
			}
			if join == "" {
				problems = append(problems, errors.New("--join is required: the coordinator's gossip address (coordinator serve --gossip)"))
			}
			// As serve's --time-scale, which must match it: 0 is refused
			// rather than read as real time.
			if !(scale > 0) || math.IsInf(scale, 0) {
				problems = append(problems, fmt.Errorf("--time-scale %v: must be a finite number of job seconds per wall second > 0 (1 is real time), the same as serve's", scale))
			}
			sec, err := security.Load()
			if err != nil {
				problems = append(problems, err)
			}
			var (
				n    int
				prof gpu.Profile
			)
			// NVML is asked only once the other flags are right.
			if gpus != "nvml" || len(problems) == 0 {
				if n, prof, err = parseGPUs(gpus, device, cmd.Flags().Changed("device")); err != nil {
					problems = append(problems, err)
				}
			}
			if len(problems) > 0 {
				return errors.Join(problems...)
			}
			if coordinator != "" {
				if err := checkCoordinator(coordinator, sec.TLS); err != nil {
					return err
				}
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			node, err := actors.StartNode(actors.NodeConfig{Name: name, Listen: listen, Gossip: gossip, Advertise: advertise, Join: []string{join}, Cluster: cluster,
				TLS: sec.TLS, GossipKey: sec.GossipKey,
				GPUs: n, Profile: prof, TimeScale: scale, Metrics: metrics, Log: log})
			if err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, readyLine(name, n, prof.Name, node.Address(), node.GossipAddr(), node.MetricsAddr))
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			<-sig
			node.Leave()
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&name, "name", host, "node name (unique in the cluster)")
	f.StringVar(&coordinator, "coordinator", "", "the coordinator's actor address (coordinator serve --listen), checked at start")
	f.StringVar(&join, "join", "", "the coordinator's gossip address (coordinator serve --gossip)")
	f.StringVar(&gpus, "gpus", "sim:1", "sim:N for N simulated GPUs, or nvml to use this machine's GPUs")
	f.StringVar(&device, "device", "h100-80gb", "device profile of the simulated GPUs, or of the GPUs --gpus nvml finds (with nvml and no --device: the profile matching their name and memory): "+strings.Join(gpu.ProfileNames(), ", "))
	f.Float64Var(&scale, "time-scale", 100, "run simulated GPUs this many times faster than real time: job seconds per wall second, > 0 (1 is real time); give serve the same")
	f.StringVar(&listen, "listen", "127.0.0.1:0", "actor (protoactor remote) address, host:port, also told to peers; an empty or 0.0.0.0 host (:7600) listens on every interface and needs --advertise")
	f.StringVar(&gossip, "gossip", "127.0.0.1:0", "gossip (memberlist) address, host:port, also told to peers; an empty or 0.0.0.0 host needs --advertise")
	f.StringVar(&advertise, "advertise", "", "IP address peers reach this node at, told to them with the --listen and --gossip ports; required when either listens on every interface, e.g. --listen :7600 --gossip :7946 --advertise 10.0.0.5")
	f.StringVar(&metrics, "metrics", "", "serve Prometheus /metrics on this address (e.g. :9091)")
	f.StringVar(&cluster, "cluster", transport.DefaultCluster, "the coordinator's cluster name (coordinator serve --cluster): gossip of other clusters is ignored")
	transport.AddSecurityFlags(f, &security)
	if err := c.Execute(); err != nil {
		// One "error:" line per problem (errors.Join puts each on its own line).
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "error:", line)
		}
		os.Exit(1)
	}
}

// checkCoordinator checks --coordinator, the coordinator's actor address,
// before the node joins (the node is found through gossip, so the address
// is only checked): that it is reachable and, with TLS (tlsCfg non-nil),
// that the coordinator's certificate verifies against --tls-ca for that
// host and that the coordinator accepts this node's certificate.
func checkCoordinator(addr string, tlsCfg *tls.Config) error {
	if tlsCfg == nil {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return fmt.Errorf("cannot reach the coordinator at %s: %v (is `coordinator serve --listen %s` running?)", addr, err, addr)
		}
		_ = c.Close()
		return nil
	}
	if err := transport.CheckTLSPeer(addr, tlsCfg, 3*time.Second); err != nil {
		host, _, _ := net.SplitHostPort(addr)
		return fmt.Errorf("cannot reach the coordinator at %s over mutual TLS: %v (is `coordinator serve --listen %s` running with --tls-cert? "+
			"The coordinator's certificate must be signed by this node's --tls-ca and hold %s among its SANs, and this node's --tls-cert must be signed by the coordinator's --tls-ca)",
			addr, err, addr, host)
	}
	return nil
}

// checkName checks --name. The coordinator publishes the node's events on
// gpusched.events.node.<name> and stores it under node.<name>, so the name
// is letters, digits, '-', '_' and '.' only, with no empty part between
// dots (a hostname is).
func checkName(name string) error {
	if name == "" {
		return errors.New("--name is required: a name unique in the cluster (the hostname could not be read)")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("bad --name %q: use letters, digits, '-', '_' and '.' only (it names the node's event subject and store key)", name)
		}
	}
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("bad --name %q: a '.' must stand between two other characters (it splits the node's event subject)", name)
	}
	return nil
}

// parseGPUs reads --gpus: "sim:N" or "nvml". With nvml, --device (when
// given: deviceSet) names the found GPUs' profile instead of the match by
// name and memory.
func parseGPUs(spec, device string, deviceSet bool) (int, gpu.Profile, error) {
	if spec == "nvml" {
		found, err := gpu.Discover()
		if err != nil {
			return 0, gpu.Profile{}, err
		}
		p, err := nvmlProfile(found, device, deviceSet)
		return len(found), p, err
	}
	n, ok := strings.CutPrefix(spec, "sim:")
	if !ok {
		if k, err := strconv.Atoi(spec); err == nil && k > 0 {
			return 0, gpu.Profile{}, fmt.Errorf("bad --gpus %q: use sim:%d for %d simulated GPUs, or nvml for this machine's", spec, k, k)
		}
		return 0, gpu.Profile{}, fmt.Errorf("bad --gpus %q: use sim:N or nvml", spec)
	}
	k, err := strconv.Atoi(n)
	if err != nil || k <= 0 || k > 64 {
		return 0, gpu.Profile{}, fmt.Errorf("bad --gpus %q: N must be 1..64", spec)
	}
	p, err := deviceProfile(device)
	return k, p, err
}

// deviceProfile is --device's profile, with an error naming the flag.
func deviceProfile(device string) (gpu.Profile, error) {
	p, err := gpu.LookupProfile(device)
	if err != nil {
		return gpu.Profile{}, fmt.Errorf("--device: %w", err)
	}
	return p, nil
}

// nvmlProfile is the profile of the GPUs NVML found: --device's when given
// (deviceSet), else the built-in profile matching them by name and memory.
// A node's GPUs share one profile, so differing models need --device too.
func nvmlProfile(found []gpu.Discovered, device string, deviceSet bool) (gpu.Profile, error) {
	if len(found) == 0 {
		return gpu.Profile{}, errors.New("NVML found no GPUs; use --gpus sim:N")
	}
	if deviceSet {
		return deviceProfile(device)
	}
	for _, d := range found[1:] {
		if d.Name != found[0].Name || d.MemoryBytes != found[0].MemoryBytes {
			return gpu.Profile{}, fmt.Errorf("this node has different GPU models (%q and %q); pass --device with the profile to plan them all with (%s)",
				found[0].Name, d.Name, strings.Join(gpu.ProfileNames(), ", "))
		}
	}
	if found[0].Profile == "" {
		return gpu.Profile{}, fmt.Errorf("no built-in device profile matches %q (%d MiB); pass --device with the closest one (%s) or add a profile (see README)",
			found[0].Name, found[0].MemoryBytes>>20, strings.Join(gpu.ProfileNames(), ", "))
	}
	return gpu.LookupProfile(found[0].Profile)
}

// readyLine is what a node prints once it has joined: its GPUs, its actor
// and gossip addresses and, with --metrics, where it serves them (the port
// chosen for --metrics 127.0.0.1:0 shows only here).
func readyLine(name string, gpus int, profile, actors, gossip, metrics string) string {
	s := fmt.Sprintf("node %s ready: %d × %s, actors %s, gossip %s", name, gpus, profile, actors, gossip)
	if metrics != "" {
		s += fmt.Sprintf(", metrics http://%s/metrics", metrics)
	}
	return s
}
