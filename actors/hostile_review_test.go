package actors

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/transport"
)

// What a device sends a job actor comes off the network. These tests send
// garbled messages straight to the job's actor, as a faulty or hostile
// device would, and check that the record, the store and the API keep what
// was accepted before, and that a log line names the GPU and the field.

// loggedCluster starts a coordinator whose log the test reads and one node
// of gpus test GPUs at time scale scale.
func loggedCluster(t *testing.T, gpus int, scale float64, ec ElasticConfig) (*testCluster, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	tc := &testCluster{t: t, dataDir: t.TempDir(), planner: DefaultPlanner(), elastic: ec,
		log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	t.Cleanup(tc.stop)
	tc.startCoordinator()
	tc.addNode("n1", gpus, testGPU, scale)
	return tc, logs
}

// logged reports whether a line of logs holds every one of words.
func logged(logs *lockedBuffer, words ...string) bool {
	for _, l := range strings.Split(logs.String(), "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}

// storedRecord is job id's record as the store has it.
func (tc *testCluster) storedRecord(id string) (*JobRecord, error) {
	b, err := tc.co.Store.Get(JobKey(id))
	if err != nil {
		return nil, err
	}
	return decodeRecord(b)
}

// barrierOrEnd is barrier, or the job's end (a job actor that ends stops
// and handles no more messages).
func (tc *testCluster) barrierOrEnd(id, gpuName string, budget int64, why string) {
	tc.t.Helper()
	tc.co.System().Root.Send(tc.co.JobPID(id), &pb.BudgetRevised{JobId: id, Gpu: gpuName, OldBudget: budget, NewBudget: budget, Reason: why})
	tc.waitFor(10*time.Second, "the job handled "+why+", or ended", func() bool {
		for _, e := range tc.eventsOf(id, "") {
			if e.Type == transport.EvResized && e.Reason == why || e.Type == transport.EvCompleted || e.Type == transport.EvFailed {
				return true
			}
		}
		return false
	})
}

// reportOf is a progress report that says what record r says.
func reportOf(r *JobRecord) *pb.Progress {
	return &pb.Progress{JobId: r.ID, Gpu: r.GPU, Iteration: r.Iteration, Total: r.Total, IterationSeconds: r.IterSeconds,
		PeakBytes: r.PeakBytes, SwappedBytes: r.SwappedBytes, Budget: r.Budget, PlanVersion: r.PlanVersion,
		PlanActions: r.PlanActions, VirtualSeconds: r.VirtualSeconds, Batch: int32(r.Batch)}
}

// A progress report with a garbled field is ignored, with a log line that
// names the GPU and the field; the job keeps its record. Before, the job
// actor copied every field into the record: a NaN or infinite iteration
// time made the record unencodable as JSON, so the store was given an empty
// value in its place (the job was lost at the next restart) and the status
// and list verbs failed; an iteration count going back or a total of 1 was
// taken as the job's checkpoint (a requeue restarted it from there), a
// report that said finished short of the total completed the job, negative
// byte counts and virtual time were recorded (the virtual time seeds an
// elastic job's attained service), and a report for another job was taken
// as this one's. A good report is still taken, and the job runs on.
func TestGarbledProgressKeepsRecord(t *testing.T) {
	tc, logs := loggedCluster(t, 1, 2, ElasticConfig{})
	id := tc.submit(mlpSpec("a", 100000, 0))[0].ID
	tc.waitFor(20*time.Second, "a runs with a measured iteration time", func() bool {
		r := tc.job(id)
		return r.State == StateRunning && r.Iteration > 0 && r.IterSeconds > 0 && r.VirtualSeconds > 0 && r.PeakBytes > 0
	})
	// The device is held: from the first barrier on, the job's only
	// reports are the test's.
	n := tc.nodes[0]
	resume := holdMailbox(t, n.System(), n.DevicePID(0))
	var once sync.Once
	t.Cleanup(func() { once.Do(resume) })
	r0 := tc.job(id)
	tc.barrier(id, r0.GPU, r0.Budget, "test: settle")
	r0, _ = tc.co.Job(id)
	total := r0.Total

	type check func(before, after *JobRecord) string
	seen := 0 // progress events published before the case
	finite := func(before, after *JobRecord) string {
		if math.IsNaN(after.IterSeconds) || math.IsInf(after.IterSeconds, 0) || after.IterSeconds < 0 ||
			math.IsNaN(after.VirtualSeconds) || math.IsInf(after.VirtualSeconds, 0) || after.VirtualSeconds < 0 {
			return fmt.Sprintf("iteration time %v, virtual time %v recorded", after.IterSeconds, after.VirtualSeconds)
		}
		return ""
	}
	kept := func(before, after *JobRecord) string {
		if after.Iteration < before.Iteration || after.Iteration > after.Total || after.Total != total {
			return fmt.Sprintf("iteration %d of %d recorded; was %d of %d", after.Iteration, after.Total, before.Iteration, total)
		}
		return ""
	}
	bytesOK := func(before, after *JobRecord) string {
		if after.PeakBytes < 0 || after.SwappedBytes < 0 || after.Budget < 0 {
			return fmt.Sprintf("peak %d, swapped %d, budget %d recorded", after.PeakBytes, after.SwappedBytes, after.Budget)
		}
		// The barrier's revision sets the budget again: the events show
		// whether the garbled one was taken meanwhile.
		for _, e := range tc.eventsOf(id, transport.EvProgress)[seen:] {
			if e.PeakBytes < 0 || e.Swapped < 0 || e.Budget < 0 {
				return fmt.Sprintf("progress published with peak %d, swapped %d, budget %d", e.PeakBytes, e.Swapped, e.Budget)
			}
		}
		return ""
	}
	const spoofed = 10007
	for _, c := range []struct {
		name, field string
		bad         func(p *pb.Progress)
		check       check
	}{
		{"another job's report", "job_id", func(p *pb.Progress) { p.JobId, p.Iteration = "j-999999", p.Iteration+spoofed }, func(before, after *JobRecord) string {
			if after.Iteration == before.Iteration+spoofed {
				return "another job's iteration count recorded"
			}
			return ""
		}},
		{"NaN iteration time", "iteration_seconds", func(p *pb.Progress) { p.IterationSeconds = math.NaN() }, finite},
		{"infinite iteration time", "iteration_seconds", func(p *pb.Progress) { p.IterationSeconds = math.Inf(1) }, finite},
		{"negative iteration time", "iteration_seconds", func(p *pb.Progress) { p.IterationSeconds = -1 }, finite},
		{"NaN virtual time", "virtual_seconds", func(p *pb.Progress) { p.VirtualSeconds = math.NaN() }, finite},
		{"negative virtual time", "virtual_seconds", func(p *pb.Progress) { p.VirtualSeconds = -1e6 }, finite},
		{"iteration going back", "iteration", func(p *pb.Progress) { p.Iteration = 0 }, kept},
		{"negative iteration", "iteration", func(p *pb.Progress) { p.Iteration = -5 }, kept},
		{"iteration beyond the total", "iteration", func(p *pb.Progress) { p.Iteration = p.Total + 1 }, kept},
		{"another total", "total", func(p *pb.Progress) { p.Total, p.Iteration = 1, 1 }, kept},
		{"negative peak", "peak_bytes", func(p *pb.Progress) { p.PeakBytes = -1 << 30 }, bytesOK},
		{"negative swapped bytes", "swapped_bytes", func(p *pb.Progress) { p.SwappedBytes = -1 }, bytesOK},
		{"negative budget", "budget", func(p *pb.Progress) { p.Budget = -1 << 40 }, bytesOK},
		// Last: before, it completed the job.
		{"finished short of the total", "finished", func(p *pb.Progress) { p.Finished = true }, func(before, after *JobRecord) string {
			if after.State != StateRunning {
				return fmt.Sprintf("job %s at iteration %d of %d", after.State, after.Iteration, after.Total)
			}
			return ""
		}},
	} {
		before, err := tc.co.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		seen = len(tc.eventsOf(id, transport.EvProgress))
		p := reportOf(before)
		c.bad(p)
		tc.co.System().Root.Send(tc.co.JobPID(id), p)
		tc.barrierOrEnd(id, before.GPU, before.Budget, "test: after "+c.name)
		after, err := tc.co.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		if why := c.check(before, after); why != "" {
			t.Errorf("%s: %s", c.name, why)
		}
		if s, err := tc.storedRecord(id); err != nil || s.State != after.State || s.Iteration != after.Iteration {
			t.Errorf("%s: the store's record: %+v, %v; want the job's, %s at %d", c.name, s, err, after.State, after.Iteration)
		}
		if !logged(logs, "n1/gpu0", id, "field="+c.field+" ") {
			t.Errorf("%s: no log line names the GPU, the job and %q", c.name, c.field)
		}
		if after.State != StateRunning {
			break
		}
		// Put back what was there (a report that says what the record
		// said before), in case the garbled one was taken.
		tc.co.System().Root.Send(tc.co.JobPID(id), reportOf(before))
		tc.barrier(id, before.GPU, before.Budget, "test: put back after "+c.name)
	}
	if t.Failed() {
		return
	}
	// A garbled budget revision is ignored too.
	before, _ := tc.co.Job(id)
	tc.co.System().Root.Send(tc.co.JobPID(id), &pb.BudgetRevised{JobId: id, Gpu: before.GPU, OldBudget: before.Budget, NewBudget: -1, Reason: "test: garbled"})
	tc.barrier(id, before.GPU, before.Budget, "test: after the garbled revision")
	if r, _ := tc.co.Job(id); r.Budget != before.Budget || !logged(logs, "n1/gpu0", id, "field=new_budget ") {
		t.Fatalf("after a revision to budget -1: budget %d (was %d); want it kept, and a log line naming new_budget", r.Budget, before.Budget)
	}
	// A good report is taken, the API answers, and the job runs on.
	good := reportOf(before)
	good.Iteration++
	tc.co.System().Root.Send(tc.co.JobPID(id), good)
	tc.barrier(id, before.GPU, before.Budget, "test: after a good report")
	if r, _ := tc.co.Job(id); r.Iteration != good.Iteration {
		t.Fatalf("a good report at iteration %d: record at %d", good.Iteration, r.Iteration)
	}
	var list ListReply
	if err := transport.Request(tc.nc, transport.VerbList, struct{}{}, &list, 5*time.Second); err != nil || len(list.Jobs) != 1 {
		t.Fatalf("list: %v, %v", list.Jobs, err)
	}
	once.Do(resume)
	tc.waitFor(20*time.Second, "a runs on", func() bool { r := tc.job(id); return r.State == StateRunning && r.Iteration > good.Iteration })
}
