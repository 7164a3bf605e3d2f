//go:build !race

package clustertest

// raceEnabled: the test binary runs without the race detector.
const raceEnabled = false
