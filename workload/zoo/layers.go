package zoo

import (
	"fmt"
	"strconv"

	"github.com/gpusched/gpusched/workload"
)

// Layer primitives. Each appends its forward kernel and, when training,
// records the backward kernels with the tensors they read, so that saved
// activations stay alive until their last use in backward:
//
//	conv2d, matmul  grad-input reads dY and W; grad-weight reads dY and X
//	batchnorm       one fused kernel reads dY, X and gamma, writes dX, dgamma, dbeta
//	layernorm       as batchnorm
//	relu, tanh      read dY and Y;  gelu reads dY and X
//	maxpool         reads dY, X and Y;  avgpool reads dY
//	softmax         reads dY and Y
//	add             no kernel: dY is passed to every input
//	concat          a split kernel writes one gradient per input
//
// Tensors are NCHW for convolutional networks and [batch, seq, hidden] for
// transformers.

// conv2d is a 2-D convolution with a kh×kw kernel, stride (sh, sw) and zero
// padding (ph, pw), with an optional bias.
func (b *builder) conv2d(name string, x, cout, kh, kw, sh, sw, ph, pw int, bias bool) int {
	s := b.shape(x)
	n, cin, h, w := s[0], s[1], s[2], s[3]
	ho := (h+2*ph-kh)/sh + 1
	wo := (w+2*pw-kw)/sw + 1
	wt := b.param(name+".weight", cout, cin, kh, kw)
	in := []int{x, wt}
	bt := -1
	if bias {
		bt = b.param(name+".bias", cout)
		in = append(in, bt)
	}
	y := b.act(name, n, cout, ho, wo)
	outPix := int64(n) * int64(ho) * int64(wo)
	macs := float64(outPix) * float64(cout) * float64(cin*kh*kw)
	flops := 2 * macs
	if bias {
		flops += float64(outPix) * float64(cout)
	}
	b.fwd(name, "conv2d", true, in, []int{y}, flops, gemmLaunch(outPix, int64(cout), 1))
	if !b.train {
		return y
	}
	b.record(bop{name: name + ".bwd_data", kind: "conv2d_bwd_data", reads: []int{gradOf(y), wt}, writes: []int{x},
		flops: 2 * macs, matrix: true, launch: gemmLaunch(int64(n)*int64(h)*int64(w), int64(cin), 1)})
	b.record(bop{name: name + ".bwd_filter", kind: "conv2d_bwd_filter", reads: []int{gradOf(y), x}, writes: []int{wt},
		flops: 2 * macs, matrix: true, launch: gemmLaunch(int64(cout), int64(cin*kh*kw), 1)})
	if bias {
		b.record(bop{name: name + ".bwd_bias", kind: "bias_grad", reads: []int{gradOf(y)}, writes: []int{bt},
			flops: float64(outPix) * float64(cout), launch: rowLaunch(int64(cout), outPix)})
	}
	return y
}

// batchnorm is 2-D batch normalisation with affine gamma and beta. Running
// statistics are buffers, not parameters, and are not modelled.
func (b *builder) batchnorm(name string, x int) int {
	s := b.shape(x)
	c := s[1]
	gamma := b.param(name+".weight", c)
	beta := b.param(name+".bias", c)
	y := b.act(name, s[0], s[1], s[2], s[3])
	ne := numel(s)
	perElem := 2.0 // inference: scale and shift
	if b.train {
		perElem = 6 // mean, variance, normalise, scale, shift
	}
	b.fwd(name, "batchnorm", false, []int{x, gamma, beta}, []int{y}, perElem*float64(ne), rowLaunch(int64(c), ne/int64(c)))
	b.record(bop{name: name + ".bwd", kind: "batchnorm_bwd", reads: []int{gradOf(y), x, gamma}, writes: []int{x, gamma, beta},
		flops: 10 * float64(ne), launch: rowLaunch(int64(c), ne/int64(c))})
	return y
}

// unary is an elementwise activation; saveOut says whether its backward
// reads the output (relu, tanh) or the input (gelu).
func (b *builder) unary(name, kind string, x int, flopsPerElem, bwdFlopsPerElem float64, saveOut bool) int {
	s := b.shape(x)
	y := b.act(name, append([]int(nil), s...)...)
	ne := numel(s)
	l := elemLaunch(ne)
	b.fwd(name, kind, false, []int{x}, []int{y}, flopsPerElem*float64(ne), l)
	saved := x
	if saveOut {
		saved = y
	}
	b.record(bop{name: name + ".bwd", kind: kind + "_bwd", reads: []int{gradOf(y), saved}, writes: []int{x},
		flops: bwdFlopsPerElem * float64(ne), launch: l})
	return y
}

func (b *builder) relu(name string, x int) int { return b.unary(name, "relu", x, 1, 1, true) }
func (b *builder) tanh(name string, x int) int { return b.unary(name, "tanh", x, 4, 3, true) }

