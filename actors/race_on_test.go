//go:build race

package actors

// raceEnabled: the race detector slows TENSILE planning 10–40×; tests that
// only plan, on one goroutine, skip under it (the plain run has them).
const raceEnabled = true
