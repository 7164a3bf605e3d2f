package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/placement"
)

// serve's and demo's --time-scale and --elastic-interval are refused with
// an error naming the flag before anything starts. A --time-scale of 0 was
// taken as 100 for the elastic loop (the nodes read 0 as real time, and
// demo ran its nodes at 1× while printing "time scale 0×"); a negative one
// or a negative --elastic-interval was refused by the elastic loop without
// naming the flag.
func TestServeDemoElasticFlagsNamed(t *testing.T) {
	// Nothing listens at this NATS URL and the spec file does not exist:
	// a value that got past the flag checks fails on those instead.
	serve := []string{"serve", "--nats-url", "nats://127.0.0.1:1", "--listen", "127.0.0.1:0", "--gossip", "127.0.0.1:0"}
	demo := []string{"demo", "--file", "no-such-spec.yaml"}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{append(serve, "--time-scale", "0"), "--time-scale"},
		{append(serve, "--time-scale", "-1"), "--time-scale"},
		{append(serve, "--elastic-interval", "-3"), "--elastic-interval"},
		{append(demo, "--time-scale", "0"), "--time-scale"},
		{append(demo, "--time-scale", "-2"), "--time-scale"},
		{append(demo, "--elastic-interval", "-3"), "--elastic-interval"},
		{append(serve, "--placement", "pack"), `invalid argument "pack" for "--placement" flag: unknown placement strategy "pack" (want binpack or spread)`},
		{append(demo, "--placement", "fewest"), `"--placement"`},
	} {
		_, _, err := runCoordinator(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%s: error %v, want one naming %s", strings.Join(c.args, " "), err, c.flag)
		}
	}
}

// serve reports every flag problem in one run, one line each (it took seven
// runs to learn of these seven), and an unknown --policy before it starts
// NATS, not after.
func TestServeFlagProblemsReportedTogether(t *testing.T) {
	_, _, err := runCoordinator(t, "serve", "--nats-url", "nats://127.0.0.1:1", "--listen", "127.0.0.1:0", "--gossip", "127.0.0.1:0",
		"--time-scale", "-1", "--elastic-interval", "-3", "--policy", "foo", "--move-cost", "-3", "--intra-node-gbs", "0", "--max-micro-steps", "0", "--tls-cert", "c.pem")
	want := []string{
		"serve: --time-scale -1:",
		"serve: --elastic-interval -3s:",
		`serve: --policy: unknown policy "foo" (want one of fifo, tiresias, ones)`,
		"serve: --intra-node-gbs: 0 must be a bandwidth",
		"serve: --move-cost -3s: must not be negative",
		"serve: --max-micro-steps 0: must be at least 1",
		"serve: missing --tls-key and --tls-ca",
	}
	if err == nil {
		t.Fatal("serve started with seven bad flags")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Errorf("%d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// --ones is checked before anything starts: an unknown key or a value out
// of range names the flag and the key, and --ones with another policy than
// ones is refused rather than ignored.
func TestONESFlagChecked(t *testing.T) {
	serve := []string{"serve", "--nats-url", "nats://127.0.0.1:1", "--listen", "127.0.0.1:0", "--gossip", "127.0.0.1:0"}
	demo := []string{"demo", "--file", "no-such-spec.yaml"}
	sim := []string{"simulate", "--workload", "no-such-workload.csv"}
	for _, base := range [][]string{serve, demo, sim} {
		for _, c := range []struct {
			extra []string
			want  []string
		}{
			{[]string{"--ones", "bogus=1"}, []string{"--ones", `unknown key "bogus"`, "hysteresis"}},
			{[]string{"--ones", "hold=-2"}, []string{"--ones", "hold=-2: out of range"}},
			{[]string{"--policy", "tiresias", "--ones", "hold=3"}, []string{"--ones hold=3 applies to --policy ones only"}},
		} {
			args := append(append([]string{}, base...), c.extra...)
			_, _, err := runCoordinator(t, args...)
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %v, want one containing %q", strings.Join(args, " "), err, w)
				}
			}
		}
	}
}

// simulate --ones reaches the policy: turning the hold, the reserve and the
// hysteresis off changes ONES's decisions on a workload (the first 40 jobs
// of workload-1), and the default settings written out give the default's
// result.
func TestSimulateONESFlagReachesPolicy(t *testing.T) {
	data, err := placement.FindDataDir(".")
	if err != nil {
		t.Skipf("measured profiles not available: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(data, "workloads", "workload-1.csv"))
	if err != nil {
		t.Fatal(err)
	}
	w := filepath.Join(t.TempDir(), "first40.csv")
	if err := os.WriteFile(w, []byte(strings.Join(strings.SplitN(string(src), "\n", 42)[:41], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	avg := func(extra ...string) float64 {
		t.Helper()
		r, _ := simulateJSON(t, append([]string{"--workload", w, "--apps", filepath.Join(data, "apps"), "--policy", "ones"}, extra...)...)
		if r.NumJobs != 40 {
			t.Fatalf("%d jobs, want 40", r.NumJobs)
		}
		return r.AvgJCT
	}
	def := avg()
	if same := avg("--ones", "hold=2,reserve=2,hysteresis=4,generations=1,population=16"); same != def {
		t.Errorf("the defaults written out: average %.1f s, default %.1f s", same, def)
	}
	if off := avg("--ones", "hold=0,reserve=0,hysteresis=0"); off == def {
		t.Errorf("hold, reserve and hysteresis off: same average %.1f s as the default", off)
	}
}

// serve's --listen and --gossip on every interface need --advertise, the
// address nodes are told; the error names the flag and the fix. Before,
// ":7600" was accepted and advertised as "[::]:7600". A bad --advertise is
// refused naming it.
func TestServeUnspecifiedHostNeedsAdvertise(t *testing.T) {
	// Nothing listens at this NATS URL: an address that got past the
	// checks fails on it instead (rather than serving until a signal).
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", ":7600", "--gossip", "127.0.0.1:0"}, `--listen ":7600" listens on every interface`},
		{[]string{"--listen", "127.0.0.1:0", "--gossip", "0.0.0.0:7946"}, "--advertise 10.0.0.5"},
		{[]string{"--listen", ":7600", "--gossip", ":7946", "--advertise", "node1"}, `bad --advertise "node1"`},
	} {
		args := append([]string{"serve", "--nats-url", "nats://127.0.0.1:1"}, c.args...)
		_, _, err := runCoordinator(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", strings.Join(args, " "), err, c.want)
		}
	}
}
