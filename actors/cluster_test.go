package actors

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type testCluster struct {
	t       *testing.T
	dataDir string
	co      *Coordinator
	nodes   []*Node
	nc      *nats.Conn
	mu      sync.Mutex
	events  []transport.Event
	planner Planner
	// log is the coordinator's log (nil: quiet).
	log *slog.Logger
	// pred is the coordinator's predictor (nil: the zoo predictor with planner).
	pred Predictor
	// elastic is the coordinator's elastic loop configuration (zero: off).
	elastic ElasticConfig
	// cluster is its gossip cluster name (see clusterName).
	cluster string
	// coordConfig and nodeConfig, when set, adjust the configuration the
	// coordinator and each node start with (the seams for tests).
	coordConfig func(*CoordinatorConfig)
	nodeConfig  func(*NodeConfig)
}

// testClusters counts the test clusters this process started.
var testClusters atomic.Int64

// clusterName is the test cluster's gossip cluster name, the same for every
// start of its coordinator and unique among concurrent test processes: a
// member does not take another cluster's news (e.g. its own name's death)
// from a stopped member of that cluster whose port it took.
func (tc *testCluster) clusterName() string {
	if tc.cluster == "" {
		tc.cluster = fmt.Sprintf("t-%d-%d", os.Getpid(), testClusters.Add(1))
	}
	return tc.cluster
}

func startCluster(t *testing.T, nodes, gpus int, device string, scale float64) *testCluster {
	t.Helper()
	return startClusterWith(t, DefaultPlanner(), nodes, gpus, device, scale)
}

// startClusterWith is startCluster with the planner the coordinator and the
// nodes use.
func startClusterWith(t *testing.T, planner Planner, nodes, gpus int, device string, scale float64) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: planner}
	tc.startCoordinator()
	for i := 0; i < nodes; i++ {
		tc.addNode(fmt.Sprintf("n%d", i+1), gpus, device, scale)
	}
	t.Cleanup(tc.stop)
	return tc
}

func (tc *testCluster) startCoordinator() {
	log := tc.log
	if log == nil {
		log = quiet
	}
	pred := tc.pred
	if pred == nil {
		pred = NewZooPredictor(tc.planner)
	}
	cfg := CoordinatorConfig{DataDir: tc.dataDir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0",
		Gossip: "127.0.0.1:0", Cluster: tc.clusterName(), Log: log, Predictor: pred, Elastic: tc.elastic}
	if tc.coordConfig != nil {
		tc.coordConfig(&cfg)
	}
	co, err := StartCoordinator(cfg)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.co = co
	nc, err := transport.Connect(co.NATSURL(), "test")
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.nc = nc
	if _, err := nc.Subscribe(transport.AllEvents, func(m *nats.Msg) {
		e, err := transport.ParseEvent(m.Data)
		if err == nil {
			tc.mu.Lock()
			tc.events = append(tc.events, e)
			tc.mu.Unlock()
		}
	}); err != nil {
		tc.t.Fatal(err)
	}
	_ = nc.Flush()
}

func (tc *testCluster) addNode(name string, gpus int, device string, scale float64) *Node {
	cfg := NodeConfig{Name: name, Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0", Join: []string{tc.co.GossipAddr()},
		Cluster: tc.clusterName(), GPUs: gpus, Profile: gpu.MustProfile(device), TimeScale: scale, Planner: tc.planner, Log: quiet}
	if tc.nodeConfig != nil {
		tc.nodeConfig(&cfg)
	}
	n, err := StartNode(cfg)
	if err != nil {
		tc.t.Fatal(err)
	}
	if n.Address() != tc.co.Address() {
		tc.t.Fatalf("node %s on actor system %s, want the process's one, %s, shared with the coordinator", name, n.Address(), tc.co.Address())
	}
	tc.nodes = append(tc.nodes, n)
	tc.waitFor(10*time.Second, "node "+name+" joined", func() bool {
		g, _ := tc.co.GPUs()
		c := 0
		for _, x := range g {
			if x.Node == name {
				c++
			}
		}
		return c == gpus
	})
	return n
}

func (tc *testCluster) stop() {
	for _, n := range tc.nodes {
		n.Kill()
	}
	tc.nodes = nil
	if tc.nc != nil {
		tc.nc.Close()
	}
	if tc.co != nil {
		tc.co.Stop()
	}
}

