package actors

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

// NodeActorName is the id of node name's actor: "node/<name>". Its device
// actors are its children ("node/n1/gpu0", ...). Nodes running in one
// process share its actor system, so their actors' ids carry the node name.
func NodeActorName(name string) string { return "node/" + name }

// MaxNodeGPUs is the most GPUs one node may have; the coordinator ignores
// a member whose gossip metadata claims more.
const MaxNodeGPUs = 1024

// NodeConfig configures a node agent.
type NodeConfig struct {
	Name string
	// Listen is the protoactor remote address of the process's actor system
	// (transport.ProcessActors: host:port, port 0 picks one); nodes running
	// in the coordinator's process share its system (use port 0).
	Listen string
	// Gossip is the memberlist bind address; Join the coordinator's gossip address.
	Gossip string
	// Advertise is the IP address peers are told to reach the node's actor
	// and gossip addresses at (with their ports); needed when Listen or
	// Gossip binds every interface (":0", "0.0.0.0:7600"), "" otherwise
	// (the listen hosts are told).
	Advertise string
	Join      []string
	// Cluster is the coordinator's gossip cluster name ("" is
	// transport.DefaultCluster).
	Cluster string
	// TLS, when set (transport.LoadTLS), runs the actor port with mutual
	// TLS; GossipKey, when set, encrypts gossip. Both must be the
	// coordinator's (same CA, same key).
	TLS       *tls.Config
	GossipKey []byte
	// GPUs is the number of devices; Profile their type.
	GPUs      int
	Profile   gpu.Profile
	TimeScale float64
	Predictor Predictor
	Planner   Planner
	// Metrics is the /metrics listen address ("" serves none).
	Metrics string
	Log     *slog.Logger

	// beforeDeviceSpawn (a seam for tests; nil: none) runs when the node
	// actor starts, before it spawns its devices.
	beforeDeviceSpawn func()
}

// Node is a running node agent: a node actor with a device actor per GPU on
// the process's actor system, a gossip member of its own, and its metrics.
type Node struct {
	cfg         NodeConfig
	actors      *transport.Actors
	gossip      *transport.Gossip
	pid         *actor.PID
	Metrics     *NodeMetrics
	stopMetrics func()
	MetricsAddr string
}

// StartNode starts a node agent and joins the cluster.
func StartNode(cfg NodeConfig) (*Node, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Name == "" {
		return nil, fmt.Errorf("node: a name is required")
	}
	if cfg.GPUs <= 0 {
		return nil, fmt.Errorf("node %s: no GPUs", cfg.Name)
	}
	if cfg.GPUs > MaxNodeGPUs {
		return nil, fmt.Errorf("node %s: %d GPUs; a node has at most %d", cfg.Name, cfg.GPUs, MaxNodeGPUs)
	}
	if cfg.TimeScale < 0 || math.IsNaN(cfg.TimeScale) || math.IsInf(cfg.TimeScale, 0) {
		return nil, fmt.Errorf("node %s: --time-scale %v: must be a finite number of job seconds per wall second > 0 (0: real time)", cfg.Name, cfg.TimeScale)
	}
	if err := checkAddrs(cfg.Listen, cfg.Gossip, cfg.Metrics, cfg.Advertise, cfg.Cluster); err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	if cfg.Planner == nil {
		cfg.Planner = DefaultPlanner()
	}
	if cfg.Predictor == nil {
		cfg.Predictor = NewZooPredictor(cfg.Planner)
	}
	log := cfg.Log.With("node", cfg.Name)
	n := &Node{cfg: cfg, Metrics: NewNodeMetrics()}
	var err error
	// Metrics first: a node that cannot start must not have joined the
	// cluster (the coordinator would take its GPUs until it is declared dead).
	if n.stopMetrics, n.MetricsAddr, err = ServeMetrics(cfg.Metrics, n.Metrics.Registry); err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.Name, listenError("--metrics", cfg.Metrics, err))
	}
	if n.actors, err = transport.ProcessActorsAdvertised(cfg.Listen, cfg.Advertise, cfg.Log, transport.WithTLS(cfg.TLS)); err != nil {
		n.stopMetrics()
		return nil, fmt.Errorf("node %s: %w", cfg.Name, listenError("--listen", cfg.Listen, err))
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &nodeActor{cfg: cfg, metrics: n.Metrics, log: log} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)))
	if n.pid, err = n.actors.System.Root.SpawnNamed(props, NodeActorName(cfg.Name)); err != nil {
		n.stopMetrics()
		return nil, fmt.Errorf("node %s: %w (is a node of that name already running in this process?)", cfg.Name, err)
	}
	// The node actor spawns its devices when it starts, on its own
	// goroutine. Wait for that before joining: a coordinator that saw the
	// node's GPUs first could place a job whose device request went to a
	// device not spawned yet (a dead letter) and requeue the job.
	if err := n.waitDevices(); err != nil {
		n.stop()
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	var gossipRef atomic.Pointer[transport.Gossip]
	n.gossip, err = transport.StartGossip(transport.GossipOptions{
		Listen: cfg.Gossip, Advertise: cfg.Advertise, Join: cfg.Join, Cluster: cfg.Cluster, SecretKey: cfg.GossipKey, Log: log,
		Meta: transport.Meta{Name: cfg.Name, Role: transport.RoleNode, Address: n.actors.Address(), GPUs: cfg.GPUs, DeviceType: cfg.Profile.Name, TLS: cfg.TLS != nil},
		OnEvent: func(transport.MemberEvent) {
			if g := gossipRef.Load(); g != nil {
				n.Metrics.GossipMembers.Set(float64(g.NumMembers()))
			}
		},
	})
	if err != nil {
		n.stop()
		return nil, fmt.Errorf("node %s: %w", cfg.Name, gossipError(cfg.Gossip, err))
	}
	gossipRef.Store(n.gossip)
	n.Metrics.GossipMembers.Set(float64(n.gossip.NumMembers()))
	log.Info("node started", "actors", n.actors.Address(), "gossip", n.gossip.Addr(), "gpus", cfg.GPUs, "device", cfg.Profile.Name)
	return n, nil
}

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Address is the node's actor (remote) address.
func (n *Node) Address() string { return n.actors.Address() }

