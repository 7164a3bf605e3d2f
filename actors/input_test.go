package actors

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

// A request with an unknown field is refused with the fields the verb
// takes, so the caller can fix the request (strictJSON's promise); so is
// data after the request's object, which would be dropped unread.
func TestStrictJSONListsAllowedFields(t *testing.T) {
	for _, c := range []struct {
		body string
		v    any
		want []string
	}{
		{`{"jbo": "j-1"}`, &JobRequest{}, []string{`"jbo"`, `"job"`}},
		{`{"spec": "name: a"}`, &SubmitRequest{}, []string{`"spec"`, `"yaml"`}},
		{`{"job": "j-1"} {"job": "j-2"}`, &JobRequest{}, []string{"data after the JSON object at byte 14", "one object per request"}},
		{`{"job": "j-1"}]`, &JobRequest{}, []string{"data after the JSON object"}},
	} {
		err := strictJSON([]byte(c.body), c.v)
		if err == nil {
			t.Errorf("%s: accepted", c.body)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %s", c.body, err, w)
			}
		}
	}
	if err := strictJSON([]byte("{\"job\": \"j-1\"}\n\t "), &JobRequest{}); err != nil {
		t.Errorf("trailing white space refused: %v", err)
	}
}

// serve --time-scale NaN, Inf or a negative number is refused: NaN made
// every elastic round fire after 1 ms at a NaN job time, and a negative
// scale was silently replaced by the default.
func TestElasticTimeScaleMustBeFinite(t *testing.T) {
	for _, s := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -5} {
		if _, err := newElasticLoop(ElasticConfig{Interval: 60, TimeScale: s}, nil, quiet); err == nil || !strings.Contains(err.Error(), "time scale") {
			t.Errorf("time scale %v: error %v, want one naming the time scale", s, err)
		}
	}
	if l, err := newElasticLoop(ElasticConfig{Interval: 60}, nil, quiet); err != nil || l.cfg.TimeScale != 100 {
		t.Errorf("time scale 0: %v (want the default, 100)", err)
	}
}

// node --time-scale NaN, Inf or a negative number is refused before the
// node starts anything: NaN made every device's virtual clock NaN (no job
// ever advanced) and a negative scale was silently replaced by real time.
func TestNodeTimeScaleMustBeFinite(t *testing.T) {
	for _, s := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -5} {
		n, err := StartNode(NodeConfig{Name: "bad-scale", GPUs: 1, TimeScale: s, Log: quiet})
		if err == nil {
			n.Leave()
			t.Errorf("time scale %v: accepted", s)
			continue
		}
		if !strings.Contains(err.Error(), "--time-scale") {
			t.Errorf("time scale %v: error %q does not name --time-scale", s, err)
		}
	}
}

// A coordinator that cannot start returns its error: every failure path
// used to panic (the deferred clean-up stopped the nil coordinator that
// "return nil, err" had just assigned). A bad elastic setting is refused
// before the embedded NATS server or anything else is started.
func TestStartCoordinatorErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  CoordinatorConfig
		want string
	}{
		{"no data dir", CoordinatorConfig{Log: quiet}, "--data-dir"},
		{"NaN time scale", CoordinatorConfig{DataDir: t.TempDir(), NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0",
			Elastic: ElasticConfig{Interval: 60, TimeScale: math.NaN()}, Log: quiet}, "time scale"},
	} {
		t.Run(c.name, func(t *testing.T) {
			co, err := StartCoordinator(c.cfg)
			if err == nil {
				co.Stop()
				t.Fatal("started")
			}
			if co != nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got (%v, %v), want (nil, an error naming %s)", co, err, c.want)
			}
			if c.cfg.DataDir != "" {
				if _, serr := os.Stat(filepath.Join(c.cfg.DataDir, "jetstream")); serr == nil {
					t.Errorf("the embedded NATS store was created before the bad setting was refused")
				}
			}
		})
	}
}

