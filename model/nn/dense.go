package nn

import "github.com/gossipd/gossipd/model/compute"

// dense is a fully connected layer: out = in·Wᵀ + b, W [out, in].
type dense struct {
	io
	weights
}

func (l *dense) forward(s *pass, in, out compute.Tensor) {
	I, O := l.in.C, l.out.C
	s.be.BroadcastRows(out, s.m, O, l.bias(s))
	s.be.Gemm(false, true, s.m, O, I, 1, in, I, l.weight(s), I, 1, out, O)
}

func (l *dense) backward(s *pass, in, _, dout, din compute.Tensor) {
	I, O := l.in.C, l.out.C
	dw, db := l.grads(s)
	if s.per {
		// Example e's weight gradient is the outer product of its
		// error and its input.
		s.be.GemmStrided(true, false, O, I, 1, 1, dout, O, O, in, I, I, 1, dw, I, s.size, s.m)
	} else {
		s.be.Gemm(true, false, O, I, s.m, 1, dout, O, in, I, 1, dw, I)
	}
	s.ly.ChannelSums(db, dout, s.m, O, 1, s.stride())
	if din.Len() > 0 {
		s.be.Gemm(false, false, s.m, I, O, 1, dout, O, l.weight(s), I, 0, din, I)
	}
}
