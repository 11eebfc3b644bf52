package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// grow makes the activation buffers hold m examples.
func (n *Net) grow(m int) {
	if m <= n.cap {
		return
	}
	n.freeActs()
	for _, l := range n.layers {
		var a, d compute.Tensor // none for a flatten: its output is its input
		if _, skip := l.(aliased); !skip {
			_, out := l.shapes()
			a, d = n.be.Alloc(m*out.Size()), n.be.Alloc(m*out.Size())
		}
		n.acts, n.dacts = append(n.acts, a), append(n.dacts, d)
	}
	n.cap = m
}

func (n *Net) freeActs() {
	for i := range n.acts {
		if n.acts[i].Len() > 0 {
			n.be.Free(n.acts[i])
			n.be.Free(n.dacts[i])
		}
	}
	n.acts, n.dacts, n.cap = nil, nil, 0
}

// below is the last layer at or before i that is not aliased (a
// flatten; −1: none), which holds layer i's output.
func (n *Net) below(i int) int {
	for i >= 0 {
		if _, skip := n.layers[i].(aliased); !skip {
			break
		}
		i--
	}
	return i
}

// Free gives the network's buffers back to its backend (device memory;
// on the CPU the garbage collector's anyway). The network may be used
// after: it allocates them again.
func (n *Net) Free() {
	n.freeActs()
	release(n.be, &n.xin)
	for _, l := range n.layers {
		l.free(n.be)
	}
}

// Loss runs the network on m examples x (row-major, m×Input().Size())
// with labels y and returns the summed cross-entropy and how many it
// classifies right. With grad (NumParams values; empty: none) it also
// sets grad to scale·∂loss/∂params. With rng, dropout layers drop
// (training); without, they pass values through (evaluation). The
// tensors are the backend's, or host tensors (copied to a device).
func (n *Net) Loss(grad, params, x compute.Tensor, y []int32, m int, scale float32, rng *rand.Rand) (float64, int) {
	if grad.Len() != 0 && grad.Len() != n.size {
		panic(fmt.Sprintf("nn: gradient of %d values for %d parameters", grad.Len(), n.size))
	}
	return n.run(&pass{be: n.be, ly: n.ly, params: params, grad: grad, size: n.size, m: m, rng: rng}, x, y, scale)
}

// PerExampleGradients sets grads (m×NumParams) to each example's loss
// gradient, for DP-SGD's per-example clipping (no dropout): one pass
// over the m examples, each layer writing each example's parameter
// gradient to its own row.
func (n *Net) PerExampleGradients(grads, params, x compute.Tensor, y []int32, m int) {
	if grads.Len() < m*n.size {
		panic(fmt.Sprintf("nn: per-example gradients of %d values for %d×%d", grads.Len(), m, n.size))
	}
	n.run(&pass{be: n.be, ly: n.ly, params: params, grad: grads.Slice(0, m*n.size), per: true, size: n.size, m: m}, x, y, 1)
}

// run is a forward pass and, where s has a gradient, a backward one.
func (n *Net) run(s *pass, x compute.Tensor, y []int32, scale float32) (float64, int) {
	x = n.input(s, x)
	n.last = x
	if len(y) < s.m {
		panic(fmt.Sprintf("nn: %d labels for %d examples", len(y), s.m))
	}
	m := s.m
	n.forward(s, x)
	last := len(n.layers) - 1
	var dz compute.Tensor
	if s.training() {
		dz = n.dacts[last].Slice(0, m*n.classes)
	}
	z := n.acts[last].Slice(0, m*n.classes)
	var loss float64
	var correct int
	if n.sum != nil && s.training() {
		n.be.SoftmaxCrossEntropySum(n.sum, z, dz, z, y, m, n.classes, scale)
	} else {
		loss, correct = n.be.SoftmaxCrossEntropy(z, dz, z, y, m, n.classes, scale)
	}
	if !s.training() {
		return loss, correct
	}
	n.ly.Zero(s.grad)
	for i := last; i >= 0; i-- {
		if n.below(i) != i {
			continue // aliased: the gradient at its output is the one at its input
		}
		in, out := n.io(i, x, m)
		_, o := n.layers[i].shapes()
		var din compute.Tensor // none for the first layer
		if j := n.below(i - 1); j >= 0 {
			din = n.dacts[j].Slice(0, in.Len())
		}
		n.layers[i].backward(s, in, out, n.dacts[i].Slice(0, m*o.Size()), din)
	}
	return loss, correct
}

