package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpusched/gpusched/transport"
)

// A --budget that is not a finite size, or too large for a byte count, is
// refused as such: it is not "below the job's persistent memory" (int64 of
// NaN or of an overflowing float is negative).
func TestPlanBudgetNotFiniteOrTooLarge(t *testing.T) {
	for _, s := range []string{"NaN", "NaNGiB", "1e30GiB", "1e19", "NaN%", "Inf%", "1e30%"} {
		_, err := parseBudget(s, 1<<30, 1<<20, 0, "")
		if err == nil {
			t.Errorf("--budget %s: accepted", s)
			continue
		}
		if strings.Contains(err.Error(), "below the job's persistent memory") || !strings.Contains(err.Error(), "--budget") ||
			!strings.Contains(err.Error(), s) {
			t.Errorf("--budget %s: error %q, want one naming --budget and the value, not a budget below the minimum", s, err)
		}
	}
	// A large but representable budget is still a budget.
	if b, err := parseBudget("1TiB", 1<<30, 1<<20, 0, ""); err != nil || b != 1<<40 {
		t.Errorf("--budget 1TiB: %d, %v", b, err)
	}
}

// --tolerance NaN or Inf is refused, as simulate refuses it.
func TestPlanToleranceNotFinite(t *testing.T) {
	for _, s := range []string{"NaN", "NaN%", "Inf", "inf%", "-Inf"} {
		_, _, err := runCoordinator(t, "plan", "--model", "mlp", "--batch", "1", "--tolerance", s)
		if err == nil || !strings.Contains(err.Error(), "--tolerance") {
			t.Errorf("plan --tolerance %s: error %v, want one naming --tolerance", s, err)
		}
	}
}

// A bare --tolerance above 1 is refused with the percentage to write ("10"
// ran a plan at 1000 %, while simulate and job specs refused it); above
// 100 % written as a percentage is taken, on plan and bench memory alike.
func TestToleranceBareAboveOne(t *testing.T) {
	for _, args := range [][]string{
		{"plan", "--model", "mlp", "--batch", "1", "--policy", "tensile"},
		{"bench", "memory", "--out", t.TempDir(), "--models", "mlp", "--batches", "2", "--copies", "1", "--copies-model", "mlp", "--policies", "tensile", "--equal-memory=false"},
	} {
		_, _, err := runCoordinator(t, append(args, "--tolerance", "10")...)
		if err == nil || !strings.Contains(err.Error(), "--tolerance") || !strings.Contains(err.Error(), `"10%"`) {
			t.Errorf("%s --tolerance 10: error %v, want one naming --tolerance and suggesting \"10%%\"", args[0], err)
		}
		if _, _, err := runCoordinator(t, append(args, "--tolerance", "150%")...); err != nil {
			t.Errorf("%s --tolerance 150%%: %v", args[0], err)
		}
	}
	if v, err := parseTolerance("--tolerance", " 0.25 ", false); err != nil || v != 0.25 {
		t.Errorf("0.25: %v, %v", v, err)
	}
}

// A duration flag given in seconds beyond what a time.Duration holds is
// refused, not wrapped to a negative duration.
func TestSecondsFlagOutOfRange(t *testing.T) {
	for _, v := range []string{"1e10", "9.3e9", "1e300", "-1e300"} {
		var s seconds
		err := s.Set(v)
		if err == nil {
			t.Errorf("seconds %s: accepted as %v", v, time.Duration(s))
			continue
		}
		if !strings.Contains(err.Error(), v) {
			t.Errorf("seconds %s: error %q does not name the value", v, err)
		}
	}
	var s seconds
	if err := s.Set("9e9"); err != nil || time.Duration(s).Seconds() != 9e9 {
		t.Errorf("seconds 9e9: %v, %v", time.Duration(s), err)
	}
}

// simulate --horizon must not be negative (0 is the policy's default); a
// negative one was silently taken as the default.
func TestSimulateNegativeHorizon(t *testing.T) {
	// The flags are checked before the workload is read.
	_, _, err := runCoordinator(t, "simulate", "--workload", "no-such-workload.csv", "--policy", "ones", "--horizon", "-5")
	if err == nil || !strings.Contains(err.Error(), "--horizon") {
		t.Fatalf("--horizon -5: error %v, want one naming --horizon", err)
	}
}

// simulate --interval has a floor: 1ns was accepted and ran a policy decision
// every nanosecond of virtual time, which never finishes a workload.
func TestSimulateIntervalFloor(t *testing.T) {
	for _, iv := range []string{"1ns", "0.5", "-1"} {
		_, _, err := runCoordinator(t, "simulate", "--workload", "no-such-workload.csv", "--policy", "fifo", "--interval", iv)
		if err == nil || !strings.Contains(err.Error(), "--interval") || !strings.Contains(err.Error(), "at least 1s") {
			t.Errorf("--interval %s: error %v, want one naming --interval and its floor", iv, err)
		}
	}
	_, _, err := runCoordinator(t, "simulate", "--workload", "no-such-workload.csv", "--policy", "fifo", "--interval", "1")
	if err == nil || strings.Contains(err.Error(), "--interval") {
		t.Fatalf("--interval 1: error %v, want the missing workload (the floor itself is allowed)", err)
	}
}

