package actors

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
)

// The metrics server's stop function returns promptly and closes every
// connection, also one that is open but has sent no request (a port probe,
// a scraper that connected and stalled): before, stop waited the full 2 s
// of its graceful shutdown for such a connection, and returned with it
// still open, so every node Leave and coordinator Stop could take 2 s more.
func TestMetricsStopClosesSilentConnection(t *testing.T) {
	m := NewNodeMetrics()
	stop, addr, err := ServeMetrics("127.0.0.1:0", m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer silent.Close()
	// The server accepts in order: once a scrape on a later connection
	// is answered, the silent one has been accepted and is tracked.
	scrape, err := net.Dial("tcp", addr)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer scrape.Close()
	if _, err := io.WriteString(scrape, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		stop()
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(scrape), nil)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		stop()
		t.Fatalf("scrape: %s", resp.Status)
	}

	start := time.Now()
	stop()
	if d := time.Since(start); d > time.Second {
		t.Errorf("stop took %v with a connection that sent no request; want well under a second", d.Round(time.Millisecond))
	}
	_ = silent.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the silent connection is still open after stop (read: %v)", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// gatedPlanner is DefaultPlanner whose PlanRound says on entered that it
// has begun and then waits for a token on gate: the test decides when
// each of a device's plans may be made. Once open is closed it no longer
// waits.
type gatedPlanner struct {
	*TensilePlanner
	entered, gate, open chan struct{}
}

func (g gatedPlanner) PlanRound(p gpu.Profile, jobs []tensorsched.Job) (*tensorsched.Result, error) {
	select {
	case g.entered <- struct{}{}:
	case <-g.open:
	}
	select {
	case <-g.gate:
	case <-g.open:
	}
	return g.TensilePlanner.PlanRound(p, jobs)
}

// gpusched_gpu_jobs counts the jobs of the plan in force, the jobs that
// run (as gpusched_gpu_memory_budgeted_bytes sums their budgets): a job
// admitted while its plan is being made waits, at no memory, and is not
// counted until that plan is installed. Before, the node's status handler
// and every install counted admitted jobs, so the gauge showed a job
// running on a GPU whose budgeted memory did not include it.
func TestNodeGPUJobsCountsRunningJobs(t *testing.T) {
	g := gatedPlanner{TensilePlanner: DefaultPlanner().(*TensilePlanner),
		entered: make(chan struct{}), gate: make(chan struct{}), open: make(chan struct{})}
	var once sync.Once
	open := func() { once.Do(func() { close(g.open) }) }
	n, err := StartNode(NodeConfig{Name: "metrics-jobs", Listen: "127.0.0.1:0", Gossip: "127.0.0.1:0", GPUs: 1,
		Profile: gpu.MustProfile(testGPU), TimeScale: 1, Log: quiet, Planner: g, Predictor: NewZooPredictor(DefaultPlanner())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open(); n.Kill() })
	gpuName := GPUName("metrics-jobs", 0)
	jobs := func() float64 { return gaugeValue(t, n.Metrics.Registry, "gpusched_gpu_jobs", gpuName) }
	budgeted := func() float64 {
		return gaugeValue(t, n.Metrics.Registry, "gpusched_gpu_memory_budgeted_bytes", gpuName)
	}
	status := func() *pb.DeviceStatus {
		t.Helper()
		s, err := n.Status(5 * time.Second)
		if err != nil || len(s.Devices) != 1 {
			t.Fatalf("node status: %v, %v", s, err)
		}
		return s.Devices[0]
	}
	waitVersion := func(v int64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); status().PlanVersion < v; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("plan version %d not installed", v)
			}
		}
	}
	admit := func(id string) {
		t.Helper()
		spec := &pb.JobSpec{Id: id, Model: "mlp", Kind: "train", Batch: 1024, BaseBatch: 1024, Iterations: 1 << 40, Tolerance: 0.2, Gpus: 1}
		res, err := n.System().Root.RequestFuture(n.DevicePID(0), &pb.BudgetRequest{Spec: spec}, 10*time.Second).Result()
		if g, ok := res.(*pb.BudgetGrant); err != nil || !ok || !g.Accepted {
			t.Fatalf("admission of %s: %v, %v", id, res, err)
		}
	}
	waiting := func() float64 {
		return gaugeValue(t, n.Metrics.Registry, "gpusched_gpu_jobs_waiting_for_plan", gpuName)
	}
	waitVersion(1) // the empty plan of the device's start
	plans := planCount(t, n.Metrics.Registry, gpuName)

	admit("a")
	<-g.entered // a's plan is being made
	admit("b")  // b waits for the next plan
	// Admissions are answered after the device published its metrics.
	if got := waiting(); got != 2 {
		t.Errorf("gpusched_gpu_jobs_waiting_for_plan %v while a's plan is made and b was admitted; want 2", got)
	}
	g.gate <- struct{}{}
	<-g.entered // a's plan is installed (version 2); a and b's is being made
	waitVersion(2)
	if got := waiting(); got != 1 {
		t.Errorf("gpusched_gpu_jobs_waiting_for_plan %v with a's plan installed and b's being made; want 1", got)
	}
	if got := planCount(t, n.Metrics.Registry, gpuName); got != plans+1 {
		t.Errorf("gpusched_gpu_plan_seconds counted %d plans after a's was installed; want %d", got, plans+1)
	}
	s := status()
	if s.PlanVersion != 2 || len(s.Jobs) != 2 {
		t.Fatalf("device status: plan version %d, %d jobs; want version 2 (a's plan), a and b", s.PlanVersion, len(s.Jobs))
	}
	if got := jobs(); got != 1 {
		t.Errorf("gpusched_gpu_jobs %v with a running and b waiting for its plan; want 1 (budgeted %v bytes, a's budget %d)",
			got, budgeted(), s.Jobs[0].Budget)
	}
	open()
	for deadline := time.Now().Add(20 * time.Second); jobs() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gpusched_gpu_jobs %v once both jobs' plan is installed, want 2", jobs())
		}
	}
	if got := waiting(); got != 0 {
		t.Errorf("gpusched_gpu_jobs_waiting_for_plan %v once both jobs' plan is installed; want 0", got)
	}
}

