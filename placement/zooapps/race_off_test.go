//go:build !race

package zooapps

const raceEnabled = false