// gelu is the tanh approximation used by BERT and GPT-2.
func (b *builder) gelu(name string, x int) int { return b.unary(name, "gelu", x, 10, 16, false) }

// pool is max or average pooling with a k×k window; k = 0 means global
// pooling over the whole feature map.
func (b *builder) pool(name, kind string, x, k, stride, pad int) int {
	s := b.shape(x)
	n, c, h, w := s[0], s[1], s[2], s[3]
	kh, kw := k, k
	if k == 0 {
		kh, kw, stride, pad = h, w, 1, 0
	}
	ho := (h+2*pad-kh)/stride + 1
	wo := (w+2*pad-kw)/stride + 1
	y := b.act(name, n, c, ho, wo)
	no := numel(b.shape(y))
	l := elemLaunch(no)
	b.fwd(name, kind, false, []int{x}, []int{y}, float64(no)*float64(kh*kw), l)
	bl := elemLaunch(numel(s))
	if kind == "maxpool" {
		b.record(bop{name: name + ".bwd", kind: "maxpool_bwd", reads: []int{gradOf(y), x, y}, writes: []int{x},
			flops: float64(no) * float64(kh*kw), launch: bl})
	} else {
		b.record(bop{name: name + ".bwd", kind: "avgpool_bwd", reads: []int{gradOf(y)}, writes: []int{x},
			flops: float64(no) * float64(kh*kw), launch: bl})
	}
	return y
}

func (b *builder) maxpool(name string, x, k, stride, pad int) int {
	return b.pool(name, "maxpool", x, k, stride, pad)
}

func (b *builder) avgpool(name string, x, k, stride, pad int) int {
	return b.pool(name, "avgpool", x, k, stride, pad)
}

// linear is y = x·Wᵀ + b over the last dimension of x, or over all but the
// first when flatten is set (a flattened NCHW feature map).
func (b *builder) linear(name string, x, out int, bias, flatten bool) int {
	s := b.shape(x)
	var rows, in int64
	var ys []int
	if flatten {
		rows = int64(s[0])
		in = numel(s) / rows
		ys = []int{s[0], out}
	} else {
		in = int64(s[len(s)-1])
		rows = numel(s) / in
		ys = append(append(make([]int, 0, len(s)), s[:len(s)-1]...), out)
	}
	wts := b.chunkedWeight(name+".weight", out, int(in))
	bt := -1
	if bias {
		bt = b.param(name+".bias", out)
	}
	return b.matmulW(name, x, wts, bt, ys, rows, in, int64(out))
}

// linearWeight is a linear layer's own weight: out rows of row bytes.
type linearWeight struct {
	name string
	out  int
	row  int64
}

// chunkTooSmall says why chunks of at most chunk bytes cannot hold the
// first of ws that they would split ("" if they can hold them all).
func chunkTooSmall(ws []linearWeight, chunk int64) string {
	for _, w := range ws {
		if chunk > 0 && w.row > 0 && int64(w.out)*w.row > chunk && chunk < w.row {
			return fmt.Sprintf("parameter chunk size %d bytes is below one row of %s (%d bytes): give at least that, or no chunk size to keep weights whole", chunk, w.name, w.row)
		}
	}
	return ""
}

// chunkedWeight makes a linear layer's [out, in] weight: one parameter, or,
// when it is larger than the build's chunk size, row blocks of at most that
// size (a size below one row is an error Build reports), each a parameter with its own gradient and Adam moments — as
// chunk-based memory managers store large parameters, so that a memory
// planner can swap a chunk's moments while another chunk updates.
func (b *builder) chunkedWeight(name string, out, in int) []int {
	row, _ := checkedBytes([]int{1, in}, b.fdt)
	lw := linearWeight{name: name, out: out, row: row}
	b.linears = append(b.linears, lw)
	if b.chunk <= 0 || row <= 0 || int64(out)*row <= b.chunk {
		return []int{b.param(name, out, in)}
	}
	per := int(b.chunk / row)
	if per < 1 {
		if b.chunkTooSmall == "" {
			b.chunkTooSmall = chunkTooSmall([]linearWeight{lw}, b.chunk)
		}
		per = 1
	}
	var ids []int
	for lo, i := 0, 0; lo < out; lo, i = lo+per, i+1 {
		n := min(per, out-lo)
		ids = append(ids, b.param(name+"#"+strconv.Itoa(i), n, in))
	}
	if b.chunks == nil {
		b.chunks = map[int]chunkOf{}
	}
	for k, id := range ids {
		b.chunks[id] = chunkOf{k: k, n: len(ids)}
	}
	return ids
}

