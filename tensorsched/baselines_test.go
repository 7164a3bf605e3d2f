package tensorsched

import (
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// TestBaselinesPassChecker runs every baseline on every zoo model (training,
// batch 16) with the correctness checker, and checks that the swapping
// policies save memory. (Checkpointing can raise the peak: recomputing a
// segment re-materialises its temporaries, which on VGG16 and ResNet-50
// outweighs what the dropped activations save; the log shows the figures.)
func TestBaselinesPassChecker(t *testing.T) {
	p := gpu.MustProfile("rtx2080ti-11gb")
	big := withUnboundedMemory(p)
	for _, m := range zoo.Models() {
		g, err := zoo.Build(m, workload.Train, 16, zoo.Options{})
		if err != nil {
			t.Fatal(err)
		}
		van, err := Execute(gpu.NewSim(big, gpu.SimOptions{}), []Job{{Graph: g}}, ExecOptions{Check: true})
		if err != nil {
			t.Fatalf("%s vanilla: %v", m, err)
		}
		for _, name := range BaselineNames() {
			b, _ := LookupBaseline(name)
			plan := b(g, p)
			if plan.Policy != name {
				t.Errorf("%s: plan policy %q", name, plan.Policy)
			}
			res, err := Execute(gpu.NewSim(big, gpu.SimOptions{}), []Job{{Graph: g, Plan: plan}}, ExecOptions{Check: true})
			if err != nil {
				t.Errorf("%s %s: %v", m, name, err)
				continue
			}
			j := res.Jobs[0]
			msr := 1 - float64(j.PeakBytes)/float64(van.Jobs[0].PeakBytes)
			eor := j.IterationSeconds/van.Jobs[0].IterationSeconds - 1
			t.Logf("%-13s %-10s actions %4d  MSR %.3f  EOR %.3f  swapped %s  recomputed %d", m, name, len(plan.Actions), msr, eor, gpu.FormatBytes(j.SwappedOutBytes), j.RecomputedOps)
			if len(plan.Actions) > 0 && msr <= 0 && name != "checkpoint" && m != "mlp" {
				t.Errorf("%s %s: %d actions but no memory saved (peak %d, vanilla %d)", m, name, len(plan.Actions), j.PeakBytes, van.Jobs[0].PeakBytes)
			}
			if name == "none" && (msr != 0 || eor != 0) {
				t.Errorf("%s none: MSR %v EOR %v, want 0", m, msr, eor)
			}
		}
	}
}