// The coordinator runs zoo models only (a job's run spec carries no trace).
// A trace job used to be accepted and given an id, then failed or waited
// with a message about an empty model name; submit refuses it up front,
// naming the field and the way to plan a trace, and accepts nothing of the
// request.
func TestSubmitRefusesTraceJobs(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 1000)
	yaml := "jobs:\n  - {name: ok, model: mlp, batch: 2, iterations: 1}\n  - {name: tr, trace: graph.json, iterations: 5}\n"
	var rep SubmitReply
	err := transport.Request(tc.nc, transport.VerbSubmit, SubmitRequest{YAML: yaml}, &rep, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "jobs[1].trace") || !strings.Contains(err.Error(), "plan --jobs") {
		for _, j := range rep.Jobs {
			time.Sleep(2 * time.Second)
			r := tc.job(j.ID)
			t.Logf("accepted %s (%s): %s, reason %q", j.ID, j.Name, r.State, r.Reason)
		}
		t.Fatalf("submit of a trace job: error %v, want one naming jobs[1].trace and plan --jobs", err)
	}
	var l ListReply
	if err := transport.Request(tc.nc, transport.VerbList, struct{}{}, &l, 10*time.Second); err != nil || len(l.Jobs) != 0 {
		t.Fatalf("after a refused submit: %d jobs (%v), want none", len(l.Jobs), err)
	}
}

