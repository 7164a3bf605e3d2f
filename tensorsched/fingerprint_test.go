package tensorsched

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// planFingerprint is a canonical dump of a plan and its stats (the
// planning time left out): two plannings that agree on it made the same
// decisions.
func planFingerprint(plans []*Plan, st any, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "err=%v\n", err)
	// JSON writes floats exactly (shortest round trip); map keys sorted.
	js, _ := json.Marshal(st)
	var m any
	if e := json.Unmarshal(js, &m); e != nil {
		panic(e)
	}
	js, _ = json.Marshal(dropPlanning(m))
	fmt.Fprintf(&b, "stats=%s\n", js)
	for j, p := range plans {
		if p == nil {
			fmt.Fprintf(&b, "job %d: nil\n", j)
			continue
		}
		fmt.Fprintf(&b, "job %d %s:", j, p.Policy)
		for _, a := range p.Actions {
			fmt.Fprintf(&b, " %d/%d/%d/%d", a.Kind, a.Tensor, a.After, a.Before)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// dropPlanning removes the planning times from a decoded JSON value.
func dropPlanning(v any) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "planning_ns")
		for k := range x {
			x[k] = dropPlanning(x[k])
		}
	case []any:
		for i := range x {
			x[i] = dropPlanning(x[i])
		}
	}
	return v
}

// updateFingerprints rewrites the golden fingerprints instead of comparing.
var updateFingerprints = flag.Bool("update-fingerprints", false,
	"rewrite "+goldenFingerprints+" with this tree's plan fingerprints")

// goldenFingerprints holds the fingerprints of the planner's decisions.
const goldenFingerprints = "testdata/plan_fingerprints.txt"

// TestPlanFingerprints plans the MSR table's models and a few more and
// compares a hash of each plan's canonical dump with the golden file, so a
// change that alters any planning decision (a speed-up meant to change
// nothing, a refactor, a cache) fails here, naming the plans it changed.
// A change meant to alter plans rewrites the file with
// -update-fingerprints (and says in its commit what moved and why).
// $PLAN_FINGERPRINTS, when set, also receives the lines and, in
// $PLAN_FINGERPRINTS.dump, every plan's full dump, to diff two trees.
// The hashes are of float results, so they are compared on amd64 builds
// that do not fuse multiply-adds (GOAMD64 v1/v2) only. fusesMultiplyAdd asks
// the compiled code itself: GOAMD64 set with `go env -w` compiles with fused
// multiply-adds but leaves the environment (and, in Go 1.26, the amd64.v3
// build tag) unset.
// Operands of fusesMultiplyAdd, variables so the compiler cannot fold them.
var fmaX, fmaY, fmaZ = 1 + 0x1p-30, 1 - 0x1p-30, -1.0

// mulAdd is x*y+z in registers (with memory operands the compiler does not
// fuse, so the probe passes arguments).
//
//go:noinline
func mulAdd(x, y, z float64) float64 { return x*y + z }

// fusesMultiplyAdd reports whether this package's code computes x*y+z with
// one rounding: x*y = 1 - 2^-60 exactly, which rounds to 1 on its own.
func fusesMultiplyAdd() bool { return mulAdd(fmaX, fmaY, fmaZ) != 0 }