// GossipAddr is the node's gossip address.
func (n *Node) GossipAddr() string { return n.gossip.Addr() }

// System is the actor system the node runs on (the process's).
func (n *Node) System() *actor.ActorSystem { return n.actors.System }

// DevicePID is the PID of device i.
func (n *Node) DevicePID(i int) *actor.PID {
	return actor.NewPID(n.actors.Address(), NodeActorName(n.cfg.Name)+"/"+DeviceActorName(i))
}

// Status asks the node actor for its devices' state.
func (n *Node) Status(timeout time.Duration) (*pb.NodeStatus, error) {
	return NodeStatusOf(n.actors.System, n.pid, timeout)
}

// NodeStatusOf asks any node actor (local or remote) for its status.
func NodeStatusOf(sys *actor.ActorSystem, pid *actor.PID, timeout time.Duration) (*pb.NodeStatus, error) {
	r, err := sys.Root.RequestFuture(pid, &pb.NodeStatusRequest{}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("node at %s: %w", pid.Address, err)
	}
	s, ok := r.(*pb.NodeStatus)
	if !ok {
		return nil, fmt.Errorf("node at %s: unexpected reply %T", pid.Address, r)
	}
	for _, d := range s.GetDevices() {
		// Off the network, and reported as JSON, which has no NaN.
		if !workload.FiniteNonNeg(d.RoundSeconds) {
			return nil, fmt.Errorf("node at %s: %w: device %s: round_seconds %v: must be a finite number of seconds ≥ 0", pid.Address, errGarbledStatus, d.Gpu, d.RoundSeconds)
		}
	}
	return s, nil
}

// errGarbledStatus marks a node status that cannot be reported.
var errGarbledStatus = errors.New("garbled status")

// Leave announces a graceful departure and stops the node: its gossip
// member, its node and device actors, and its metrics.
func (n *Node) Leave() {
	_ = n.gossip.Leave(2 * time.Second)
	n.stop()
}

// Kill stops the node without announcing it, as a crash would: its gossip
// member goes silent (the cluster declares it dead) and its actors stop.
func (n *Node) Kill() {
	n.gossip.Shutdown()
	n.stop()
}

func (n *Node) stop() {
	n.stopMetrics()
	n.stopActors()
}

// devicesReady asks the node actor (local only, never sent over the
// network) how many device actors it has spawned.
type devicesReady struct{}

// nodeStartTimeout bounds how long StartNode waits for its node actor to
// have spawned its devices.
const nodeStartTimeout = 10 * time.Second

// waitDevices returns once the node actor has spawned every device actor.
// The node actor handles its Started message before any other, so its
// answer comes after the spawns.
func (n *Node) waitDevices() error {
	r, err := n.actors.System.Root.RequestFuture(n.pid, devicesReady{}, nodeStartTimeout).Result()
	if err != nil {
		return fmt.Errorf("the node actor did not start its devices within %s: %w", nodeStartTimeout, err)
	}
	if got, _ := r.(int); got != n.cfg.GPUs {
		return fmt.Errorf("%d of %d device actors started (see the log for the spawn error)", got, n.cfg.GPUs)
	}
	return nil
}

// stopActors stops the node actor and, with it, its device actors; the
// process's actor system keeps running (a process starts it once).
func (n *Node) stopActors() {
	if err := n.actors.System.Root.PoisonFuture(n.pid).Wait(); err != nil {
		n.cfg.Log.Warn("node actor did not stop", "node", n.cfg.Name, "err", err)
	}
}

// nodeActor supervises the node's device actors (restarting one that
// crashes) and answers status requests.
type nodeActor struct {
	cfg     NodeConfig
	metrics *NodeMetrics
	log     *slog.Logger
	devices []*actor.PID
	ledgers []*ledger
}

func (a *nodeActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		if a.cfg.beforeDeviceSpawn != nil {
			a.cfg.beforeDeviceSpawn()
		}
		if a.ledgers == nil {
			for i := 0; i < a.cfg.GPUs; i++ {
				a.ledgers = append(a.ledgers, newLedger())
			}
		}
		a.devices = a.devices[:0]
		for i := 0; i < a.cfg.GPUs; i++ {
			props := newDeviceProps(DeviceConfig{Node: a.cfg.Name, Index: i, Profile: a.cfg.Profile, TimeScale: a.cfg.TimeScale,
				Predictor: a.cfg.Predictor, Planner: a.cfg.Planner, Log: a.log, Metrics: a.metrics}, a.ledgers[i])
			pid, err := ctx.SpawnNamed(props, DeviceActorName(i))
			if err != nil {
				a.log.Error("spawn device", "gpu", i, "err", err)
				continue
			}
			a.devices = append(a.devices, pid)
		}
	case devicesReady:
		ctx.Respond(len(a.devices))
	case *pb.NodeStatusRequest:
		st := &pb.NodeStatus{Name: a.cfg.Name, Address: ctx.Self().Address, DeviceType: a.cfg.Profile.Name}
		for _, pid := range a.devices {
			r, err := ctx.RequestFuture(pid, &pb.DeviceStatusRequest{}, 2*time.Second).Result()
			if ds, ok := r.(*pb.DeviceStatus); err == nil && ok {
				st.Devices = append(st.Devices, ds)
			}
		}
		ctx.Respond(st)
	}
}
