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

// aliased is a layer the network never runs: it passes its input on as
// its output (Net.io), and the gradient at its output is the one at its
// input.
type aliased interface{ aliased() }

// flatten views C×H×W as C·H·W values: the same memory order.
type flatten struct{ io }

func (*flatten) aliased()                                                                       {}
func (*flatten) forward(*pass, compute.Tensor, compute.Tensor)                                  {}
func (*flatten) backward(*pass, compute.Tensor, compute.Tensor, compute.Tensor, compute.Tensor) {}

// pooledReLU is a ReLU that the max pool after it applies to its own,
// smaller output instead (pool.relu): max(relu(x)) = relu(max(x)), and
// the gradient reaches the same input, the window's first maximum, where
// it is positive. The same numbers, with a quarter of the work for a 2×2
// pool.
type pooledReLU struct{ io }

func (*pooledReLU) aliased()                                                                       {}
func (*pooledReLU) forward(*pass, compute.Tensor, compute.Tensor)                                  {}
func (*pooledReLU) backward(*pass, compute.Tensor, compute.Tensor, compute.Tensor, compute.Tensor) {}
