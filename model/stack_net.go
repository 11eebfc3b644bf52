package model

import (
	"fmt"

	"github.com/gossipd/gossipd/model/compute"
)

// Layered networks in a stack. A stack of layered networks holds their
// parameters side by side on its backend like any stack, and trains
// them one after the other through one network of the spec (netStack):
// each model's step is the very step Model.SGDStepRowsOn takes alone,
// with its parameters, data and gradients staying on the backend. A
// simulator thus keeps --peer-batch's bookkeeping for CNNs (one call, no
// copy per step); the convolutions themselves are not yet batched
// across models. Networks with dropout are refused: each peer draws its
// masks from its own source, which a shared network does not have.

// netStack is the network a stack of layered models trains through:
// a Model whose parameters point at one slot of the stack at a time.
type netStack struct {
	m     *Model
	own   compute.Tensor // m's own parameters, given back on close
	probs []float32      // TallyRows' probabilities, on the host
}

// newNetStack builds the stack's network, or refuses spec.
func newNetStack(spec Spec, be compute.Backend) (*netStack, error) {
	if spec.Stochastic() {
		return nil, fmt.Errorf("%w: a network with dropout trains each peer's update on its own (its masks come from the peer's own randomness): %s", ErrSpec, spec)
	}
	m, err := newNet(spec, options{backend: be})
	if err != nil {
		return nil, err
	}
	return &netStack{m: m, own: m.params}, nil
}

// netAt points the network at model i of the stack.
func (s *Stack) netAt(i int) *Model {
	s.net.m.params = s.params.Slice(i*s.size, (i+1)*s.size)
	return s.net.m
}

// netGradRows is GradRows (and, with factor layers, GradRowsFactors) for
// layered networks: model i's gradient into row i of the gradient tensor.
func (s *Stack) netGradRows(x compute.Tensor, rows []int, y []int32, batch, k int, loss []float64, layers []string) [][]Factors {
	var factors [][]Factors
	if layers != nil {
		factors = make([][]Factors, k)
	}
	if k == 0 {
		return factors
	}
	g := s.gradTensor(k)
	for i := range k {
		m := s.netAt(i)
		xt := m.netRows(x, rows[i*batch:(i+1)*batch])
		l := m.GradientOn(g.Slice(i*s.size, (i+1)*s.size), xt, y[i*batch:(i+1)*batch], batch)
		if loss != nil {
			loss[i] = l
		}
		if layers != nil {
			factors[i] = m.netFactors(layers, batch)
		}
	}
	return factors
}

// netClippedRows is ClippedGradRows for layered networks.
func (s *Stack) netClippedRows(x compute.Tensor, rows []int, y []int32, batch int, counts []int, clip float64, grads [][]float32) int {
	k := len(grads)
	if k == 0 {
		return 0
	}
	g, clipped := s.gradTensor(k), 0
	for i, c := range counts {
		m := s.netAt(i)
		xt := m.netRows(x, rows[i*batch:i*batch+c])
		clipped += m.ClippedGradientSumOn(g.Slice(i*s.size, (i+1)*s.size), xt, y[i*batch:i*batch+c], c, clip)
	}
	s.storeGrads(grads)
	return clipped
}

// netTallyRows is TallyRows for layered networks: each model's forward
// pass alone, as Model.TallyWith's, its probabilities copied to the host
// and tallied there row by row, with the same bits.
func (s *Stack) netTallyRows(x compute.Tensor, y []int32, n int, loss []float64, correct []int) {
	C := s.spec.Classes
	if len(s.net.probs) < n*C {
		s.net.probs = make([]float32, n*C)
	}
	probs := s.net.probs[:n*C]
	for i := range loss {
		m := s.netAt(i)
		for lo := 0; lo < n; lo += 512 { // netTally's chunks
			k := min(512, n-lo)
			m.net.Predict(probs[:k*C], m.params, x.Slice(lo*s.spec.Inputs, (lo+k)*s.spec.Inputs), k)
			tallyProbs(probs[:k*C], y[lo:lo+k], C, &loss[i], &correct[i], nil)
		}
	}
}

// close frees the network, its own parameters included.
func (n *netStack) close() {
	n.m.params = n.own
	n.m.Close()
}
