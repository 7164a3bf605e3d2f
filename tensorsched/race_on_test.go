//go:build race

package tensorsched

// raceEnabled: the race detector slows planning ~10×; the longest
// table-style tests, whose concurrency the shorter ones already cover, skip.
const raceEnabled = true
