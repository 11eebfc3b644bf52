package nn

import (
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// layer is one layer of a network, built for its input shape. Its
// methods work on the m examples of a pass at once, each example's
// values in a row (m × shape.Size(), row-major). A layer owns the
// buffers it keeps between its forward and its backward pass.
type layer interface {
	// shapes are the layer's input and output shapes.
	shapes() (in, out Shape)
	// forward sets out from in.
	forward(s *pass, in, out []float32)
	// backward adds the layer's parameter gradients to s's (each
	// example's to its own row when s.per) and, where din is not nil,
	// sets ∂loss/∂in from dout, the gradient at its output; in and out
	// are what forward saw and gave.
	backward(s *pass, in, out, dout, din []float32)
}

// pass is one forward (and backward) pass over m examples.
type pass struct {
	be     compute.Backend
	params []float32
	// grad is the summed gradient (NumParams values), or with per one
	// row per example (m × NumParams); nil in a forward-only pass.
	grad []float32
	per  bool
	size int // NumParams
	m    int
	// rng draws dropout masks in training; nil: evaluation, where
	// dropout passes values through.
	rng *rand.Rand
}

// training reports whether backward will follow (layers then keep what
// it needs).
func (s *pass) training() bool { return s.grad != nil }

// io holds a layer's shapes.
type io struct{ in, out Shape }

func (l io) shapes() (Shape, Shape) { return l.in, l.out }

// weights locates a layer's weight (w, wn values) and bias (b, bn) in
// the parameter vector.
type weights struct{ w, wn, b, bn int }

func (p weights) weight(s *pass) []float32 { return s.params[p.w : p.w+p.wn] }
func (p weights) bias(s *pass) []float32   { return s.params[p.b : p.b+p.bn] }

// grads returns where example e's (or with s.per false, every
// example's) weight and bias gradients go.
func (p weights) grads(s *pass, e int) (dw, db []float32) {
	g := s.grad
	if s.per {
		g = s.grad[e*s.size : (e+1)*s.size]
	}
	return g[p.w : p.w+p.wn], g[p.b : p.b+p.bn]
}
