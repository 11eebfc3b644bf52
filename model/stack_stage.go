package model

import "github.com/gossipd/gossipd/model/compute"

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
