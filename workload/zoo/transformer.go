package zoo

import "strconv"

const (
	hidden = 768
	heads  = 12
	ffn    = 3072
	layers = 12
)

// buildBERT is BERT-base (uncased) as in Hugging Face's BertModel: token,
// position and segment embeddings summed and layer-normed, 12 post-norm
// encoder layers (separate query, key and value projections, 12 heads,
// GELU feed-forward of width 3072) and the tanh pooler over the [CLS]
// token (109,482,240 parameters), plus a 2-way sequence classifier
// (1,538) whose cross-entropy is the training loss. Attention scores and
// probabilities are [batch, 12, seq, seq] tensors.
func buildBERT(b *builder, opt Options) {
	n, seq := b.batch, opt.Seq
	ids := b.input("input_ids", "int64", n, seq)
	types := b.input("token_type_ids", "int64", n, seq)
	mask := b.input("attention_mask", "int64", n, seq)
	labels := -1
	if b.train {
		labels = b.input("labels", "int64", n)
	}
	wte := b.param("embeddings.word_embeddings.weight", 30522, hidden)
	wpe := b.param("embeddings.position_embeddings.weight", 512, hidden)
	wtt := b.param("embeddings.token_type_embeddings.weight", 2, hidden)
	e1 := b.embedding("embeddings.word", ids, wte, n, seq)
	e2 := b.embedding("embeddings.position", -1, wpe, n, seq)
	e3 := b.embedding("embeddings.token_type", types, wtt, n, seq)
	x := b.add("embeddings.sum", e1, e2, e3)
	x = b.layernorm("embeddings.LayerNorm", x)
	for l := 0; l < layers; l++ {
		p := "encoder.layer." + strconv.Itoa(l)
		q := b.linear(p+".attention.self.query", x, hidden, true, false)
		k := b.linear(p+".attention.self.key", x, hidden, true, false)
		v := b.linear(p+".attention.self.value", x, hidden, true, false)
		s := b.attnScores(p+".attention.self.scores", q, k, heads)
		pr := b.softmax(p+".attention.self.probs", "scale_mask_softmax", s, mask)
		c := b.attnContext(p+".attention.self.context", pr, v, heads)
		o := b.linear(p+".attention.output.dense", c, hidden, true, false)
		o = b.add(p+".attention.output.residual", o, x)
		x = b.layernorm(p+".attention.output.LayerNorm", o)
		h := b.linear(p+".intermediate.dense", x, ffn, true, false)
		h = b.gelu(p+".intermediate.gelu", h)
		h = b.linear(p+".output.dense", h, hidden, true, false)
		h = b.add(p+".output.residual", h, x)
		x = b.layernorm(p+".output.LayerNorm", h)
	}
	cls := b.selectFirst("pooler.cls", x)
	pooled := b.linear("pooler.dense", cls, hidden, true, false)
	pooled = b.tanh("pooler.tanh", pooled)
	logits := b.linear("classifier", pooled, 2, true, false)
	if b.train {
		b.crossEntropy(logits, labels)
	}
}

// buildGPT2 is GPT-2 small as in Hugging Face's GPT2LMHeadModel: token and
// position embeddings, 12 pre-norm decoder layers (fused query/key/value
// projection split into three, causal 12-head attention, GELU feed-forward
// of width 3072), a final layer norm and the LM head, which reuses the token
// embedding matrix (124,439,808 parameters). Training minimises next-token
// cross-entropy over all positions, so the [batch, seq, 50257] logits and
// their log-softmax are materialised.
func buildGPT2(b *builder, opt Options) {
	const vocab, ctx = 50257, 1024
	n, seq := b.batch, opt.Seq
	ids := b.input("input_ids", "int64", n, seq)
	labels := -1
	if b.train {
		labels = b.input("labels", "int64", n, seq)
	}
	wte := b.param("wte.weight", vocab, hidden)
	wpe := b.param("wpe.weight", ctx, hidden)
	e1 := b.embedding("wte", ids, wte, n, seq)
	e2 := b.embedding("wpe", -1, wpe, n, seq)
	x := b.add("embeddings.sum", e1, e2)
	for l := 0; l < layers; l++ {
		p := "h." + strconv.Itoa(l)
		h := b.layernorm(p+".ln_1", x)
		qkv := b.linear(p+".attn.c_attn", h, 3*hidden, true, false)
		parts := b.split(p+".attn.split", qkv, 3)
		s := b.attnScores(p+".attn.scores", parts[0], parts[1], heads)
		pr := b.softmax(p+".attn.probs", "scale_causal_softmax", s)
		c := b.attnContext(p+".attn.context", pr, parts[2], heads)
		o := b.linear(p+".attn.c_proj", c, hidden, true, false)
		x = b.add(p+".attn.residual", x, o)
		h = b.layernorm(p+".ln_2", x)
		h = b.linear(p+".mlp.c_fc", h, ffn, true, false)
		h = b.gelu(p+".mlp.gelu", h)
		h = b.linear(p+".mlp.c_proj", h, hidden, true, false)
		x = b.add(p+".mlp.residual", x, h)
	}
	x = b.layernorm("ln_f", x)
	logits := b.matmulW("lm_head", x, []int{wte}, -1, []int{n, seq, vocab}, int64(n)*int64(seq), hidden, vocab)
	if b.train {
		b.crossEntropy(logits, labels)
	}
}
