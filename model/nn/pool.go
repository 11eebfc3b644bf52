package nn

import "github.com/gossipd/gossipd/model/compute"

// window is a convolution's or a pool's geometry.
type window struct {
	io
	g compute.Window
}

// pool is a max or an average pool: K×K windows at stride s, no padding.
// A max pool with relu also applies the ReLU before it (pooledReLU).
type pool struct {
	window
	isMax, relu bool
}

func (l *pool) forward(s *pass, in, out compute.Tensor) {
	s.ly.Pool(out, in, l.g, s.m, l.isMax)
	if l.relu {
		s.ly.Activate(out, out, compute.ActReLU)
	}
}

func (l *pool) backward(s *pass, in, out, dout, din compute.Tensor) {
	if din.Len() == 0 {
		return
	}
	if l.relu {
		// dout is the network's buffer for this layer, which nothing
		// reads after: the ReLU's gradient goes in place.
		s.ly.ActivateBackward(dout, dout, out, out, compute.ActReLU)
	}
	s.ly.PoolBackward(din, dout, in, l.g, s.m, l.isMax)
}
