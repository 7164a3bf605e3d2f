//go:build race

package zooapps

// raceEnabled: the race detector slows planning ~10x; the whole-workload
// table test skips (the shorter tests cover the builder's concurrency).
const raceEnabled = true
