package nn

import "github.com/gossipd/gossipd/model/compute"

// norm is layer normalisation (one group: the whole example, a weight
// and bias per value) or group normalisation (groups of C/G channels,
// a weight and bias per channel).
type norm struct {
	io
	weights
	groups int
	// size is the values per group, hw how many share a weight (1 for
	// layer norm, H·W for group norm).
	size, hw int
	stats    compute.Tensor // each (example, group)'s mean and 1/σ
}

func (l *norm) forward(s *pass, in, out compute.Tensor) {
	stats := buffer(s.be, &l.stats, 2*s.m*l.groups)
	s.ly.Norm(out, stats, in, l.weight(s), l.bias(s), s.m, l.groups, l.size, l.hw)
}

func (l *norm) backward(s *pass, in, _, dout, din compute.Tensor) {
	dw, db := l.grads(s)
	s.ly.NormBackward(din, dw, db, dout, in, l.weight(s), l.stats.Slice(0, 2*s.m*l.groups), s.m, l.groups, l.size, l.hw, s.stride())
}

func (l *norm) free(be compute.Backend) { release(be, &l.stats) }
