//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gossipd/gossipd/model/compute"
)

// GemmStrided implements compute.Batched with one
// cublasSgemmStridedBatched call: row-major problems as column-major
// transposes, the operands swapped (as gemm does).
func (b *Backend) GemmStrided(tA, tB bool, m, n, k int, alpha float32, a compute.Tensor, lda, strideA int, bt compute.Tensor, ldb, strideB int, beta float32, c compute.Tensor, ldc, strideC int, count int) {
	compute.CheckStrided(m, n, k, tA, tB, a, lda, strideA, bt, ldb, strideB, c, ldc, strideC, count)
	if count == 0 || m == 0 || n == 0 {
		return
	}
	defer b.enter()()
	pa, _ := b.ptr(a, 0, true, false)
	pb, _ := b.ptr(bt, 1, true, false)
	pc, done := b.ptr(c, 2, true, true)
	b.gemmStrided(tA, tB, m, n, k, alpha, pa, lda, strideA, pb, ldb, strideB, beta, pc, ldc, strideC, count)
	done()
}

// gemmStrided is GemmStrided on device addresses (inside enter).
func (b *Backend) gemmStrided(tA, tB bool, m, n, k int, alpha float32, pa uint64, lda, strideA int, pb uint64, ldb, strideB int, beta float32, pc uint64, ldc, strideC int, count int) {
	if count == 0 || m == 0 || n == 0 {
		return
	}
	if r := b.rec; r != nil && r.note(appendU64(append(r.sig[:0], 's'), uint64(op(tA)), uint64(op(tB)), uint64(m), uint64(n), uint64(k), f32(alpha),
		pa, uint64(lda), uint64(strideA), pb, uint64(ldb), uint64(strideB), f32(beta), pc, uint64(ldc), uint64(strideC), uint64(count))) {
		return
	}
	if r := b.blas.sgemmStrided(b.bh, op(tB), op(tA), int32(n), int32(m), int32(k), &alpha, pb, int32(ldb), int64(strideB),
		pa, int32(lda), int64(strideA), &beta, pc, int32(ldc), int64(strideC), int32(count)); r != 0 {
		panic(fmt.Sprintf("cuda: cublasSgemmStridedBatched %d × %d×%d×%d: status %d (on %s)", count, m, n, k, r, b.dev))
	}
}

// SoftmaxCrossEntropyRows implements compute.Batched.
func (b *Backend) SoftmaxCrossEntropyRows(probs, grad, logits compute.Tensor, y []int32, m, n int, scale float32, loss []float64) int {
	if len(loss) < m {
		panic(fmt.Sprintf("cuda: SoftmaxCrossEntropyRows of %d rows into %d losses", m, len(loss)))
	}
	_, correct := b.softmaxXent(probs, grad, logits, y, m, n, scale, loss)
	return correct
}

// HingeOneVsRestRows implements compute.Batched.
func (b *Backend) HingeOneVsRestRows(grad, scores compute.Tensor, y []int32, m, n int, scale float32, loss []float64) int {
	if len(loss) < m {
		panic(fmt.Sprintf("cuda: HingeOneVsRestRows of %d rows into %d losses", m, len(loss)))
	}
	_, correct := b.hingeOVR(grad, scores, y, m, n, scale, loss)
	return correct
}

// TallyRows implements compute.Batched: tally_rows over every row, its
// sums (k doubles, then k ints) zeroed first and copied back at once.
func (b *Backend) TallyRows(logits compute.Tensor, y []int32, k, m, n int, hinge bool, loss []float64, correct []int) {
	compute.CheckTally(logits, y, k, m, n, loss, correct)
	if k == 0 || m == 0 {
		return
	}
	defer b.enter()()
	pz, _ := b.ptr(logits.Slice(0, k*m*n), 0, true, false)
	yp := b.labels(y[:m])
	sums := b.grow(&b.rows, uintptr(12*k))
	b.must("cuMemsetD32", b.a.memset32(sums, 0, uintptr(3*k)))
	pl, pc := sums, sums+8*uint64(k)
	kk, mm, nn, h := int32(k), int32(m), int32(n), int32(0)
	if hinge {
		h = 1
	}
	b.launch("tally_rows", k*m, rowThreads, arg(&pz), arg(&yp), arg(&kk), arg(&mm), arg(&nn), arg(&h), arg(&pl), arg(&pc))
	out := make([]uint64, (3*k+1)/2)
	b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&out[0]), sums, uintptr(12*k)))
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&out[0])), 3*k)
	for i := range k {
		loss[i] += math.Float64frombits(uint64(words[2*i]) | uint64(words[2*i+1])<<32)
		correct[i] += int(int32(words[2*k+i]))
	}
}
