// Package clustertest is gpusched's multi-process test harness: it runs a
// real `coordinator serve` and N `node` processes on loopback addresses,
// drives them through the coordinator CLI (submit, status, nodes) and the
// NATS event subjects, and injects faults by killing processes with SIGKILL.
//
// A test builds the binaries (or uses prebuilt ones), starts a cluster and
// waits on conditions, each wait bounded by its own deadline and by the
// harness's overall deadline:
//
//	h := clustertest.New(t, clustertest.Options{})
//	h.StartCoordinator()
//	n1 := h.StartNode("n1")
//	h.StartNode("n2")
//	jobs := h.SubmitYAML("name: a\nmodel: resnet50\nbatch: 32\niterations: 30000\n")
//	h.Kill(n1)
//	h.WaitNodeState("n1", "dead", 10*time.Second)
//	h.WaitJobState(jobs[0].ID, actors.StateCompleted, 30*time.Second)
//
// Every child process gets its own temporary directory (working directory
// and logs) and is killed when the test ends; the coordinator's JetStream
// data lives in one directory that its restarts share. Run the package's tests with
//
//	go test ./cluster-test/ -run TestClusterKillNode -v
package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/transport"
)

// BinDirEnv names an environment variable that points at a directory with
// prebuilt `coordinator` and `node` binaries (e.g. `make build` then
// GPUSCHED_BIN_DIR=$PWD/bin). Unset, the harness builds them with go build.
const BinDirEnv = "GPUSCHED_BIN_DIR"

// Options configure a Harness. The zero value builds the binaries into the
// test's temporary directory and bounds the whole run by DefaultDeadline.
type Options struct {
	// BinDir holds prebuilt coordinator and node binaries; empty uses
	// $GPUSCHED_BIN_DIR, or builds them.
	BinDir string
	// Deadline bounds everything the harness waits for, counted from New
	// after the binaries are ready (default DefaultDeadline).
	Deadline time.Duration
	// SameHost puts every process on 127.0.0.1 even where 127.0.0.x works.
	SameHost bool
}

// DefaultDeadline bounds a harness run after the binaries are built.
const DefaultDeadline = 90 * time.Second

// poll is how often waits re-check their condition.
const poll = 100 * time.Millisecond

// Harness runs a coordinator and nodes as child processes.
type Harness struct {
	t           testing.TB
	root        string // parent of the processes' directories
	coordBin    string
	nodeBin     string
	deadline    time.Time
	nodeHosts   bool // nodes on 127.0.0.2, 127.0.0.3, ...
	nodeCount   int
	procs       []*Process
	coordinator *Process
	// dataDir is the coordinator's data directory, the same for every
	// start, so a restarted coordinator recovers its jobs.
	dataDir string
	// cluster is the gossip cluster name of this harness's processes (see
	// New).
	cluster string

	// Addresses of the running coordinator (from its ready line).
	NATSURL    string
	ActorAddr  string
	GossipAddr string

	nc     *nats.Conn
	mu     sync.Mutex
	events []transport.Event
}

// Process is one child process of the harness.
type Process struct {
	// Name is the node name, or "coordinator".
	Name string
	// Dir is the process's own temporary directory: its working directory,
	// stdout.log and stderr.log.
	Dir string
	// Host is the loopback address its listeners bind.
	Host string
	// ActorAddr and GossipAddr are the addresses it reported when ready.
	ActorAddr  string
	GossipAddr string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's result, set before done closes
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid is the operating system's id of the process.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stderr returns what the process has written to its standard error so far.
func (p *Process) Stderr() string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, "stderr.log"))
	return string(b)
}

