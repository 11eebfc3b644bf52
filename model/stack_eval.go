package model

import (
	"fmt"

	"github.com/gossipd/gossipd/model/compute"
)

// TallyRows measures models 0 to len(loss)−1 on the same n examples, x
// (n rows of Inputs values, in the backend's memory) with labels y: it
// adds each model's summed loss to loss[i] and its correct predictions
// to correct[i], as Model.TallyWith adds them to a Tally (on the CPU's
// backend, and a device that computes as it does, the same bits). The
// forward pass is a few strided-batched GEMMs for all of them, every
// model reading the one x, and the losses one kernel (compute.Batched's
// TallyRows): a simulator evaluates the peers' models on its device this
// way, instead of copying them to the host. A layered network's models
// are measured one after the other (the forward pass of each on the
// device, its probabilities tallied on the host), as a stack trains
// them.
func (s *Stack) TallyRows(x compute.Tensor, y []int32, n int, loss []float64, correct []int) {
	k := len(loss)
	if k > s.cap || len(correct) < k || len(y) < n || n < 0 || x.Len() < n*s.spec.Inputs {
		panic(fmt.Sprintf("model: TallyRows of %d models (stack of %d) on %d rows: %d values of x, %d labels, %d counts", k, s.cap, n, x.Len(), len(y), len(correct)))
	}
	if k == 0 || n == 0 {
		return
	}
	s.ensure(k)
	if s.net != nil {
		for _, c := range y[:n] {
			if c < 0 || int(c) >= s.spec.Classes {
				panic(fmt.Sprintf("model: TallyRows: label %d out of range [0,%d)", c, s.spec.Classes))
			}
		}
		s.netTallyRows(x, y[:n], n, loss[:k], correct[:k])
		return
	}
	s.grow(n, false)
	s.forward(x.Slice(0, n*s.spec.Inputs), 0, k, n) // every model reads the one x
	L := len(s.layers)
	last := s.layers[L-1]
	s.be.TallyRows(s.z[L-1].Slice(0, k*n*last.out), y[:n], k, n, last.out, s.spec.Kind == SVM, loss, correct)
}

// forward runs models 0 to k−1 of a stack of dense layers forward on
// batch rows each, z_i = 1·b_iᵀ + X_i·W_iᵀ, then ReLU for hidden layers:
// layer 0 reads x, model i's rows at i·stride0 (0: one input for all),
// the later layers their own activations.
func (s *Stack) forward(x compute.Tensor, stride0, k, batch int) {
	be, P, L, n := s.be, s.size, len(s.layers), k*batch
	ones := s.ones.Slice(0, batch)
	for l, ly := range s.layers {
		z := s.z[l].Slice(0, n*ly.out)
		in, stride := x, stride0
		if l > 0 {
			in, stride = s.input(l, n), batch*ly.in
		}
		be.GemmStrided(false, false, batch, ly.out, 1, 1, ones, 1, 0, s.params.Slice(ly.bOff, k*P), ly.out, P, 0, z, ly.out, batch*ly.out, k)
		be.GemmStrided(false, true, batch, ly.out, ly.in, 1, in, ly.in, stride, s.params.Slice(ly.wOff, k*P), ly.in, P, 1, z, ly.out, batch*ly.out, k)
		if l < L-1 {
			reluInto(be, s.a[l].Slice(0, n*ly.out), z)
		}
	}
}
