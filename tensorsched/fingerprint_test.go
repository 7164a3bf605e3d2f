package tensorsched

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
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

// TestPlanFingerprints plans the MSR table's models and a few more and
// writes a hash of each plan's canonical dump to $PLAN_FINGERPRINTS (run
// only when it is set): planner speed-ups must leave every line the same.
func TestPlanFingerprints(t *testing.T) {
	out := os.Getenv("PLAN_FINGERPRINTS")
	if out == "" {
		t.Skip("set PLAN_FINGERPRINTS to a file to write the fingerprints to")
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
	for _, l := range lines {
		t.Log(l)
	}
	if err := os.WriteFile(out, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out+".dump", []byte(strings.Join(dumps, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}
