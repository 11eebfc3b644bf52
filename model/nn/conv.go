package nn

import "github.com/gossipd/gossipd/model/compute"

// conv is a 2-D convolution, on the backend's kernels
// (compute.Layers.ConvForward: im2col and GEMM on the CPU).
type conv struct {
	window
	weights
	ch int // output channels
	// cols holds a training pass's unrolled inputs, for its backward:
	// only ConvForward writes it (its padding entries stay zero).
	cols compute.Tensor
}

func (l *conv) forward(s *pass, in, out compute.Tensor) {
	var cols compute.Tensor
	if s.training() {
		cols = buffer(s.be, &l.cols, s.m*l.g.Cols())
	}
	s.ly.ConvForward(out, cols, in, l.weight(s), l.bias(s), l.g, l.ch, s.m)
}

func (l *conv) backward(s *pass, _, _, dout, din compute.Tensor) {
	dw, db := l.grads(s)
	s.ly.ConvBackward(din, dw, db, dout, l.cols.Slice(0, s.m*l.g.Cols()), l.weight(s), l.g, l.ch, s.m, s.stride())
}

func (l *conv) free(be compute.Backend) { release(be, &l.cols) }
