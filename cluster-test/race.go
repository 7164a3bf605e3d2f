//go:build race

package clustertest

// raceEnabled: the test binary runs under the race detector, so the harness
// builds the coordinator and node with -race too.
const raceEnabled = true
