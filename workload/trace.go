package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// TraceFormat is the format string every trace file carries in its "format"
// field.
const TraceFormat = "gpusched.trace/v1"

// traceFile is the on-disk form of a trace: the graph's own JSON fields with
// the format string in front. Tensors are written through traceTensor so
// that an empty shape and an absent one stay distinct.
type traceFile struct {
	Format string `json:"format"`
	*Graph
	Tensors []traceTensor `json:"tensors"`
}

// traceTensor writes a Tensor with its shape omitted only when it is nil,
// so that a scalar's empty shape survives a round trip.
type traceTensor struct {
	Tensor
	Shape *[]int `json:"shape,omitempty"`
}

// ExportTrace writes g to w as a gpusched.trace/v1 JSON document. It refuses
// a graph that Validate rejects, so that every exported trace imports again.
func ExportTrace(w io.Writer, g *Graph) error {
	if g == nil {
		return errors.New("export trace: nil graph")
	}
	if err := g.Validate(); err != nil {
		return fmt.Errorf("export trace: invalid graph:\n%w", err)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	tf := traceFile{Format: TraceFormat, Graph: g}
	if g.Tensors != nil {
		tf.Tensors = make([]traceTensor, len(g.Tensors))
		for i := range g.Tensors {
			tf.Tensors[i].Tensor = g.Tensors[i]
			if g.Tensors[i].Shape != nil {
				tf.Tensors[i].Shape = &g.Tensors[i].Shape
			}
		}
	}
	if err := enc.Encode(tf); err != nil {
		return fmt.Errorf("export trace: %w", err)
	}
	return nil
}

// ImportTrace reads a gpusched.trace/v1 JSON document and returns its graph.
// It rejects a missing or different format string, malformed JSON (naming
// the line and column), unknown fields, values of the wrong type (naming the
// field), trailing data, and every problem Validate finds.
func ImportTrace(r io.Reader) (*Graph, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return parseTrace(data)
}

// LoadTrace reads and imports the trace file at path.
func LoadTrace(path string) (*Graph, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	g, err := parseTrace(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

func parseTrace(data []byte) (*Graph, error) {
	// A UTF-8 byte-order mark, as some editors write, is not JSON.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	// Check the format first so that a file of another format (or version)
	// is reported as such rather than as a list of unknown fields.
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonError(data, "", err)
	}
	switch {
	case head.Format == nil:
		return nil, fmt.Errorf("trace: missing \"format\" field (expected %q)", TraceFormat)
	case *head.Format != TraceFormat:
		return nil, fmt.Errorf("trace: format %q is not supported (expected %q)", *head.Format, TraceFormat)
	}

	// encoding/json keeps the last of a repeated key; refuse it instead,
	// as a job spec refuses a field set twice.
	if err := repeatedKey(data); err != nil {
		return nil, err
	}

	// Decode tensors and ops one element at a time so that a type error or
	// an unknown field is reported with the element it is in.
	var raw struct {
		Format string `json:"format"`
		Graph
		Tensors []json.RawMessage `json:"tensors"`
		Ops     []json.RawMessage `json:"ops"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, jsonError(data, "", err)
	}
	// json.Unmarshal above has already rejected data after the object.
	g := raw.Graph
	if raw.Tensors != nil {
		g.Tensors = make([]Tensor, len(raw.Tensors))
	}
	for i, m := range raw.Tensors {
		if err := decodeStrict(m, &g.Tensors[i]); err != nil {
			return nil, jsonError(m, fmt.Sprintf("tensors[%d]", i), err)
		}
	}
	if raw.Ops != nil {
		g.Ops = make([]Op, len(raw.Ops))
	}
	for i, m := range raw.Ops {
		if err := decodeStrict(m, &g.Ops[i]); err != nil {
			return nil, jsonError(m, fmt.Sprintf("ops[%d]", i), err)
		}
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("trace: invalid graph:\n%w", err)
	}
	return &g, nil
}

// repeatedKey reports the first key written twice in one object of data
// (valid JSON), naming its path, such as ops[2].flops, and its line.
func repeatedKey(data []byte) error {
	type frame struct {
		path    string
		keys    map[string]bool // nil for an array
		key     string          // an object's current key
		wantKey bool            // an object expects a key or its end next
		index   int             // an array's next element
	}
	var stack []*frame
	top := func() *frame {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1]
	}
	valuePath := func() string {
		switch f := top(); {
		case f == nil:
			return ""
		case f.keys != nil:
			if f.path == "" {
				return f.key
			}
			return f.path + "." + f.key
		default:
			return fmt.Sprintf("%s[%d]", f.path, f.index)
		}
	}
	valueDone := func() {
		if f := top(); f != nil {
			f.wantKey = true
			f.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error reported elsewhere
		}
		d, isDelim := tok.(json.Delim)
		if f := top(); f != nil && f.keys != nil && f.wantKey && !isDelim {
			k, _ := tok.(string)
			if f.keys[k] {
				line, _ := lineCol(data, dec.InputOffset())
				f.key = k
				return fmt.Errorf("trace: %s: set twice in one object (line %d); keep one", valuePath(), line)
			}
			f.keys[k], f.key, f.wantKey = true, k, false
			continue
		}
		switch {
		case isDelim && d == '{':
			stack = append(stack, &frame{path: valuePath(), keys: map[string]bool{}, wantKey: true})
		case isDelim && d == '[':
			stack = append(stack, &frame{path: valuePath()})
		case isDelim: // '}' or ']'
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields and
// trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the value")
	}
	return nil
}

// jsonError rewrites an encoding/json error in the trace's terms. With an
// empty elem, data is the whole file and positions are given as line and
// column; otherwise data is the element named by elem (such as "ops[3]").
func jsonError(data []byte, elem string, err error) error {
	where := func(off int64) string {
		if elem != "" {
			return ""
		}
		line, col := lineCol(data, off)
		return fmt.Sprintf(" (line %d, column %d)", line, col)
	}
	prefix := "trace: "
	if elem != "" {
		prefix += elem + ": "
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Offset counts the bytes read, including the offending one.
		return fmt.Errorf("%smalformed JSON%s: %v", prefix, where(max(syn.Offset-1, 0)), syn)
	case errors.As(err, &typ) && typ.Field == "" && elem == "":
		return fmt.Errorf("trace: must be a JSON object with a \"format\" field (got a JSON %s)", typ.Value)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "value"
		}
		return fmt.Errorf("%s%s: cannot use JSON %s as %s%s", prefix, field, typ.Value, typ.Type, where(typ.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fmt.Errorf("%smalformed JSON: unexpected end of input after %d bytes", prefix, len(data))
	}
	// Unknown fields, unknown kind or phase names and the like.
	return fmt.Errorf("%s%v", prefix, err)
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = 1 + len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}
