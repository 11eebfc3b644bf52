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

// grownStage makes the staging buffer hold k models: page-locked memory
// on a backend that has it (compute.PinnedHost), which a GPU copies to
// and from several times as fast as ordinary memory, else a slice.
func (s *Stack) grownStage(k int) {
	if len(s.stage) >= k*s.size {
		return
	}
	s.dropStage()
	if p, ok := s.be.(compute.PinnedHost); ok {
		if buf, unpin, err := p.AllocPinned(k * s.size); err == nil {
			s.stage, s.unpin = buf, unpin
			return
		}
	}
	s.stage = make([]float32, k*s.size)
}

// dropStage gives the staging buffer back.
func (s *Stack) dropStage() {
	if s.unpin != nil {
		s.unpin()
	}
	s.stage, s.unpin = nil, nil
}
