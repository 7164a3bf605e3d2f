package tensorsched

import (
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/gpu"
)

// pickJoint keeps joint mode's time at or below that of the solo plans
// started together (candidate 0): a candidate reserving less but with a
// higher mean EOR loses; when candidate 0 is itself over the tolerance,
// only the tolerance counts.
func TestPickJointEORGuard(t *testing.T) {
	cases := []struct {
		name  string
		cands []jointCand
		tol   float64
		want  int
	}{
		{"least reserve within the EOR of the solo plans", []jointCand{
			{res: 100, slow: 1.20, eor: 0.15},
			{res: 60, slow: 1.25, eor: 0.22}, // less memory, more time: rejected
			{res: 80, slow: 1.18, eor: 0.12},
			{res: 70, slow: 1.20, eor: 0.15}, // equal EOR: allowed
		}, 0.26, 3},
		{"nothing better than the solo plans", []jointCand{
			{res: 100, slow: 1.20, eor: 0.15},
			{res: 60, slow: 1.25, eor: 0.22},
		}, 0.26, 0},
		{"solo plans over the tolerance: no guard", []jointCand{
			{res: 100, slow: 1.40, eor: 0.35},
			{res: 90, slow: 1.29, eor: 0.28},
			{res: 60, slow: 1.30, eor: 0.29},
		}, 0.30, 2},
		{"none within the tolerance: the least slow", []jointCand{
			{res: 100, slow: 1.40, eor: 0.35},
			{res: 60, slow: 1.35, eor: 0.30},
			{res: 50, slow: 1.38, eor: 0.31},
		}, 0.30, 1},
	}
	for _, tc := range cases {
		if got := pickJoint(tc.cands, tc.tol, true); got != tc.want {
			t.Errorf("%s: picked candidate %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The five-model mix at batch 2 (jobs of very different lengths): joint
// mode reserves less than sum-of-peaks at an EOR no higher, as the
// executor measures them with the checker on.
func TestPlanJointMixEOR(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans the five-model mix in both modes (skipped with -short and -race: a table; shorter tests cover its concurrency)")
	}
	p := gpu.MustProfile("rtx2080ti-11gb")
	var jobs []Job
	for i, m := range []string{"vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"} {
		jobs = append(jobs, Job{Name: fmt.Sprintf("%s#%d", m, i), Graph: buildGraph(t, m, 2)})
	}
	tgt := Target{Tolerance: PaperEOR["vgg16"]} // what bench memory plans the mix with
	got := map[Mode]SeveralResult{}
	for _, mode := range []Mode{SumOfPeaks, Joint} {
		plans, st, err := PlanJobs(jobs, p, mode, tgt)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		sr, err := MeasureSeveral(p, jobs, plans, &st, true)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		t.Logf("%-12s MSR %.3f EOR %.3f reserved %s offsets %v", mode, sr.MSR, sr.EOR, gpu.FormatBytes(sr.ReservedBytes), sr.StartOffsets)
		got[mode] = sr
	}
	j, s := got[Joint], got[SumOfPeaks]
	if j.EOR > s.EOR+1e-9 {
		t.Errorf("joint EOR %.4f above sum-of-peaks' %.4f", j.EOR, s.EOR)
	}
	if j.MSR <= s.MSR {
		t.Errorf("joint MSR %.4f not above sum-of-peaks' %.4f", j.MSR, s.MSR)
	}
}
