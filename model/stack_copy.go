package model

import (
	"runtime"

	"github.com/gossipd/gossipd/model/compute"
)

// copyRowsFrom is the batch size (models × values) from which a stack
// copies between its staging buffer and the models' host vectors on every
// core: on a GPU those copies are most of a batch's time on the host, and
// the simulator's other cores are idle meanwhile.
const copyRowsFrom = 1 << 18

// copyRows calls copy(i) for the k models of size values, side by side
// for a large batch. Each call copies one model's values alone.
func copyRows(k, size int, copy func(i int)) {
	workers := 1
	if k*size >= copyRowsFrom {
		workers = runtime.GOMAXPROCS(0)
	}
	compute.ForEach(k, workers, copy)
}
