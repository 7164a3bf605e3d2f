package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/transport"
)

// A submitted file's problems are reported at once, as the README says, with
// the field paths the file's own shape gives. The coordinator used to parse
// first and check models and devices only when parsing found nothing, so a
// file with a zero batch and an unknown model reported the batch alone, and
// fixing it brought up the model; and a single-job file's model or device
// was named "jobs[0].model" although the file has no jobs list (its other
// fields were named "batch", "name").
func TestSubmitReportsEveryProblemAtOnce(t *testing.T) {
	tc := startCluster(t, 0, 0, "h100-80gb", 1)
	cases := []struct {
		name, yaml string
		want, not  []string
	}{
		{
			name: "list",
			yaml: "jobs:\n  - {name: a, model: resnet51, batch: 4, iterations: 10}\n  - {name: b, model: mlp, batch: 0, iterations: 10}\n  - {name: c, model: mlp, batch: 4, iterations: 10, device: h200}\n",
			want: []string{`jobs[0].model: unknown model "resnet51"`, "jobs[1].batch: must be ≥ 1", `jobs[2].device: unknown device profile "h200"`},
		},
		{
			name: "single job",
			yaml: "name: a\nmodel: resnet51\nbatch: 0\niterations: 10\n",
			want: []string{`model: unknown model "resnet51"`, "batch: must be ≥ 1"},
			not:  []string{"jobs[0]"},
		},
		{
			name: "single job, model and device",
			yaml: "name: a\nmodel: resnet51\nbatch: 4\niterations: 10\ndevice: h200\n",
			want: []string{`model: unknown model "resnet51"`, `device: unknown device profile "h200"`},
			not:  []string{"jobs[0]"},
		},
	}
	for _, c := range cases {
		err := transport.Request(tc.nc, transport.VerbSubmit, SubmitRequest{YAML: c.yaml}, nil, 10*time.Second)
		if err == nil {
			t.Fatalf("%s: accepted", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error does not report %q:\n%v", c.name, w, err)
			}
		}
		for _, n := range c.not {
			if strings.Contains(err.Error(), n) {
				t.Errorf("%s: error names %q, a path the file does not have:\n%v", c.name, n, err)
			}
		}
	}
}
