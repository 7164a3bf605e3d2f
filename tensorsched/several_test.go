package tensorsched

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// MeasureSeveral runs the plans as the accounting says and measures what
// the planner predicts: joint plans from their start offsets for the
// horizon, reserving the whole-run device peak (the planner's MSR and EOR
// exactly); sum-of-peaks and the baselines from offset zero, reserving
// the sum of the jobs' own peaks; joint saves at least as much as
// sum-of-peaks on copies of one model.
func TestMeasureSeveral(t *testing.T) {
	if testing.Short() {
		t.Skip("plans several co-located ResNet-50s")
	}
	p := gpu.MustProfile("rtx2080ti-11gb")
	g := buildGraph(t, "resnet50", 16)
	for _, n := range []int{2, 3} {
		jobs := make([]Job, n)
		for i := range jobs {
			jobs[i] = Job{Name: fmt.Sprintf("r%d", i), Graph: g}
		}
		msr := map[Mode]float64{}
		for _, mode := range []Mode{Joint, SumOfPeaks} {
			plans, st, err := PlanJobs(jobs, p, mode, Target{Tolerance: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			sr, err := MeasureSeveral(p, jobs, plans, &st, true)
			if err != nil {
				t.Fatalf("%dx %s: %v", n, mode, err)
			}
			msr[mode] = sr.MSR
			t.Logf("%dx resnet50 %-12s MSR %.4f (predicted %.4f) EOR %.4f (%.4f) reserved %s, steady peak %s, vanilla co-located %s, offsets %v",
				n, mode, sr.MSR, st.MSR, sr.EOR, st.EOR, gpu.FormatBytes(sr.ReservedBytes), gpu.FormatBytes(sr.PeakBytes), gpu.FormatBytes(sr.VanillaPeakBytes), sr.StartOffsets)
			if sr.Horizon != st.Horizon || sr.Horizon != SeveralHorizon {
				t.Errorf("%dx %s: measured over %d iterations, planned over %d (want %d)", n, mode, sr.Horizon, st.Horizon, SeveralHorizon)
			}
			if sr.SumOfVanillaJobPeaks != st.SumOfVanillaJobPeaks {
				t.Errorf("%dx %s: Σ vanilla job peaks %d, planner %d", n, mode, sr.SumOfVanillaJobPeaks, st.SumOfVanillaJobPeaks)
			}
			if math.Abs(sr.EOR-st.EOR) > 1e-9 {
				t.Errorf("%dx %s: measured EOR %.12f, predicted %.12f", n, mode, sr.EOR, st.EOR)
			}
			var own int64
			for _, j := range sr.Jobs {
				own += j.RunPeakBytes
			}
			switch mode {
			case Joint:
				// Joint mode staggers the copies: by taking turns
				// (offsets zero) or from start offsets.
				if !sr.Joint || sr.Turns != st.Turns || !slices.Equal(sr.StartOffsets, st.StartOffsets) || !st.Turns && slices.Max(sr.StartOffsets) <= 0 {
					t.Errorf("%dx joint: ran from offsets %v (joint %v, turns %v), planned %v (turns %v)", n, sr.StartOffsets, sr.Joint, sr.Turns, st.StartOffsets, st.Turns)
				}
				if sr.ReservedBytes != st.ReservedBytes || sr.ReservedBytes != sr.RunPeakBytes || math.Abs(sr.MSR-st.MSR) > 1e-9 {
					t.Errorf("%dx joint: reserved %d (whole-run peak %d) MSR %.12f; planner reserved %d MSR %.12f",
						n, sr.ReservedBytes, sr.RunPeakBytes, sr.MSR, st.ReservedBytes, st.MSR)
				}
			case SumOfPeaks:
				if sr.Joint || slices.Max(sr.StartOffsets) != 0 || sr.ReservedBytes != own {
					t.Errorf("%dx sum-of-peaks: offsets %v, reserved %d, Σ own peaks %d", n, sr.StartOffsets, sr.ReservedBytes, own)
				}
			}
			if want := 1 - float64(sr.ReservedBytes)/float64(sr.SumOfVanillaJobPeaks); math.Abs(sr.MSR-want) > 1e-12 {
				t.Errorf("%dx %s: MSR %v, 1 − reserved/Σ vanilla = %v", n, mode, sr.MSR, want)
			}
		}
		if msr[Joint] < msr[SumOfPeaks] {
			t.Errorf("%dx resnet50: joint MSR %.4f below sum-of-peaks %.4f", n, msr[Joint], msr[SumOfPeaks])
		}
		// Baselines: no offsets, the same horizon, each job's own peak
		// reserved; vanilla saves nothing and costs nothing.
		for _, pol := range []string{"none", "vdnn-conv"} {
			b, err := LookupBaseline(pol)
			if err != nil {
				t.Fatal(err)
			}
			plans := make([]*Plan, n)
			for i := range plans {
				plans[i] = b(g, p)
			}
			sr, err := MeasureSeveral(p, jobs, plans, nil, true)
			if err != nil {
				t.Fatalf("%dx %s: %v", n, pol, err)
			}
			var own int64
			for _, j := range sr.Jobs {
				own += j.RunPeakBytes
			}
			if sr.Horizon != SeveralHorizon || sr.Joint || sr.ReservedBytes != own {
				t.Errorf("%dx %s: horizon %d joint %v reserved %d, Σ own peaks %d", n, pol, sr.Horizon, sr.Joint, sr.ReservedBytes, own)
			}
			if pol == "none" && (sr.MSR != 0 || sr.EOR != 0 || sr.PeakBytes != sr.VanillaPeakBytes) {
				t.Errorf("%dx none: MSR %v EOR %v peak %d vanilla %d", n, sr.MSR, sr.EOR, sr.PeakBytes, sr.VanillaPeakBytes)
			}
		}
	}
	if _, err := MeasureSeveral(p, []Job{{Graph: g}}, nil, nil, false); err == nil {
		t.Error("no error for 0 plans for 1 job")
	}
}
