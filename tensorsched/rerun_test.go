package tensorsched

import (
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/workload"
)

// rerunGraph: a batch norm whose backward kernel reads gamma and writes
// both parameter gradients; the optimizer then updates gamma before beta,
// as zoo's builder orders Adam (parameter creation order). A clipping op
// between the backward kernel and the updates makes the peak, which the
// large dbeta, idle until beta's update, is the obvious tensor to cut; the
// copy engines are too slow for a swap, so the planner can only drop dbeta
// and re-run bn.bwd. Re-run just before beta.sgd, bn.bwd would read gamma
// after gamma.sgd updated it: a different dbeta.
func rerunGraph() *workload.Graph {
	const mib = 1 << 20
	g := &workload.Graph{Model: "bn-update", Kind: workload.Train, Batch: 1,
		Tensors: []workload.Tensor{
			{ID: 0, Name: "in", Bytes: 64, Kind: workload.Input},
			{ID: 1, Name: "gamma", Bytes: 32 * mib, Kind: workload.Param},
			{ID: 2, Name: "beta", Bytes: 64 * mib, Kind: workload.Param},
			{ID: 3, Name: "x", Bytes: 64, Kind: workload.Activation},
			{ID: 4, Name: "y", Bytes: 64, Kind: workload.Activation},
			{ID: 5, Name: "loss", Bytes: 4, Kind: workload.Activation},
			{ID: 6, Name: "dy", Bytes: 64, Kind: workload.Gradient},
			{ID: 7, Name: "dgamma", Bytes: 32 * mib, Kind: workload.Gradient},
			{ID: 8, Name: "dbeta", Bytes: 64 * mib, Kind: workload.Gradient},
			{ID: 9, Name: "dgamma.clipped", Bytes: 32 * mib, Kind: workload.Gradient},
		},
		Ops: []workload.Op{
			{Name: "embed", Kind: "embedding", Inputs: []int{0}, Outputs: []int{3}, Phase: workload.Forward},
			{Name: "bn", Kind: "batchnorm", Inputs: []int{3, 1, 2}, Outputs: []int{4}, Phase: workload.Forward},
			{Name: "loss", Kind: "nll_loss", Inputs: []int{4}, Outputs: []int{5}, Phase: workload.Forward},
			{Name: "loss.bwd", Kind: "nll_loss_bwd", Inputs: []int{5}, Outputs: []int{6}, Phase: workload.Backward},
			{Name: "bn.bwd", Kind: "batchnorm_bwd", Inputs: []int{6, 3, 1}, Outputs: []int{7, 8}, Phase: workload.Backward},
			{Name: "clip", Kind: "clip", Inputs: []int{7}, Outputs: []int{9}, Phase: workload.Backward},
			{Name: "gamma.sgd", Kind: "sgd", Inputs: []int{1, 9}, Outputs: []int{1}, Phase: workload.Optimizer},
			{Name: "beta.sgd", Kind: "sgd", Inputs: []int{2, 8}, Outputs: []int{2}, Phase: workload.Optimizer},
		},
	}
	return numbered(g)
}

// numbered numbers g's ops in order at 1 ms each and returns g.
func numbered(g *workload.Graph) *workload.Graph {
	for i := range g.Ops {
		g.Ops[i].ID, g.Ops[i].MeasuredSeconds = i, 1e-3
	}
	return g
}

// validGraph fails the test when g is not a valid graph.
func validGraph(t *testing.T, g *workload.Graph) {
	t.Helper()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
}

// checkRun runs plan for g alone on p with the checker on and reports what
// it finds, naming the case and the plan.
func checkRun(t *testing.T, p gpu.Profile, g *workload.Graph, plan *Plan, label string) {
	t.Helper()
	if _, err := Execute(gpu.NewSim(p, gpu.SimOptions{}), []Job{{Graph: g, Plan: plan}}, ExecOptions{Check: true}); err != nil {
		t.Errorf("%s: %v (plan %v)", label, err, plan.Actions)
	}
}

