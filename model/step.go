package model

import (
	"fmt"

	"github.com/gossipd/gossipd/model/compute"
)

// SGDStep takes one plain SGD step, w ← w − lr·∇L, on the mean loss L over
// the n examples in x with labels y, and returns L (for the SVM including
// λ/2·‖W‖², whose gradient λ·W it applies as the shrinkage w ← (1 − lr·λ)·w).
// It computes each layer's weight gradient straight into the weights, so it
// needs no gradient buffer and no second pass over the parameters; its
// result equals Gradient followed by w −= lr·grad up to rounding.
func (m *Model) SGDStep(x []float32, y []int32, n int, lr float32) float64 {
	m.check(x, y, n)
	return m.sgdStep(host(x), y, n, lr)
}

// SGDStepRows is SGDStep on the rows of x (a matrix of Inputs columns)
// that rows lists, with their labels y (len(rows) of them), read in place:
// a minibatch need not be copied out of its dataset. Backends that cannot
// gather (compute.Gatherer) get a copy.
func (m *Model) SGDStepRows(x []float32, rows []int, y []int32, lr float32) float64 {
	return m.SGDStepRowsOn(host(x), rows, y, lr)
}

// SGDStepRowsOn is SGDStepRows on a dataset x in the backend's memory:
// Load it once, and a device backend gathers each minibatch where it lies
// (a device backend must then be a compute.Gatherer): once, into a tensor
// of the workspace, on a backend that gathers once (compute.GathersOnce),
// else in the two GEMMs that read it.
func (m *Model) SGDStepRowsOn(x compute.Tensor, rows []int, y []int32, lr float32) float64 {
	n, d := len(rows), m.spec.Inputs
	if len(y) < n {
		panic(fmt.Sprintf("model: %d labels for %d rows", len(y), n))
	}
	m.checkLabels(y, n)
	for _, r := range rows {
		if r < 0 || (r+1)*d > x.Len() {
			panic(fmt.Sprintf("model: row %d outside x of %d values", r, x.Len()))
		}
	}
	if m.net != nil {
		return m.netStep(m.netRows(x, rows), y, n, lr)
	}
	g, ok := m.backend.(compute.Gatherer)
	if !ok {
		if !x.OnHost() {
			panic("model: SGDStepRowsOn with a device tensor needs a backend that gathers (compute.Gatherer)")
		}
		return m.sgdStep(host(m.hostRows(x.HostSlice(), rows)), y, n, lr)
	}
	if o, ok := m.backend.(compute.GathersOnce); ok && o.GathersOnce() {
		m.grow(n)
		return m.sgdStep(m.gatherRows(x, rows, m.ws.cap), y, n, lr)
	}
	m.rows, m.gather = rows, g
	defer func() { m.rows, m.gather = nil, nil }()
	return m.sgdStep(x, y, n, lr)
}

func (m *Model) sgdStep(x compute.Tensor, y []int32, n int, lr float32) float64 {
	if m.net != nil {
		return m.netStep(x, y, n, lr)
	}
	loss, _ := m.backward(x, y, n, 1/float32(n))
	loss = m.stepLoss(loss, n)
	beta := float32(1)
	if m.spec.Kind == SVM {
		beta = 1 - lr*float32(m.spec.Lambda)
	}
	be := m.backend
	for l, ly := range m.layers {
		dz := m.ws.dz[l].Slice(0, n*ly.out)
		if l == 0 && m.rows != nil {
			m.gather.GemmGatherB(ly.out, ly.in, -lr, dz, ly.out, x, ly.in, m.rows, beta, m.weights(ly), ly.in)
		} else {
			be.Gemm(true, false, ly.out, ly.in, n, -lr, dz, ly.out, m.input(x, l), ly.in, beta, m.weights(ly), ly.in)
		}
		if f, ok := be.(compute.Fused); ok {
			f.ColumnSumsAxpby(m.bias(ly), -lr, dz, n, ly.out, beta)
			continue
		}
		sums := m.ws.colSums.Slice(0, ly.out)
		be.ColumnSums(sums, dz, n, ly.out)
		be.Axpby(m.bias(ly), -lr, sums, beta)
	}
	return loss
}

// reluInto sets a = max(z, 0) (a hidden layer's activations from its
// pre-activations, which the backward pass still needs): one kernel on a
// backend that fuses the copy and the ReLU (compute.Fused).
func reluInto(be compute.Backend, a, z compute.Tensor) {
	if f, ok := be.(compute.Fused); ok {
		f.ReLUInto(a, z)
		return
	}
	be.Copy(a, z)
	be.ReLU(a)
}
