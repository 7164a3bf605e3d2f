//go:build race

package main

// raceEnabled: under the race detector the planner runs ~10× slower; tests
// whose concurrency is covered elsewhere skip their slowest parts.
const raceEnabled = true
