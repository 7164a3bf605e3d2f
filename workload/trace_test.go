package workload

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTraceRoundTrip(t *testing.T) {
	graphs := map[string]*Graph{"train": smallGraph()}
	inf := smallGraph()
	inf.Kind = Infer
	inf.Ops = inf.Ops[:2]
	inf.HostSecondsPerIteration = 0.002
	inf.HostSecondsPerKernel = 5e-6
	inf.Ops[1].Inputs = []int{}    // empty, not nil: must survive as empty
	inf.Tensors[8].Shape = []int{} // a scalar's empty shape, likewise
	graphs["infer"] = inf
	for name, g := range graphs {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := ExportTrace(&buf, g); err != nil {
				t.Fatalf("ExportTrace: %v", err)
			}
			if !strings.Contains(buf.String(), `"format":"gpusched.trace/v1"`) {
				t.Fatalf("exported trace lacks the format string:\n%s", buf.String())
			}
			got, err := ImportTrace(&buf)
			if err != nil {
				t.Fatalf("ImportTrace: %v", err)
			}
			if !reflect.DeepEqual(got, g) {
				t.Fatalf("round trip changed the graph:\n got %+v\nwant %+v", got, g)
			}
		})
	}
}

func TestExportTraceRefusesInvalidGraph(t *testing.T) {
	g := smallGraph()
	g.Tensors[1].Bytes = -4
	err := ExportTrace(&bytes.Buffer{}, g)
	if err == nil || !strings.Contains(err.Error(), `tensor 1 "fc.w": bytes: negative size -4`) {
		t.Fatalf("ExportTrace error = %v, want the negative size named", err)
	}
}

func TestLoadTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.trace.json")
	var buf bytes.Buffer
	if err := ExportTrace(&buf, smallGraph()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := LoadTrace(path)
	if err != nil {
		t.Fatalf("LoadTrace: %v", err)
	}
	if !reflect.DeepEqual(g, smallGraph()) {
		t.Fatal("LoadTrace returned a different graph")
	}
	if _, err := LoadTrace(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("LoadTrace of a missing file succeeded")
	}
	if err := os.WriteFile(path, []byte(`{"format":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTrace(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadTrace error = %v, want it to name the file", err)
	}
}

// exported returns the small graph's trace with old replaced by new
// (exactly once), for building malformed traces.
func exported(t *testing.T, old, new string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := ExportTrace(&buf, smallGraph()); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	if old == "" {
		return s
	}
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%q occurs %d times in the trace, want once:\n%s", old, n, s)
	}
	return strings.Replace(s, old, new, 1)
}

func TestImportTraceRejects(t *testing.T) {
	cases := []struct {
		name     string
		old, new string // replacement applied to the small graph's trace
		raw      string // used instead when set
		want     []string
	}{
		{name: "missing format", old: `"format":"gpusched.trace/v1",`, new: ``,
			want: []string{`missing "format" field (expected "gpusched.trace/v1")`}},
		{name: "other format", old: `"gpusched.trace/v1"`, new: `"gpusched.trace/v2"`,
			want: []string{`format "gpusched.trace/v2" is not supported (expected "gpusched.trace/v1")`}},
		{name: "format of wrong type", old: `"gpusched.trace/v1"`, new: `1`,
			want: []string{"format: cannot use JSON number"}},
		{name: "not an object", raw: `[1, 2]`,
			want: []string{`must be a JSON object with a "format" field (got a JSON array)`}},
		{name: "malformed JSON", raw: "{\n  \"format\": \"gpusched.trace/v1\",\n  \"model\": oops\n}",
			want: []string{"malformed JSON (line 3, column 12)"}},
		{name: "truncated", raw: `{"format":"gpusched.trace/v1","model":"x"`,
			want: []string{"malformed JSON"}},
		{name: "trailing data", old: "", raw: "", want: []string{"malformed JSON (line 2, column 1)", "after top-level value"}},
		{name: "unknown top-level field", old: `"model":"tiny"`, new: `"model":"tiny","modle":"tiny"`,
			want: []string{`unknown field "modle"`}},
		{name: "unknown op field", old: `"name":"relu_bwd"`, new: `"name":"relu_bwd","stream":2`,
			want: []string{`ops[2]: json: unknown field "stream"`}},
		{name: "unknown tensor kind", old: `"kind":"workspace"`, new: `"kind":"scratch"`,
			want: []string{`tensors[8]`, `unknown tensor kind "scratch"`}},
		{name: "unknown phase", old: `"phase":"optimizer"`, new: `"phase":"update"`,
			want: []string{`ops[4]`, `unknown phase "update"`}},
		{name: "wrong type in op", old: `"flops":16,"bytes_moved":128,"phase":"backward"`, new: `"flops":"16","bytes_moved":128,"phase":"backward"`,
			want: []string{`ops[2]: flops: cannot use JSON string as float64`}},
		{name: "dangling tensor id", old: `"inputs":[0,4]`, new: `"inputs":[0,999]`,
			want: []string{`op 3 "fc_bwd_w": inputs[1]: tensor 999 does not exist (graph has 9 tensors)`}},
		{name: "negative size", old: `"name":"fc.w","bytes":64`, new: `"name":"fc.w","bytes":-4`,
			want: []string{`tensor 1 "fc.w": bytes: negative size -4`}},
		{name: "use before definition", old: `"inputs":[2],"outputs":[3]`, new: `"inputs":[4],"outputs":[3]`,
			want: []string{`op 1 "relu": inputs[0]: tensor 4 "relu.grad" is used before it is defined (first written by op 2)`}},
		{name: "several problems at once", old: `"name":"fc.w","bytes":64`, new: `"name":"fc.w","bytes":-4,"kind":"param","shape":[4,4]},{"id":99,"name":"extra","bytes":-1`,
			want: []string{`tensor 1 "fc.w": bytes: negative size -4`, `tensor 2 "extra": id: must equal its index 2 in tensors (got 99)`, `tensor 2 "extra": bytes: negative size -1`}},
		{name: "bad batch", old: `"batch":4`, new: `"batch":0`,
			want: []string{"batch: must be ≥ 1 (got 0)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.raw
			switch {
			case tc.name == "trailing data":
				in = exported(t, "", "") + `{"format":"gpusched.trace/v1"}`
			case in == "":
				in = exported(t, tc.old, tc.new)
			}
			g, err := ImportTrace(strings.NewReader(in))
			if err == nil {
				t.Fatalf("ImportTrace accepted the trace (%d ops); want an error containing %q", len(g.Ops), tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ImportTrace error:\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// Tensors whose sizes are each valid but whose total does not fit in an
// int64 were accepted: the graph's byte counts then wrapped negative (a
// persistent footprint of -9223372036854775808 bytes fits any GPU). The zoo
// refuses such graphs; a trace is refused the same way.
func TestImportTraceRefusesOverflowingBytes(t *testing.T) {
	in := exported(t, `"name":"fc.w","bytes":64`, `"name":"fc.w","bytes":4611686018427387904`)
	in = strings.Replace(in, `"name":"fc.w.adam_m","bytes":64`, `"name":"fc.w.adam_m","bytes":4611686018427387904`, 1)
	g, err := ImportTrace(strings.NewReader(in))
	want := `tensor 6 "fc.w.adam_m": bytes: the tensors' sizes add up to more than 9223372036854775807 bytes`
	if err == nil || !strings.Contains(err.Error(), want) {
		got := ""
		if g != nil {
			got = fmt.Sprintf(" (persistent bytes %d)", g.PersistentBytes())
		}
		t.Fatalf("error %v%s; want it to contain %q", err, got, want)
	}
}

// A key written twice in one JSON object was accepted and the later value
// kept, so `"batch":4,"batch":64` imported a batch-64 graph without a word
// about the 4 (a job spec refuses a field set twice). Both are refused,
// naming the field and the line.
func TestImportTraceRefusesRepeatedKeys(t *testing.T) {
	for _, c := range []struct{ old, new, want string }{
		{`"batch":4`, "\"batch\":4,\n\"batch\":64", `trace: batch: set twice in one object (line 2)`},
		{`"name":"relu_bwd"`, `"name":"relu_bwd","flops":1e9`, `trace: ops[2].flops: set twice in one object (line 1)`},
	} {
		g, err := ImportTrace(strings.NewReader(exported(t, c.old, c.new)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			got := ""
			if g != nil {
				got = fmt.Sprintf(" (batch %d, ops[2].flops %v)", g.Batch, g.Ops[2].FLOPs)
			}
			t.Errorf("%s: error %v%s; want it to contain %q", c.new, err, got, c.want)
		}
	}
}

// A trace saved with a UTF-8 byte-order mark (as some editors on Windows
// write it) was refused as malformed JSON at line 1, column 1, with no
// word of what to change. The mark is skipped, as job specs skip it.
func TestImportTraceSkipsByteOrderMark(t *testing.T) {
	plain := exported(t, "", "")
	want, err := ImportTrace(strings.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	g, err := ImportTrace(strings.NewReader("\ufeff" + plain))
	if err != nil {
		t.Fatalf("trace with a byte-order mark: %v", err)
	}
	if g.Batch != want.Batch || len(g.Ops) != len(want.Ops) || len(g.Tensors) != len(want.Tensors) {
		t.Fatalf("with the mark: batch %d, %d ops, %d tensors; without: %d, %d, %d",
			g.Batch, len(g.Ops), len(g.Tensors), want.Batch, len(want.Ops), len(want.Tensors))
	}
}