// TestPlanRecomputeAfterParamUpdate: a recompute re-runs its producer only
// where the producer's inputs still hold what it read. Before the fix the
// planner re-ran bn.bwd before beta.sgd, after gamma.sgd had updated gamma,
// and the checker failed the plan ("recompute of op 4 (bn.bwd) before op 7
// reads tensor 1 (gamma) at version 1, but the original run read version
// 0"). Found by FuzzPlanTensileRandomGraph.
func TestPlanRecomputeAfterParamUpdate(t *testing.T) {
	g := rerunGraph()
	validGraph(t, g)
	p := testProfile(1<<40, 1e9)
	for _, tg := range []Target{{Tolerance: 1}, {Budget: 200 << 20}} {
		plan, _, err := PlanTensile(g, p, tg)
		if plan == nil {
			t.Fatalf("target %+v: no plan: %v", tg, err)
		}
		checkRun(t, p, g, plan, fmt.Sprintf("target %+v", tg))
	}
}

// TestPlanRecomputeAfterInPlaceWrite: the same for an activation updated
// in place (relu_) after the op that read it ran: re-running that op
// later would read the updated activation.
func TestPlanRecomputeAfterInPlaceWrite(t *testing.T) {
	g := rerunGraph()
	// x is updated in place after bn.bwd, before the updates; the
	// clipping op reads it.
	g.Ops[5].Inputs = []int{7, 3}
	g.Ops[5].Outputs = []int{9, 3}
	validGraph(t, g)
	p := testProfile(1<<40, 1e9)
	plan, _, err := PlanTensile(g, p, Target{Tolerance: 1})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, p, g, plan, "tolerance 1")
}

// TestCapuchinRecomputeAfterInPlaceWrite: a saved activation updated in
// place after its producer ran (relu_) cannot be brought back by re-running
// the producer. Capuchin dropped it when its swap would stall longer than
// the producer runs, and the backward op read the producer's version
// ("op 6 (a.bwd) reads tensor 2 (a), whose device copy is stale (version 1,
// current 2)"). Found by FuzzPlanTensileRandomGraph, which checks every
// baseline's plan.
func TestCapuchinRecomputeAfterInPlaceWrite(t *testing.T) {
	const mib = 1 << 20
	g := &workload.Graph{Model: "inplace", Kind: workload.Train, Batch: 1,
		Tensors: []workload.Tensor{
			{ID: 0, Name: "in", Bytes: 64, Kind: workload.Input},
			{ID: 1, Name: "W", Bytes: 64, Kind: workload.Param},
			{ID: 2, Name: "a", Bytes: 64 * mib, Kind: workload.Activation},
			{ID: 3, Name: "b", Bytes: 64, Kind: workload.Activation},
			{ID: 4, Name: "loss", Bytes: 4, Kind: workload.Activation},
			{ID: 5, Name: "dloss", Bytes: 4, Kind: workload.Gradient},
			{ID: 6, Name: "db", Bytes: 64, Kind: workload.Gradient},
			{ID: 7, Name: "da", Bytes: 64 * mib, Kind: workload.Gradient},
			{ID: 8, Name: "dW", Bytes: 64, Kind: workload.Gradient},
		},
		Ops: []workload.Op{
			{Name: "f", Kind: "matmul", Inputs: []int{0, 1}, Outputs: []int{2}, Phase: workload.Forward},
			{Name: "relu_", Kind: "relu_", Inputs: []int{2}, Outputs: []int{2}, Phase: workload.Forward},
			{Name: "g", Kind: "pool", Inputs: []int{2}, Outputs: []int{3}, Phase: workload.Forward},
			{Name: "loss", Kind: "nll_loss", Inputs: []int{3}, Outputs: []int{4}, Phase: workload.Forward},
			{Name: "loss.bwd", Kind: "fill", Inputs: []int{4}, Outputs: []int{5}, Phase: workload.Backward},
			{Name: "b.bwd", Kind: "nll_loss_bwd", Inputs: []int{5, 3}, Outputs: []int{6}, Phase: workload.Backward},
			{Name: "a.bwd", Kind: "pool_bwd", Inputs: []int{6, 2}, Outputs: []int{7}, Phase: workload.Backward},
			{Name: "f.bwd", Kind: "matmul_bwd_weight", Inputs: []int{7, 0}, Outputs: []int{8}, Phase: workload.Backward},
			{Name: "W.sgd", Kind: "sgd", Inputs: []int{1, 8}, Outputs: []int{1}, Phase: workload.Optimizer},
		},
	}
	validGraph(t, numbered(g))
	p := testProfile(1<<40, 1e9)
	for _, name := range BaselineNames() {
		b, _ := LookupBaseline(name)
		checkRun(t, p, g, b(g, p), name)
	}
}