// planCount is how many plans gpusched_gpu_plan_seconds has observed for
// GPU label, as a scrape of reg reads it (0 when there is no series).
func planCount(t *testing.T, reg *prometheus.Registry, label string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gpusched_gpu_plan_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// gaugeValue is the value of gauge (or counter) name's series with any label set to
// label, as a scrape of reg reads it (-1 when there is none).
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// A bad or unusable --listen, --gossip or --metrics address of a node or
// the coordinator is refused with an error naming the flag and what to do:
// a malformed one before anything is started (the coordinator's embedded
// NATS store is not created, nor is it for an unusable --metrics), a taken
// or foreign one with a hint. Before,
// the errors said "actor remote: bad port", "gossip: cannot listen on ..."
// or "metrics on ...", none naming the flag to fix, and the coordinator
// started NATS, recovered its jobs and joined the gossip before it found
// that its --metrics address was malformed.
func TestAddressErrorsNameFlag(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	taken := tcp.Addr().String()
	type addrs struct{ listen, gossip, metrics string }
	ok := addrs{"127.0.0.1:0", "127.0.0.1:0", ""}
	cases := []struct {
		flag, addr, hint string
		malformed        bool
	}{
		{"--listen", "foo", "host:port", true},
		{"--listen", ":99999", "0..65535", true},
		{"--gossip", "foo", "host:port", true},
		{"--gossip", ":99999", "0..65535", true},
		{"--gossip", "1.2.3.4:80", "this machine", false},
		{"--gossip", taken, "taken", false},
		{"--metrics", "foo", "host:port", true},
		{"--metrics", ":99999", "0..65535", true},
		{"--metrics", "1.2.3.4:80", "this machine", false},
		{"--metrics", taken, "taken", false},
	}
	for _, c := range cases {
		a := ok
		switch c.flag {
		case "--listen":
			a.listen = c.addr
		case "--gossip":
			a.gossip = c.addr
		case "--metrics":
			a.metrics = c.addr
		}
		check := func(who string, err error) {
			t.Helper()
			if err == nil {
				t.Errorf("%s %s %s: started", who, c.flag, c.addr)
				return
			}
			if msg := err.Error(); !strings.Contains(msg, c.flag+" "+c.addr) && !strings.Contains(msg, c.flag+" \""+c.addr+"\"") ||
				!strings.Contains(msg, c.hint) {
				t.Errorf("%s %s %s: error %q, want one naming %s %s and saying %q", who, c.flag, c.addr, msg, c.flag, c.addr, c.hint)
			}
		}
		n, err := StartNode(NodeConfig{Name: "bad-addr", Listen: a.listen, Gossip: a.gossip, Metrics: a.metrics,
			GPUs: 1, Profile: gpu.MustProfile(testGPU), Log: quiet})
		if err == nil {
			n.Kill()
		}
		check("node", err)
		dir := t.TempDir()
		co, err := StartCoordinator(CoordinatorConfig{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: a.listen, Gossip: a.gossip,
			Metrics: a.metrics, Log: quiet})
		if err == nil {
			co.Stop()
		}
		check("coordinator", err)
		if _, serr := os.Stat(filepath.Join(dir, "jetstream")); serr == nil && (c.malformed || c.flag != "--listen") {
			t.Errorf("coordinator %s %s: the embedded NATS store was created before the address was refused", c.flag, c.addr)
		}
	}
}

// A device actor that restarts rebuilds its jobs from its ledger and
// re-plans them: until that plan is installed every job waits, and
// gpusched_gpu_jobs_waiting_for_plan says so. It kept the count of the
// plan in force before the crash (0 here) until the re-plan was installed.
func TestNodeJobsWaitingAfterDeviceRestart(t *testing.T) {
	tc, held, r := startRunningOnHeldPlans(t)
	waiting := func() float64 {
		return gaugeValue(t, tc.nodes[0].Metrics.Registry, "gpusched_gpu_jobs_waiting_for_plan", r.GPU)
	}
	if got := waiting(); got != 0 {
		t.Fatalf("gpusched_gpu_jobs_waiting_for_plan %v with a running in the plan in force; want 0", got)
	}
	restartDeviceHoldingPlans(t, tc, held)
	tc.waitFor(5*time.Second, "gpusched_gpu_jobs_waiting_for_plan counts a while the restarted device re-plans", func() bool { return waiting() == 1 })
	held.release()
	tc.waitFor(20*time.Second, "the re-plan is installed", func() bool { return waiting() == 0 })
}
