package tensorsched

import "math"

// EORFloor is the smallest extra-time ratio CBR divides by: a plan that
// saves memory at no measurable extra time gets CBR = MSR / EORFloor (a
// large, finite number) instead of +Inf, which JSON cannot hold.
const EORFloor = 1e-4

// Metrics are TENSILE's figures of merit for a scheduled run against the
// vanilla one.
type Metrics struct {
	// MSR = 1 − peak/vanilla_peak: the memory saving ratio.
	MSR float64 `json:"msr"`
	// EOR = time/vanilla_time − 1: the extra overhead ratio.
	EOR float64 `json:"eor"`
	// CBR = MSR/EOR: the cost-benefit ratio (EOR floored at EORFloor; 0
	// when nothing is saved).
	CBR float64 `json:"cbr"`
}

// ComputeMetrics returns MSR, EOR and CBR from peaks and iteration times.
func ComputeMetrics(vanillaPeak, peak int64, vanillaSeconds, seconds float64) Metrics {
	var m Metrics
	if vanillaPeak > 0 {
		m.MSR = 1 - float64(peak)/float64(vanillaPeak)
	}
	if vanillaSeconds > 0 {
		m.EOR = seconds/vanillaSeconds - 1
	}
	if math.Abs(m.EOR) < 1e-12 {
		m.EOR = 0
	}
	if m.MSR > 0 {
		m.CBR = m.MSR / math.Max(m.EOR, EORFloor)
	}
	return m
}
