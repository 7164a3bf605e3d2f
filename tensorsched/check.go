package tensorsched

import "fmt"

// The correctness checker (ExecOptions.Check) follows the data, not just the
// bytes. Every tensor has a logical version: the number of writes the
// program has made to it (the host writing an input counts; params and
// optimizer state start at version 0, on the device or, when the plan
// starts them on the host, as a host copy only). Separately it tracks which version
// the device buffer holds and which the host copy holds:
//
//   - an op's write bumps the logical version and the device now holds it;
//   - a swap-out gives the host copy the device's version and, from the
//     moment it is issued, the tensor is no longer readable on the device;
//   - a swap-in gives the device the host copy's version;
//   - a drop or a free after the last use leaves the device with nothing;
//   - a recompute gives the device the version the producing op wrote in
//     this iteration, and is only valid when the producer's inputs hold the
//     same versions it read the first time; the producer's other outputs
//     still on the device get that version back too (the re-run writes
//     them), so an in-place update of one since is undone.
//
// Every op must read device buffers holding the current logical version;
// anything else (reading a swapped-out, dropped or freed tensor, or a stale
// one: swapped in from an older copy, recomputed after an in-place update)
// is an error naming the job, the op and the tensor.

type goneReason uint8

const (
	goneNever goneReason = iota
	goneFreed
	goneDropped
	goneSwapped
	goneStartHost // never on the device yet: the run started it on the host
)

type checkJob struct {
	x      *xjob
	ver    []int32 // logical version
	dev    []int32 // version held on the device, -1: none
	host   []int32 // version of the host copy, -1: none
	defv   []int32 // version written by the producing op this iteration
	reason []goneReason
	goneAt []int32 // op after which the tensor left the device
	inOff  []int32
	inVer  []int32 // versions each op read at its last (original) run
	outOff []int32
	outVer []int32 // versions each op wrote at its last (original) run
}

type checker struct {
	jobs []checkJob
}

func newChecker(xs []xjob) *checker {
	c := &checker{jobs: make([]checkJob, len(xs))}
	for j := range xs {
		x := &xs[j]
		nt := len(x.g.Tensors)
		cj := &c.jobs[j]
		cj.x = x
		cj.ver = make([]int32, nt)
		cj.dev = make([]int32, nt)
		cj.host = make([]int32, nt)
		cj.defv = make([]int32, nt)
		cj.reason = make([]goneReason, nt)
		cj.goneAt = make([]int32, nt)
		for t := range cj.dev {
			cj.dev[t], cj.host[t], cj.defv[t] = -1, -1, -1
		}
		cj.inOff = make([]int32, len(x.g.Ops)+1)
		for i := range x.g.Ops {
			cj.inOff[i+1] = cj.inOff[i] + int32(len(x.g.Ops[i].Inputs))
		}
		cj.inVer = make([]int32, cj.inOff[len(x.g.Ops)])
		cj.outOff = make([]int32, len(x.g.Ops)+1)
		for i := range x.g.Ops {
			cj.outOff[i+1] = cj.outOff[i] + int32(len(x.g.Ops[i].Outputs))
		}
		cj.outVer = make([]int32, cj.outOff[len(x.g.Ops)])
	}
	return c
}

// initial marks a persistent tensor present on the device at t = 0.
func (c *checker) initial(j, t int) { c.jobs[j].dev[t] = c.jobs[j].ver[t] }

// initialHost marks a persistent tensor the plan starts on the host: its
// host copy holds version 0 and the device nothing until it is swapped in.
func (c *checker) initialHost(j, t int) {
	cj := &c.jobs[j]
	cj.host[t] = cj.ver[t]
	cj.reason[t] = goneStartHost
	cj.goneAt[t] = -1
}

// write records op i (or the host, i = -1) writing tensor t.
func (c *checker) write(j, i, t int) {
	cj := &c.jobs[j]
	cj.ver[t]++
	cj.dev[t] = cj.ver[t]
	if i >= 0 && int(cj.x.def[t]) == i {
		cj.defv[t] = cj.ver[t]
	}
}

