package compute

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Batched is the part of a Backend that computes many problems of one
// shape in one call: the models of many peers, stacked in one tensor and
// trained side by side (model.Stack), so that a simulator's peers due at
// once make a few large kernel calls instead of many small ones (on a GPU,
// cuBLAS's strided-batched GEMM and one launch per kernel for every peer).
type Batched interface {
	// GemmStrided computes C_i = alpha·op(A_i)·op(B_i) + beta·C_i for
	// i < count, each as Gemm would, where X_i is the matrix at offset
	// i·strideX of X. A stride of 0 uses one A (or B) for every i; the
	// C_i must not overlap.
	GemmStrided(transA, transB bool, m, n, k int, alpha float32, a Tensor, lda, strideA int, b Tensor, ldb, strideB int, beta float32, c Tensor, ldc, strideC int, count int)
	// SoftmaxCrossEntropyRows is SoftmaxCrossEntropy that writes each
	// row's loss to loss[i] (len ≥ m) instead of summing them; it returns
	// the number of correct rows.
	SoftmaxCrossEntropyRows(probs, grad, logits Tensor, y []int32, m, n int, scale float32, loss []float64) int
	// HingeOneVsRestRows is HingeOneVsRest with each row's loss in
	// loss[i].
	HingeOneVsRestRows(grad, scores Tensor, y []int32, m, n int, scale float32, loss []float64) int
	// TallyRows measures k models on the same m examples: logits holds
	// k·m rows of n classes (model i's from row i·m), y the m labels. It
	// adds model i's loss over its rows (the softmax cross-entropy, or
	// with hinge the one-vs-rest hinge loss) to loss[i], and its rows
	// whose first arg-max is the label to correct[i]: on the CPU
	// SoftmaxCrossEntropy's (HingeOneVsRest's) sum and count of each
	// model's rows, on a device with one kernel for all and one copy
	// back, the rows' losses added in a fixed order (the same from run
	// to run; to rounding, the CPU's). The logits may be overwritten
	// (with probabilities, by the CPU's softmax). An evaluation of many
	// models on one test set, in one call. k·m must fit in an int32.
	TallyRows(logits Tensor, y []int32, k, m, n int, hinge bool, loss []float64, correct []int)
}

// CheckTally panics unless a TallyRows call's sizes agree.
func CheckTally(logits Tensor, y []int32, k, m, n int, loss []float64, correct []int) {
	if k < 0 || m < 0 || n <= 0 || len(y) < m || len(loss) < k || len(correct) < k || logits.Len() < k*m*n || k*m > math.MaxInt32 {
		panic(fmt.Sprintf("compute: TallyRows of %d models × %d rows of %d classes: %d logits, %d labels, %d losses, %d counts", k, m, n, logits.Len(), len(y), len(loss), len(correct)))
	}
	for _, c := range y[:m] {
		if c < 0 || int(c) >= n {
			panic(fmt.Sprintf("compute: TallyRows: label %d out of range [0,%d)", c, n))
		}
	}
}

// CheckStrided panics unless count, the strides and the C_i of a
// GemmStrided call are sound: every matrix lies inside its tensor and the
// C_i do not overlap (count > 1 needs strideC ≥ (m−1)·ldc + n).
func CheckStrided(m, n, k int, transA, transB bool, a Tensor, lda, strideA int, b Tensor, ldb, strideB int, c Tensor, ldc, strideC int, count int) {
	if count < 0 || strideA < 0 || strideB < 0 || strideC < 0 {
		panic(fmt.Sprintf("compute: GemmStrided: count %d, strides %d, %d, %d", count, strideA, strideB, strideC))
	}
	if count == 0 || m == 0 || n == 0 {
		return
	}
	if count > 1 && strideC < (m-1)*ldc+n {
		panic(fmt.Sprintf("compute: GemmStrided: C stride %d < %d: the %d C matrices (%d×%d, ldc %d) overlap", strideC, (m-1)*ldc+n, count, m, n, ldc))
	}
	span := func(name string, t Tensor, rows, cols, ld, stride int) {
		if rows == 0 || cols == 0 {
			return
		}
		if need := (count-1)*stride + (rows-1)*ld + cols; need > t.Len() || ld < cols {
			panic(fmt.Sprintf("compute: GemmStrided: %s of %d values for %d matrices %d×%d (ld %d, stride %d)", name, t.Len(), count, rows, cols, ld, stride))
		}
	}
	ra, ca := m, k
	if transA {
		ra, ca = k, m
	}
	rb, cb := k, n
	if transB {
		rb, cb = n, k
	}
	span("A", a, ra, ca, lda, strideA)
	span("B", b, rb, cb, ldb, strideB)
	span("C", c, m, n, ldc, strideC)
}

