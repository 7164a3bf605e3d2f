package placement

import (
	"strings"
	"testing"
)

func TestParseONESTuning(t *testing.T) {
	good := []struct {
		in   string
		want func(c ONESConfig) bool
	}{
		{"", func(c ONESConfig) bool { return c == ONESConfig{} }},
		{" hold=4 , hysteresis=8.5 ", func(c ONESConfig) bool { return c.Hold == 4 && c.Hysteresis == 8.5 }},
		// 0 turns a mechanism off: ONESConfig reads 0 as its default, so
		// Apply writes the negative value it reads as none.
		{"hold=0,reserve=0,hysteresis=0", func(c ONESConfig) bool { return c.Hold < 0 && c.Reserve < 0 && c.Hysteresis < 0 }},
		{"crossover=0,mutation=0", func(c ONESConfig) bool { return c.Crossover < 0 && c.Mutation < 0 }},
		{"arrivals=0", func(c ONESConfig) bool { return c.ArrivalLoad < 0 }},
		{"arrivals=0.25,arrival-horizon=1800", func(c ONESConfig) bool { return c.ArrivalLoad == 0.25 && c.ArrivalHorizon == 1800 }},
		{"discount=0", func(c ONESConfig) bool { return c.Discount < 0 }},
		{"discount=7200", func(c ONESConfig) bool { return c.Discount == 7200 }},
		{"noise=0", func(c ONESConfig) bool { return c.NoiseExponent < 0 }},
		{"noise=0.45", func(c ONESConfig) bool { return c.NoiseExponent == 0.45 }},
		{"marginal=0", func(c ONESConfig) bool { return c.Marginal < 0 }},
		{"marginal=0.3", func(c ONESConfig) bool { return c.Marginal == 0.3 }},
		{"spare=0", func(c ONESConfig) bool { return c.Spare < 0 }},
		{"spare=0.35", func(c ONESConfig) bool { return c.Spare == 0.35 }},
		{"realloc-after=0", func(c ONESConfig) bool { return c.ReallocAfter < 0 }},
		{"realloc-after=300", func(c ONESConfig) bool { return c.ReallocAfter == 300 }},
		{"lookahead=0", func(c ONESConfig) bool { return c.Lookahead < 0 }},
		{"lookahead=120", func(c ONESConfig) bool { return c.Lookahead == 120 }},
		{"population=32,generations=4,explore=3,efficiency=0.5,marginal=0", func(c ONESConfig) bool {
			return c.Population == 32 && c.Generations == 4 && c.Explore == 3 && c.Efficiency == 0.5 && c.Marginal < 0
		}},
	}
	for _, tc := range good {
		tu, err := ParseONESTuning(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		var c ONESConfig
		tu.Apply(&c)
		if !tc.want(c) {
			t.Errorf("%q: applied %+v", tc.in, c)
		}
		if again, err := ParseONESTuning(tu.String()); err != nil || again.String() != tu.String() {
			t.Errorf("%q: String %q does not parse back (%v)", tc.in, tu.String(), err)
		}
	}
	bad := []struct{ in, want string }{
		{"bogus=1", `unknown key "bogus" (keys: accum, arrival-horizon, arrivals, crossover,`},
		{"hold", "want key=value"},
		{"hold=", "want key=value"},
		{"hold=2,,reserve=1", "want key=value"},
		{"hold=2,hold=3", "hold given twice"},
		{"hold=2.5", "hold=2.5: want a whole number"},
		{"hold=-1", "hold=-1: out of range, want 0 to"},
		{"efficiency=0", "efficiency=0: out of range"},
		{"efficiency=NaN", "efficiency=NaN: want a number"},
		// efficiency is read only with the marginal rule off.
		{"efficiency=0.5", "efficiency=0.5 applies only with marginal=0"},
		{"marginal=0.3,efficiency=0.35", "efficiency=0.35 applies only with marginal=0"},
		{"marginal=0,spare=0.3", "spare=0.3 applies only with the marginal rule on"},
		{"efficiency=.5", "efficiency=.5 applies only with marginal=0"}, // as typed
		{"mutation=1.5", "mutation=1.5: out of range, want 0 to 1"},
		{"population=1", "population=1: out of range, want 2 to"},
		{"generations=0", "generations=0: out of range, want 1 to"},
		{"arrivals=-0.5", "arrivals=-0.5: out of range, want 0 to 100"},
		{"arrival-horizon=0", "arrival-horizon=0: out of range, want 1 to"},
		{"discount=0.5", "discount=0.5: out of range, want 0 or 1 to 1000000000"},
		{"accum=65", "accum=65: out of range, want 0 to 64"},
		{"marginal=1.5", "marginal=1.5: out of range, want 0 to 1"},
		{"marginal=-0.1", "marginal=-0.1: out of range, want 0 to 1"},
		{"accum=1.5", "accum=1.5"},
	}
	for _, tc := range bad {
		_, err := ParseONESTuning(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestNewPolicyRefusesONESTuningForOtherPolicies(t *testing.T) {
	tu, err := ParseONESTuning("hold=3")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fifo", "tiresias"} {
		if _, err := NewPolicy(name, PolicyOptions{ONES: tu}); err == nil || !strings.Contains(err.Error(), "apply to ones only") {
			t.Errorf("%s with ONES settings: %v", name, err)
		}
	}
	p, err := NewPolicy("ones", PolicyOptions{ONES: tu})
	if err != nil {
		t.Fatal(err)
	}
	if h := p.(*ONES).Config().Hold; h != 3 {
		t.Errorf("hold=3 gave Hold %d", h)
	}
}

// TestONESMoreGenerationsSearchFurther checks that Generations runs more
// generations per call: the first generation is the same draw for both
// (same seed), and survivors keep the best, so the best candidate after
// three generations predicts no worse than after one, and the search drew
// more random numbers.
func TestONESMoreGenerationsSearchFurther(t *testing.T) {
	cluster, jobs := onesBenchState(t, 64)
	best := func(gens int) (float64, int64) {
		o := NewONES(ONESConfig{Seed: 3, Generations: gens})
		o.Schedule(0, cluster, jobs)
		ctx := o.newCtx(0, cluster, jobs)
		g := ctx.restore(o.pop[0])
		ctx.repair(g)
		return ctx.fitness(g), o.rng.Int63()
	}
	f1, r1 := best(1)
	f3, r3 := best(3)
	if f3 > f1 {
		t.Errorf("best predicted sum after 3 generations %.0f s > after 1 %.0f s", f3, f1)
	}
	if r1 == r3 {
		t.Errorf("3 generations drew the same random numbers as 1: only one generation ran")
	}
	t.Logf("best predicted sum of completion times: 1 generation %.0f s, 3 generations %.0f s", f1, f3)
}

// FuzzParseONESTuning: any string is either refused or parses into
// settings whose String parses back to the same settings, and applying
// them never leaves a setting out of the range its key accepts.
func FuzzParseONESTuning(f *testing.F) {
	for _, s := range []string{"", "hold=4", "hold=0,reserve=0,hysteresis=0", "population=32,generations=4",
		"efficiency=1e-3,marginal=0", "explore=1000000", "mutation=1,crossover=0.25", "arrivals=100,arrival-horizon=1", "hold=2,,", "explore=9999999999999999999", "hysteresis=1e400", "marginal=0.25"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tu, err := ParseONESTuning(s)
		if err != nil {
			if tu.String() != "" {
				t.Fatalf("%q refused (%v) but settings kept: %s", s, err, tu)
			}
			return
		}
		again, err := ParseONESTuning(tu.String())
		if err != nil || again.String() != tu.String() {
			t.Fatalf("%q: String %q does not parse back: %v", s, tu.String(), err)
		}
		var c ONESConfig
		tu.Apply(&c)
		p := NewONES(c).Config()
		if p.Population < 2 || p.Generations < 1 || p.Explore < 1 || !(p.Efficiency > 0 && p.Efficiency <= 1) ||
			p.Crossover > 1 || p.Mutation > 1 || p.ArrivalLoad < 0 || !(p.ArrivalHorizon > 0) || p.NoiseExponent < 0 || p.NoiseExponent > 2 ||
			p.Marginal < 0 || p.Marginal > 1 {
			t.Fatalf("%q gave an unusable config %+v", s, p)
		}
	})
}

// TestONESTuningZeroTurnsOffThroughNewONES: hysteresis=0, crossover=0 and
// mutation=0 are documented as none; the policy NewPolicy builds must not
// read them back as their defaults.
func TestONESTuningZeroTurnsOffThroughNewONES(t *testing.T) {
	tu, err := ParseONESTuning("hold=0,reserve=0,hysteresis=0,crossover=0,mutation=0,arrivals=0,discount=0,noise=0,marginal=0,lookahead=0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy("ones", PolicyOptions{ONES: tu})
	if err != nil {
		t.Fatal(err)
	}
	c := p.(*ONES).Config()
	if c.Hold != 0 || c.Reserve != 0 || c.Hysteresis != 0 || c.Crossover != 0 || c.Mutation != 0 || c.ArrivalLoad != 0 || c.Discount != 0 || c.NoiseExponent != 0 || c.Marginal != 0 || c.Lookahead != 0 {
		t.Errorf("zero settings gave Hold %d Reserve %d Hysteresis %g Crossover %g Mutation %g ArrivalLoad %g Discount %g NoiseExponent %g Marginal %g Lookahead %g, want all 0",
			c.Hold, c.Reserve, c.Hysteresis, c.Crossover, c.Mutation, c.ArrivalLoad, c.Discount, c.NoiseExponent, c.Marginal, c.Lookahead)
	}
	d := NewONES(ONESConfig{}).Config()
	if d.Hysteresis != 4 || d.Crossover != 0.5 || d.Mutation != 0.3 || d.ArrivalLoad != 0.5 || d.ArrivalHorizon != 3600 || d.Discount != DefaultDiscount || d.NoiseExponent != DefaultNoiseExponent || d.Marginal != DefaultMarginal || d.Efficiency != 0.2 || d.Lookahead != d.Interval {
		t.Errorf("defaults changed: %+v", d)
	}
}

// The range in an error is written as the numbers the key accepts: a
// whole-number key's bound is not given in exponent notation
// ("want a whole number from 1 to 1.048576e+06").
func TestParseONESTuningRangeReadable(t *testing.T) {
	for in, want := range map[string]string{
		"hold=-1":                     "hold=-1: out of range, want 0 to 1048576 (",
		"explore=9999999999999999999": "want a whole number from 1 to 1048576 (",
		"hysteresis=-1":               "want 0 to 1000000 (",
		"efficiency=0":                "want 0.000001 to 1 (",
		"noise=2.5":                   "noise=2.5: out of range, want 0 to 2 (",
	} {
		if _, err := ParseONESTuning(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", in, err, want)
		}
	}
}