// New returns a harness whose processes are all killed when the test ends.
func New(t testing.TB, o Options) *Harness {
	t.Helper()
	h := &Harness{t: t}
	dir := o.BinDir
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir != "" {
		h.coordBin, h.nodeBin = filepath.Join(dir, "coordinator"), filepath.Join(dir, "node")
		for _, b := range []string{h.coordBin, h.nodeBin} {
			if _, err := os.Stat(b); err != nil {
				t.Fatalf("prebuilt binary missing: %v (run `make build`, or unset %s to build in the test)", err, BinDirEnv)
			}
		}
	} else {
		h.coordBin, h.nodeBin = Build(t, t.TempDir())
	}
	d := o.Deadline
	if d <= 0 {
		d = DefaultDeadline
	}
	h.deadline = time.Now().Add(d)
	h.nodeHosts = !o.SameHost && DistinctLoopback()
	// The processes' directories live under root, whose removal (registered
	// here, first) runs after Close has read their logs.
	h.root = t.TempDir()
	// A cluster name of its own (its directory is unique among concurrent
	// test processes): a node of this harness ignores the gossip of
	// another test's cluster whose stopped member used the same port.
	sum := fnv.New64a()
	sum.Write([]byte(h.root))
	h.cluster = fmt.Sprintf("h-%d-%x", os.Getpid(), sum.Sum64())
	t.Cleanup(h.Close)
	return h
}

// Build compiles bin/coordinator and bin/node of this module into dir with
// `go build` and returns their paths, failing the test if either does not
// build. It works from a clean checkout. When the test runs under -race the
// binaries are built with -race as well, and a data race that a process
// reports on its stderr fails the test (see Close).
func Build(t testing.TB, dir string) (coordinator, node string) {
	t.Helper()
	start := time.Now()
	coordinator, node, err := BuildBinaries(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built coordinator and node in %s", time.Since(start).Round(time.Millisecond))
	return coordinator, node
}

// BuildBinaries is Build without a test: it runs `go build` (with -race
// when this test binary has the race detector) for cmd/coordinator and
// cmd/node, 5 minutes at most, and returns their paths.
func BuildBinaries(dir string) (coordinator, node string, err error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, name := range []string{"coordinator", "node"} {
		args := []string{"build", "-o", filepath.Join(dir, name)}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.CommandContext(ctx, goBin, append(args, "github.com/gpusched/gpusched/cmd/"+name)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, b)
		}
	}
	return filepath.Join(dir, "coordinator"), filepath.Join(dir, "node"), nil
}

// DistinctLoopback reports whether this machine routes 127.0.0.2 to itself
// without extra set-up (Linux does; macOS needs an alias), by binding a TCP
// and a UDP socket there and connecting to the TCP one.
func DistinctLoopback() bool {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", "127.0.0.2:0")
	if err != nil {
		return false
	}
	_ = u.Close()
	c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// remaining is how long until the harness's overall deadline, capped at d.
func (h *Harness) remaining(d time.Duration) time.Duration {
	if r := time.Until(h.deadline); r < d {
		return r
	}
	return d
}

// WaitFor polls cond until it reports true, failing the test after timeout
// (or at the harness's deadline) with what it waited for and the last
// status cond returned.
func (h *Harness) WaitFor(timeout time.Duration, what string, cond func() (bool, string)) {
	h.t.Helper()
	timeout = h.remaining(timeout)
	end := time.Now().Add(timeout)
	for {
		ok, status := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			h.t.Fatalf("timed out after %s waiting for %s (last: %s)", timeout.Round(time.Millisecond), what, status)
		}
		time.Sleep(poll)
	}
}

// start launches bin with args in a fresh directory and waits for its ready
// line on stderr, returning the line's submatches of ready.
func (h *Harness) start(name, host, bin string, ready *regexp.Regexp, args ...string) (*Process, []string) {
	h.t.Helper()
	p := h.launch(name, host, bin, args...)
	var m []string
	h.WaitFor(30*time.Second, name+" to report ready", func() (bool, string) {
		if m = ready.FindStringSubmatch(p.Stderr()); m != nil {
			return true, ""
		}
		if p.Exited() {
			h.t.Fatalf("%s exited before it was ready (%v):\n%s", name, p.err, tail(p.Stderr(), 20))
		}
		return false, "no ready line yet"
	})
	return p, m
}

