//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"fmt"
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

// TallyRows implements compute.Batched: tally_rows over every row, the
// rows' losses and the models' counts (zeroed first) copied back at once,
// and each model's rows added in order on the host, so that a run's
// losses are the same from run to run.
func (b *Backend) TallyRows(logits compute.Tensor, y []int32, k, m, n int, hinge bool, loss []float64, correct []int) {
	compute.CheckTally(logits, y, k, m, n, loss, correct)
	if k == 0 || m == 0 {
		return
	}
	defer b.enter()()
	pz, _ := b.ptr(logits.Slice(0, k*m*n), 0, true, false)
	yp := b.labels(y[:m])
	rows := k * m
	buf := b.grow(&b.rows, uintptr(8*rows+4*k))
	pr, pc := buf, buf+8*uint64(rows)
	b.must("cuMemsetD32", b.a.memset32(pc, 0, uintptr(k)))
	kk, mm, nn, h := int32(k), int32(m), int32(n), int32(0)
	if hinge {
		h = 1
	}
	b.launch("tally_rows", rows, rowThreads, arg(&pz), arg(&yp), arg(&kk), arg(&mm), arg(&nn), arg(&h), arg(&pr), arg(&pc))
	out := make([]float64, rows+(k+1)/2)
	b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&out[0]), buf, uintptr(8*rows+4*k)))
	counts := unsafe.Slice((*int32)(unsafe.Pointer(&out[rows])), k)
	for i := range k {
		var l float64
		for _, v := range out[i*m : (i+1)*m] {
			l += v
		}
		loss[i] += l
		correct[i] += int(counts[i])
	}
}
