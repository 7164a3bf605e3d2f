package actors

import (
	"math"
	"strings"
	"testing"
)

// A request with an unknown field is refused with the fields the verb
// takes, so the caller can fix the request (strictJSON's promise).
func TestStrictJSONListsAllowedFields(t *testing.T) {
	for _, c := range []struct {
		body string
		v    any
		want []string
	}{
		{`{"jbo": "j-1"}`, &JobRequest{}, []string{`"jbo"`, `"job"`}},
		{`{"spec": "name: a"}`, &SubmitRequest{}, []string{`"spec"`, `"yaml"`}},
	} {
		err := strictJSON([]byte(c.body), c.v)
		if err == nil {
			t.Errorf("%s: accepted", c.body)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %s", c.body, err, w)
			}
		}
	}
}

// serve --time-scale NaN, Inf or a negative number is refused: NaN made
// every elastic round fire after 1 ms at a NaN job time, and a negative
// scale was silently replaced by the default.
func TestElasticTimeScaleMustBeFinite(t *testing.T) {
	for _, s := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -5} {
		if _, err := newElasticLoop(ElasticConfig{Interval: 60, TimeScale: s}, nil, quiet); err == nil || !strings.Contains(err.Error(), "time scale") {
			t.Errorf("time scale %v: error %v, want one naming the time scale", s, err)
		}
	}
	if l, err := newElasticLoop(ElasticConfig{Interval: 60}, nil, quiet); err != nil || l.cfg.TimeScale != 100 {
		t.Errorf("time scale 0: %v (want the default, 100)", err)
	}
}
