package placement

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ONESTuning overrides some of ONES's search and stability parameters, as
// parsed from "key=value,key=value" by ParseONESTuning (the --ones flag of
// simulate and serve). The zero value changes nothing.
type ONESTuning struct {
	set []onesSetting
}

type onesSetting struct {
	key string
	v   float64
}

// onesKey is one key ParseONESTuning accepts.
type onesKey struct {
	help     string
	integer  bool
	lo, hi   float64 // accepted range, both inclusive
	apply    func(c *ONESConfig, v float64)
	zeroNone bool // 0 turns the mechanism off (ONESConfig reads 0 as its default)
}

var onesKeys = map[string]onesKey{
	"population": {help: "candidates kept per generation (default 16)", integer: true, lo: 2, hi: 4096,
		apply: func(c *ONESConfig, v float64) { c.Population = int(v) }},
	"generations": {help: "generations per scheduling interval (default 1)", integer: true, lo: 1, hi: 1000,
		apply: func(c *ONESConfig, v float64) { c.Generations = int(v) }},
	"crossover": {help: "crossover probability (default 0.5)", lo: 0, hi: 1, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.Crossover = v }},
	"mutation": {help: "probability each mutation operator fires (default 0.3)", lo: 0, hi: 1, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.Mutation = v }},
	"explore": {help: "a job grows to at most this × the most GPUs it was measured on (default 2)", integer: true, lo: 1, hi: 1 << 20,
		apply: func(c *ONESConfig, v float64) { c.Explore = int(v) }},
	"efficiency": {help: "only with marginal=0: goodput per GPU, as a fraction of that on the fewest GPUs, below which the projection stops scaling a job (default 0.2)", lo: 1e-6, hi: 1,
		apply: func(c *ONESConfig, v float64) { c.Efficiency = v }},
	"marginal": {help: "the projection grows a job by steps that add at least this × its per-GPU goodput on its fewest GPUs for each GPU (default 0.3; 0: none, efficiency's rule instead)", lo: 0, hi: 1, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.Marginal = v }},
	"spare": {help: "with marginal on: once none waits, the projection grows running jobs into GPUs left over up to the scale where goodput per GPU is this fraction of that on their fewest GPUs (default 0.2; 0: none)", lo: 0, hi: 1, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.Spare = v }},
	"realloc-after": {help: "seconds: the projection hands out GPUs freed or left idle no earlier than this (default 8 intervals; 0, or less than an interval: the next interval)", lo: 0, hi: 1e7, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.ReallocAfter = v }},
	"hold": {help: "intervals a job keeps GPUs it was just given (default 2; 0: none)", integer: true, lo: 0, hi: 1 << 20, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.Hold = int(v) }},
	"reserve": {help: "GPUs kept back for arrivals when idle GPUs are handed out (default 2; 0: none)", integer: true, lo: 0, hi: 1 << 20, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.Reserve = int(v) }},
	"hysteresis": {help: "a new allocation must save this × move cost per job it restarts (default 4; 0: none)", lo: 0, hi: 1e6, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.Hysteresis = v }},
	"arrivals": {help: "share of the arrival stream's expected GPU demand the projection keeps from active jobs (default 0.5; 0: none)", lo: 0, hi: 100, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.ArrivalLoad = v }},
	"accum": {help: "most extra gradient-accumulation micro-steps per iteration (default 5; 0: none)", integer: true, lo: 0, hi: 64, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.MaxAccum = int(v) }},
	"discount": {help: "seconds D: while a stream of jobs is expected to go on arriving, a completion T seconds away counts D·ln(1+T/D) in the projection (default 30000; 0: none)", lo: 1, hi: 1e9, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.Discount = v }},
	"noise": {help: "exponent α: the noise scale at batch b is taken as the one measured at batch m times (b/m)^α (default 0.3; 0: none)", lo: 0, hi: 2, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.NoiseExponent = v }},
	"lookahead": {help: "seconds: size each job by its noise scale times the growth its application's reports show over that much training at its rate on its cap, and pick its batch by its own (default: the interval; 0: none)", lo: 0, hi: 1e7, zeroNone: true,
		apply: func(c *ONESConfig, v float64) { c.Lookahead = v }},
	"arrival-horizon": {help: "seconds the projection expects arrivals to go on (default 3600)", lo: 1, hi: 1e7,
		apply: func(c *ONESConfig, v float64) { c.ArrivalHorizon = v }},
}

