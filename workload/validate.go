package workload

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// MaxProblems is how many problems Validate (and spec validation) report
// individually; any further ones are summarised as "and N more problems".
const MaxProblems = 20

// problems collects validation errors so that every problem is reported at
// once rather than one per run.
type problems struct {
	list []error
	n    int // total, including those not kept
}

func (p *problems) add(format string, args ...any) {
	p.n++
	if len(p.list) < MaxProblems {
		p.list = append(p.list, fmt.Errorf(format, args...))
	}
}

func (p *problems) addErr(err error) {
	p.n++
	if len(p.list) < MaxProblems {
		p.list = append(p.list, err)
	}
}

// err joins the collected problems (nil when there are none). Problems past
// MaxProblems are counted in a final "and N more problems" entry.
func (p *problems) err() error {
	if p.n == 0 {
		return nil
	}
	errs := p.list
	if extra := p.n - len(p.list); extra > 0 {
		errs = append(errs[:len(errs):len(errs)], fmt.Errorf("and %d more %s", extra, Plural(extra, "problem")))
	}
	return errors.Join(errs...)
}

// Plural is word for a count of n: "problem" for 1, "problems" else.
func Plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Validate checks that g is a well-formed iteration graph and returns every
// problem it finds, joined with errors.Join (at most MaxProblems of them are
// listed individually). Each problem names the tensor or op and the field,
// for example
//
//	op 12 "conv3_bwd": inputs[1]: tensor 999 does not exist (graph has 410 tensors)
//
// It checks: a model name, a known kind, batch ≥ 1, at least one op, dense ids
// (Tensors[i].ID == i and Ops[i].ID == i), tensor ids in op inputs and outputs
// that exist, tensor sizes ≥ 0 whose total fits in an int64, non-negative
// finite flops, bytes moved, measured times and host times, known tensor kinds
// and phases, no backward or optimizer ops in an inference graph, valid UTF-8
// names, and that every tensor that is not persistent (param, optimizer state)
// or an input is written by an earlier op before any op reads it.
func (g *Graph) Validate() error {
	var p problems
	if g.Model == "" {
		p.add("model: must name the model (got an empty string)")
	} else if !utf8.ValidString(g.Model) {
		p.add("model: not valid UTF-8")
	}
	if g.Kind != Train && g.Kind != Infer {
		p.add("kind: must be %q or %q (got %q)", Train, Infer, g.Kind)
	}
	if g.Batch < 1 {
		p.add("batch: must be ≥ 1 (got %d)", g.Batch)
	}
	checkSeconds(&p, "host_seconds_per_iteration", g.HostSecondsPerIteration)
	checkSeconds(&p, "host_seconds_per_kernel", g.HostSecondsPerKernel)
	if len(g.Ops) == 0 {
		p.add("ops: graph has no ops")
	}

	nt := len(g.Tensors)
	var total int64 // bytes of all tensors so far; sums of them must not wrap
	overflow := false
	for i := range g.Tensors {
		t := &g.Tensors[i]
		where := tensorLabel(i, t.Name)
		if t.ID != i {
			p.add("%s: id: must equal its index %d in tensors (got %d)", where, i, t.ID)
		}
		if !utf8.ValidString(t.Name) {
			p.add("%s: name: not valid UTF-8", where)
		}
		switch {
		case t.Bytes < 0:
			p.add("%s: bytes: negative size %d", where, t.Bytes)
		case overflow:
		case t.Bytes > math.MaxInt64-total:
			p.add("%s: bytes: the tensors' sizes add up to more than %d bytes (got %d after %d); no device holds that much", where, int64(math.MaxInt64), t.Bytes, total)
			overflow = true
		default:
			total += t.Bytes
		}
		if t.Kind >= numTensorKinds {
			p.add("%s: kind: unknown tensor kind %d (allowed: %v)", where, uint8(t.Kind), tensorKindNames)
		}
		for j, d := range t.Shape {
			if d < 0 {
				p.add("%s: shape[%d]: negative dimension %d", where, j, d)
			}
		}
		if !utf8.ValidString(t.DType) {
			p.add("%s: dtype: not valid UTF-8", where)
		}
	}

	// firstWrite[t] is the first op that lists t as an output, or -1.
	firstWrite := make([]int, nt)
	for i := range firstWrite {
		firstWrite[i] = -1
	}
	for i := range g.Ops {
		for _, t := range g.Ops[i].Outputs {
			if t >= 0 && t < nt && firstWrite[t] < 0 {
				firstWrite[t] = i
			}
		}
	}

	for i := range g.Ops {
		op := &g.Ops[i]
		where := opLabel(i, op.Name)
		if op.ID != i {
			p.add("%s: id: must equal its index %d in ops (got %d)", where, i, op.ID)
		}
		for _, s := range []struct{ field, v string }{{"name", op.Name}, {"kind", op.Kind}, {"dtype", op.DType}, {"launch", op.Launch}} {
			if !utf8.ValidString(s.v) {
				p.add("%s: %s: not valid UTF-8", where, s.field)
			}
		}
		if op.Phase > Optimizer {
			p.add("%s: phase: unknown phase %d (allowed: %v)", where, uint8(op.Phase), phaseNames)
		} else if g.Kind == Infer && op.Phase != Forward {
			p.add("%s: phase: %s op in an inference graph (inference graphs have only forward ops)", where, op.Phase)
		}
		checkNonNeg(&p, where+": flops", op.FLOPs)
		checkNonNeg(&p, where+": bytes_moved", op.MemBytes)
		checkNonNeg(&p, where+": measured_seconds", op.MeasuredSeconds)
		for j, t := range op.Inputs {
			field := fmt.Sprintf("%s: inputs[%d]", where, j)
			if t < 0 || t >= nt {
				p.add("%s: tensor %d does not exist (graph has %d tensors)", field, t, nt)
				continue
			}
			tt := &g.Tensors[t]
			if tt.Kind.Persistent() || tt.Kind == Input || tt.Kind >= numTensorKinds {
				continue
			}
			if fw := firstWrite[t]; fw < 0 {
				p.add("%s: %s is read but no op writes it (only params, optimizer state and inputs exist before the first op)", field, tensorLabel(t, tt.Name))
			} else if fw >= i {
				by := fmt.Sprintf("op %d", fw)
				if fw == i {
					by = "this op"
				}
				p.add("%s: %s is used before it is defined (first written by %s)", field, tensorLabel(t, tt.Name), by)
			}
		}
		for j, t := range op.Outputs {
			if t < 0 || t >= nt {
				p.add("%s: outputs[%d]: tensor %d does not exist (graph has %d tensors)", where, j, t, nt)
			}
		}
	}
	return p.err()
}

func tensorLabel(i int, name string) string {
	return fmt.Sprintf("tensor %d %q", i, name)
}

func opLabel(i int, name string) string {
	return fmt.Sprintf("op %d %q", i, name)
}

// FiniteNonNeg reports whether x is a finite number ≥ 0 (not NaN, not
// infinite): what a time, size or rate read off a file or the network must
// be before it is used.
func FiniteNonNeg(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// checkNonNeg reports v when it is negative, NaN or infinite; field already
// carries the location.
func checkNonNeg(p *problems, field string, v float64) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		p.add("%s: must be a finite number ≥ 0 (got %v)", field, v)
	case v < 0:
		p.add("%s: negative value %v", field, v)
	}
}

func checkSeconds(p *problems, field string, v float64) {
	checkNonNeg(p, field, v)
}
