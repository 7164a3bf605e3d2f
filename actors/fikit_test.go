package actors

import (
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/tensorsched/fikit"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

func mustGraph(t testing.TB, model string, kind workload.JobKind, batch int) *workload.Graph {
	t.Helper()
	g, err := zoo.Build(model, kind, batch, zoo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustRound(t *testing.T, p gpu.Profile, jobs []kernelJob, o kernelOptions) *kernelRound {
	t.Helper()
	r, err := runKernelRound(p, jobs, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A high-priority service next to low-priority training: under FIKIT the
// service runs within 5% of its exclusive speed and the training job still
// progresses in the service's gaps; priority-unaware streams slow the
// service down badly.
func TestKernelEngineHighPriorityNearExclusive(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	cases := []struct {
		name   string
		hp, lp kernelJob
	}{
		{"closed-loop resnet50 service + resnet50 training",
			kernelJob{Name: "serve", Graph: mustGraph(t, "resnet50", workload.Infer, 16), Priority: 9, PerRequest: 6e-3},
			kernelJob{Name: "train", Graph: mustGraph(t, "resnet50", workload.Train, 32), Priority: 0, PerIteration: 1.5e-3}},
		{"poisson bert-base service + vgg16 training",
			kernelJob{Name: "serve", Graph: mustGraph(t, "bert-base", workload.Infer, 8), Priority: 9, PerRequest: 2e-3, Rate: 50},
			kernelJob{Name: "train", Graph: mustGraph(t, "vgg16", workload.Train, 64), Priority: 0, PerIteration: 1.5e-3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			alone := mustRound(t, p, []kernelJob{c.hp}, kernelOptions{})
			lpAlone := mustRound(t, p, []kernelJob{c.lp}, kernelOptions{})
			both := mustRound(t, p, []kernelJob{c.hp, c.lp}, kernelOptions{})
			streams := mustRound(t, p, []kernelJob{c.hp, c.lp}, kernelOptions{Mode: fikit.Streams})
			hpA, hpF, hpS := alone.Jobs[0].IterationSeconds, both.Jobs[0].IterationSeconds, streams.Jobs[0].IterationSeconds
			lpA, lpF := lpAlone.Jobs[0].IterationSeconds, both.Jobs[1].IterationSeconds
			t.Logf("HP per request: alone %.2f ms, fikit %.2f ms (×%.3f), streams %.2f ms (×%.2f); LP per iteration: alone %.1f ms, fikit %.1f ms; gap fill %.2f",
				hpA*1e3, hpF*1e3, hpF/hpA, hpS*1e3, hpS/hpA, lpA*1e3, lpF*1e3, both.GapFill)
			if hpF > 1.05*hpA {
				t.Errorf("HP under fikit %.3f ms is more than 5%% above alone %.3f ms", hpF*1e3, hpA*1e3)
			}
			if math.IsInf(lpF, 0) || !(lpF > 0) {
				t.Errorf("LP made no progress under fikit (%v)", lpF)
			}
			if hpS < 1.3*hpF {
				t.Errorf("streams (%.3f ms) should slow HP far more than fikit (%.3f ms)", hpS*1e3, hpF*1e3)
			}
			again := mustRound(t, p, []kernelJob{c.hp, c.lp}, kernelOptions{})
			if again.Jobs[0] != both.Jobs[0] || again.Jobs[1] != both.Jobs[1] {
				t.Errorf("not deterministic: %+v then %+v", both.Jobs, again.Jobs)
			}
		})
	}
}

// The engine's memory readiness follows the plan: a job alone with a
// TENSILE plan under a tight budget runs as slowly as the executor says it
// does (swap-ins it waits for, recomputations), not at vanilla speed. With
// jitter off the two agree to the executor's own timing.
func TestKernelEngineFollowsMemoryPlan(t *testing.T) {
	if raceEnabled {
		t.Skip("plans ResNet-50 and BERT-base at their minimums on one goroutine: 24 s under the race detector")
	}
	p := gpu.MustProfile("h100-80gb")
	for _, c := range []struct {
		model string
		batch int
		tol   float64
	}{{"resnet50", 128, 0.2}, {"bert-base", 64, 0.2}} {
		g := mustGraph(t, c.model, workload.Train, c.batch)
		minB, _, err := tensorsched.MinBudget(g, p, c.tol)
		if err != nil {
			t.Fatal(err)
		}
		tj := []tensorsched.Job{{Name: c.model, Graph: g, Budget: minB}}
		if err := DefaultPlanner().Plan(p, tj); err != nil {
			t.Fatal(err)
		}
		ex, err := tensorsched.Execute(gpu.NewSim(p, gpu.SimOptions{}), tj, tensorsched.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		noJitter := kernelOptions{Jitter: -1, HostJitter: -1}
		planned := mustRound(t, p, []kernelJob{{Name: c.model, Graph: g, Plan: tj[0].Plan}}, noJitter).Jobs[0].IterationSeconds
		vanilla := mustRound(t, p, []kernelJob{{Name: c.model, Graph: g}}, noJitter).Jobs[0].IterationSeconds
		want := ex.Jobs[0].IterationSeconds
		t.Logf("%s: %d plan actions; executor %.2f ms, kernel engine %.2f ms, vanilla %.2f ms", c.model, len(tj[0].Plan.Actions), want*1e3, planned*1e3, vanilla*1e3)
		if math.Abs(planned/want-1) > 0.005 {
			t.Errorf("%s: kernel engine %.3f ms, executor %.3f ms: more than 0.5%% apart", c.model, planned*1e3, want*1e3)
		}
		if planned < vanilla*1.02 {
			t.Errorf("%s: the plan's stalls did not slow the engine (%.3f ms vs vanilla %.3f ms)", c.model, planned*1e3, vanilla*1e3)
		}
	}
}

// newTestDevice is a device actor driven directly, without an actor system
// or network: admit, re-plan and advance are called in the test.
func newTestDevice(t testing.TB, prof string) *deviceActor {
	t.Helper()
	d := &deviceActor{cfg: DeviceConfig{Node: "n", Profile: gpu.MustProfile(prof), TimeScale: 1,
		Predictor: NewZooPredictor(DefaultPlanner()), Planner: DefaultPlanner()}, led: newLedger(), name: "n/gpu0", log: quiet}
	d.jobs = map[string]*devJob{}
	return d
}

func admitSpec(t *testing.T, d *deviceActor, s *pb.JobSpec) *devJob {
	t.Helper()
	g := d.admit(nil, &pb.BudgetRequest{Spec: s})
	if !g.Accepted {
		t.Fatalf("%s refused: %s", s.Id, g.Reason)
	}
	return d.jobs[s.Id]
}

// The device's iteration engine end to end, without networking: a
// high-priority inference job and a low-priority training job share one GPU
// under their joint memory plan; the service keeps within 5% of its speed
// alone on the device and the training job still progresses.
func TestDeviceKernelDispatch(t *testing.T) {
	serve := &pb.JobSpec{Id: "j-1", Model: "resnet50", Kind: "infer", Batch: 16, BaseBatch: 16, Iterations: 100000, Priority: 9,
		Tolerance: 0.05, Gpus: 1, HostPerRequest: 6e-3}
	train := &pb.JobSpec{Id: "j-2", Model: "resnet50", Kind: "train", Batch: 32, BaseBatch: 32, Iterations: 100000, Priority: 0,
		Tolerance: 0.2, Gpus: 1, HostPerIteration: 1.5e-3}
	alone := newTestDevice(t, "h100-80gb")
	hpAlone := admitSpec(t, alone, serve).kernelSeconds()

	d := newTestDevice(t, "h100-80gb")
	hp := admitSpec(t, d, serve)
	lp := admitSpec(t, d, train)
	if !hp.kern.valid || !lp.kern.valid {
		t.Fatal("the kernel dispatcher did not run")
	}
	hpShared, lpShared := hp.kernelSeconds(), lp.kernelSeconds()
	t.Logf("service per request: alone %.2f ms, shared %.2f ms (×%.3f); training per iteration %.2f ms (memory round said %.2f ms)",
		hpAlone*1e3, hpShared*1e3, hpShared/hpAlone, lpShared*1e3, lp.res.IterationSeconds*1e3)
	if hpShared > 1.05*hpAlone {
		t.Errorf("service %.3f ms shared, %.3f ms alone: more than 5%% slower", hpShared*1e3, hpAlone*1e3)
	}
	if math.IsInf(lpShared, 0) || !(lpShared > 0) {
		t.Fatalf("training starved: %v", lpShared)
	}
	// Ten virtual seconds of progress at the measured speeds.
	for i := 0; i < 100; i++ {
		hp.advance(0.1)
		lp.advance(0.1)
	}
	if want := 10 / hpShared; math.Abs(hp.entry.done-want) > 1e-6*want {
		t.Errorf("service did %.2f requests, want %.2f", hp.entry.done, want)
	}
	if lp.entry.done < 1 {
		t.Errorf("training did %.2f iterations in 10 s", lp.entry.done)
	}
	p := d.progress(lp, false)
	if p.IterationSeconds != lpShared || p.Batch != 32 {
		t.Errorf("progress reports %v s at batch %d, want %v at 32", p.IterationSeconds, p.Batch, lpShared)
	}
}

// After a resize, until the plan for the new batch is installed, the device
// runs and reports the job at the new batch's predicted time, not at the
// time of the plan in force (made for the old batch): that time, reported
// under the new batch, would teach the elastic loop a wrong speed.
func TestResizedJobReportsNewBatchTime(t *testing.T) {
	spec := &pb.JobSpec{Id: "j-1", Model: "resnet50", Kind: "train", Batch: 16, BaseBatch: 16, Iterations: 100000,
		Tolerance: 0.2, Gpus: 1}
	d := newTestDevice(t, "h100-80gb")
	j := admitSpec(t, d, spec)
	old := j.kernelSeconds()
	if !j.kern.valid || old != j.kern.rate.IterationSeconds {
		t.Fatalf("batch 16: %v s, want the dispatcher's %v (valid %v)", old, j.kern.rate.IterationSeconds, j.kern.valid)
	}
	// What resize does before the device re-plans (elastic_device.go).
	big := proto.Clone(spec).(*pb.JobSpec)
	big.Batch = 64
	pred, err := d.cfg.Predictor.Predict(big, d.cfg.Profile.Name)
	if err != nil {
		t.Fatal(err)
	}
	j.entry.req.Spec, j.entry.req.Demand, j.pred = big, pred.Demand, pred
	want := pred.Demand.IterationSeconds
	if !(want > 2*old) {
		t.Fatalf("batch 64 predicted at %v s, batch 16 runs at %v s: want a clearly slower iteration", want, old)
	}
	p := d.progress(j, false)
	if p.Batch != 64 || p.IterationSeconds != want {
		t.Errorf("before the new plan: %v s at batch %d, want the prediction %v s at 64 (old plan: %v s)", p.IterationSeconds, p.Batch, want, old)
	}
	j.advance(10 * want)
	if got := j.entry.done; math.Abs(got-10*4) > 1e-6 {
		t.Errorf("10 predicted iterations at batch 64 advanced %v base iterations, want 40", got)
	}
	d.rebudget(nil, "test: resized")
	p = d.progress(j, false)
	if !j.kern.valid || p.Batch != 64 || p.IterationSeconds != j.kern.rate.IterationSeconds || p.IterationSeconds == old {
		t.Errorf("after the new plan: %v s at batch %d, want the dispatcher's %v s at 64", p.IterationSeconds, p.Batch, j.kern.rate.IterationSeconds)
	}
}

// A replica resized in place runs at a new iteration time: the pace its
// job actor set for the old batch (the slowest replica's time then) no
// longer holds, and until the job actor paces it anew the replica steps at
// its own time at the new batch, not at the old batch's pace.
func TestResizeDropsOldPace(t *testing.T) {
	spec := &pb.JobSpec{Id: "j-1", Model: "resnet50", Kind: "train", Batch: 64, BaseBatch: 128, Iterations: 100000,
		Tolerance: 0.2, Gpus: 1, Replicas: 2, SyncSeconds: 1e-3}
	d := newTestDevice(t, "h100-80gb")
	j := admitSpec(t, d, spec)
	j.pace = 1.1 * j.ownSeconds() // its job's slowest replica at batch 64
	old := j.pace
	if r := d.resize(nil, &pb.Resize{JobId: "j-1", Batch: 16, Replicas: 2, SyncSeconds: 1e-3}); !r.Accepted {
		t.Fatalf("resize refused: %s", r.Reason)
	}
	if step, own := j.stepSeconds(), j.ownSeconds(); step != own || !(own < old/2) {
		t.Errorf("at batch 16: steps at %v s, its own time %v s; want its own time, well below batch 64's pace %v s", step, own, old)
	}
}

// A device actor that crashes while a job it admitted still owes virtual
// time (its checkpoint-and-restart after an elastic move) keeps the debt
// across its restart, as it keeps how far the job got: the job makes no
// progress until the debt is paid, instead of skipping its restart.
func TestDeviceRestartKeepsRestartDebt(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	cfg := DeviceConfig{Node: "n", Profile: gpu.MustProfile(testGPU), TimeScale: 1000, Predictor: NewZooPredictor(DefaultPlanner()),
		Planner: DefaultPlanner(), Tick: 5 * time.Millisecond, ProgressEvery: time.Hour, Log: quiet}
	pid := sys.Root.Spawn(newDeviceProps(cfg, newLedger()))
	spec := &pb.JobSpec{Id: "j-1", Model: "mlp", Kind: "train", Batch: 4096, BaseBatch: 4096, Iterations: 1 << 40, Tolerance: 0.2, Gpus: 1}
	res, err := sys.Root.RequestFuture(pid, &pb.BudgetRequest{Spec: spec, DoneIterations: 100, RestartSeconds: 1e9}, 10*time.Second).Result()
	if g, ok := res.(*pb.BudgetGrant); err != nil || !ok || !g.Accepted {
		t.Fatalf("admission: %v, %v", res, err)
	}
	progress := func() *pb.Progress {
		t.Helper()
		res, err := sys.Root.RequestFuture(pid, &pb.Attach{JobId: "j-1"}, 10*time.Second).Result()
		r, ok := res.(*pb.AttachReply)
		if err != nil || !ok || !r.Known {
			t.Fatalf("attach: %v, %v", res, err)
		}
		return r.Progress
	}
	// runs waits until the job has run another 100 virtual seconds.
	runs := func(what string) *pb.Progress {
		t.Helper()
		from := progress().VirtualSeconds
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if p := progress(); p.VirtualSeconds > from+100 {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the job does not run", what)
			}
		}
	}
	if p := runs("before the crash"); p.Iteration != 100 {
		t.Fatalf("before the crash: iteration %d while it restarts, want 100", p.Iteration)
	}
	sys.Root.Send(pid, &pb.Crash{Reason: "test"})
	if p := runs("after the crash"); p.Iteration != 100 {
		t.Fatalf("after the device restarted: iteration %d after %.0f virtual seconds of its 1e9 s restart, want 100", p.Iteration, p.VirtualSeconds)
	}
}

// swapGraph is a two-kernel job (1 ms each) whose parameter (a copy of
// copySeconds each way) is swapped out after the first kernel and back in
// at the start of the next iteration or request.
func swapGraph(p gpu.Profile, kind workload.JobKind, name string, copySeconds float64) (*workload.Graph, *tensorsched.Plan) {
	g := &workload.Graph{Model: name, Kind: kind, Batch: 1,
		Tensors: []workload.Tensor{{ID: 0, Name: name + ".w", Bytes: int64(copySeconds * p.H2DBandwidth), Kind: workload.Param},
			{ID: 1, Name: name + ".a", Bytes: 1024, Kind: workload.Activation},
			{ID: 2, Name: name + ".b", Bytes: 1024, Kind: workload.Activation}},
		Ops: []workload.Op{{ID: 0, Name: name + ".op0", Kind: name + "-op0", Inputs: []int{0}, Outputs: []int{1}, MeasuredSeconds: 1e-3},
			{ID: 1, Name: name + ".op1", Kind: name + "-op1", Inputs: []int{1}, Outputs: []int{2}, MeasuredSeconds: 1e-3}}}
	plan := &tensorsched.Plan{Policy: "test", Actions: []tensorsched.Action{
		{Kind: tensorsched.SwapOut, Tensor: 0, After: 0, Before: -1},
		{Kind: tensorsched.SwapIn, Tensor: 0, After: -1, Before: 0}}}
	return g, plan
}

// The copy engines serve copies in the order they are issued. A service's
// swap-ins for its next request are issued when that request starts (after
// 20 ms of post- and 20 ms of pre-processing), not when the previous one
// ends: booked early, they held the host-to-device engine ahead of every
// copy the training job issued meanwhile, and the training job, alone 5 ms
// per iteration, ran at twice that.
func TestKernelEngineCopiesInIssueOrder(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	hg, hplan := swapGraph(p, workload.Infer, "serve", 2e-3)
	lg, lplan := swapGraph(p, workload.Train, "train", 2e-3)
	hp := kernelJob{Name: "serve", Graph: hg, Plan: hplan, Priority: 9, PerRequest: 40e-3}
	lp := kernelJob{Name: "train", Graph: lg, Plan: lplan, Priority: 0, PerIteration: 0.5e-3}
	exact := kernelOptions{Jitter: -1, HostJitter: -1}
	alone := mustRound(t, p, []kernelJob{lp}, exact).Jobs[0].IterationSeconds
	both := mustRound(t, p, []kernelJob{hp, lp}, exact)
	shared := both.Jobs[1].IterationSeconds
	t.Logf("training per iteration: alone %.3f ms, beside the service %.3f ms; service per request %.3f ms",
		alone*1e3, shared*1e3, both.Jobs[0].IterationSeconds*1e3)
	// The service's copies take at most 4 ms of the copy engines per 42 ms
	// request.
	if shared > 1.2*alone {
		t.Errorf("training %.3f ms per iteration beside the service, %.3f ms alone: its copies waited behind the service's next request", shared*1e3, alone*1e3)
	}
}