// launch starts bin with args in a fresh directory, its output going to
// the directory's stdout.log and stderr.log.
func (h *Harness) launch(name, host, bin string, args ...string) *Process {
	h.t.Helper()
	dir, err := os.MkdirTemp(h.root, name+"-")
	if err != nil {
		h.t.Fatal(err)
	}
	p := &Process{Name: name, Dir: dir, Host: host, done: make(chan struct{})}
	stdout, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		h.t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		h.t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	if err := p.cmd.Start(); err != nil {
		h.t.Fatalf("start %s: %v", name, err)
	}
	h.procs = append(h.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		_ = stdout.Close()
		_ = stderr.Close()
		close(p.done)
	}()
	return p
}

var (
	coordReady = regexp.MustCompile(`coordinator ready: NATS (\S+), actors (\S+), gossip ([^\s,]+)`)
	nodeReady  = regexp.MustCompile(`node \S+ ready: .*actors (\S+), gossip ([^\s,]+)`)
)

// StartCoordinator runs `coordinator serve` on 127.0.0.1 with free ports for
// NATS, actors and gossip and the harness's coordinator data directory (a
// coordinator started after the previous one exited recovers its jobs);
// args are added after the defaults (a repeated flag overrides one). It
// waits until the coordinator is ready and subscribes to its events.
func (h *Harness) StartCoordinator(args ...string) *Process {
	h.t.Helper()
	if h.coordinator != nil && !h.coordinator.Exited() {
		h.t.Fatal("a coordinator is already running")
	}
	if h.dataDir == "" {
		h.dataDir = filepath.Join(h.root, "coordinator-data")
	}
	full := append([]string{"serve", "--data-dir", h.dataDir, "--nats-listen", "127.0.0.1:0",
		"--listen", "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--cluster", h.cluster}, args...)
	p, m := h.start("coordinator", "127.0.0.1", h.coordBin, coordReady, full...)
	p.ActorAddr, p.GossipAddr = m[2], m[3]
	h.coordinator = p
	h.NATSURL, h.ActorAddr, h.GossipAddr = m[1], m[2], m[3]
	if h.nc != nil {
		h.nc.Close()
	}
	// The coordinator takes --nats-token from the environment it inherits.
	nc, err := transport.Connect(h.NATSURL, "gpusched-cluster-test", nats.Token(os.Getenv(transport.NATSTokenEnv)))
	if err != nil {
		h.t.Fatal(err)
	}
	h.nc = nc
	if _, err := nc.Subscribe(transport.AllEvents, func(msg *nats.Msg) {
		if e, err := transport.ParseEvent(msg.Data); err == nil {
			h.mu.Lock()
			h.events = append(h.events, e)
			h.mu.Unlock()
		}
	}); err != nil {
		h.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// NodeHost is the loopback address the i-th node (from 0) binds:
// 127.0.0.(i+2) where this machine routes 127.0.0.x, else 127.0.0.1.
func (h *Harness) NodeHost(i int) string {
	if !h.nodeHosts || i > 250 {
		return "127.0.0.1"
	}
	return fmt.Sprintf("127.0.0.%d", i+2)
}

// StartNode runs a node named name with one simulated h100-80gb GPU at
// time scale 100 on its own loopback address and free ports, joined to the
// coordinator; args are added after the defaults (e.g. "--gpus", "sim:2").
// It returns once `coordinator nodes` lists the node alive with its GPUs.
func (h *Harness) StartNode(name string, args ...string) *Process {
	h.t.Helper()
	if h.coordinator == nil {
		h.t.Fatal("StartNode before StartCoordinator")
	}
	host := h.NodeHost(h.nodeCount)
	h.nodeCount++
	return h.startNode(name, host, net.JoinHostPort(host, "0"), net.JoinHostPort(host, "0"), args...)
}

// RestartNode starts node p (which must have exited, e.g. by Kill) again
// under the same name, host, actor address and gossip address, as a
// supervisor restarting it with the same configuration would; args are
// added after the defaults, as for StartNode. It returns once `coordinator
// nodes` lists the node alive with its GPUs, which may still be the old
// process's entry: the caller waits for what it expects to follow.
func (h *Harness) RestartNode(p *Process, args ...string) *Process {
	h.t.Helper()
	if !p.Exited() {
		h.t.Fatalf("RestartNode %s: pid %d is still running", p.Name, p.Pid())
	}
	return h.startNode(p.Name, p.Host, p.ActorAddr, p.GossipAddr, args...)
}

// StartNodeFails runs a node as StartNode does and expects it to refuse to
// start: it waits until the process exits (failing the test if it reports
// ready, or exits with status 0) and returns its standard error.
func (h *Harness) StartNodeFails(name string, args ...string) string {
	h.t.Helper()
	if h.coordinator == nil {
		h.t.Fatal("StartNodeFails before StartCoordinator")
	}
	host := h.NodeHost(h.nodeCount)
	h.nodeCount++
	p := h.launch(name, host, h.nodeBin, h.nodeArgs(name, net.JoinHostPort(host, "0"), net.JoinHostPort(host, "0"), args...)...)
	h.WaitFor(30*time.Second, name+" to refuse to start", func() (bool, string) {
		if nodeReady.MatchString(p.Stderr()) {
			h.t.Fatalf("%s started, want it refused:\n%s", name, tail(p.Stderr(), 20))
		}
		return p.Exited(), "still running"
	})
	if p.err == nil {
		h.t.Fatalf("%s exited with status 0, want a failure:\n%s", name, tail(p.Stderr(), 20))
	}
	return p.Stderr()
}

// nodeArgs are a node's command-line arguments: the harness's defaults,
// then args.
func (h *Harness) nodeArgs(name, listen, gossip string, args ...string) []string {
	return append([]string{"--name", name, "--coordinator", h.ActorAddr, "--join", h.GossipAddr,
		"--gpus", "sim:1", "--device", "h100-80gb", "--time-scale", "100",
		"--listen", listen, "--gossip", gossip, "--cluster", h.cluster}, args...)
}

func (h *Harness) startNode(name, host, listen, gossip string, args ...string) *Process {
	h.t.Helper()
	p, m := h.start(name, host, h.nodeBin, nodeReady, h.nodeArgs(name, listen, gossip, args...)...)
	p.ActorAddr, p.GossipAddr = m[1], m[2]
	h.WaitFor(30*time.Second, "node "+name+" to be listed alive with its GPUs", func() (bool, string) {
		n, err := h.Node(name)
		if err != nil {
			return false, err.Error()
		}
		return n.State == "alive" && n.GPUs > 0 && len(n.Devices) == n.GPUs, fmt.Sprintf("state %s, %d of %d devices", n.State, len(n.Devices), n.GPUs)
	})
	return p
}

// Kill ends p with SIGKILL (no graceful leave: the others must notice
// through gossip) and waits until it has exited. It returns when it sent
// the signal.
func (h *Harness) Kill(p *Process) time.Time {
	h.t.Helper()
	at := time.Now()
	if err := p.cmd.Process.Kill(); err != nil && !p.Exited() {
		h.t.Fatalf("kill %s: %v", p.Name, err)
	}
	h.waitExit(p)
	return at
}

// Stop asks p to shut down (SIGTERM: a node leaves the cluster gracefully)
// and waits until it has exited.
func (h *Harness) Stop(p *Process) {
	h.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.Exited() {
		h.t.Fatalf("SIGTERM %s: %v", p.Name, err)
	}
	h.waitExit(p)
}

func (h *Harness) waitExit(p *Process) {
	h.t.Helper()
	select {
	case <-p.done:
	case <-time.After(h.remaining(15 * time.Second)):
		h.t.Fatalf("%s (pid %d) did not exit", p.Name, p.Pid())
	}
}

// Close kills every process still running and waits for them. A process
// whose stderr holds a race detector report fails the test (binaries built
// with -race print one and go on); when the test failed it logs the end of
// each process's stderr. New registers Close with t.Cleanup.
func (h *Harness) Close() {
	if h.nc != nil {
		h.nc.Close()
		h.nc = nil
	}
	for _, p := range h.procs {
		if !p.Exited() {
			_ = p.cmd.Process.Kill()
		}
	}
	if h.t.Failed() {
		h.t.Logf("--- events seen:\n%s", h.EventLog())
	}
	for _, p := range h.procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			h.t.Errorf("%s (pid %d) still running after SIGKILL", p.Name, p.Pid())
		}
		if i := strings.Index(p.Stderr(), "WARNING: DATA RACE"); i >= 0 {
			h.t.Errorf("%s reported a data race (%s):\n%s", p.Name, filepath.Join(p.Dir, "stderr.log"), head(p.Stderr()[i:], 60))
		}
		if h.t.Failed() {
			h.t.Logf("--- %s (%s) stderr, last lines:\n%s", p.Name, p.Dir, tail(p.Stderr(), 30))
		}
	}
	h.procs = nil
}

