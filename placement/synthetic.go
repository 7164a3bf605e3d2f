package placement

import (
	"errors"
	"fmt"
	"math"
)

// SyntheticApp describes an application that has no measured profile: its
// step time comes from a function (for instance a cost model) and its
// statistical efficiency from a constant gradient noise scale, following
// the large-batch model of arXiv 1812.06162 that Gain implements.
//
// Progress is counted, as for measured applications, in base-batch
// iterations. One epoch is DatasetSize/BaseBatch of them, and a job
// completes after Epochs epochs: a run at the base batch B0 reads the
// dataset exactly Epochs times. A run at global batch B needs
// Epochs·DatasetSize·(Bnoise+B)/(Bnoise+B0) samples, that is
// (Bnoise+B)/(Bnoise+B0) times as many (the model's E = Emin·(1+B/Bnoise)).
type SyntheticApp struct {
	Name string
	// BaseBatch is the global batch B0 in whose iterations progress is
	// counted (and the smallest batch an elastic policy may choose);
	// MaxBatch the largest global batch.
	BaseBatch, MaxBatch int
	// MinLocal and MaxLocal bound the per-GPU batch (MaxLocal: the largest
	// that fits in device memory).
	MinLocal, MaxLocal int
	// NoiseScale is the gradient noise scale Bnoise in samples (> 0).
	NoiseScale float64
	// DatasetSize is the number of samples in one epoch; Epochs the epochs
	// (at the base batch) after which a job completes.
	DatasetSize float64
	Epochs      int
	// Step returns the seconds of one micro-step with synchronisation and
	// the part spent synchronising, for replicas GPUs over nodes nodes at
	// per-GPU batch local. It must return 0 ≤ sync ≤ step and step > 0.
	Step func(nodes, replicas int, local float64) (step, sync float64)
}

// NewSyntheticApp checks s and returns an App that behaves as a measured
// one: StepTime calls s.Step; GradStats is constant (squared norm 1,
// variance Bnoise/B0, so NoiseScale gives Bnoise back); Gain has no
// calibration (factor 1); EpochProgress(e) = e·DatasetSize/B0; Iterations
// is exact at B0·2^k and MaxBatch and linear in between, as for measured
// applications.
func NewSyntheticApp(s SyntheticApp) (*App, error) {
	var errs []error
	bad := func(field, why string) {
		errs = append(errs, fmt.Errorf("application %s: field %s: %s", s.Name, field, why))
	}
	if s.Name == "" {
		bad("Name", "empty (give the application's name)")
	}
	if s.BaseBatch < 1 {
		bad("BaseBatch", fmt.Sprintf("%d must be ≥ 1", s.BaseBatch))
	}
	if s.MaxBatch < s.BaseBatch {
		bad("MaxBatch", fmt.Sprintf("%d must be ≥ BaseBatch (%d)", s.MaxBatch, s.BaseBatch))
	}
	if s.MinLocal < 1 || s.MaxLocal < s.MinLocal {
		bad("MaxLocal", fmt.Sprintf("per-GPU batch range [%d, %d] must satisfy 1 ≤ MinLocal ≤ MaxLocal", s.MinLocal, s.MaxLocal))
	}
	if !(s.NoiseScale > 0) || math.IsInf(s.NoiseScale, 0) {
		bad("NoiseScale", fmt.Sprintf("%v must be a finite number of samples > 0", s.NoiseScale))
	}
	if !(s.DatasetSize >= 1) || math.IsInf(s.DatasetSize, 0) {
		bad("DatasetSize", fmt.Sprintf("%v must be a finite number of samples ≥ 1", s.DatasetSize))
	}
	if s.Epochs < 1 {
		bad("Epochs", fmt.Sprintf("%d must be ≥ 1", s.Epochs))
	}
	if s.Step == nil {
		bad("Step", "nil (give the step-time function)")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	a := &App{
		Name: s.Name, BaseBatch: s.BaseBatch, MaxBatch: s.MaxBatch,
		MinLocal: s.MinLocal, MaxLocal: s.MaxLocal, Epochs: s.Epochs,
		shape: s.Step,
	}
	b0 := float64(s.BaseBatch)
	perEpoch := s.DatasetSize / b0
	a.progress = make([]float64, s.Epochs)
	for e := range a.progress {
		a.progress[e] = float64(e+1) * perEpoch
	}
	vr := s.NoiseScale / b0
	for b := s.BaseBatch; ; b *= 2 {
		b = min(b, s.MaxBatch)
		g := GainFromStats(1, vr, float64(b), b0)
		rows := make([]valRow, s.Epochs)
		for e := range rows {
			rows[e] = valRow{progress: a.progress[e], iteration: a.progress[e] / g, gradSqr: 1, gradVar: vr}
		}
		a.valBatch = append(a.valBatch, b)
		a.val = append(a.val, rows)
		if b == s.MaxBatch {
			break
		}
	}
	a.calib = make([]float64, len(a.valBatch))
	for i := range a.calib {
		a.calib[i] = 1
	}
	return a, nil
}

// Synthetic reports whether the application was built by NewSyntheticApp
// rather than loaded from measurements.
func (a *App) Synthetic() bool { return a.shape != nil }

// StepPrior is a synthetic application's step times as a throughput
// model (JobState.Prior), on a cluster of nodes × gpusPerNode GPUs: what
// the live loop gives ONES from the same cost model (PriorModel through
// one GPU's step at the smallest and largest per-GPU batch, and the
// application's own synchronisation at the largest). nil for a measured
// application (its step times are what ONES learns).
func (a *App) StepPrior(nodes, gpusPerNode int) *ThroughputModel {
	if a.shape == nil {
		return nil
	}
	l1, l2 := float64(max(a.MinLocal, 1)), float64(max(a.MaxLocal, 1))
	t1, _ := a.shape(1, 1, l1)
	t2, _ := a.shape(1, 1, l2)
	sync := func(n, r int) float64 {
		_, y := a.shape(n, r, l2)
		return y
	}
	return PriorModel(l1, t1, l2, t2, sync, nodes, gpusPerNode, nodes*gpusPerNode)
}
