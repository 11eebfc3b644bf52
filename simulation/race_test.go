//go:build race

package simulation

// raceEnabled: the race detector is on; a few slow accuracy checks run
// smaller (their full size runs in `make kernels`, under every kernel set).
const raceEnabled = true
