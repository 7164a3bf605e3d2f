package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/placement"
)

// Two small jobs on a node of two empty H100s: binpack (the default) puts
// the second next to the first, where both fit at their vanilla peaks;
// spread puts it on the empty GPU. A strategy it does not know stops the
// coordinator before it starts, naming the flag.
func TestPlacementStrategy(t *testing.T) {
	for _, c := range []struct {
		strategy placement.Strategy
		same     bool
	}{{"", true}, {placement.BinPack, true}, {placement.Spread, false}} {
		t.Run(string(c.strategy)+"_", func(t *testing.T) {
			tc := &testCluster{t: t, dataDir: t.TempDir(), planner: DefaultPlanner(),
				coordConfig: func(cfg *CoordinatorConfig) { cfg.Placement = c.strategy }}
			tc.startCoordinator()
			t.Cleanup(tc.stop)
			tc.addNode("n1", 2, "h100-80gb", 1)
			a := tc.submit(mlpSpec("a", 1_000_000, 0))[0].ID
			ra := tc.waitState(a, StateRunning, 20*time.Second)
			b := tc.submit(mlpSpec("b", 1_000_000, 0))[0].ID
			rb := tc.waitState(b, StateRunning, 20*time.Second)
			if (ra.GPU == rb.GPU) != c.same {
				t.Errorf("strategy %q: a on %s, b on %s; want them on the same GPU: %v", c.strategy, ra.GPU, rb.GPU, c.same)
			}
		})
	}
	_, err := StartCoordinator(CoordinatorConfig{DataDir: t.TempDir(), Placement: "pack"})
	if err == nil || !strings.Contains(err.Error(), "--placement") || !strings.Contains(err.Error(), `"pack"`) {
		t.Errorf("placement pack: %v, want an error naming --placement and the value", err)
	}
}
