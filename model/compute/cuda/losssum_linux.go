//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gossipd/gossipd/model/compute"
)

// lossSum is a compute.LossSum on the GPU: a double the loss kernels add
// to (and, beside it, the int they count correct rows in), read with one
// copy, which waits for the work queued before it.
type lossSum struct {
	b *Backend
	p uint64
}

// NewLossSum implements compute.LossSums.
func (b *Backend) NewLossSum() compute.LossSum {
	defer b.enter()()
	s := &lossSum{b: b}
	s.p = b.memAlloc(16)
	b.must("cuMemsetD32", b.a.memset32(s.p, 0, 4))
	return s
}

// Read implements compute.LossSum.
func (s *lossSum) Read() float64 {
	defer s.live().enter()()
	var v uint64
	s.b.must("cuMemcpyDtoH", s.b.a.dtoh(unsafe.Pointer(&v), s.p, 8))
	return math.Float64frombits(v)
}

// Reset implements compute.LossSum.
func (s *lossSum) Reset() {
	defer s.live().enter()()
	s.b.must("cuMemsetD32", s.b.a.memset32(s.p, 0, 4))
}

// Free implements compute.LossSum.
func (s *lossSum) Free() {
	defer s.live().enter()()
	s.b.memFree(s.p)
	s.p = 0
}

func (s *lossSum) live() *Backend {
	if s.p == 0 {
		panic("cuda: LossSum used after Free")
	}
	return s.b
}

// sum is s as b's sum.
func (b *Backend) sum(s compute.LossSum) *lossSum {
	ls, ok := s.(*lossSum)
	if !ok || ls.b != b {
		panic(fmt.Sprintf("cuda: a LossSum (%T) not made by this backend", s))
	}
	ls.live()
	return ls
}

// SoftmaxCrossEntropySum implements compute.LossSums.
func (b *Backend) SoftmaxCrossEntropySum(s compute.LossSum, probs, grad, logits compute.Tensor, y []int32, m, n int, scale float32) {
	ls := b.sum(s)
	if m == 0 {
		return
	}
	defer b.enter()()
	b.softmaxXentInto(probs, grad, logits, y, m, n, scale, ls.p, ls.p+8, 0)
}

// HingeOneVsRestSum implements compute.LossSums.
func (b *Backend) HingeOneVsRestSum(s compute.LossSum, grad, scores compute.Tensor, y []int32, m, n int, scale float32) {
	ls := b.sum(s)
	if m == 0 {
		return
	}
	defer b.enter()()
	b.hingeOVRInto(grad, scores, y, m, n, scale, ls.p, ls.p+8, 0)
}

// AddSumSquares implements compute.LossSums.
func (b *Backend) AddSumSquares(s compute.LossSum, w float64, x compute.Tensor) {
	ls := b.sum(s)
	if x.Len() == 0 {
		return
	}
	defer b.enter()()
	px, _ := b.ptr(x, 0, true, false)
	b.sumSquares(px, x.Len(), w, ls.p)
}