// ONESTuningKeys lists the keys ParseONESTuning accepts, sorted and
// comma-separated.
func ONESTuningKeys() string {
	return strings.Join(slices.Sorted(maps.Keys(onesKeys)), ", ")
}

// ParseONESTuning parses "key=value,key=value" (spaces around items
// allowed; "" is no change). Unknown keys, repeated keys, non-numbers and
// values out of range are refused, naming the key and what it accepts.
func ParseONESTuning(s string) (ONESTuning, error) {
	var t ONESTuning
	if strings.TrimSpace(s) == "" {
		return t, nil
	}
	raw := map[string]string{} // each key's value as typed: repeats, errors
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		k, val, ok := strings.Cut(item, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" || val == "" {
			return ONESTuning{}, fmt.Errorf("%q: want key=value (keys: %s)", item, ONESTuningKeys())
		}
		spec, known := onesKeys[k]
		if !known {
			return ONESTuning{}, fmt.Errorf("unknown key %q (keys: %s)", k, ONESTuningKeys())
		}
		if _, again := raw[k]; again {
			return ONESTuning{}, fmt.Errorf("%s given twice", k)
		}
		raw[k] = val
		var v float64
		if spec.integer {
			n, err := strconv.Atoi(val)
			if err != nil {
				return ONESTuning{}, fmt.Errorf("%s=%s: want a whole number from %s (%s)", k, val, spec.rangeText(), spec.help)
			}
			v = float64(n)
		} else {
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return ONESTuning{}, fmt.Errorf("%s=%s: want a number from %s (%s)", k, val, spec.rangeText(), spec.help)
			}
			v = f
		}
		if (v < spec.lo && !(spec.zeroNone && v == 0)) || v > spec.hi {
			return ONESTuning{}, fmt.Errorf("%s=%s: out of range, want %s (%s)", k, val, spec.rangeText(), spec.help)
		}
		t.set = append(t.set, onesSetting{key: k, v: v})
	}
	// efficiency is the rule marginal replaces: given alone it would be
	// read and then ignored.
	if eff, marg := t.value("efficiency"), t.value("marginal"); eff != nil && (marg == nil || *marg != 0) {
		return ONESTuning{}, fmt.Errorf("efficiency=%s applies only with marginal=0 (the projection's scale is the marginal rule's unless marginal=0 turns it off): add marginal=0, or set marginal instead", raw["efficiency"])
	}
	// The spare scale exists only beside the marginal rule: with it off,
	// the efficient scale is already the average rule's.
	if sp, marg := t.value("spare"), t.value("marginal"); sp != nil && *sp != 0 && marg != nil && *marg == 0 {
		return ONESTuning{}, fmt.Errorf("spare=%s applies only with the marginal rule on (with marginal=0 the projection's scale is already the average rule's, set by efficiency): drop marginal=0, or set efficiency instead", raw["spare"])
	}
	return t, nil
}

// value is the value t sets for key, or nil.
func (t ONESTuning) value(key string) *float64 {
	for _, s := range t.set {
		if s.key == key {
			return &s.v
		}
	}
	return nil
}

// rangeText is the values k accepts: "lo to hi", or "0 or lo to hi" when
// 0 (none) lies outside the range.
func (k onesKey) rangeText() string {
	if k.zeroNone && k.lo > 0 {
		return "0 or " + bound(k.lo) + " to " + bound(k.hi)
	}
	return bound(k.lo) + " to " + bound(k.hi)
}

// bound is a range bound as a plain number (1048576, not 1.048576e+06).
func bound(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// Empty reports whether t changes nothing.
func (t ONESTuning) Empty() bool { return len(t.set) == 0 }

// String is t in ParseONESTuning's syntax.
func (t ONESTuning) String() string {
	parts := make([]string, len(t.set))
	for i, s := range t.set {
		if onesKeys[s.key].integer {
			parts[i] = s.key + "=" + strconv.Itoa(int(s.v))
		} else {
			parts[i] = s.key + "=" + strconv.FormatFloat(s.v, 'g', -1, 64)
		}
	}
	return strings.Join(parts, ",")
}

// Apply writes t's settings into c (before NewONES fills in defaults).
func (t ONESTuning) Apply(c *ONESConfig) {
	for _, s := range t.set {
		k := onesKeys[s.key]
		v := s.v
		if k.zeroNone && v == 0 {
			v = -1
		}
		k.apply(c, v)
	}
}
