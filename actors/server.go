package actors

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// CoordinatorConfig configures the coordinator daemon.
type CoordinatorConfig struct {
	// DataDir holds the embedded NATS server's JetStream data.
	DataDir string
	// NATSURL names an external NATS server with JetStream; empty embeds one.
	NATSURL string
	// NATSListen is the embedded server's client address (default 127.0.0.1:4222).
	NATSListen string
	// NATSToken, when set, is required of every NATS client by the
	// embedded server, and given by the coordinator to NATS (embedded or
	// external).
	NATSToken string
	// Listen is the protoactor remote address of the process's actor system
	// (transport.ProcessActors), which the coordinator shares with any nodes
	// running in the same process; Gossip is the memberlist address.
	Listen string
	Gossip string
	// Advertise is the IP address peers are told to reach Listen and Gossip
	// at (with their ports); needed when either binds every interface
	// (":7600", "0.0.0.0:7946"), "" otherwise (the listen hosts are told).
	Advertise string
	// Cluster names the gossip cluster nodes must join with the same name
	// ("" is transport.DefaultCluster).
	Cluster string
	// TLS, when set (transport.LoadTLS), runs the actor port with mutual
	// TLS (transport.WithTLS); GossipKey, when set, encrypts gossip
	// (transport.GossipOptions.SecretKey). Nodes need the same CA and key.
	TLS       *tls.Config
	GossipKey []byte
	// Metrics is the /metrics listen address ("" serves none).
	Metrics   string
	Predictor Predictor
	Log       *slog.Logger
	// Elastic configures the elastic loop (elastic.go); a zero Interval
	// disables it.
	Elastic ElasticConfig
	// Placement is how a job is placed among the GPUs with room for it:
	// placement.BinPack ("", the default: the tightest fit, so jobs share
	// GPUs and large holes stay free) or placement.Spread (the GPU with
	// the fewest jobs).
	Placement placement.Strategy

	// Seams for tests (zero: the defaults): how the stored jobs are listed
	// at start and after a crash, and how long a job actor waits for a
	// device to answer its budget request.
	listJobs            func(*transport.Store) ([]string, error)
	budgetAnswerTimeout time.Duration
}

// Coordinator is a running coordinator: NATS (embedded or external), the
// job store and event stream, the coordinator actor (with its job actors) on
// the process's actor system, gossip, and the request/reply API.
type Coordinator struct {
	cfg         CoordinatorConfig
	nats        *transport.Embedded
	nc          *nats.Conn
	Store       *transport.Store
	actors      *transport.Actors
	gossip      *transport.Gossip
	pid         *actor.PID
	subs        []*nats.Subscription
	Metrics     *CoordinatorMetrics
	stopMetrics func()
	MetricsAddr string
	// Recovered is the number of unfinished jobs rebuilt from the store at start.
	Recovered int
	// elastic is the coordinator actor's elastic loop (nil: none); Stop
	// drops its predictions not started yet.
	elastic *elasticLoop
}