// matmulW applies an existing weight ([out, in], in one tensor or in row
// chunks) and optional bias bt.
func (b *builder) matmulW(name string, x int, wts []int, bt int, ys []int, rows, in, out int64) int {
	y := b.act(name, ys...)
	in3 := append([]int{x}, wts...)
	macs := float64(rows) * float64(in) * float64(out)
	flops := 2 * macs
	if bt >= 0 {
		in3 = append(in3, bt)
		flops += float64(rows) * float64(out)
	}
	b.fwd(name, "matmul", true, in3, []int{y}, flops, gemmLaunch(rows, out, 1))
	if !b.train {
		return y
	}
	b.record(bop{name: name + ".bwd_data", kind: "matmul_bwd_data", reads: append([]int{gradOf(y)}, wts...), writes: []int{x},
		flops: 2 * macs, matrix: true, launch: gemmLaunch(rows, in, 1)})
	b.record(bop{name: name + ".bwd_weight", kind: "matmul_bwd_weight", reads: []int{gradOf(y), x}, writes: wts,
		flops: 2 * macs, matrix: true, launch: gemmLaunch(out, in, 1)})
	if bt >= 0 {
		b.record(bop{name: name + ".bwd_bias", kind: "bias_grad", reads: []int{gradOf(y)}, writes: []int{bt},
			flops: float64(rows) * float64(out), launch: rowLaunch(out, rows)})
	}
	return y
}

// add sums tensors of equal shape (residual connections).
func (b *builder) add(name string, xs ...int) int {
	s := b.shape(xs[0])
	y := b.act(name, append([]int(nil), s...)...)
	ne := numel(s)
	b.fwd(name, "add", false, xs, []int{y}, float64(ne)*float64(len(xs)-1), elemLaunch(ne))
	b.record(bop{name: name + ".bwd", alias: true, reads: []int{gradOf(y)}, writes: xs})
	return y
}

// concat joins tensors along dimension 1 (channels); its backward splits
// the gradient into one tensor per input.
func (b *builder) concat(name string, xs ...int) int {
	s := b.shape(xs[0])
	ys := append([]int(nil), s...)
	ys[1] = 0
	for _, x := range xs {
		ys[1] += b.shape(x)[1]
	}
	y := b.act(name, ys...)
	ne := numel(ys)
	b.fwd(name, "concat", false, xs, []int{y}, 0, elemLaunch(ne))
	b.record(bop{name: name + ".bwd", kind: "split", reads: []int{gradOf(y)}, writes: xs, launch: elemLaunch(ne)})
	return y
}

// split divides the last dimension of x into parts of equal width (GPT-2's
// fused query/key/value projection); its backward concatenates the gradients.
func (b *builder) split(name string, x int, parts int) []int {
	s := b.shape(x)
	ys := make([]int, parts)
	reads := make([]int, parts)
	for i := range ys {
		ps := append([]int(nil), s...)
		ps[len(ps)-1] /= parts
		ys[i] = b.act(name+"."+strconv.Itoa(i), ps...)
		reads[i] = gradOf(ys[i])
	}
	ne := numel(s)
	b.fwd(name, "split", false, []int{x}, ys, 0, elemLaunch(ne))
	b.record(bop{name: name + ".bwd", kind: "concat", reads: reads, writes: []int{x}, launch: elemLaunch(ne)})
	return ys
}

// layernorm normalises over the last dimension with affine gamma and beta.
func (b *builder) layernorm(name string, x int) int {
	s := b.shape(x)
	h := s[len(s)-1]
	gamma := b.param(name+".weight", h)
	beta := b.param(name+".bias", h)
	y := b.act(name, append([]int(nil), s...)...)
	ne := numel(s)
	l := rowLaunch(ne/int64(h), int64(h))
	b.fwd(name, "layernorm", false, []int{x, gamma, beta}, []int{y}, 8*float64(ne), l)
	b.record(bop{name: name + ".bwd", kind: "layernorm_bwd", reads: []int{gradOf(y), x, gamma}, writes: []int{x, gamma, beta},
		flops: 12 * float64(ne), launch: l})
	return y
}

// softmax over the last dimension; extra inputs (an attention mask) are read
// by the forward kernel only. The 1/√d scaling and masking are fused into it.
func (b *builder) softmax(name, kind string, x int, extra ...int) int {
	s := b.shape(x)
	y := b.act(name, append([]int(nil), s...)...)
	ne := numel(s)
	last := int64(s[len(s)-1])
	l := rowLaunch(ne/last, last)
	b.fwd(name, kind, false, append([]int{x}, extra...), []int{y}, 5*float64(ne), l)
	b.record(bop{name: name + ".bwd", kind: "softmax_bwd", reads: []int{gradOf(y), y}, writes: []int{x},
		flops: 4 * float64(ne), launch: l})
	return y
}