// GemmStrided implements Batched: Gemm on each problem, the problems
// split among the backend's threads (one writer per C_i, so the result
// does not depend on the thread count).
func (c *CPU) GemmStrided(transA, transB bool, m, n, k int, alpha float32, at Tensor, lda, strideA int, bt Tensor, ldb, strideB int, beta float32, ct Tensor, ldc, strideC int, count int) {
	CheckStrided(m, n, k, transA, transB, at, lda, strideA, bt, ldb, strideB, ct, ldc, strideC, count)
	if count == 0 || m == 0 || n == 0 {
		return
	}
	a, b, cc := host(at), host(bt), host(ct)
	one := func(i int) {
		gemm(c.ks, 1, c.path, transA, transB, m, n, k, alpha, a[i*strideA:], lda, b[i*strideB:], ldb, beta, cc[i*strideC:], ldc)
	}
	t := min(c.threads, count)
	if count*m*n*k < gemmMinParallel {
		t = 1
	}
	ForEach(count, t, one)
}

// ForEachRow calls f(0) to f(k−1), each working on one of k vectors of
// size values (copying, allocating), split among every core once they
// hold 1<<18 values or more, and on the caller's goroutine below: a
// large batch's host copies would otherwise leave a device and the other
// cores waiting.
func ForEachRow(k, size int, f func(i int)) {
	workers := 1
	if k*size >= 1<<18 {
		workers = runtime.GOMAXPROCS(0)
	}
	ForEach(k, workers, f)
}

// ForEach calls f(0) to f(count−1), split among up to workers goroutines
// in contiguous ranges (on the caller's alone for workers ≤ 1), and
// returns when all have returned. Calls that write only their own i's
// results give the same result whatever workers is.
func ForEach(count, workers int, f func(i int)) {
	workers = min(workers, count)
	if workers <= 1 {
		for i := range count {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w * count / workers; i < (w+1)*count/workers; i++ {
				f(i)
			}
		})
	}
	wg.Wait()
}

// SoftmaxCrossEntropyRows implements Batched.
func (c *CPU) SoftmaxCrossEntropyRows(pt, gt, lt Tensor, y []int32, m, n int, scale float32, loss []float64) int {
	if len(loss) < m {
		panic(fmt.Sprintf("compute: SoftmaxCrossEntropyRows of %d rows into %d losses", m, len(loss)))
	}
	_, correct := c.softmaxXent(host(pt), host(gt), host(lt), y, m, n, scale, loss)
	return correct
}

// HingeOneVsRestRows implements Batched.
func (c *CPU) HingeOneVsRestRows(gt, st Tensor, y []int32, m, n int, scale float32, loss []float64) int {
	if len(loss) < m {
		panic(fmt.Sprintf("compute: HingeOneVsRestRows of %d rows into %d losses", m, len(loss)))
	}
	_, correct := hingeOVR(host(gt), host(st), y, m, n, scale, loss)
	return correct
}

// TallyRows implements Batched: each model's rows by the summed kernel,
// as a Model measures one (Model.TallyWith).
func (c *CPU) TallyRows(lt Tensor, y []int32, k, m, n int, hinge bool, loss []float64, correct []int) {
	CheckTally(lt, y, k, m, n, loss, correct)
	z := host(lt)
	for i := range k {
		zi := z[i*m*n : (i+1)*m*n]
		var l float64
		var r int
		if hinge {
			l, r = hingeOVR(nil, zi, y, m, n, 0, nil)
		} else {
			l, r = c.softmaxXent(zi, nil, zi, y, m, n, 0, nil)
		}
		loss[i] += l
		correct[i] += r
	}
}