// StartCoordinator starts everything and recovers jobs from the store.
func StartCoordinator(cfg CoordinatorConfig) (co *Coordinator, err error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Predictor == nil {
		cfg.Predictor = NewZooPredictor(DefaultPlanner())
	}
	// Settings are checked before anything is started.
	elastic, err := newElasticLoop(cfg.Elastic, cfg.Predictor, cfg.Log)
	if err != nil {
		return nil, err
	}
	strategy, err := placement.ParseStrategy(string(cfg.Placement))
	if err != nil {
		return nil, fmt.Errorf("coordinator: --placement: %w", err)
	}
	if cfg.NATSURL == "" && cfg.DataDir == "" {
		return nil, errors.New("coordinator: --data-dir is required with the embedded NATS server")
	}
	if err := checkAddrs(cfg.Listen, cfg.Gossip, cfg.Metrics, cfg.Advertise, cfg.Cluster); err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	if err := checkGossipBind(cfg.Gossip); err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	// started is what to clean up on a failure below: each "return nil,
	// err" sets co to nil before the deferred clean-up runs.
	started := &Coordinator{cfg: cfg, Metrics: NewCoordinatorMetrics(), stopMetrics: func() {}, elastic: elastic}
	co = started
	defer func() {
		if err != nil {
			started.Stop()
			co = nil
		}
	}()
	// Metrics first: a taken --metrics address fails the start before
	// NATS is started or any job recovered.
	if co.stopMetrics, co.MetricsAddr, err = ServeMetrics(cfg.Metrics, co.Metrics.Registry); err != nil {
		co.stopMetrics = func() {}
		return nil, fmt.Errorf("coordinator: %w", listenError("--metrics", cfg.Metrics, err))
	}
	url := cfg.NATSURL
	if url == "" {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, err
		}
		listen := cfg.NATSListen
		if listen == "" {
			listen = "127.0.0.1:4222"
		}
		if co.nats, err = transport.StartEmbedded(transport.EmbeddedOptions{Listen: listen, StoreDir: filepath.Join(cfg.DataDir, "jetstream"), Token: cfg.NATSToken}); err != nil {
			return nil, err
		}
		url = co.nats.ClientURL()
	}
	if co.nc, err = transport.Connect(url, "gpusched-coordinator", nats.Token(cfg.NATSToken)); err != nil {
		if cfg.NATSURL != "" {
			return nil, fmt.Errorf("--nats-url: %w (start that NATS server with JetStream, or leave --nats-url out to embed one)", err)
		}
		return nil, err
	}
	if co.Store, err = transport.OpenStore(co.nc); err != nil {
		return nil, err
	}
	pub, err := transport.NewPublisher(co.nc)
	if err != nil {
		return nil, err
	}
	if co.actors, err = transport.ProcessActorsAdvertised(cfg.Listen, cfg.Advertise, cfg.Log, transport.WithTLS(cfg.TLS)); err != nil {
		return nil, fmt.Errorf("coordinator: %w", listenError("--listen", cfg.Listen, err))
	}
	recovered := make(chan recovery, 1)
	ca := &coordActor{store: co.Store, pub: pub, pred: cfg.Predictor, metrics: co.Metrics, log: cfg.Log.With("actor", "coordinator"),
		recs: map[string]*JobRecord{}, pids: map[string]*actor.PID{}, waiting: map[string]bool{}, nodes: map[string]*nodeEntry{},
		orphans: map[string][]placement.FitJob{}, reasons: map[string]string{}, recovered: recovered, elastic: elastic,
		listJobs: cfg.listJobs, budgetTimeout: cfg.budgetAnswerTimeout, tls: cfg.TLS != nil, strategy: strategy}
	if ca.listJobs == nil {
		ca.listJobs = func(s *transport.Store) ([]string, error) { return s.Keys("job.") }
	}
	if ca.budgetTimeout <= 0 {
		ca.budgetTimeout = defaultBudgetAnswerTimeout
	}
	props := actor.PropsFromProducer(func() actor.Actor { return ca },
		actor.WithSupervisor(actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)))
	if co.pid, err = co.actors.System.Root.SpawnNamed(props, CoordinatorActorName); err != nil {
		return nil, err
	}
	select {
	case r := <-recovered:
		if r.err != nil {
			return nil, r.err
		}
		co.Recovered = r.n
	case <-time.After(30 * time.Second):
		return nil, errors.New("coordinator: recovering jobs from the store took more than 30s")
	}
	// Rejoin nodes known from before a restart, so their running jobs are found again.
	var seeds []string
	if keys, err := co.Store.Keys("node."); err == nil {
		for _, k := range keys {
			if b, err := co.Store.Get(k); err == nil {
				var ni NodeInfo
				if json.Unmarshal(b, &ni) == nil && ni.Gossip != "" {
					seeds = append(seeds, ni.Gossip)
				}
			}
		}
	}
	sys := co.actors.System
	var gossipRef atomic.Pointer[transport.Gossip]
	co.gossip, err = transport.StartGossip(transport.GossipOptions{
		Listen:    cfg.Gossip,
		Advertise: cfg.Advertise,
		Cluster:   cfg.Cluster,
		SecretKey: cfg.GossipKey,
		Meta:      transport.Meta{Name: "coordinator", Role: transport.RoleCoordinator, Address: co.actors.Address(), TLS: cfg.TLS != nil},
		OnEvent: func(e transport.MemberEvent) {
			sys.Root.Send(co.pid, &memberEv{ev: e})
			if g := gossipRef.Load(); g != nil {
				co.Metrics.GossipMembers.Set(float64(g.NumMembers()))
			}
		},
		Log: cfg.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", gossipError(cfg.Gossip, err))
	}
	gossipRef.Store(co.gossip)
	co.Metrics.GossipMembers.Set(1)
	if len(seeds) > 0 {
		go func() { _, _ = co.gossip.Join(seeds) }()
	}
	if co.subs, err = transport.ServeAPI(co.nc, co.handlers()); err != nil {
		return nil, err
	}
	cfg.Log.Info("coordinator started", "nats", transport.RedactURL(url), "actors", co.actors.Address(), "gossip", co.gossip.Addr(), "recovered", co.Recovered)
	return co, nil
}

