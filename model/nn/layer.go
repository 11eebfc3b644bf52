package nn

import (
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// layer is one layer of a network, built for its input shape. Its
// methods work on the m examples of a pass at once, each example's
// values in a row (m × shape.Size(), row-major), in tensors of the
// network's backend, computing on its kernels (compute.Layers). A layer
// owns the buffers it keeps between its forward and its backward pass.
type layer interface {
	// shapes are the layer's input and output shapes.
	shapes() (in, out Shape)
	// forward sets out from in.
	forward(s *pass, in, out compute.Tensor)
	// backward adds the layer's parameter gradients to s's (each
	// example's to its own row when s.per) and, where din is not empty,
	// sets ∂loss/∂in from dout, the gradient at its output; in and out
	// are what forward saw and gave.
	backward(s *pass, in, out, dout, din compute.Tensor)
	// free gives the layer's buffers back to the backend.
	free(be compute.Backend)
}

// pass is one forward (and backward) pass over m examples.
type pass struct {
	be     compute.Backend
	ly     compute.Layers
	params compute.Tensor
	// grad is the summed gradient (NumParams values), or with per one
	// row per example (m × NumParams); empty in a forward-only pass.
	grad compute.Tensor
	per  bool
	size int // NumParams
	m    int
	// rng draws dropout masks in training; nil: evaluation, where
	// dropout passes values through.
	rng *rand.Rand
}

// training reports whether backward will follow (layers then keep what
// it needs).
func (s *pass) training() bool { return s.grad.Len() > 0 }

// stride is the distance between examples' gradients: 0 when summed.
func (s *pass) stride() int {
	if s.per {
		return s.size
	}
	return 0
}

// io holds a layer's shapes.
type io struct{ in, out Shape }

func (l io) shapes() (Shape, Shape) { return l.in, l.out }

// free: most layers keep nothing.
func (io) free(compute.Backend) {}

// weights locates a layer's weight (w, wn values) and bias (b, bn) in
// the parameter vector.
type weights struct{ w, wn, b, bn int }

func (p weights) weight(s *pass) compute.Tensor { return s.params.Slice(p.w, p.w+p.wn) }
func (p weights) bias(s *pass) compute.Tensor   { return s.params.Slice(p.b, p.b+p.bn) }

// grads returns where the weight and bias gradients go: the summed
// ones, or with s.per example 0's, the others s.size values apart.
func (p weights) grads(s *pass) (dw, db compute.Tensor) {
	g := s.grad
	if s.per {
		return g.Slice(p.w, g.Len()), g.Slice(p.b, g.Len())
	}
	return g.Slice(p.w, p.w+p.wn), g.Slice(p.b, p.b+p.bn)
}

// buffer returns *t grown to at least n values on be.
func buffer(be compute.Backend, t *compute.Tensor, n int) compute.Tensor {
	if t.Len() < n {
		if t.Len() > 0 {
			be.Free(*t)
		}
		*t = be.Alloc(n)
	}
	return t.Slice(0, n)
}

// release frees the tensors that buffer grew.
func release(be compute.Backend, ts ...*compute.Tensor) {
	for _, t := range ts {
		if t.Len() > 0 {
			be.Free(*t)
			*t = compute.Tensor{}
		}
	}
}
