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

// A re-plan needs the total to move by more than ReplanThreshold: exactly
// 30 % faster or slower is not enough, whatever the rounding of the op
// times' sum, and a little more is, in both directions.
func TestOpProfileReplanBoundary(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	for _, model := range []string{"mlp", "resnet50", "vgg16"} {
		g := buildGraph(t, model, 32)
		for _, c := range []struct {
			factor float64
			replan bool
		}{
			{1.3, false}, {0.7, false}, {1.3001, true}, {0.6999, true}, {1.2999, false}, {0.7001, false},
		} {
			for _, perOp := range []bool{false, true} {
				o := NewOpProfile(g, p)
				o.MarkPlanned()
				if perOp {
					m := o.Seconds()
					for i := range m {
						m[i] *= c.factor
					}
					if err := o.Observe(m); err != nil {
						t.Fatal(err)
					}
				} else if err := o.ObserveTotal(c.factor * o.Total()); err != nil {
					t.Fatal(err)
				}
				if got := o.NeedsReplan(); got != c.replan {
					t.Errorf("%s, measured %.4f× the planned time (per op %v): NeedsReplan = %v (drift %.17g), want %v",
						model, c.factor, perOp, got, o.Drift(), c.replan)
				}
			}
		}
	}
}

// TestOpProfileFirstValidMeasurementReplaces: an op's first valid
// measurement replaces its prediction even when an earlier iteration's
// measurement of it was missing (0) or invalid; later ones are averaged.
func TestOpProfileFirstValidMeasurementReplaces(t *testing.T) {
	p := gpu.MustProfile("h100-80gb")
	g := buildGraph(t, "mlp", 32)
	o := NewOpProfile(g, p)
	pred := o.Seconds()
	first := make([]float64, len(pred))
	for i := range first {
		first[i] = 2 * pred[i]
	}
	first[0] = 0 // op 0 not measured in the first iteration
	if err := o.Observe(first); err != nil {
		t.Fatal(err)
	}
	if s := o.Seconds(); s[0] != pred[0] || s[1] != first[1] {
		t.Fatalf("after one iteration: op 0 %v (want its prediction %v), op 1 %v (want %v)", s[0], pred[0], s[1], first[1])
	}
	second := make([]float64, len(pred))
	for i := range second {
		second[i] = 3 * pred[i]
	}
	if err := o.Observe(second); err != nil {
		t.Fatal(err)
	}
	a := o.alpha()
	if s := o.Seconds(); s[0] != second[0] || math.Abs(s[1]-((1-a)*first[1]+a*second[1])) > 1e-18 {
		t.Fatalf("after two iterations: op 0 %v (want its first measurement %v), op 1 %v (want the average %v)",
			s[0], second[0], s[1], (1-a)*first[1]+a*second[1])
	}
}
