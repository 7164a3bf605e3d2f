package placement

// Statistical efficiency from the gradient noise scale ("An Empirical Model
// of Large-Batch Training", arXiv 1812.06162; the form Pollux uses).
//
// With gradient statistics measured at the base batch B0 — sqr, the squared
// norm of the true gradient, and vr, the variance of a B0-sample gradient —
// the noise scale in samples is Bnoise = B0·vr/sqr. One iteration at global
// batch B is worth
//
//	Gain(B) = (vr + sqr) / (vr·B0/B + sqr) = (B/B0) · Efficiency(B)
//
// base-batch iterations, where Efficiency(B) = (Bnoise + B0)/(Bnoise + B) ≤ 1
// for B ≥ B0: a larger batch makes more progress per iteration but less per
// sample.

// NoiseScale returns Bnoise in samples, or 0 when the statistics are unknown.
func NoiseScale(sqr, vr, base float64) float64 {
	if sqr <= 0 || vr < 0 {
		return 0
	}
	return base * vr / sqr
}

// Efficiency is the progress per sample at batch relative to the base batch.
func Efficiency(noise, batch, base float64) float64 {
	if batch <= 0 {
		return 0
	}
	return (noise + base) / (noise + batch)
}

// GainFromStats is the progress, in base-batch iterations, of one iteration
// at global batch batch given gradient statistics measured at base.
// Both statistics are non-negative by definition; a negative one (a
// garbled report) counts as 0, so the gain stays between 1 and batch/base
// instead of dividing by zero.
func GainFromStats(sqr, vr, batch, base float64) float64 {
	if batch <= 0 {
		return 0
	}
	sqr, vr = max(sqr, 0), max(vr, 0)
	if sqr <= 0 && vr <= 0 {
		return batch / base
	}
	return (vr + sqr) / (vr*base/batch + sqr)
}