// op checks op i's reads and applies its writes.
func (c *checker) op(j, i int) error {
	cj := &c.jobs[j]
	op := &cj.x.g.Ops[i]
	off := cj.inOff[i]
	for k, t := range op.Inputs {
		if cj.dev[t] != cj.ver[t] {
			return c.readError(j, i, t)
		}
		cj.inVer[int(off)+k] = cj.ver[t]
	}
	for k, t := range op.Outputs {
		c.write(j, i, t)
		cj.outVer[int(cj.outOff[i])+k] = cj.ver[t]
	}
	return nil
}

// readError explains why op i of job j may not read tensor t.
func (c *checker) readError(j, i, t int) error {
	cj := &c.jobs[j]
	x := cj.x
	op := &x.g.Ops[i]
	what := fmt.Sprintf("check: job %q iteration %d: op %d (%s) reads tensor %d (%s)", x.name, x.iter, i, op.Name, t, x.g.Tensors[t].Name)
	if cj.dev[t] >= 0 {
		return fmt.Errorf("%s, whose device copy is stale (version %d, current %d)", what, cj.dev[t], cj.ver[t])
	}
	switch cj.reason[t] {
	case goneSwapped:
		return fmt.Errorf("%s, which was swapped out after op %d and not swapped back in before it", what, cj.goneAt[t])
	case goneDropped:
		return fmt.Errorf("%s, which was dropped after op %d and not recomputed before it", what, cj.goneAt[t])
	case goneFreed:
		return fmt.Errorf("%s, which was freed after its last use (op %d)", what, cj.goneAt[t])
	case goneStartHost:
		return fmt.Errorf("%s, which the plan starts on the host and does not swap in before it", what)
	}
	return fmt.Errorf("%s, which is not on the device", what)
}

// gone records tensor t leaving the device after op `after`.
func (c *checker) gone(j, t int, r goneReason, after int) {
	cj := &c.jobs[j]
	if r == goneSwapped {
		cj.host[t] = cj.dev[t]
	}
	cj.dev[t] = -1
	cj.reason[t] = r
	cj.goneAt[t] = int32(after)
}

// swapIn records the host copy of t coming back.
func (c *checker) swapIn(j, t int) {
	cj := &c.jobs[j]
	cj.dev[t] = cj.host[t]
	cj.host[t] = -1
}

func (c *checker) swapInError(j, t, after, before int) error {
	cj := &c.jobs[j]
	x := cj.x
	return fmt.Errorf("check: job %q iteration %d: swap-in of tensor %d (%s) after op %d for op %d, but it has no host copy (%s)",
		x.name, x.iter, t, x.g.Tensors[t].Name, after, before, map[goneReason]string{
			goneNever: "never swapped out", goneFreed: "freed after its last use", goneDropped: "dropped, not swapped out",
		}[cj.reason[t]])
}

// recompute checks that re-running producer p before op `before` reproduces
// the versions it wrote, and gives them to tensors.
func (c *checker) recompute(j, p, before int, tensors []int32) error {
	cj := &c.jobs[j]
	x := cj.x
	op := &x.g.Ops[p]
	off := cj.inOff[p]
	for k, t := range op.Inputs {
		if cj.dev[t] != cj.inVer[int(off)+k] {
			if cj.dev[t] < 0 {
				return fmt.Errorf("check: job %q iteration %d: recompute of op %d (%s) before op %d: %w",
					x.name, x.iter, p, op.Name, before, c.readError(j, p, t))
			}
			return fmt.Errorf("check: job %q iteration %d: recompute of op %d (%s) before op %d reads tensor %d (%s) at version %d, but the original run read version %d: the result would differ",
				x.name, x.iter, p, op.Name, before, t, x.g.Tensors[t].Name, cj.dev[t], cj.inVer[int(off)+k])
		}
	}
	for _, t := range tensors {
		if cj.dev[t] < 0 {
			cj.dev[t] = cj.defv[t]
		}
	}
	// The re-run writes every output of the producer: one still on the
	// device is overwritten with what the producer wrote, undoing any
	// later in-place update of it (a later read then finds it stale).
	for k, t := range op.Outputs {
		if cj.dev[t] >= 0 {
			cj.dev[t] = cj.outVer[int(cj.outOff[p])+k]
		}
	}
	return nil
}