// NATSURL is the NATS server clients use.
func (co *Coordinator) NATSURL() string { return co.nc.ConnectedUrl() }

// Address is the coordinator's actor address.
func (co *Coordinator) Address() string { return co.actors.Address() }

// GossipAddr is the address nodes join.
func (co *Coordinator) GossipAddr() string { return co.gossip.Addr() }

// System is the actor system the coordinator runs on (the process's).
func (co *Coordinator) System() *actor.ActorSystem { return co.actors.System }

// JobPID is the PID of a job's actor.
func (co *Coordinator) JobPID(id string) *actor.PID {
	return actor.NewPID(co.actors.Address(), CoordinatorActorName+"/"+JobActorName(id))
}

// Stop shuts everything down; the store survives in the data directory.
// The process's actor system keeps running (a process starts it once):
// the coordinator actor and its job actors are stopped, so a coordinator
// started afterwards in the same process takes their names again.
func (co *Coordinator) Stop() {
	if co.elastic != nil {
		co.elastic.ahead.close()
	}
	for _, s := range co.subs {
		_ = s.Unsubscribe()
	}
	if co.stopMetrics != nil {
		co.stopMetrics()
	}
	if co.gossip != nil {
		co.gossip.Shutdown()
	}
	if co.pid != nil {
		if err := co.actors.System.Root.PoisonFuture(co.pid).Wait(); err != nil {
			co.cfg.Log.Warn("coordinator actor did not stop", "err", err)
		}
	}
	if co.nc != nil {
		_ = co.nc.Drain()
		co.nc.Close()
	}
	if co.nats != nil {
		co.nats.Shutdown()
	}
}

func (co *Coordinator) ask(msg any) (any, error) { return co.askWithin(msg, 10*time.Second) }

// askWithin is ask waiting at most d for the answer.
func (co *Coordinator) askWithin(msg any, d time.Duration) (any, error) {
	r, err := co.actors.System.Root.RequestFuture(co.pid, msg, d).Result()
	if err != nil {
		return nil, fmt.Errorf("coordinator actor: %w", err)
	}
	if e, ok := r.(error); ok {
		return nil, e
	}
	return r, nil
}

