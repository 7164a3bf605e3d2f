package workload_test

// Fuzz tests of spec and trace parsing, and round trips of real zoo graphs
// through the trace format. This file is an external test package so that it
// can build graphs with workload/zoo, which imports workload.

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// FuzzParseSpec checks that spec parsing never panics, that every accepted
// input validates, and that accepted specs survive a YAML round trip.
func FuzzParseSpec(f *testing.F) {
	for _, name := range []string{"train-resnet50.yaml", "infer-bert.yaml", "elastic.yaml", "colocated.yaml"} {
		data, err := os.ReadFile(filepath.Join("../examples", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"name: a\nmodel: mlp\nbatch: 1\niterations: 1\n",
		"name: a\nmodel: mlp\nkind: infer\nbatch: 2\nrequests: 3\narrivals: {poisson_rate: 50, seed: 9}\nhost: {per_request: 2ms}\n",
		"name: a\ntrace: t.json\ntarget_samples: 10\ntolerance: 0%\n",
		"jobs:\n  - &b {name: a, model: mlp, batch: {min: 1, max: 8}, gpus: {value: 2}, iterations: 1}\n  - <<: *b\n    name: b\n",
		"name: a\nmodel: mlp\nbatch: {min: 0, max: 8}\npriority: 12\ntolerance: 10\n",
		"---\nname: a\nmodel: mlp\nbatch: 1\niterations: 1\n---\nname: b\nmodel: mlp\nbatch: 1\niterations: 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		specs, err := workload.ParseSpecs(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if len(specs) == 0 {
			t.Fatal("ParseSpecs accepted input with no jobs")
		}
		if err := workload.ValidateSpecs(specs, workload.ValidateOptions{}); err != nil {
			t.Fatalf("accepted specs do not validate: %v", err)
		}
		for i := range specs {
			specs[i].ArrivalTimes(8)
			specs[i].Elastic()
		}
		out, err := workload.MarshalSpecs(specs)
		if err != nil {
			t.Fatalf("MarshalSpecs: %v", err)
		}
		back, err := workload.ParseSpecs(out)
		if err != nil {
			t.Fatalf("re-parsing marshalled specs: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, specs) {
			t.Fatalf("YAML round trip changed the specs:\n%s\n got %#v\nwant %#v", out, back, specs)
		}
	})
}

// FuzzParseTrace checks that trace import never panics, that every accepted
// trace validates, and that export then import gives the same graph.
func FuzzParseTrace(f *testing.F) {
	for _, kind := range []workload.JobKind{workload.Train, workload.Infer} {
		g, err := zoo.Build("mlp", kind, 2, zoo.Options{})
		if err != nil {
			f.Fatal(err)
		}
		var buf bytes.Buffer
		if err := workload.ExportTrace(&buf, g); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	for _, s := range []string{
		`{"format":"gpusched.trace/v1","model":"m","kind":"infer","batch":1,"tensors":[{"id":0,"name":"x","bytes":4,"kind":"input"},{"id":1,"name":"y","bytes":4,"kind":"activation","shape":[]}],"ops":[{"id":0,"name":"f","kind":"relu","inputs":[0],"outputs":[1],"flops":1,"bytes_moved":8,"phase":"forward"}]}`,
		`{"format":"gpusched.trace/v1","model":"m","kind":"train","batch":1,"tensors":[{"id":0,"name":"y","bytes":-4,"kind":"activation"}],"ops":[{"id":0,"name":"f","kind":"relu","inputs":[0, 7],"outputs":[0],"flops":-1,"bytes_moved":8,"phase":"backward"}]}`,
		`{"format":"gpusched.trace/v2"}`,
		`{"format":"gpusched.trace/v1","tensors":[null],"ops":null}`,
		`[1,2,3]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := workload.ImportTrace(bytes.NewReader(data))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("imported graph does not validate: %v", err)
		}
		g.Lifetimes()
		g.ParamCount()
		var buf bytes.Buffer
		if err := workload.ExportTrace(&buf, g); err != nil {
			t.Fatalf("ExportTrace of an imported graph: %v", err)
		}
		back, err := workload.ImportTrace(&buf)
		if err != nil {
			t.Fatalf("re-importing an exported graph: %v\n%s", err, buf.Bytes())
		}
		if !reflect.DeepEqual(back, g) {
			t.Fatalf("trace round trip changed the graph:\n got %#v\nwant %#v", back, g)
		}
	})
}

// TestTraceRoundTripZoo exports every zoo model's training and inference
// graph as a trace and imports it again unchanged.
func TestTraceRoundTripZoo(t *testing.T) {
	for _, name := range zoo.Models() {
		for _, kind := range []workload.JobKind{workload.Train, workload.Infer} {
			t.Run(name+"/"+string(kind), func(t *testing.T) {
				g, err := zoo.Build(name, kind, 2, zoo.Options{})
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				if err := workload.ExportTrace(&buf, g); err != nil {
					t.Fatalf("ExportTrace: %v", err)
				}
				back, err := workload.ImportTrace(&buf)
				if err != nil {
					t.Fatalf("ImportTrace: %v", err)
				}
				if !reflect.DeepEqual(back, g) {
					t.Fatal("round trip changed the graph")
				}
			})
		}
	}
}

// TestSpecsWithZooNames validates the example specs against the zoo's own
// model list, the way the coordinator does.
func TestSpecsWithZooNames(t *testing.T) {
	opts := workload.ValidateOptions{
		KnownModel: func(m string) bool { _, ok := zoo.Canonical(m); return ok },
		Models:     zoo.Models(),
	}
	for _, name := range []string{"train-resnet50.yaml", "infer-bert.yaml", "elastic.yaml", "colocated.yaml"} {
		specs, err := workload.LoadSpecs(filepath.Join("../examples", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := workload.ValidateSpecs(specs, opts); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
