package tensorsched

import (
	"math"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

func TestOpProfile(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	g := buildGraph(t, "mlp", 32)
	o := NewOpProfile(g, p)
	if math.Abs(o.Total()-p.GraphSeconds(g)) > 1e-12 {
		t.Fatalf("cold start total %v, cost model %v", o.Total(), p.GraphSeconds(g))
	}
	o.MarkPlanned()
	steps := []struct {
		name   string
		factor float64 // measured = factor × cold-start prediction
		total  bool
		replan bool
	}{
		{"first measurement matches", 1.0, false, false},
		{"small drift", 1.1, false, false},
		{"slow by half", 1.5, false, false},              // average moves 1.05 → 1.275
		{"slow again", 1.5, false, true},                 // 1.3875 > 1.3
		{"total only, back to normal", 1.0, true, false}, // 1.19
	}
	base := o.Seconds()
	for _, s := range steps {
		if s.total {
			if err := o.ObserveTotal(s.factor * p.GraphSeconds(g)); err != nil {
				t.Fatal(err)
			}
		} else {
			m := make([]float64, len(base))
			for i := range m {
				m[i] = s.factor * base[i]
			}
			if err := o.Observe(m); err != nil {
				t.Fatal(err)
			}
		}
		if got := o.NeedsReplan(); got != s.replan {
			t.Errorf("%s: NeedsReplan = %v (drift %.3f), want %v", s.name, got, o.Drift(), s.replan)
		}
	}
	o.MarkPlanned()
	if o.NeedsReplan() {
		t.Error("NeedsReplan right after MarkPlanned")
	}
	if err := o.Observe([]float64{1}); err == nil {
		t.Error("Observe with the wrong length should fail")
	}
	if err := o.ObserveTotal(-1); err == nil {
		t.Error("ObserveTotal(-1) should fail")
	}
}
