package tensorsched

import "testing"

// jointHeldOutCases are several-job cases outside the table
// (jointCases): some rules of joint mode (the long start-offset trials,
// offsetHorizonLong, among them) were chosen while looking at the table,
// so these check that its invariants hold on models, batch sizes and a mix
// it was not tuned on.
func jointHeldOutCases() []jointCase {
	return []jointCase{
		{"2x vgg16", []string{"vgg16", "vgg16"}, 16},
		{"2x densenet121", []string{"densenet121", "densenet121"}, 16},
		{"2x inception-v4", []string{"inception-v4", "inception-v4"}, 16},
		{"2x resnet50 b8", []string{"resnet50", "resnet50"}, 8},
		{"2x resnet50 b32", []string{"resnet50", "resnet50"}, 32},
		{"resnet50+inception-v3", []string{"resnet50", "inception-v3"}, 16},
	}
}

// The held-out several-job cases, on both devices at the table's
// tolerances, with the table's per-case invariants (checkJointCase) and
// logging. No MSR-gain target: the table meets its +10-point target on few
// cases, and these only guard the invariants.
func TestPlanJointHeldOut(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans 6 held-out several-job cases on two devices (skipped with -short and -race, as TestPlanJointTable)")
	}
	for _, dev := range []string{"rtx2080ti-11gb", "h100-80gb"} {
		for _, tc := range jointHeldOutCases() {
			checkJointCase(t, dev, tc)
		}
	}
}