func (tc *testCluster) waitFor(d time.Duration, what string, cond func() bool) {
	tc.t.Helper()
	if raceEnabled {
		// The race detector slows planning 10–40×: a resize's re-plan
		// outlasted TestElasticResize's 30 s once with other tests beside it.
		d *= 3
	}
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tc.t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tc *testCluster) submit(yaml string) []SubmittedJob {
	tc.t.Helper()
	var rep SubmitReply
	if err := transport.Request(tc.nc, transport.VerbSubmit, SubmitRequest{YAML: yaml}, &rep, 10*time.Second); err != nil {
		tc.t.Fatal(err)
	}
	return rep.Jobs
}

func (tc *testCluster) job(id string) *JobRecord {
	tc.t.Helper()
	var r JobRecord
	if err := transport.Request(tc.nc, transport.VerbStatus, JobRequest{Job: id}, &r, 10*time.Second); err != nil {
		tc.t.Fatal(err)
	}
	return &r
}

func (tc *testCluster) waitState(id string, s JobState, d time.Duration) *JobRecord {
	tc.t.Helper()
	var r *JobRecord
	tc.waitFor(d, fmt.Sprintf("job %s %s", id, s), func() bool { r = tc.job(id); return r.State == s })
	return r
}

func (tc *testCluster) eventsOf(job, typ string) []transport.Event {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var out []transport.Event
	for _, e := range tc.events {
		if (job == "" || e.Job == job) && (typ == "" || e.Type == typ) {
			out = append(out, e)
		}
	}
	return out
}

func spec(name, model string, batch, iters, prio int) string {
	return fmt.Sprintf("name: %s\nmodel: %s\nkind: train\nbatch: %d\niterations: %d\npriority: %d\ntolerance: 0.1\n", name, model, batch, iters, prio)
}

func TestSubmitPlacedCompleted(t *testing.T) {
	tc := startCluster(t, 2, 2, "h100-80gb", 200)
	jobs := tc.submit(spec("r50", "resnet50", 32, 300, 3))
	r := tc.waitState(jobs[0].ID, StateCompleted, 30*time.Second)
	if r.GPU == "" || r.Budget <= 0 || r.Iteration != 300 || r.PeakBytes <= 0 {
		t.Fatalf("record %+v", r)
	}
	// Events reach the test's subscription on their own goroutine: wait for
	// the last one before checking them.
	tc.waitEvent(jobs[0].ID, transport.EvCompleted, 10*time.Second, nil)
	var seq uint64
	var types []string
	for _, e := range tc.eventsOf(jobs[0].ID, "") {
		if e.Seq <= seq {
			t.Fatalf("sequence not increasing: %d after %d", e.Seq, seq)
		}
		seq = e.Seq
		if len(types) == 0 || types[len(types)-1] != e.Type {
			types = append(types, e.Type)
		}
	}
	got := strings.Join(types, ",")
	if !strings.HasPrefix(got, "submitted,placed,started") || !strings.HasSuffix(got, "completed") {
		t.Fatalf("events %s", got)
	}
}

func TestGarbledAPIRequest(t *testing.T) {
	tc := startCluster(t, 0, 0, "h100-80gb", 1)
	m, err := tc.nc.Request(transport.APIPrefix+transport.VerbSubmit, []byte("\x00\xffgarbage"), 5*time.Second)
	if err != nil || !strings.Contains(string(m.Data), "not valid JSON") {
		t.Fatalf("%s %v", m.Data, err)
	}
	err = transport.Request(tc.nc, transport.VerbSubmit, SubmitRequest{YAML: "name: x\nmodel: nosuchmodel\nkind: train\nbatch: 8\niterations: 5\n"}, nil, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "model") {
		t.Fatalf("bad model accepted: %v", err)
	}
	// Nothing accepted is lost: a good job still goes through afterwards.
	jobs := tc.submit(spec("ok", "mlp", 64, 10, 0))
	if len(jobs) != 1 {
		t.Fatal(jobs)
	}
	var list ListReply
	if err := transport.Request(tc.nc, transport.VerbList, struct{}{}, &list, 5*time.Second); err != nil || len(list.Jobs) != 1 {
		t.Fatalf("%v %v", list, err)
	}
	r := tc.job(jobs[0].ID)
	if r.State != StatePending || !strings.Contains(r.Reason, "no GPU") {
		tc.waitFor(5*time.Second, "waiting reason", func() bool { r = tc.job(jobs[0].ID); return strings.Contains(r.Reason, "no GPU") })
	}
}

var _ = pb.Crash{}
var _ = workload.Train