// FuzzSubmitRequest: a submit body from the network goes through the
// coordinator's decoding and validation (strictJSON, then ParseSpecsWith
// with SubmitValidateOptions, as the submit handler does) without a panic;
// no job it accepts names a trace, and every one converts to a run spec with
// at least one iteration, a batch size and a GPU.
func FuzzSubmitRequest(f *testing.F) {
	for _, s := range []string{
		`{"yaml": "name: a\nmodel: mlp\nbatch: 2\niterations: 3\n"}`,
		`{"yaml": "name: a\nmodel: bert\nkind: infer\nbatch: 1\narrivals: {times: [0, 0.5, 1]}\n"}`,
		`{"yaml": "name: a\nmodel: mlp\nbatch: {min: 2, max: 8}\ngpus: {min: 1, max: 4}\ntarget_samples: 100\n"}`,
		`{"yaml": "name: a\ntrace: t.json\ntarget_samples: 10\n"}`,
		`{"yaml": "name: a\nmodel: vgg16\nbatch: 2\niterations: 3\nparam_chunk: 4MiB\noptimizer: spread\n"}`,
		`{"yaml": 5}`,
		`{"spec": "x"}`,
		`null`,
		`{"yaml": "jobs: []"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r SubmitRequest
		if err := strictJSON(body, &r); err != nil {
			return
		}
		specs, err := workload.ParseSpecsWith([]byte(r.YAML), SubmitValidateOptions())
		if err != nil {
			return
		}
		for i := range specs {
			if specs[i].Trace != "" {
				t.Fatalf("spec %+v names a trace and was accepted for submit", specs[i])
			}
			rs := RunSpec("j-1", &specs[i])
			if rs.Iterations < 1 || rs.Batch < 1 || rs.Gpus < 1 || rs.Model == "" || math.IsNaN(rs.ArrivalRate) || rs.ArrivalRate < 0 {
				t.Fatalf("spec %+v: run spec %v", specs[i], rs)
			}
		}
	})
}

// A node stopped once can be stopped again: Leave after Kill, or a second
// Leave, panicked in memberlist ("leave after shutdown").
func TestNodeStopTwice(t *testing.T) {
	tc := startCluster(t, 0, 0, testGPU, 1000)
	for i, c := range []struct {
		name        string
		first, then func(*Node)
	}{
		{"leave twice", (*Node).Leave, (*Node).Leave},
		{"kill then leave", (*Node).Kill, (*Node).Leave},
		{"leave then kill", (*Node).Leave, (*Node).Kill},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := tc.addNode(fmt.Sprintf("twice-%d", i), 1, testGPU, 1000)
			tc.nodes = tc.nodes[:len(tc.nodes)-1]
			c.first(n)
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("second stop panicked: %v", r)
				}
			}()
			c.then(n)
		})
	}
}

// A budget request off the network without a job spec is refused, naming
// the field: the device actor dereferenced the nil spec and crashed, the
// sender got no answer, and past its supervisor's 10 restarts in 10 s the
// device actor was stopped for good, taking the jobs it ran with it. The
// job already running there keeps running.
func TestDeviceRefusesBudgetRequestWithoutSpec(t *testing.T) {
	tc := startCluster(t, 1, 1, testGPU, 1)
	id := tc.submit(mlpSpec("keep", 1_000_000, 0))[0].ID
	tc.waitState(id, StateRunning, 30*time.Second)
	pid := tc.nodes[0].DevicePID(0)
	for i, req := range []*pb.BudgetRequest{
		{},
		{Demand: &pb.Demand{MinBudget: 1}, Job: &pb.ActorRef{Address: "x", Id: "y"}, DoneIterations: 3},
		{Spec: &pb.JobSpec{Model: "mlp", Kind: "train", Batch: 8, Iterations: 5}}, // no id
	} {
		for k := 0; k < 6; k++ { // more than the supervisor's 10 restarts in all
			r, err := tc.co.System().Root.RequestFuture(pid, req, 5*time.Second).Result()
			g, ok := r.(*pb.BudgetGrant)
			if err != nil || !ok || g.Accepted || !strings.Contains(g.Reason, "spec") {
				t.Fatalf("request %d (%v): answer %v, %v; want a refusal naming the spec", i, req, r, err)
			}
		}
	}
	d := tc.device("n1/gpu0")
	if d.Restarts != 0 || len(d.Jobs) != 1 || d.Jobs[0].JobId != id {
		t.Fatalf("device after the bad requests: %d restart(s), jobs %v; want none, and %s still there", d.Restarts, d.Jobs, id)
	}
	if r := tc.job(id); r.State != StateRunning {
		t.Fatalf("job %s is %s, want running", id, r.State)
	}
}

// rawMember is a gossip member that advertises meta as its metadata,
// whatever it holds (another version's, or garbage).
type rawMember struct{ meta []byte }

func (m rawMember) NodeMeta(int) []byte           { return m.meta }
func (rawMember) NotifyMsg([]byte)                {}
func (rawMember) GetBroadcasts(int, int) [][]byte { return nil }
func (rawMember) LocalState(bool) []byte          { return nil }
func (rawMember) MergeRemoteState([]byte, bool)   {}

// lockedBuffer is a log destination tests read while loggers write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A member whose gossip metadata the coordinator cannot use is ignored,
// with a log line that names it and the field: a GPU count of 100 000 made
// the coordinator create 100 000 GPUs for it (a count like 1<<40 runs it
// out of memory), a negative one or another version's "gpus": "4" joined a
// node with no GPUs, a missing actor address a node no job could reach,
// and metadata that is not JSON was dropped without a word. A good node
// joins as before.
func TestCoordinatorIgnoresBadNodeMeta(t *testing.T) {
	var logs lockedBuffer
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: DefaultPlanner(),
		log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	tc.startCoordinator()
	t.Cleanup(tc.stop)
	for _, c := range []struct{ name, meta, want string }{
		{"bad-huge", `{"name":"bad-huge","role":"node","addr":"127.0.0.1:1","gpus":100000,"type":"h100-80gb"}`, "gpus"},
		{"bad-neg", `{"name":"bad-neg","role":"node","addr":"127.0.0.1:1","gpus":-3,"type":"h100-80gb"}`, "gpus"},
		{"bad-old", `{"name":"bad-old","role":"node","addr":"127.0.0.1:1","gpus":"4","type":"h100-80gb"}`, "gpus"},
		{"bad-noaddr", `{"name":"bad-noaddr","role":"node","gpus":2,"type":"h100-80gb"}`, "addr"},
		{"bad-garbage", "\x00\xffnot json", "metadata"},
	} {
		cfg := transport.LANConfig()
		cfg.Name, cfg.BindAddr, cfg.BindPort, cfg.Label = c.name, "127.0.0.1", 0, tc.clusterName()
		cfg.Delegate = rawMember{meta: []byte(c.meta)}
		cfg.LogOutput = io.Discard
		ml, err := memberlist.Create(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ml.Shutdown() })
		if _, err := ml.Join([]string{tc.co.GossipAddr()}); err != nil {
			t.Fatal(err)
		}
		tc.waitFor(10*time.Second, "a log line about "+c.name+" naming "+c.want, func() bool {
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, c.name) && strings.Contains(l, c.want) {
					return true
				}
			}
			return false
		})
	}
	tc.addNode("good", 2, testGPU, 1000)
	gpus, err := tc.co.GPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 {
		t.Fatalf("%d GPUs (first %+v), want the good node's 2", len(gpus), gpus[0])
	}
	var nodes NodesReply
	if err := transport.Request(tc.nc, transport.VerbNodes, struct{}{}, &nodes, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].Name != "good" {
		t.Fatalf("nodes %+v, want only the good one", nodes.Nodes)
	}
	// A node agent does not start with more GPUs than the coordinator takes.
	if n, err := StartNode(NodeConfig{Name: "too-many", GPUs: MaxNodeGPUs + 1, Log: quiet}); err == nil || !strings.Contains(err.Error(), "1024") {
		if err == nil {
			n.Kill()
		}
		t.Fatalf("a node with %d GPUs: %v, want an error naming the limit", MaxNodeGPUs+1, err)
	}
}

// A node that cannot start (its metrics address is taken) never joins the
// cluster: it used to join the gossip first and then shut down, so the
// coordinator took its GPUs (placing waiting jobs there) until it was
// declared dead a few seconds later.
func TestNodeFailedStartNeverJoins(t *testing.T) {
	tc := startCluster(t, 0, 0, testGPU, 1000)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	n, err := StartNode(NodeConfig{Name: "bad", Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0", Join: []string{tc.co.GossipAddr()}, Cluster: tc.clusterName(),
		GPUs: 1, Profile: gpu.MustProfile(testGPU), Metrics: busy.Addr().String(), Log: quiet})
	if err == nil {
		n.Kill()
		t.Fatal("started with its metrics address taken")
	}
	if !strings.Contains(err.Error(), "metrics") {
		t.Fatalf("error %q does not name the metrics address", err)
	}
	// A start that fails later (its gossip address is taken) leaves its
	// metrics address free again.
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := ln.Addr().String()
	ln.Close()
	if n, err := StartNode(NodeConfig{Name: "bad", Listen: "127.0.0.1:0", Gossip: udp.LocalAddr().String(), Join: []string{tc.co.GossipAddr()}, Cluster: tc.clusterName(),
		GPUs: 1, Profile: gpu.MustProfile(testGPU), Metrics: metrics, Log: quiet}); err == nil {
		n.Kill()
		t.Fatal("started with its gossip address taken")
	}
	if ln, err := net.Listen("tcp", metrics); err != nil {
		t.Fatalf("metrics address still taken after the failed start: %v", err)
	} else {
		ln.Close()
	}
	// Members join in order: once a good node has joined, a join of the
	// bad one would have been seen.
	tc.addNode("good", 1, testGPU, 1000)
	tc.waitEvent("", transport.EvJoined, 10*time.Second, func(e transport.Event) bool { return e.Node == "good" })
	for _, e := range tc.eventsOf("", "") {
		if e.Node == "bad" {
			t.Errorf("event %s of the node that failed to start", e.Type)
		}
	}
}

// A coordinator whose external NATS server (--nats-url) cannot be reached
// says so and how to fix it; it used to suggest starting `coordinator serve`,
// the very command that failed.
func TestStartCoordinatorUnreachableNATS(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close() // nothing listens there now
	co, err := StartCoordinator(CoordinatorConfig{DataDir: t.TempDir(), NATSURL: url, Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0", Log: quiet})
	if err == nil {
		co.Stop()
		t.Fatal("started without its NATS server")
	}
	if msg := err.Error(); !strings.Contains(msg, "--nats-url") || !strings.Contains(msg, url) || strings.Contains(msg, "coordinator serve") {
		t.Fatalf("error %q; want one naming --nats-url and %s, not suggesting `coordinator serve`", msg, url)
	}
}

// A node joins the cluster only once its device actors exist. The node
// actor spawns them on its own goroutine; the node used to join the gossip
// without waiting, so on a loaded machine the coordinator could place a job
// whose device request went to a device not spawned yet (a dead letter)
// and requeue it. Here the spawns are held back until the coordinator lists
// the node's GPU, or 1 s: the coordinator must not list it in that time.
func TestNodeJoinsAfterItsDevicesExist(t *testing.T) {
	tc := startCluster(t, 0, 0, testGPU, 1000)
	seen := make(chan bool, 1)
	hold := func() {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			if g, _ := tc.co.GPUs(); slices.ContainsFunc(g, func(x GPUInfo) bool { return x.Node == "held" }) {
				seen <- true
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		seen <- false
	}
	tc.nodeConfig = func(c *NodeConfig) { c.beforeDeviceSpawn = hold }
	n := tc.addNode("held", 1, testGPU, 1000)
	if <-seen {
		t.Fatal("the coordinator listed the node's GPU before the node had spawned its device actor")
	}
	if _, ok := n.actors.System.ProcessRegistry.Get(n.DevicePID(0)); !ok {
		t.Fatal("device actor missing after StartNode returned")
	}
}
