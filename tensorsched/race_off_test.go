//go:build !race

package tensorsched

const raceEnabled = false
