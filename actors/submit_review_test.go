package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
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

// A sequence length beyond a zoo model's positions is refused when the file
// is submitted, with its field path, as the README's spec table says (seq ≤
// 512 for bert-base, ≤ 1024 for gpt2-small). It used to pass validation, so
// the job was accepted and failed only once a node tried to predict its
// demand ("cannot predict memory demand: ... exceeds the model's 512
// positions"). Models without a sequence length still ignore seq.
func TestSubmitRefusesSeqBeyondModel(t *testing.T) {
	yaml := "jobs:\n" +
		"  - {name: a, model: bert-base, batch: 4, iterations: 10, seq: 513}\n" +
		"  - {name: b, model: gpt2, batch: 4, iterations: 10, seq: 1025}\n" +
		"  - {name: c, model: bert-base, batch: 4, iterations: 10, seq: 512}\n" +
		"  - {name: d, model: gpt2-small, batch: 4, iterations: 10, seq: 1024}\n" +
		"  - {name: e, model: resnet50, batch: 4, iterations: 10, seq: 4096}\n"
	_, err := workload.ParseSpecsWith([]byte(yaml), ValidateOptions())
	if err == nil {
		t.Fatal("accepted bert-base at seq 513 and gpt2-small at seq 1025")
	}
	for _, w := range []string{"jobs[0].seq: bert-base takes at most 512 tokens (got 513)", "jobs[1].seq: gpt2 takes at most 1024 tokens (got 1025)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not report %q:\n%v", w, err)
		}
	}
	for _, n := range []string{"jobs[2]", "jobs[3]", "jobs[4]"} {
		if strings.Contains(err.Error(), n) {
			t.Errorf("error reports %s, which is within its model's positions or has none:\n%v", n, err)
		}
	}
}
