package nn

import "github.com/gossipd/gossipd/model/compute"

// window is a convolution's or a pool's geometry.
type window struct {
	io
	g compute.Window
}

// pool is a max or an average pool: K×K windows at stride s, no padding.
type pool struct {
	window
	isMax bool
}

func (l *pool) forward(s *pass, in, out compute.Tensor) {
	s.ly.Pool(out, in, l.g, s.m, l.isMax)
}

func (l *pool) backward(s *pass, in, _, dout, din compute.Tensor) {
	if din.Len() > 0 {
		s.ly.PoolBackward(din, dout, in, l.g, s.m, l.isMax)
	}
}