// attnScores is the batched product Q·Kᵀ per head: q and k are
// [batch, seq, hidden]; the result is [batch, heads, seq, seq].
func (b *builder) attnScores(name string, q, k, heads int) int {
	s := b.shape(q)
	n, seq, hid := s[0], s[1], s[2]
	dh := hid / heads
	y := b.act(name, n, heads, seq, seq)
	bh := int64(n) * int64(heads)
	macs := float64(bh) * float64(seq) * float64(seq) * float64(dh)
	b.fwd(name, "batched_matmul", true, []int{q, k}, []int{y}, 2*macs, gemmLaunch(int64(seq), int64(seq), bh))
	b.record(bop{name: name + ".bwd_q", kind: "batched_matmul_bwd", reads: []int{gradOf(y), k}, writes: []int{q},
		flops: 2 * macs, matrix: true, launch: gemmLaunch(int64(seq), int64(dh), bh)})
	b.record(bop{name: name + ".bwd_k", kind: "batched_matmul_bwd", reads: []int{gradOf(y), q}, writes: []int{k},
		flops: 2 * macs, matrix: true, launch: gemmLaunch(int64(seq), int64(dh), bh)})
	return y
}

// attnContext is the batched product P·V per head: p is [batch, heads, seq,
// seq], v is [batch, seq, hidden]; the result (heads merged) is
// [batch, seq, hidden].
func (b *builder) attnContext(name string, p, v, heads int) int {
	s := b.shape(v)
	n, seq, hid := s[0], s[1], s[2]
	dh := hid / heads
	y := b.act(name, n, seq, hid)
	bh := int64(n) * int64(heads)
	macs := float64(bh) * float64(seq) * float64(seq) * float64(dh)
	b.fwd(name, "batched_matmul", true, []int{p, v}, []int{y}, 2*macs, gemmLaunch(int64(seq), int64(dh), bh))
	b.record(bop{name: name + ".bwd_p", kind: "batched_matmul_bwd", reads: []int{gradOf(y), v}, writes: []int{p},
		flops: 2 * macs, matrix: true, launch: gemmLaunch(int64(seq), int64(seq), bh)})
	b.record(bop{name: name + ".bwd_v", kind: "batched_matmul_bwd", reads: []int{gradOf(y), p}, writes: []int{v},
		flops: 2 * macs, matrix: true, launch: gemmLaunch(int64(seq), int64(dh), bh)})
	return y
}

// embedding looks up rows of table ([vocab, hidden]) for the token ids
// ([batch, seq]); ids < 0 means positions 0..seq-1 (no ids tensor). The
// backward scatter-adds into the table's gradient.
func (b *builder) embedding(name string, ids, table, n, seq int) int {
	hid := b.shape(table)[1]
	y := b.act(name, n, seq, hid)
	yb := b.bytes(y)
	in := []int{table}
	reads := []int{gradOf(y)}
	var idb int64
	if ids >= 0 {
		in = []int{ids, table}
		reads = append(reads, ids)
		idb = b.bytes(ids)
	}
	ne := numel(b.shape(y))
	// Only the looked-up rows are read, not the whole table.
	b.op(name, "embedding", workload.Forward, false, in, []int{y}, 0, float64(idb+2*yb), elemLaunch(ne))
	b.record(bop{name: name + ".bwd", kind: "embedding_bwd", reads: reads, writes: []int{table},
		flops: float64(ne), launch: elemLaunch(ne)})
	return y
}

// selectFirst takes position 0 of the sequence ([batch, seq, hidden] →
// [batch, hidden]), BERT's [CLS] token.
func (b *builder) selectFirst(name string, x int) int {
	s := b.shape(x)
	y := b.act(name, s[0], s[2])
	b.fwd(name, "select", false, []int{x}, []int{y}, 0, elemLaunch(numel(b.shape(y))))
	b.record(bop{name: name + ".bwd", kind: "select_bwd", reads: []int{gradOf(y)}, writes: []int{x},
		launch: elemLaunch(numel(s))})
	return y
}

// crossEntropy is log-softmax over the last dimension of logits followed by
// the mean negative log-likelihood of labels; it sets the builder's loss.
func (b *builder) crossEntropy(logits, labels int) int {
	lsm := b.softmax("loss.log_softmax", "log_softmax", logits)
	// The log-softmax backward reads its output like softmax does; rename
	// the recorded kind.
	if b.train {
		b.tape[len(b.tape)-1].kind = "log_softmax_bwd"
	}
	loss := b.act("loss", 1)
	rows := numel(b.shape(labels))
	b.fwd("loss.nll", "nll_loss", false, []int{lsm, labels}, []int{loss}, float64(rows), rowLaunch(1, rows))
	b.record(bop{name: "loss.nll.bwd", kind: "nll_loss_bwd", reads: []int{gradOf(loss), labels}, writes: []int{lsm},
		flops: float64(rows), launch: elemLaunch(numel(b.shape(lsm)))})
	b.loss = loss
	return loss
}