// API request and reply bodies.
type (
	// SubmitRequest carries a job spec file's YAML text.
	SubmitRequest struct {
		YAML string `json:"yaml"`
	}
	// SubmitReply lists the accepted jobs.
	SubmitReply struct {
		Jobs []SubmittedJob `json:"jobs"`
	}
	// JobRequest names one job.
	JobRequest struct {
		Job string `json:"job"`
	}
	// StatusReply is the cluster summary (status without a job).
	StatusReply struct {
		Jobs  map[JobState]int `json:"jobs"`
		Nodes []NodeInfo       `json:"nodes"`
		GPUs  []GPUInfo        `json:"gpus"`
	}
	// ListReply lists every job.
	ListReply struct {
		Jobs []*JobRecord `json:"jobs"`
	}
	// NodeReport is one node with its devices' live state.
	NodeReport struct {
		NodeInfo
		Devices []*pb.DeviceStatus `json:"devices,omitempty"`
		Error   string             `json:"error,omitempty"`
	}
	// NodesReply lists the nodes.
	NodesReply struct {
		Nodes []NodeReport `json:"nodes"`
	}
)

// SubmitSpecs validates specs against the model zoo and device profiles and submits them.
func (co *Coordinator) SubmitSpecs(specs []workload.Spec) ([]SubmittedJob, error) {
	if err := workload.ValidateSpecs(specs, SubmitValidateOptions()); err != nil {
		return nil, fmt.Errorf("submit: invalid job spec:\n%w", err)
	}
	return co.submitValid(specs)
}

// submitValid submits specs that passed SubmitValidateOptions' checks.
func (co *Coordinator) submitValid(specs []workload.Spec) ([]SubmittedJob, error) {
	if len(specs) == 0 {
		return nil, errors.New("submit: no jobs in the request")
	}
	r, err := co.ask(&submitReq{specs: specs})
	if err != nil {
		return nil, err
	}
	return r.(*submitResp).jobs, nil
}

// ValidateOptions checks models against the zoo and devices against the
// known profiles.
func ValidateOptions() workload.ValidateOptions {
	return workload.ValidateOptions{
		KnownModel:  func(m string) bool { _, ok := zoo.Canonical(m); return ok },
		KnownDevice: func(d string) bool { _, err := gpu.LookupProfile(d); return err == nil },
		Models:      zoo.Models(),
		Devices:     gpu.ProfileNames(),
		MaxSeq:      zoo.MaxSeq,
		ParamChunk:  zoo.CheckParamChunk,
	}
}

// SubmitValidateOptions are ValidateOptions for jobs submitted to run: a
// job's run spec names a zoo model, since the nodes cannot load a trace.
func SubmitValidateOptions() workload.ValidateOptions {
	o := ValidateOptions()
	o.RefuseTraces = "the coordinator runs zoo models only (set model); plan a trace with `coordinator plan --trace FILE` or `plan --jobs FILE`"
	return o
}

// Job returns one job's record.
func (co *Coordinator) Job(id string) (*JobRecord, error) {
	r, err := co.ask(&statusReq{id: id})
	if err != nil {
		return nil, err
	}
	return r.(*JobRecord), nil
}

// Jobs returns every job's record in submission order.
func (co *Coordinator) Jobs() ([]*JobRecord, error) {
	r, err := co.ask(&listReq{})
	if err != nil {
		return nil, err
	}
	return r.([]*JobRecord), nil
}

// Cancel cancels a job.
func (co *Coordinator) Cancel(id string) (*JobRecord, error) {
	r, err := co.ask(&cancelReq{id: id})
	if err != nil {
		return nil, err
	}
	return r.(*JobRecord), nil
}

// GPUs returns placement's view of the GPUs.
func (co *Coordinator) GPUs() ([]GPUInfo, error) {
	r, err := co.ask(&gpusReq{})
	if err != nil {
		return nil, err
	}
	return r.([]GPUInfo), nil
}

