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
	s.grow(n)
	be, P, L := s.be, s.size, len(s.layers)
	ones := s.ones.Slice(0, n)
	// Forward: z_i = 1·b_iᵀ + X·W_iᵀ (the input read by every model:
	// stride 0), then ReLU for hidden layers.
	for l, ly := range s.layers {
		z := s.z[l].Slice(0, k*n*ly.out)
		in, stride := x.Slice(0, n*ly.in), 0
		if l > 0 {
			in, stride = s.a[l-1].Slice(0, k*n*ly.in), n*ly.in
		}
		be.GemmStrided(false, false, n, ly.out, 1, 1, ones, 1, 0, s.params.Slice(ly.bOff, k*P), ly.out, P, 0, z, ly.out, n*ly.out, k)
		be.GemmStrided(false, true, n, ly.out, ly.in, 1, in, ly.in, stride, s.params.Slice(ly.wOff, k*P), ly.in, P, 1, z, ly.out, n*ly.out, k)
		if l < L-1 {
			reluInto(be, s.a[l].Slice(0, k*n*ly.out), z)
		}
	}
	last := s.layers[L-1]
	be.TallyRows(s.z[L-1].Slice(0, k*n*last.out), y[:n], k, n, last.out, s.spec.Kind == SVM, loss, correct)
}
