package workload

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// zooModels are the model-zoo names, passed to validation the way callers
// pass the zoo package's list.
var zooModels = []string{"vgg16", "resnet50", "inception-v3", "inception-v4", "densenet121", "bert-base", "gpt2-small", "mlp"}

var zooOpts = ValidateOptions{
	KnownModel:  func(m string) bool { return slices.Contains(zooModels, m) },
	Models:      zooModels,
	KnownDevice: func(d string) bool { return d == "h100-80gb" || d == "v100-16gb" },
	Devices:     []string{"h100-80gb", "v100-16gb"},
}

const minimalTrain = "name: job\nmodel: resnet50\nbatch: 16\niterations: 10\n"

func TestParseSpecDefaults(t *testing.T) {
	s, err := ParseSpec([]byte(minimalTrain))
	if err != nil {
		t.Fatalf("ParseSpec: %v", err)
	}
	want := Spec{Name: "job", Model: "resnet50", Kind: Train, Batch: Fixed(16), Iterations: 10,
		Priority: 0, Tolerance: DefaultTolerance, GPUs: Fixed(1)}
	if !reflect.DeepEqual(*s, want) {
		t.Fatalf("ParseSpec = %+v\nwant %+v", *s, want)
	}
	if s.Elastic() {
		t.Error("a fixed job reports Elastic")
	}
	if got := s.ToleranceFraction(); got != 0.10 {
		t.Errorf("ToleranceFraction = %v, want 0.10", got)
	}
	if err := s.Validate(zooOpts); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestParseSpecForms(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want Spec
	}{
		{"elastic batch and gpus", "name: job\nmodel: resnet50\nbatch: {min: 8, max: 64}\ngpus: {min: 1, max: 4}\niterations: 1\n",
			Spec{Name: "job", Model: "resnet50", Kind: Train, Batch: Range{8, 64}, Iterations: 1, Tolerance: 0.1, GPUs: Range{1, 4}}},
		{"batch value mapping", "name: job\nmodel: mlp\nbatch: {value: 32}\ntarget_samples: 5000\n",
			Spec{Name: "job", Model: "mlp", Kind: Train, Batch: Fixed(32), TargetSamples: 5000, Tolerance: 0.1, GPUs: Fixed(1)}},
		{"tolerance as a fraction", "name: job\nmodel: mlp\nbatch: 1\niterations: 1\ntolerance: 0.25\n",
			Spec{Name: "job", Model: "mlp", Kind: Train, Batch: Fixed(1), Iterations: 1, Tolerance: 0.25, GPUs: Fixed(1)}},
		{"tolerance zero percent", "name: job\nmodel: mlp\nbatch: 1\niterations: 1\ntolerance: 0%\n",
			Spec{Name: "job", Model: "mlp", Kind: Train, Batch: Fixed(1), Iterations: 1, Tolerance: 0, GPUs: Fixed(1)}},
		{"everything for inference", `
name: svc-1
model: gpt2-small
kind: infer
batch: 4
seq: 256
dtype: bf16
requests: 3
priority: 9
tolerance: 100%
gpus: {value: 2}
device: h100-80gb
arrivals: {times: [0, 0.5, 0.5]}
host: {per_iteration: 1ms, per_kernel: 0.000005, per_request: 2ms}
`, Spec{Name: "svc-1", Model: "gpt2-small", Kind: Infer, Batch: Fixed(4), Seq: 256, DType: "bf16", Requests: 3,
			Priority: 9, Tolerance: 1, GPUs: Fixed(2), Device: "h100-80gb", Arrivals: &Arrivals{Times: []float64{0, 0.5, 0.5}},
			Host: HostTimes{PerIteration: 0.001, PerKernel: 5e-6, PerRequest: 0.002}}},
		{"requests default to the arrival list", "name: svc\nmodel: mlp\nkind: infer\nbatch: 1\narrivals: {times: [1, 2]}\n",
			Spec{Name: "svc", Model: "mlp", Kind: Infer, Batch: Fixed(1), Requests: 2, Tolerance: 0.1, GPUs: Fixed(1), Arrivals: &Arrivals{Times: []float64{1, 2}}}},
		{"trace job without batch", "name: t\ntrace: testdata/tiny.trace.json\niterations: 3\n",
			Spec{Name: "t", Trace: "testdata/tiny.trace.json", Kind: Train, Iterations: 3, Tolerance: 0.1, GPUs: Fixed(1)}},
		{"merge keys", "base: &b {model: mlp, batch: 8, iterations: 2}\n", Spec{}}, // rejected below: base is unknown
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSpec([]byte(tc.yaml))
			if tc.name == "merge keys" {
				if err == nil || !strings.Contains(err.Error(), `unknown field "base"`) {
					t.Fatalf("err = %v, want unknown field base", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSpec: %v", err)
			}
			if tc.want.Name != "" && !reflect.DeepEqual(*s, tc.want) {
				t.Fatalf("ParseSpec = %+v\nwant %+v", *s, tc.want)
			}
			if err := s.Validate(zooOpts); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestParseSpecElastic(t *testing.T) {
	s, err := ParseSpec([]byte("name: job\nmodel: resnet50\nbatch: {min: 8, max: 64}\ngpus: {min: 2, max: 4}\niterations: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Elastic() {
		t.Error("Elastic = false for batch 8–64")
	}
	if lo, hi := s.BatchRange(); lo != 8 || hi != 64 {
		t.Errorf("BatchRange = %d, %d; want 8, 64", lo, hi)
	}
	if lo, hi := s.GPURange(); lo != 2 || hi != 4 {
		t.Errorf("GPURange = %d, %d; want 2, 4", lo, hi)
	}
}

func TestParseSpecsForms(t *testing.T) {
	job := func(name string) string {
		return "name: " + name + "\nmodel: mlp\nbatch: 2\niterations: 3\n"
	}
	indent := func(s string) string {
		return "  - " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
	}
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{"single mapping", job("a"), []string{"a"}},
		{"jobs list", "jobs:\n" + indent(job("a")) + indent(job("b")), []string{"a", "b"}},
		{"documents", job("a") + "---\n" + job("b") + "---\n" + "jobs:\n" + indent(job("c")), []string{"a", "b", "c"}},
		{"empty documents skipped", "---\n" + job("a") + "---\n---\n", []string{"a"}},
		{"merge keys", "jobs:\n  - &base\n    name: a\n    model: mlp\n    batch: 2\n    iterations: 3\n  - <<: *base\n    name: b\n    batch: 4\n", []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs, err := ParseSpecs([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("ParseSpecs: %v", err)
			}
			var names []string
			for _, s := range specs {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("names = %v, want %v", names, tc.want)
			}
			if err := ValidateSpecs(specs, zooOpts); err != nil {
				t.Fatalf("ValidateSpecs: %v", err)
			}
		})
	}
	specs, err := ParseSpecs([]byte(cases[4].yaml))
	if err != nil {
		t.Fatal(err)
	}
	if specs[1].Batch != Fixed(4) || specs[1].Model != "mlp" || specs[1].Iterations != 3 {
		t.Errorf("merged spec = %+v, want batch 4 over the base's model and iterations", specs[1])
	}
	if _, err := ParseSpec([]byte("jobs:\n" + indent(job("a")) + indent(job("b")))); err == nil ||
		!strings.Contains(err.Error(), "holds 2 jobs") {
		t.Errorf("ParseSpec of two jobs: err = %v", err)
	}
}

// TestSpecFieldErrors checks that every bad field is reported with its path
// and what is allowed.
func TestSpecFieldErrors(t *testing.T) {
	const infer = "name: svc\nmodel: bert-base\nkind: infer\nbatch: 1\nrequests: 10\n"
	cases := []struct {
		field string
		yaml  string
		want  string
	}{
		{"name", "model: mlp\nbatch: 1\niterations: 1\n", "name: required"},
		{"name", strings.Replace(minimalTrain, "name: job", "name: My_Job", 1), `name: must be a DNS label: lowercase letters, digits and '-'`},
		{"name", strings.Replace(minimalTrain, "name: job", "name: "+strings.Repeat("a", 64), 1), "at most 63 characters"},
		{"name", strings.Replace(minimalTrain, "name: job", "name: [a]", 1), "name: must be a string (got a list)"},
		{"model", strings.Replace(minimalTrain, "resnet50", "resnet51", 1), `model: unknown model "resnet51" (known: vgg16, resnet50,`},
		{"model", strings.Replace(minimalTrain, "resnet50", "resnet51", 1), `did you mean "resnet50"?`},
		{"model", minimalTrain + "trace: x.json\n", "job: set either model or trace, not both"},
		{"model", "name: job\nbatch: 1\niterations: 1\n", "job: set model (a zoo model name) or trace"},
		{"kind", minimalTrain + "kind: serve\n", `kind: must be "train" or "infer" (got "serve")`},
		{"batch", "name: job\nmodel: mlp\niterations: 1\n", "batch: required: a batch size ≥ 1"},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: 0", 1), "batch: must be ≥ 1 (got 0)"},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: sixteen", 1), `batch: must be an integer (got string "sixteen")`},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: 16.5", 1), "batch: must be an integer (got number 16.5)"},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: {min: 0, max: 8}", 1), "batch.min: must be ≥ 1 (got 0)"},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: {min: 16, max: 8}", 1), "batch.max: must be ≥ min (got min 16, max 8)"},
		// Too large, not too small: the message names the upper bound.
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: {min: 2000000, max: 3000000}", 1), "batch.min: must be ≤ 1048576 (got 2000000)"},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: 3000000000", 1), "batch: must be ≤ 2147483647 (got 3000000000)"},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: {min: 1, max: 3000000000}", 1), "batch.max: must be ≤ 2147483647 (got 3000000000)"},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: {min: 8}", 1), "batch: set both min and max"},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: {value: 8, max: 9}", 1), "batch: set either value or min and max, not both"},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: {min: 1, maximum: 9}", 1), `batch: unknown field "maximum" (line 3; allowed: min, max, value); did you mean "max"?`},
		{"batch", strings.Replace(minimalTrain, "batch: 16", "batch: 2000000", 1), "batch: must be 1–1048576 (got 2000000)"},
		{"batch", infer + "batch: {min: 1, max: 8}\n", "job: batch: set twice (lines 4 and 6)"},
		{"batch", strings.Replace(infer, "batch: 1", "batch: {min: 1, max: 8}", 1), "batch: an inference job takes one batch size"},
		{"batch", "name: t\ntrace: x.json\nbatch: {min: 1, max: 8}\niterations: 1\n", "batch: a trace is recorded at one batch size"},
		{"iterations", "name: job\nmodel: mlp\nbatch: 1\n", "iterations: required for a training job (or set target_samples)"},
		{"iterations", strings.Replace(minimalTrain, "iterations: 10", "iterations: 0", 1), "iterations: must be 1–2147483647 (got 0)"},
		{"iterations", strings.Replace(minimalTrain, "iterations: 10", "iterations: -3", 1), "iterations: must be 1–2147483647 (got -3)"},
		{"iterations", minimalTrain + "target_samples: 100\n", "job: set either iterations or target_samples, not both"},
		{"iterations", infer + "iterations: 5\n", "iterations: only for training jobs"},
		{"target_samples", "name: job\nmodel: mlp\nbatch: 1\ntarget_samples: lots\n", `target_samples: must be an integer (got string "lots")`},
		{"target_samples", infer + "target_samples: 5\n", "target_samples: only for training jobs"},
		{"requests", "name: svc\nmodel: bert-base\nkind: infer\nbatch: 1\n", "requests: required for an inference job"},
		{"requests", minimalTrain + "requests: 5\n", "requests: only for inference jobs (kind: infer)"},
		{"requests", strings.Replace(infer, "requests: 10", "requests: 0", 1), "requests: must be 1–2147483647 (got 0)"},
		{"priority", minimalTrain + "priority: 12\n", "priority: must be 0–9, higher is more important (got 12)"},
		{"priority", minimalTrain + "priority: -1\n", "priority: must be 0–9"},
		{"priority", minimalTrain + "priority: high\n", `priority: must be an integer (got string "high")`},
		{"tolerance", minimalTrain + "tolerance: 10\n", `tolerance: must be 0%–100%, as "10%" or a fraction such as 0.10 (got 10; for 10 percent write "10%")`},
		{"tolerance", minimalTrain + "tolerance: 150%\n", `tolerance: must be 0%–100%`},
		{"tolerance", minimalTrain + "tolerance: -0.1\n", `tolerance: must be 0%–100%`},
		{"tolerance", minimalTrain + "tolerance: ten\n", `tolerance: must be 0%–100%, as "10%" or a fraction such as 0.10 (got string "ten")`},
		{"tolerance", minimalTrain + "tolerance: .nan\n", `tolerance: must be 0%–100%`},
		{"gpus", minimalTrain + "gpus: 0\n", "gpus: must be ≥ 1 (got 0)"},
		{"gpus", minimalTrain + "gpus: {min: 4, max: 2}\n", "gpus.max: must be ≥ min (got min 4, max 2)"},
		{"gpus", minimalTrain + "gpus: [1, 2]\n", "gpus: must be an integer ≥ 1, or a mapping {min, max} (got a list)"},
		{"gpus", infer + "gpus: {min: 1, max: 2}\n", "gpus: an inference job takes one GPU count"},
		{"device", minimalTrain + "device: h100\n", `device: unknown device profile "h100" (known: h100-80gb, v100-16gb); did you mean "h100-80gb"?`},
		{"arrivals", minimalTrain + "arrivals: {poisson_rate: 5}\n", "arrivals: only for inference jobs (kind: infer)"},
		{"arrivals", infer + "arrivals: {}\n", "arrivals: set poisson_rate (requests per second) or times"},
		{"arrivals", infer + "arrivals: 50\n", "arrivals: must be a mapping: {poisson_rate: 50} or {times: [0, 0.1, ...]} (got integer 50)"},
		{"arrivals", infer + "arrivals: {poisson_rate: 5, times: [0]}\n", "arrivals: set either poisson_rate or times, not both"},
		{"arrivals", infer + "arrivals: {poisson_rate: -5}\n", "arrivals.poisson_rate: must be a rate in requests per second, > 0"},
		{"arrivals", infer + "arrivals: {poisson_rate: fast}\n", `arrivals.poisson_rate: must be a number (got string "fast")`},
		{"arrivals", infer + "arrivals: {rate: 5}\n", `arrivals: unknown field "rate" (line 6; allowed: poisson_rate, times, seed)`},
		{"arrivals", infer + "arrivals: {times: [0, 0.3, 0.2]}\n", "arrivals.times[2]: must not be earlier than the time before it (got 0.2 after 0.3)"},
		{"arrivals", infer + "arrivals: {times: [0, -1]}\n", "arrivals.times[1]: must be a time ≥ 0 in seconds (got -1)"},
		{"arrivals", infer + "arrivals: {times: [0, soon]}\n", `arrivals.times[1]: must be a number (got string "soon")`},
		{"arrivals", infer + "arrivals: {times: 0.5}\n", "arrivals.times: must be a list of times in seconds (got number 0.5)"},
		{"arrivals", infer + "arrivals: {times: [0, 1]}\n", "arrivals.times: has 2 arrival times but requests is 10; give one time per request"},
		{"arrivals", infer + "arrivals: {times: [0], seed: 3}\n", "arrivals.seed: only used with poisson_rate"},
		{"arrivals", infer + "arrivals: {poisson_rate: 0}\n", "arrivals.poisson_rate: must be a rate in requests per second, > 0 and ≤ 1e9 (got 0); write e.g. poisson_rate: 50"},
		{"arrivals", infer + "arrivals: {times: [0], seed: 0}\n", "arrivals.seed: only used with poisson_rate; explicit times make no random draws, so remove seed (got seed: 0 beside times)"},
		{"arrivals", infer + "arrivals: {poisson_rate: 5, seed: x}\n", `arrivals.seed: must be an integer (got string "x")`},
		{"host", minimalTrain + "host: {per_iteration: 5 ms}\n", `host.per_iteration: must be a duration such as "5ms" or "20us", or seconds as a number (got "5 ms")`},
		{"host", minimalTrain + "host: {per_kernel: -5us}\n", `host.per_kernel: must not be negative (got "-5us")`},
		{"host", minimalTrain + "host: {per_kernel: -1}\n", "host.per_kernel: must not be negative (got -1)"},
		{"host", minimalTrain + "host: {per_request: 2ms}\n", "host.per_request: only for inference jobs (kind: infer)"},
		{"host", minimalTrain + "host: {per_batch: 2ms}\n", `host: unknown field "per_batch" (line 5; allowed: per_iteration, per_kernel, per_request)`},
		{"host", minimalTrain + "host: 5ms\n", "host: must be a mapping {per_iteration, per_kernel, per_request} of durations"},
		{"seq", minimalTrain + "seq: 0\n", "seq: must be 1–2147483647 (got 0)"},
		{"seq", "name: t\ntrace: x.json\niterations: 1\nseq: 128\n", "seq: only for zoo models"},
		{"dtype", minimalTrain + "dtype: fp8\n", `dtype: must be one of fp32, tf32, bf16, fp16 (got "fp8")`},
		{"dtype", "name: t\ntrace: x.json\niterations: 1\ndtype: fp16\n", "dtype: only for zoo models"},
		{"param_chunk", minimalTrain + "param_chunk: lots\n", `param_chunk: must be a size above zero such as 4MiB (got "lots"); leave it out to keep weights whole`},
		{"param_chunk", minimalTrain + "param_chunk: 0\n", `param_chunk: must be a size above zero such as 4MiB (got "0")`},
		{"param_chunk", minimalTrain + "param_chunk: [4MiB]\n", "param_chunk: must be a size such as 4MiB (got a list"},
		{"param_chunk", minimalTrain + "param_chunk: 1000000.7\n", "param_chunk: must be a whole number of bytes, or a size with a unit such as 4MiB (got 1000000.7)"},
		{"param_chunk", minimalTrain + "param_chunk: 9e30\n", `param_chunk: "9e30" is more bytes than a size can hold`},
		{"param_chunk", "name: t\ntrace: x.json\niterations: 1\nparam_chunk: 4MiB\n", "param_chunk: only for zoo models"},
		{"param_chunk", "name: s\nmodel: mlp\nkind: infer\nbatch: 1\nrequests: 1\nparam_chunk: 4MiB\n", "param_chunk: only for training jobs"},
		{"optimizer", minimalTrain + "optimizer: sprd\n", `optimizer: must be one of fused, spread (got "sprd"); leave it out for every update after backward`},
		{"optimizer", minimalTrain + "optimizer: spread\n", "optimizer: spread spreads the updates of chunked weights: set param_chunk too (4MiB, say), or use optimizer: fused"},
		{"optimizer", "name: t\ntrace: x.json\niterations: 1\noptimizer: fused\n", "optimizer: only for zoo models"},
		{"optimizer", "name: s\nmodel: mlp\nkind: infer\nbatch: 1\nrequests: 1\noptimizer: fused\n", "optimizer: only for training jobs"},
		{"unknown", minimalTrain + "batch_size: 3\n", `job: unknown field "batch_size" (line 5; allowed: name, model, trace, kind, batch,`},
		{"unknown", minimalTrain + "batch_size: 3\n", `did you mean "batch"?`},
		{"unknown", minimalTrain + "1: 3\n", "job: keys must be field names (got integer 1, line 5)"},
		{"file", "- a\n- b\n", "document (line 1): must be a job mapping (name, model, trace, ...) or a mapping with a jobs list (got a list)"},
		{"file", "jobs: 3\n", "jobs: must be a list of job mappings (got integer 3, line 1)"},
		{"file", "jobs: []\n", "jobs: the list is empty"},
		{"file", "jobs:\n  - name: a\nname: b\n", `unknown field "name" beside jobs`},
		{"file", "jobs:\n  - 3\n", "jobs[0]: must be a job mapping with fields name, model"},
		{"file", "", "job spec is empty"},
		{"file", "name: [\n", "job spec is not valid YAML"},
		{"file", "jobs:\n  - " + strings.ReplaceAll(strings.TrimSpace(minimalTrain), "\n", "\n    ") + "\n  - " + strings.ReplaceAll(strings.TrimSpace(minimalTrain), "\n", "\n    ") + "\n",
			`jobs[1].name: duplicate job name "job" (also jobs[0]); names must be unique`},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			specs, err := ParseSpecs([]byte(tc.yaml))
			if err == nil {
				err = ValidateSpecs(specs, zooOpts)
				if err == nil {
					t.Fatalf("accepted:\n%s\nwant an error containing %q", tc.yaml, tc.want)
				}
				// ValidateSpecs names fields jobs[i]; a single job's
				// messages have no prefix.
				if len(specs) == 1 {
					err = specs[0].Validate(zooOpts)
				}
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("input:\n%s\nerror:\n%v\nwant it to contain %q", tc.yaml, err, tc.want)
			}
		})
	}
}

