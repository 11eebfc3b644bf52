//go:build race

package simulation

// raceEnabled: the race detector is on; a few slow accuracy checks run
// smaller (trimmed; their full size runs in `make kernels`).
const raceEnabled = true
