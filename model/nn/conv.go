package nn

import "github.com/gossipd/gossipd/model/compute"

// conv is a 2-D convolution, on the backend's kernels
// (compute.Layers.ConvForward: on the CPU a direct convolution for
// stride 1, im2col and GEMM otherwise).
type conv struct {
	window
	weights
	ch int // output channels
	// cols holds what a training pass's backward needs of its inputs,
	// in the backend's layout (unrolled inputs, or the CPU's padded
	// images): allocated zero (backends' Alloc zeroes), then written
	// only by ConvForward, which leaves its padding entries zero.
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