func TestSpecReportsEveryProblem(t *testing.T) {
	const bad = `
jobs:
  - name: ok
    model: resnet50
    batch: 16
    iterations: 10
  - name: Bad_Name
    model: resnet50
    trace: x.json
    batch: 16
    iterations: 10
  - name: c
    model: vgg16
    batch: {min: 0, max: 32}
    iterations: 10
    priority: 12
    tolerance: 200%
  - name: d
    model: bert-base
    kind: infer
    batch: 1
    arrivals: {poisson_rate: 0}
`
	_, err := ParseSpecs([]byte(bad))
	if err == nil {
		t.Fatal("ParseSpecs accepted a file with several bad jobs")
	}
	want := []string{
		"jobs[1].name: must be a DNS label",
		"jobs[1]: set either model or trace, not both",
		"jobs[2].batch.min: must be ≥ 1 (got 0)",
		"jobs[2].priority: must be 0–9, higher is more important (got 12)",
		"jobs[2].tolerance: must be 0%–100%",
		"jobs[3].requests: required for an inference job",
		"jobs[3].arrivals.poisson_rate: must be a rate in requests per second, > 0 and ≤ 1e9 (got 0)",
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != len(want) {
		t.Errorf("want exactly %d problems, got:\n%v", len(want), err)
	}
	if strings.Contains(err.Error(), "jobs[0]") {
		t.Errorf("the good job was reported:\n%v", err)
	}
}

func TestSpecModelUnknownWithOptions(t *testing.T) {
	specs, err := ParseSpecs([]byte("jobs:\n  - name: a\n    model: resnet51\n    batch: 1\n    iterations: 1\n    device: a100\n"))
	if err != nil {
		t.Fatalf("ParseSpecs without options must not check model names: %v", err)
	}
	err = ValidateSpecs(specs, zooOpts)
	for _, w := range []string{`jobs[0].model: unknown model "resnet51" (known: vgg16, resnet50, inception-v3`, `jobs[0].device: unknown device profile "a100"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("ValidateSpecs error = %v; want %q", err, w)
		}
	}
	// A KnownModel func without a list still rejects, without "known:".
	err = specs[0].Validate(ValidateOptions{KnownModel: func(string) bool { return false }})
	if err == nil || !strings.Contains(err.Error(), `model: unknown model "resnet51"`) || strings.Contains(err.Error(), "known:") {
		t.Errorf("Validate error = %v", err)
	}
}

func TestSpecValidateInCode(t *testing.T) {
	s := Spec{Name: "x", Model: "mlp", Kind: Train, Batch: Range{Min: 0, Max: 8}, Iterations: 1, GPUs: Fixed(1)}
	if err := s.Validate(zooOpts); err == nil || !strings.Contains(err.Error(), "batch.min: must be ≥ 1 (got 0)") {
		t.Errorf("Validate = %v", err)
	}
	s = Spec{Name: "x", Model: "mlp", Batch: Fixed(8), Iterations: 1}
	err := s.Validate(zooOpts)
	for _, w := range []string{`kind: must be "train" or "infer" (got "")`, "gpus: must be 1–16384 (got 0)"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate = %v; want %q", err, w)
		}
	}
	s = Spec{Name: "x", Model: "mlp", Kind: Train, Batch: Fixed(8), Iterations: 1, GPUs: Fixed(1), Tolerance: math.NaN(), Host: HostTimes{PerKernel: math.Inf(1)}}
	err = s.Validate(zooOpts)
	for _, w := range []string{"tolerance: must be 0%–100%", "host.per_kernel: must be a duration ≥ 0"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate = %v; want %q", err, w)
		}
	}
}

func TestArrivalTimesPoisson(t *testing.T) {
	const n, rate = 10000, 50.0
	s := Spec{Arrivals: &Arrivals{PoissonRate: rate, Seed: 42}}
	a, b := s.ArrivalTimes(n), s.ArrivalTimes(n)
	if !slices.Equal(a, b) {
		t.Fatal("ArrivalTimes differs between calls with the same seed")
	}
	other := Spec{Arrivals: &Arrivals{PoissonRate: rate, Seed: 43}}
	if slices.Equal(a, other.ArrivalTimes(n)) {
		t.Fatal("different seeds gave the same arrival times")
	}
	if !slices.IsSorted(a) || a[0] <= 0 {
		t.Fatalf("times are not increasing from after 0: first %v", a[:3])
	}
	// The mean gap of n exponential gaps has standard deviation
	// 1/(rate·√n); allow five of them.
	mean := a[n-1] / n
	if tol := 5 / (rate * math.Sqrt(n)); math.Abs(mean-1/rate) > tol {
		t.Fatalf("mean gap %v, want %v ± %v", mean, 1/rate, tol)
	}
	// Exponential gaps: the variance equals the squared mean (within 10%).
	var ss float64
	prev := 0.0
	for _, x := range a {
		d := x - prev - mean
		ss += d * d
		prev = x
	}
	if cv2 := ss / n / (mean * mean); cv2 < 0.9 || cv2 > 1.1 {
		t.Fatalf("squared coefficient of variation of the gaps = %v, want about 1", cv2)
	}
	// Fixed values guard against the generator changing under us.
	want := []float64{0.00818449487656462, 0.05024281154606616}
	if got := a[:2]; !slices.Equal(got, want) {
		t.Fatalf("first arrivals = %v, want %v (seed 42, rate 50)", got, want)
	}
}

func TestArrivalTimesList(t *testing.T) {
	s := Spec{Arrivals: &Arrivals{Times: []float64{0, 0.1, 0.3}}}
	if got := s.ArrivalTimes(2); !slices.Equal(got, []float64{0, 0.1}) {
		t.Errorf("ArrivalTimes(2) = %v", got)
	}
	got := s.ArrivalTimes(5)
	if !slices.Equal(got, []float64{0, 0.1, 0.3}) {
		t.Errorf("ArrivalTimes(5) = %v", got)
	}
	got[0] = 9
	if s.Arrivals.Times[0] != 0 {
		t.Error("ArrivalTimes returned the spec's own slice")
	}
	if (&Spec{}).ArrivalTimes(3) != nil {
		t.Error("a spec without arrivals returned times")
	}
}

func TestSpecYAMLRoundTrip(t *testing.T) {
	specs := []Spec{
		{Name: "a", Model: "resnet50", Kind: Train, Batch: Range{Min: 8, Max: 64}, TargetSamples: 1e6, Priority: 2, Tolerance: 0, GPUs: Range{Min: 1, Max: 4}, Seq: 0, DType: "tf32"},
		{Name: "e", Model: "vgg16", Kind: Train, Batch: Fixed(16), Iterations: 5, Tolerance: 0.05, GPUs: Fixed(1), ParamChunk: 4 << 20, Optimizer: "spread"},
		{Name: "b", Model: "bert-base", Kind: Infer, Batch: Fixed(4), Requests: 3, Priority: 9, Tolerance: 0.05, GPUs: Fixed(1), Device: "h100-80gb",
			Arrivals: &Arrivals{Times: []float64{0, 0.1, 0.30000000000000004}}, Host: HostTimes{PerRequest: 0.002, PerKernel: 5e-6}, Seq: 128},
		{Name: "c", Trace: "x.trace.json", Kind: Train, Iterations: 7, Tolerance: 0.1, GPUs: Fixed(1)},
		{Name: "d", Model: "gpt2-small", Kind: Infer, Batch: Fixed(1), Requests: 100, Tolerance: 0.1, GPUs: Fixed(2), Arrivals: &Arrivals{PoissonRate: 12.5, Seed: -3}},
	}
	if err := ValidateSpecs(specs, zooOpts); err != nil {
		t.Fatal(err)
	}
	out, err := MarshalSpecs(specs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSpecs(out)
	if err != nil {
		t.Fatalf("ParseSpecs of marshalled specs: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, specs) {
		t.Fatalf("round trip changed the specs:\n%s\n got %+v\nwant %+v", out, back, specs)
	}
}

func TestExamples(t *testing.T) {
	// Only these examples are job specs of this format; others in the
	// directory belong to other commands.
	for _, name := range []string{"train-resnet50.yaml", "infer-bert.yaml", "elastic.yaml", "colocated.yaml"} {
		t.Run(name, func(t *testing.T) {
			specs, err := LoadSpecs(filepath.Join("../examples", name))
			if err != nil {
				t.Fatal(err)
			}
			if err := ValidateSpecs(specs, zooOpts); err != nil {
				t.Fatal(err)
			}
		})
	}
	specs, err := LoadSpecs("../examples/colocated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) < 2 || len(specs) > 4 {
		t.Errorf("colocated.yaml has %d jobs, want 2–4", len(specs))
	}
	if _, err := LoadSpecs(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("LoadSpecs of a missing file succeeded")
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSpecs(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("LoadSpecs error = %v, want it to name the file", err)
	}
}

// TestSpecMergeKeysDoNotMultiply guards against a file whose merge keys
// refer to each other many times over: each mapping is expanded once, so
// parsing stays fast (8 levels of 8 aliases would otherwise be 8^8 merges).
func TestSpecMergeKeysDoNotMultiply(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 {x: 1}\n")
	for i := 1; i <= 7; i++ {
		ref := strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 8)
		fmt.Fprintf(&b, "l%d: &l%d {<<: [%s]}\n", i, i, strings.TrimSuffix(ref, ", "))
	}
	b.WriteString("<<: [*l7, *l7, *l7, *l7, *l7, *l7, *l7, *l7]\nname: a\nmodel: mlp\nbatch: 1\niterations: 1\n")
	start := time.Now()
	_, err := ParseSpecs([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), `job: unknown field "x"`) {
		t.Fatalf("err = %v, want the merged field x reported", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("parsing took %v", d)
	}
}

// TestArrivalsZeroValuesGiven checks that arrival fields written out as 0 are
// judged as given: "poisson_rate: 0" is a bad rate (not a missing one), and
// "seed: 0" beside times is refused like any other seed there, since explicit
// times make no random draws.
func TestArrivalsZeroValuesGiven(t *testing.T) {
	const infer = "name: svc\nmodel: bert-base\nkind: infer\nbatch: 1\nrequests: 1\n"
	for _, tc := range []struct{ yaml, want, notWant string }{
		{infer + "arrivals: {poisson_rate: 0}\n",
			"arrivals.poisson_rate: must be a rate in requests per second, > 0 and ≤ 1e9 (got 0); write e.g. poisson_rate: 50, or list arrival times instead",
			"set poisson_rate (requests per second) or times"},
		{infer + "arrivals: {poisson_rate: 0.0, seed: 4}\n",
			"arrivals.poisson_rate: must be a rate in requests per second, > 0 and ≤ 1e9 (got 0)",
			"set poisson_rate (requests per second) or times"},
		{infer + "arrivals: {times: [0.5], seed: 0}\n",
			"arrivals.seed: only used with poisson_rate; explicit times make no random draws, so remove seed (got seed: 0 beside times)",
			""},
	} {
		_, err := ParseSpecs([]byte(tc.yaml))
		if err == nil {
			t.Errorf("accepted:\n%s\nwant an error containing %q", tc.yaml, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("input:\n%s\nerror:\n%v\nwant it to contain %q", tc.yaml, err, tc.want)
		}
		if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
			t.Errorf("input:\n%s\nerror:\n%v\nshould not say %q", tc.yaml, err, tc.notWant)
		}
	}
	// Left out, or null, they are still fine.
	for _, ok := range []string{
		infer + "arrivals: {times: [0.5]}\n",
		infer + "arrivals: {times: [0.5], seed: ~}\n",
		infer + "arrivals: {poisson_rate: 5}\n",
		infer + "arrivals: {poisson_rate: 5, seed: 0}\n",
	} {
		if _, err := ParseSpecs([]byte(ok)); err != nil {
			t.Errorf("refused:\n%s\n%v", ok, err)
		}
	}
}

// ValidateOptions.MaxSeq bounds seq per model; a model it gives no limit
// (0) ignores seq, and without MaxSeq only the package-wide MaxSeq holds.
func TestSpecSeqBoundedByModel(t *testing.T) {
	opts := zooOpts
	opts.MaxSeq = func(m string) int {
		if m == "bert-base" {
			return 512
		}
		return 0
	}
	spec := "name: job\nmodel: %s\nbatch: 4\niterations: 10\nseq: %d\n"
	if _, err := ParseSpecsWith(fmt.Appendf(nil, spec, "bert-base", 513), opts); err == nil || !strings.Contains(err.Error(), "seq: bert-base takes at most 512 tokens (got 513)") {
		t.Errorf("bert-base at seq 513: %v", err)
	}
	for _, c := range []struct {
		model string
		seq   int
		opts  ValidateOptions
	}{{"bert-base", 512, opts}, {"resnet50", 4096, opts}, {"bert-base", 513, zooOpts}} {
		if _, err := ParseSpecsWith(fmt.Appendf(nil, spec, c.model, c.seq), c.opts); err != nil {
			t.Errorf("%s at seq %d (MaxSeq set: %v): %v", c.model, c.seq, c.opts.MaxSeq != nil, err)
		}
	}
}

// param_chunk takes a size with a unit or a byte count, and the
// ValidateOptions check (the zoo's rows, in the coordinator) names the
// field.
func TestSpecParamChunk(t *testing.T) {
	for _, c := range []struct {
		text string
		want int64
	}{{"4MiB", 4 << 20}, {"2 mb", 2e6}, {"1048576", 1 << 20}, {"1e6", 1e6}, {"1.5KiB", 1536}} {
		s, err := ParseSpec([]byte(minimalTrain + "optimizer: spread\nparam_chunk: " + c.text + "\n"))
		if err != nil || s.ParamChunk != c.want || s.Optimizer != "spread" {
			t.Errorf("param_chunk: %s: %+v, %v; want %d bytes", c.text, s, err, c.want)
		}
	}
	opts := zooOpts
	opts.ParamChunk = func(m, dtype string, b int64) error {
		if b < 1000 {
			return fmt.Errorf("%d bytes is below one row of %s at %q", b, m, dtype)
		}
		return nil
	}
	if _, err := ParseSpecsWith([]byte(minimalTrain+"dtype: bf16\nparam_chunk: 10\n"), opts); err == nil || !strings.Contains(err.Error(), `param_chunk: 10 bytes is below one row of resnet50 at "bf16"`) {
		t.Errorf("param_chunk 10 with a row check: %v", err)
	}
	if _, err := ParseSpecsWith([]byte(minimalTrain+"param_chunk: 1000\n"), opts); err != nil {
		t.Errorf("param_chunk 1000 with a row check: %v", err)
	}
}

// TestSpecRefuseTraces: with RefuseTraces set, a trace job is a problem of
// its trace field, reported in the same pass as the other jobs' problems;
// without it a trace job is valid.
func TestSpecRefuseTraces(t *testing.T) {
	yaml := []byte("jobs:\n  - {name: a, model: resnet51, batch: 1, iterations: 1}\n  - {name: b, trace: g.trace.json, iterations: 2}\n")
	opts := zooOpts
	opts.RefuseTraces = "run zoo models only"
	_, err := ParseSpecsWith(yaml, opts)
	for _, w := range []string{`jobs[0].model: unknown model "resnet51"`, "jobs[1].trace: run zoo models only"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("ParseSpecsWith error = %v; want %q", err, w)
		}
	}
	if _, err := ParseSpecsWith([]byte("name: b\ntrace: g.trace.json\niterations: 2\n"), zooOpts); err != nil {
		t.Errorf("a trace job without RefuseTraces: %v", err)
	}
}