// CLI runs `coordinator ARGS... --nats-url <the harness's NATS>` and returns
// its standard output, or an error carrying its standard error.
func (h *Harness) CLI(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.remaining(30*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, h.coordBin, append(args, "--nats-url", h.NATSURL)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("coordinator %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// CLIJSON runs a CLI command with --json and decodes its output into v.
func (h *Harness) CLIJSON(v any, args ...string) error {
	out, err := h.CLI(append(args, "--json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("coordinator %s --json: %v in %q", strings.Join(args, " "), err, tail(string(out), 5))
	}
	return nil
}

// Submit runs `coordinator submit FILE --json` and returns the accepted jobs.
func (h *Harness) Submit(file string) []actors.SubmittedJob {
	h.t.Helper()
	var rep actors.SubmitReply
	if err := h.CLIJSON(&rep, "submit", file); err != nil {
		h.t.Fatal(err)
	}
	if len(rep.Jobs) == 0 {
		h.t.Fatalf("submit %s: no jobs accepted", file)
	}
	return rep.Jobs
}

// SubmitYAML writes a spec to a file and submits it.
func (h *Harness) SubmitYAML(spec string) []actors.SubmittedJob {
	h.t.Helper()
	f, err := os.CreateTemp(h.t.TempDir(), "jobs-*.yaml")
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := f.WriteString(spec); err != nil {
		h.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		h.t.Fatal(err)
	}
	return h.Submit(f.Name())
}

// Job returns a job's record from `coordinator status JOB --json`.
func (h *Harness) Job(id string) (actors.JobRecord, error) {
	var r actors.JobRecord
	err := h.CLIJSON(&r, "status", id)
	return r, err
}

// WaitJob polls a job's record until cond holds.
func (h *Harness) WaitJob(id string, timeout time.Duration, what string, cond func(actors.JobRecord) bool) actors.JobRecord {
	h.t.Helper()
	var r actors.JobRecord
	h.WaitFor(timeout, "job "+id+" "+what, func() (bool, string) {
		var err error
		if r, err = h.Job(id); err != nil {
			return false, err.Error()
		}
		return cond(r), describe(r)
	})
	return r
}

// WaitJobState waits until a job is in state s. It fails at once if the job
// ends in another terminal state.
func (h *Harness) WaitJobState(id string, s actors.JobState, timeout time.Duration) actors.JobRecord {
	h.t.Helper()
	return h.WaitJob(id, timeout, string(s), func(r actors.JobRecord) bool {
		if r.State != s && r.State.Terminal() {
			h.t.Fatalf("job %s ended %s while waiting for %s: %s", id, r.State, s, describe(r))
		}
		return r.State == s
	})
}

func describe(r actors.JobRecord) string {
	s := fmt.Sprintf("%s on %q, %d/%d iterations, attempt %d", r.State, r.GPU, r.Iteration, r.Total, r.Attempt)
	if r.Reason != "" {
		s += ", reason: " + r.Reason
	}
	return s
}

// Nodes returns `coordinator nodes --json`.
func (h *Harness) Nodes() ([]actors.NodeReport, error) {
	var r actors.NodesReply
	err := h.CLIJSON(&r, "nodes")
	return r.Nodes, err
}

// Node returns one node from `coordinator nodes --json`.
func (h *Harness) Node(name string) (actors.NodeReport, error) {
	nodes, err := h.Nodes()
	if err != nil {
		return actors.NodeReport{}, err
	}
	for _, n := range nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return actors.NodeReport{}, fmt.Errorf("node %s not listed (%d nodes)", name, len(nodes))
}

// WaitNodeState waits until `coordinator nodes` shows the node in state
// (alive, suspect, dead or left).
func (h *Harness) WaitNodeState(name, state string, timeout time.Duration) actors.NodeReport {
	h.t.Helper()
	var n actors.NodeReport
	h.WaitFor(timeout, "node "+name+" "+state, func() (bool, string) {
		var err error
		if n, err = h.Node(name); err != nil {
			return false, err.Error()
		}
		return n.State == state, "state " + n.State
	})
	return n
}

// Events returns the events seen on gpusched.events.> since the coordinator
// started, filtered by job id and type ("" matches any). Node events have
// no job id: pass "" and filter on Node.
func (h *Harness) Events(job, typ string) []transport.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []transport.Event
	for _, e := range h.events {
		if (job == "" || e.Job == job) && (typ == "" || e.Type == typ) {
			out = append(out, e)
		}
	}
	return out
}

// EventLog lists the events seen, one a line, leaving out progress events
// but ending with a line per job that counts them and gives the last one.
func (h *Harness) EventLog() string {
	var b strings.Builder
	type prog struct {
		n    int
		last transport.Event
	}
	progress := map[string]*prog{}
	var order []string
	for _, e := range h.Events("", "") {
		if e.Type == transport.EvProgress {
			p := progress[e.Job]
			if p == nil {
				p = &prog{}
				progress[e.Job] = p
				order = append(order, e.Job)
			}
			p.n++
			p.last = e
			continue
		}
		fmt.Fprintf(&b, "  #%d %s %s", e.Seq, e.Time.Format("15:04:05.000"), e.Type)
		if e.Job != "" {
			fmt.Fprintf(&b, " job %s", e.Job)
		}
		if e.Node != "" {
			fmt.Fprintf(&b, " node %s", e.Node)
		}
		if e.GPU != "" {
			fmt.Fprintf(&b, " gpu %s", e.GPU)
		}
		if e.Total > 0 {
			fmt.Fprintf(&b, " %d/%d", e.Iteration, e.Total)
		}
		if e.Attempt > 0 {
			fmt.Fprintf(&b, " attempt %d", e.Attempt)
		}
		if e.Reason != "" {
			fmt.Fprintf(&b, " (%s)", e.Reason)
		}
		b.WriteByte('\n')
	}
	for _, j := range order {
		p := progress[j]
		fmt.Fprintf(&b, "  job %s: %d progress event(s), the last #%d at %s on %s, %d/%d\n", j, p.n, p.last.Seq,
			p.last.Time.Format("15:04:05.000"), p.last.GPU, p.last.Iteration, p.last.Total)
	}
	return b.String()
}

// WaitEvent waits for the first event of a type matching match; what
// describes it in a timeout's message.
func (h *Harness) WaitEvent(typ string, timeout time.Duration, what string, match func(transport.Event) bool) transport.Event {
	h.t.Helper()
	var got transport.Event
	h.WaitFor(timeout, what, func() (bool, string) {
		for _, e := range h.Events("", typ) {
			if match == nil || match(e) {
				got = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events so far", len(h.Events("", "")))
	})
	return got
}

func head(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