// TestCheckpointRecomputeAfterInPlaceWrite: checkpointing re-runs a
// segment's forward ops from what is resident; an input they read that
// was updated in place after they ran (a0 by relu_ after f1 read it) no
// longer holds what they read, so the segment member whose producer reads
// it is kept instead of recomputed. Before, the recompute of a1 re-ran f1
// on the updated a0 and the checker failed the plan.
func TestCheckpointRecomputeAfterInPlaceWrite(t *testing.T) {
	const mib = 1 << 20
	g := &workload.Graph{Model: "ckpt-inplace", Kind: workload.Train, Batch: 1,
		Tensors: []workload.Tensor{
			{ID: 0, Name: "in", Bytes: 64, Kind: workload.Input},
			{ID: 1, Name: "W", Bytes: 64, Kind: workload.Param},
			{ID: 2, Name: "a0", Bytes: 16 * mib, Kind: workload.Activation},
			{ID: 3, Name: "a1", Bytes: 16 * mib, Kind: workload.Activation},
			{ID: 4, Name: "a2", Bytes: 16 * mib, Kind: workload.Activation},
			{ID: 5, Name: "a3", Bytes: 16 * mib, Kind: workload.Activation},
			{ID: 6, Name: "loss", Bytes: 4, Kind: workload.Activation},
			{ID: 7, Name: "d3", Bytes: 16 * mib, Kind: workload.Gradient},
			{ID: 8, Name: "d2", Bytes: 16 * mib, Kind: workload.Gradient},
			{ID: 9, Name: "d1", Bytes: 16 * mib, Kind: workload.Gradient},
			{ID: 10, Name: "d0", Bytes: 16 * mib, Kind: workload.Gradient},
			{ID: 11, Name: "dW", Bytes: 64, Kind: workload.Gradient},
		},
		Ops: []workload.Op{
			{Name: "f0", Kind: "matmul", Inputs: []int{0, 1}, Outputs: []int{2}, Phase: workload.Forward},
			{Name: "f1", Kind: "conv", Inputs: []int{2}, Outputs: []int{3}, Phase: workload.Forward},
			{Name: "relu_", Kind: "relu_", Inputs: []int{2}, Outputs: []int{2}, Phase: workload.Forward},
			{Name: "f2", Kind: "conv", Inputs: []int{3}, Outputs: []int{4}, Phase: workload.Forward},
			{Name: "f3", Kind: "conv", Inputs: []int{4}, Outputs: []int{5}, Phase: workload.Forward},
			{Name: "loss", Kind: "nll_loss", Inputs: []int{5}, Outputs: []int{6}, Phase: workload.Forward},
			{Name: "loss.bwd", Kind: "nll_loss_bwd", Inputs: []int{6, 5}, Outputs: []int{7}, Phase: workload.Backward},
			{Name: "f3.bwd", Kind: "conv_bwd", Inputs: []int{7, 4}, Outputs: []int{8}, Phase: workload.Backward},
			{Name: "f2.bwd", Kind: "conv_bwd", Inputs: []int{8, 3}, Outputs: []int{9}, Phase: workload.Backward},
			{Name: "f1.bwd", Kind: "conv_bwd", Inputs: []int{9, 2}, Outputs: []int{10}, Phase: workload.Backward},
			{Name: "f0.bwd", Kind: "matmul_bwd_weight", Inputs: []int{10, 0}, Outputs: []int{11}, Phase: workload.Backward},
			{Name: "W.sgd", Kind: "sgd", Inputs: []int{1, 11}, Outputs: []int{1}, Phase: workload.Optimizer},
		},
	}
	validGraph(t, numbered(g))
	p := testProfile(1<<40, 1e9)
	checkRun(t, p, g, PlanCheckpoint(g, p), "checkpoint")
}