func TestPlanFingerprints(t *testing.T) {
	if runtime.GOARCH != "amd64" || fusesMultiplyAdd() {
		t.Skipf("golden plan fingerprints are recorded on amd64 without fused multiply-add (this build: GOARCH=%s, fused=%v)", runtime.GOARCH, fusesMultiplyAdd())
	}
	if raceEnabled && !*updateFingerprints && os.Getenv("PLAN_FINGERPRINTS") == "" {
		t.Skip("34 plannings take a minute under -race; the plain run compares them")
	}
	var lines, dumps []string
	add := func(name, fp string) {
		dumps = append(dumps, "== "+name+"\n"+fp)
		h := sha256.Sum256([]byte(fp))
		lines = append(lines, fmt.Sprintf("%-50s %x", name, h[:12]))
	}
	for _, dev := range []string{"rtx2080ti-11gb", "h100-80gb"} {
		p := gpu.MustProfile(dev)
		for _, model := range []string{"vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"} {
			tol := 0.05
			if dev == "rtx2080ti-11gb" {
				tol = paperTolerance[model]
			}
			batches := []int{16}
			if model == "densenet121" && dev == "rtx2080ti-11gb" {
				batches = append(batches, 8)
			}
			for _, batch := range batches {
				g := buildGraph(t, model, batch)
				for _, rs := range []bool{false, true} {
					plan, st, err := PlanTensile(g, p, Target{Tolerance: tol, ResidentStart: rs})
					add(fmt.Sprintf("%s %s b%d resident=%v", dev, model, batch, rs), planFingerprint([]*Plan{plan}, st, err))
				}
			}
		}
	}
	// The benchmarks' plans (5 % on the RTX 2080 Ti).
	rtx := gpu.MustProfile("rtx2080ti-11gb")
	for _, model := range []string{"resnet50", "densenet121"} {
		plan, st, err := PlanTensile(buildGraph(t, model, 16), rtx, Target{Tolerance: 0.05})
		add(fmt.Sprintf("rtx %s b16 5%%", model), planFingerprint([]*Plan{plan}, st, err))
	}
	// Budgets: the budget-first greedy and the waiting fallback.
	p := gpu.MustProfile("h100-80gb")
	g := buildGraph(t, "densenet121", 16)
	for _, budget := range []int64{335 << 20, 600 << 20} {
		plan, st, err := PlanTensile(g, p, Target{Budget: budget, Tolerance: 0.1})
		add(fmt.Sprintf("h100 densenet121 b16 budget %d", budget), planFingerprint([]*Plan{plan}, st, err))
	}
	// Several jobs: joint and sum-of-peaks.
	rg := buildGraph(t, "resnet50", 16)
	jobs := []Job{{Graph: rg}, {Graph: rg}, {Graph: rg}, {Graph: rg}}
	for _, mode := range []Mode{Joint, SumOfPeaks} {
		plans, st, err := PlanJobs(jobs, rtx, mode, Target{Tolerance: 0.1})
		add(fmt.Sprintf("rtx resnet50 x4 %v", mode), planFingerprint(plans, st, err))
	}
	// The runtime's five jobs on an H100 at their minimum budgets.
	var five []Job
	var sum int64
	for i, s := range runtimeFive {
		g := buildGraph(t, s.model, s.batch)
		min, van, err := MinBudget(g, p, 0.1)
		add(fmt.Sprintf("h100 minbudget %s b%d", s.model, s.batch), fmt.Sprint(min, van, err))
		five = append(five, Job{Name: fmt.Sprintf("%s-%d", s.model, i), Graph: g, Budget: min})
		sum += min
	}
	plans, st, err := PlanJobs(five, p, Joint, Target{Budget: sum})
	add("h100 runtime five joint", planFingerprint(plans, st, err))
	got := strings.Join(lines, "\n") + "\n"
	if out := os.Getenv("PLAN_FINGERPRINTS"); out != "" {
		if err := os.WriteFile(out, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out+".dump", []byte(strings.Join(dumps, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if *updateFingerprints {
		if err := os.WriteFile(goldenFingerprints, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d fingerprints to %s", len(lines), goldenFingerprints)
		return
	}
	want, err := os.ReadFile(goldenFingerprints)
	if err != nil {
		t.Fatalf("%v (create it with: go test ./tensorsched/ -run TestPlanFingerprints -update-fingerprints)", err)
	}
	if diff := fingerprintDiff(string(want), got); diff != "" {
		t.Errorf("planning decisions changed:\n%s\nIf the change is intended, rewrite the golden file with\n  go test ./tensorsched/ -run TestPlanFingerprints -update-fingerprints\nand say in the commit what moved; to see how a plan changed, run with PLAN_FINGERPRINTS=FILE on both trees and diff FILE.dump.", diff)
	}
}

// fingerprintDiff lists the plans whose fingerprint differs between two
// golden-file texts (one line per plan: name, then hash), and plans only
// one of them has; "" when they agree.
func fingerprintDiff(want, got string) string {
	parse := func(s string) (map[string]string, []string) {
		m := map[string]string{}
		var order []string
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			i := strings.LastIndex(l, " ")
			if i < 0 {
				continue
			}
			name := strings.TrimSpace(l[:i])
			m[name] = l[i+1:]
			order = append(order, name)
		}
		return m, order
	}
	w, worder := parse(want)
	g, gorder := parse(got)
	var b strings.Builder
	for _, n := range gorder {
		switch wh, ok := w[n]; {
		case !ok:
			fmt.Fprintf(&b, "  new plan: %s\n", n)
		case wh != g[n]:
			fmt.Fprintf(&b, "  changed: %s (%s -> %s)\n", n, wh, g[n])
		}
	}
	for _, n := range worder {
		if _, ok := g[n]; !ok {
			fmt.Fprintf(&b, "  gone: %s\n", n)
		}
	}
	return b.String()
}