// Nodes returns every node with its devices' live state.
func (co *Coordinator) Nodes() ([]NodeReport, error) {
	r, err := co.ask(&nodesReq{})
	if err != nil {
		return nil, err
	}
	var out []NodeReport
	for _, n := range r.([]NodeInfo) {
		nr := NodeReport{NodeInfo: n}
		if n.State == "alive" || n.State == "suspect" {
			st, err := NodeStatusOf(co.actors.System, actor.NewPID(n.Address, NodeActorName(n.Name)), 2*time.Second)
			if err != nil {
				nr.Error = err.Error()
				if errors.Is(err, errGarbledStatus) {
					co.cfg.Log.Warn("a node's status is garbled; reporting it without its devices", "node", n.Name, "err", err)
				}
			} else {
				nr.Devices = st.Devices
			}
		}
		out = append(out, nr)
	}
	return out, nil
}

func (co *Coordinator) handlers() map[string]transport.Handler {
	jobReq := func(b []byte) (string, error) {
		var r JobRequest
		if err := strictJSON(b, &r); err != nil {
			return "", err
		}
		if !ValidJobID(r.Job) {
			return "", fmt.Errorf("bad job id %q (ids look like j-12)", r.Job)
		}
		return r.Job, nil
	}
	return map[string]transport.Handler{
		transport.VerbSubmit: func(b []byte) (any, error) {
			var r SubmitRequest
			if err := strictJSON(b, &r); err != nil {
				return nil, err
			}
			// Models and devices are checked in the same pass as
			// everything else, so every problem is reported at once.
			specs, err := workload.ParseSpecsWith([]byte(r.YAML), SubmitValidateOptions())
			if err != nil {
				return nil, fmt.Errorf("submit: %w", err)
			}
			jobs, err := co.submitValid(specs)
			if err != nil {
				return nil, err
			}
			return SubmitReply{Jobs: jobs}, nil
		},
		transport.VerbStatus: func(b []byte) (any, error) {
			var r JobRequest
			if err := strictJSON(b, &r); err != nil {
				return nil, err
			}
			if r.Job != "" {
				if !ValidJobID(r.Job) {
					return nil, fmt.Errorf("bad job id %q (ids look like j-12)", r.Job)
				}
				return co.Job(r.Job)
			}
			jobs, err := co.Jobs()
			if err != nil {
				return nil, err
			}
			s := StatusReply{Jobs: map[JobState]int{}}
			for _, j := range jobs {
				s.Jobs[j.State]++
			}
			nr, err := co.ask(&nodesReq{})
			if err != nil {
				return nil, err
			}
			s.Nodes = nr.([]NodeInfo)
			if s.GPUs, err = co.GPUs(); err != nil {
				return nil, err
			}
			return s, nil
		},
		transport.VerbList: func(b []byte) (any, error) {
			jobs, err := co.Jobs()
			return ListReply{Jobs: jobs}, err
		},
		transport.VerbCancel: func(b []byte) (any, error) {
			id, err := jobReq(b)
			if err != nil {
				return nil, err
			}
			return co.Cancel(id)
		},
		transport.VerbNodes: func(b []byte) (any, error) {
			n, err := co.Nodes()
			return NodesReply{Nodes: n}, err
		},
	}
}

// strictJSON decodes a request body, rejecting unknown fields with a message
// that lists the allowed ones.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			return fmt.Errorf("bad request: %v (allowed: %s)", err, strings.Join(jsonFields(v), ", "))
		}
		return fmt.Errorf("bad request: %v", err)
	}
	// One JSON value per request: a second would be silently dropped.
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("bad request: data after the JSON object at byte %d (send one object per request)", end)
	}
	return nil
}

// jsonFields lists the JSON names of the fields of the struct v points to.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, strconv.Quote(name))
		}
	}
	return out
}

// SortedStates lists states in display order with their counts.
func SortedStates(m map[JobState]int) []string {
	var out []string
	for _, s := range AllStates {
		if m[s] > 0 {
			out = append(out, fmt.Sprintf("%s %d", s, m[s]))
		}
	}
	return out
}
