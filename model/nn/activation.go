package nn

import "github.com/gossipd/gossipd/model/compute"

// activation applies a function to each value: ReLU, tanh or GELU.
type activation struct {
	io
	f compute.Activation
}

func (l *activation) forward(s *pass, in, out compute.Tensor) { s.ly.Activate(out, in, l.f) }

func (l *activation) backward(s *pass, in, out, dout, din compute.Tensor) {
	if din.Len() > 0 {
		s.ly.ActivateBackward(din, dout, in, out, l.f)
	}
}

// flatten views C×H×W as C·H·W values: the same memory order, so the
// network passes its input on as its output (Net.io) and never runs it.
type flatten struct{ io }

func (l *flatten) forward(*pass, compute.Tensor, compute.Tensor) {}

func (l *flatten) backward(*pass, compute.Tensor, compute.Tensor, compute.Tensor, compute.Tensor) {}
