package model

import (
	"fmt"

	"github.com/gossipd/gossipd/model/compute"
)

// DP-SGD in a stack. A peer's DP-SGD step takes a Poisson lot of its data
// whose size varies from step to step and from peer to peer, so the
// models of one call cannot share a batch size the way StepRows' do.
// ClippedGradRows takes every model's share of a call as batch rows of
// which only the first counts[i] are its lot's; the rest pad the share
// and their errors are scaled by zero, so they add nothing. The caller
// adds the noise on the host (with each peer's own source) and steps the
// models along the noisy gradients with StepGrads.

// ClippedGradRows writes to grads[i] (NumParams values, on the host)
// DP-SGD's clipped gradient sum Σ_j clip(∇ℓ_j, C) of model i over the
// first counts[i] of its batch rows of x, rows[i·batch:(i+1)·batch] with
// labels y[i·batch:(i+1)·batch], for models 0 to len(grads)−1, as
// Model.ClippedGradientSumOn computes it for one (the regulariser
// excluded; AddRegGrads adds it). The other rows of a model's share must
// be rows of x with valid labels, and count for nothing. It returns how
// many examples were clipped.
func (s *Stack) ClippedGradRows(x compute.Tensor, rows []int, y []int32, batch int, counts []int, clip float64, grads [][]float32) int {
	k := len(grads)
	if len(counts) != k {
		panic(fmt.Sprintf("model: ClippedGradRows of %d models with %d counts", k, len(counts)))
	}
	for i, g := range grads {
		if len(g) != s.size || counts[i] < 0 || counts[i] > batch {
			panic(fmt.Sprintf("model: ClippedGradRows model %d: gradient of %d values (want %d), %d of %d rows", i, len(g), s.size, counts[i], batch))
		}
	}
	if s.net != nil {
		s.checkCall("ClippedGradRows", rows, y, batch, k, nil)
		return s.netClippedRows(x, rows, y, batch, counts, clip, grads)
	}
	if !s.pass("ClippedGradRows", x, rows, y, batch, k, 1, nil) {
		return 0
	}
	n := k * batch
	if len(s.norms) < 3*n {
		s.norms = make([]float64, 3*n)
	}
	clipped := clipRows(s.be, s.layers, func(l int) compute.Tensor { return s.dz[l].Slice(0, n*s.layers[l].out) },
		func(l int) compute.Tensor { return s.input(l, n) }, n, clip, s.norms, s.rowScales,
		func(j int) bool { return j%batch >= counts[j/batch] })
	s.weightGrads(k, batch)
	s.storeGrads(grads)
	return clipped
}

// AddRegGrads adds the regulariser's gradient of models 0 to len(grads)−1
// (the SVM's λ·W_i; nothing for the other models) to grads[i], on the
// host, as Model.AddRegGradient does for one.
func (s *Stack) AddRegGrads(grads [][]float32) {
	if s.spec.Kind != SVM || len(grads) == 0 {
		return
	}
	s.loadGrads(grads)
	s.storeGrads(grads)
}

// StepGrads takes one SGD step of each of models 0 to len(lr)−1 along
// grads[i] (on the host) plus the regulariser's gradient:
// W_i ← W_i − lr[i]·(grads[i] + λ·W_i), as a DP-SGD update of one model
// does with its noisy gradient (Model.AddRegGradient, then Axpby).
func (s *Stack) StepGrads(grads [][]float32, lr []float32) {
	k := len(lr)
	if len(grads) != k {
		panic(fmt.Sprintf("model: StepGrads of %d gradients at %d rates", len(grads), k))
	}
	if k == 0 {
		return
	}
	g := s.loadGrads(grads)
	if len(s.rowScales) < k {
		s.rowScales = make([]float32, s.n)
	}
	for i, v := range lr {
		s.rowScales[i] = -v
	}
	s.be.ScaleRows(g, k, s.size, s.rowScales[:k])
	s.be.Axpby(s.params.Slice(0, k*s.size), 1, g, 1)
}

// loadGrads copies grads to the stack's gradient tensor, adds the SVM's
// λ·W_i to each, and returns the first len(grads)·NumParams values.
func (s *Stack) loadGrads(grads [][]float32) compute.Tensor {
	k, P := len(grads), s.size
	if k > s.cap {
		panic(fmt.Sprintf("model: %d gradients for a stack of %d", k, s.cap))
	}
	s.ensure(k)
	t := s.gradTensor(k)
	s.grownStage(k)
	for i, g := range grads {
		if len(g) != P {
			panic(fmt.Sprintf("model: gradient %d has %d values, want %d", i, len(g), P))
		}
		copy(s.stage[i*P:], g)
	}
	s.be.Copy(t, compute.Host(s.stage[:k*P]))
	if s.spec.Kind == SVM {
		s.be.Axpby(t, float32(s.spec.Lambda), s.params.Slice(0, k*P), 1)
	}
	return t
}