// input checks a pass's parameters and inputs and returns the inputs
// where the backend computes on them: a host tensor copied to a device.
func (n *Net) input(s *pass, x compute.Tensor) compute.Tensor {
	if s.params.Len() != n.size {
		panic(fmt.Sprintf("nn: %d parameters, the network has %d", s.params.Len(), n.size))
	}
	d := n.in.Size()
	if s.m < 1 || x.Len() < s.m*d {
		panic(fmt.Sprintf("nn: %d input values for %d examples of %s", x.Len(), s.m, n.in))
	}
	x = x.Slice(0, s.m*d)
	if n.onHost || !x.OnHost() {
		return x
	}
	xin := buffer(n.be, &n.xin, x.Len())
	n.be.Copy(xin, x)
	return xin
}

// io returns layer i's input and output for m examples of x (a
// flatten's output is its input: the same values in the same order).
func (n *Net) io(i int, x compute.Tensor, m int) (in, out compute.Tensor) {
	li, lo := n.layers[i].shapes()
	if j := n.below(i - 1); j >= 0 {
		in = n.acts[j].Slice(0, m*li.Size())
	} else {
		in = x.Slice(0, m*li.Size())
	}
	if n.below(i) != i {
		return in, in
	}
	return in, n.acts[i].Slice(0, m*lo.Size())
}

func (n *Net) forward(s *pass, x compute.Tensor) {
	n.grow(s.m)
	for i, l := range n.layers {
		if n.below(i) == i {
			in, out := n.io(i, x, s.m)
			l.forward(s, in, out)
		}
	}
}

// Predict writes the class probabilities of m examples x to out
// (m×Classes(), host memory), in chunks of at most 256 examples.
func (n *Net) Predict(out []float32, params, x compute.Tensor, m int) {
	d, c := n.in.Size(), n.classes
	if len(out) < m*c {
		panic(fmt.Sprintf("nn: %d outputs for %d examples of %d classes", len(out), m, c))
	}
	for lo := 0; lo < m; lo += 256 {
		k := min(256, m-lo)
		s := &pass{be: n.be, ly: n.ly, params: params, size: n.size, m: k}
		xs := n.input(s, x.Slice(min(x.Len(), lo*d), x.Len()))
		n.forward(s, xs)
		z := n.acts[len(n.layers)-1].Slice(0, k*c)
		n.be.Softmax(z, z, k, c)
		n.be.Store(out[lo*c:(lo+k)*c], z)
	}
}

// SumLosses makes training passes add their loss to s where the backend
// computes (compute.LossSums), instead of returning it: Loss then
// returns 0 for both (a device then need not wait at every step). nil
// returns them again.
func (n *Net) SumLosses(s compute.LossSum) { n.sum = s }

// Zero sets a tensor of the network's backend to zeros.
func (n *Net) Zero(x compute.Tensor) { n.ly.Zero(x) }

// DenseFactors returns, after a training pass over m examples (Loss with
// a gradient), the sufficient factors of the dense layer whose weight is
// named name ("4.weight"): u, the gradient at its output (m × out), and
// v, its input (m × in), tensors of the network's backend that the next
// pass overwrites; uᵀ·v is the weight's gradient. ok is false when no
// dense layer has that weight.
func (n *Net) DenseFactors(name string, m int) (u, v compute.Tensor, out, in int, ok bool) {
	off := -1
	for _, p := range n.params {
		if p.Name == name {
			off = p.Off
		}
	}
	for i, l := range n.layers {
		d, isDense := l.(*dense)
		if !isDense || d.w != off {
			continue
		}
		if m > n.cap || n.last.Len() < m*n.in.Size() {
			panic(fmt.Sprintf("nn: factors of %d examples after a pass of fewer", m))
		}
		in, _ := n.io(i, n.last, m)
		return n.dacts[i].Slice(0, m*d.out.C), in, d.out.C, d.in.C, true
	}
	return compute.Tensor{}, compute.Tensor{}, 0, 0, false
}