// simulate --gpus is bounded: 400 million GPUs ran the process out of
// memory building the cluster instead of answering with an error.
func TestSimulateGPUsBounded(t *testing.T) {
	_, _, err := runCoordinator(t, "simulate", "--workload", "no-such-workload.csv", "--policy", "fifo", "--gpus", "400000000")
	if err == nil || !strings.Contains(err.Error(), "--gpus") || !strings.Contains(err.Error(), "65536") {
		t.Fatalf("--gpus 400000000: error %v, want one naming --gpus and its limit", err)
	}
	_, _, err = runCoordinator(t, "simulate", "--workload", "no-such-workload.csv", "--policy", "fifo", "--gpus", "65536")
	if err == nil || strings.Contains(err.Error(), "--gpus") {
		t.Fatalf("--gpus 65536: error %v, want the missing workload (the limit itself is allowed)", err)
	}
}

// A progress event from the network whose iteration is beyond its total,
// negative, or large enough to overflow the bar's arithmetic draws a bar
// rather than panicking in strings.Repeat (submit --wait, watch).
func TestFormatProgressOutOfRange(t *testing.T) {
	for _, c := range []struct{ it, total int64 }{{30, 10}, {-5, 10}, {math.MaxInt64, math.MaxInt64}, {math.MaxInt64 / 2, 1}, {1, math.MinInt64}} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("iteration %d of %d: panic: %v", c.it, c.total, r)
				}
			}()
			for _, typ := range []string{transport.EvProgress, transport.EvCompleted} {
				s := formatProgress(transport.Event{Type: typ, Job: "j-1", Iteration: c.it, Total: c.total}, "a")
				if !strings.Contains(s, "j-1") {
					t.Errorf("iteration %d of %d: %q", c.it, c.total, s)
				}
			}
		}()
	}
}

// FuzzFormatProgress: any event the CLI reads from NATS formats without a
// panic.
func FuzzFormatProgress(f *testing.F) {
	for _, s := range []string{
		`{"seq":1,"type":"progress","job":"j-1","iteration":5,"total":10}`,
		`{"seq":2,"type":"completed","job":"j-1","iteration":12,"total":10}`,
		`{"type":"progress","job":"j-2","iteration":-3,"total":10}`,
		`{"type":"resized","job":"j-1","batch":8,"old_batch":4,"gpu_ids":["a","b"],"old_gpu_ids":["a"]}`,
		`{"type":"placed","job":"j-1","gpu":"n1/0","min_budget":-1,"vanilla_peak":9223372036854775807}`,
		`{"type":"started","job":"j-1","budget":-9223372036854775808}`,
		`{"type":"failed","job":"j-1","reason":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := transport.ParseEvent(data)
		if err != nil {
			return
		}
		_ = formatProgress(e, e.Name)
	})
}

// plan --batch is bounded as a spec's batch is: a batch large enough to
// overflow the graph's tensor sizes failed deep in the simulated device
// ("alloc of negative size") without naming the flag.
func TestPlanBatchTooLarge(t *testing.T) {
	_, _, err := runCoordinator(t, "plan", "--model", "vgg16", "--batch", "9000000000000000000")
	if err == nil || !strings.Contains(err.Error(), "--batch") || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("--batch 9e18: error %v, want one naming --batch and its limit", err)
	}
}

// fakeCoordinator serves each verb's API subject on an embedded NATS server
// with a fixed reply body, and returns the server's URL.
func fakeCoordinator(t *testing.T, replies map[string]string) string {
	t.Helper()
	handlers := map[string]func(*nats.Conn, *nats.Msg) string{}
	for verb, body := range replies {
		handlers[verb] = func(*nats.Conn, *nats.Msg) string { return body }
	}
	return fakeCoordinatorFunc(t, handlers)
}

// A client command given a reply it does not expect prints an error that
// says so: a job list or a node's device list with a null entry panicked
// (list, nodes), and a reply with no job in it printed an empty job
// ("job  (): ") or "cancelling  (, was )" and succeeded (status JOB,
// cancel), as did a submit whose reply named no job.
func TestClientUnexpectedReplies(t *testing.T) {
	for _, c := range []struct {
		reply string
		args  []string
		want  string
	}{
		{`{"jobs": [null]}`, []string{"list"}, "jobs[0]"},
		{`{"nodes": [{"name": "n1", "state": "alive", "devices": [null]}]}`, []string{"nodes"}, "devices[0]"},
		{`null`, []string{"status", "j-1"}, "empty reply"},
		{`{}`, []string{"status", "j-1"}, "no job"},
		{`{"jobs": {"running": 1}}`, []string{"status", "j-1"}, "no job"},
		{`null`, []string{"status"}, "empty reply"},
		{`{}`, []string{"cancel", "j-1"}, "no job"},
		{`{"jobs": []}`, []string{"submit", "../../examples/train-resnet50.yaml"}, "no job"},
		{`{"jobs": [{"name": "a"}]}`, []string{"submit", "../../examples/train-resnet50.yaml"}, "jobs[0]"},
	} {
		name := strings.Join(c.args, " ") + " ← " + c.reply
		verb := c.args[0]
		url := fakeCoordinator(t, map[string]string{verb: c.reply})
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: panic: %v", name, r)
				}
			}()
			_, _, err := runCoordinator(t, append(c.args, "--nats-url", url, "--timeout", "5s")...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %v, want one containing %q", name, err, c.want)
			}
		}()
	}
}
