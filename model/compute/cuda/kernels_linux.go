//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gossipd/gossipd/model/compute"
)

// arg is a kernel argument, for launch's argument lists.
func arg[T any](v *T) karg { return karg{unsafe.Pointer(v), unsafe.Sizeof(*v)} }

// Alloc implements compute.Memory.
func (b *Backend) Alloc(n int) compute.Tensor {
	defer b.enter()()
	d := b.memAlloc(uintptr(4 * max(n, 1)))
	if n > 0 {
		b.must("cuMemsetD32", b.a.memset32(d, 0, uintptr(n)))
	}
	return compute.DeviceTensor(uintptr(d), n)
}

// Load implements compute.Memory.
func (b *Backend) Load(x []float32) compute.Tensor {
	t := b.Alloc(len(x))
	if len(x) > 0 {
		defer b.enter()()
		addr, _ := t.Device()
		b.must("cuMemcpyHtoD", b.a.htod(uint64(addr), unsafe.Pointer(&x[0]), uintptr(4*len(x))))
	}
	return t
}

// Store implements compute.Memory.
func (b *Backend) Store(dst []float32, t compute.Tensor) {
	if t.Len() == 0 {
		return
	}
	if t.OnHost() {
		copy(dst[:t.Len()], t.HostSlice())
		return
	}
	defer b.enter()()
	src, _ := b.ptr(t, 0, false, false)
	b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&dst[:t.Len()][0]), src, uintptr(4*t.Len())))
}

// Copy implements compute.Memory.
func (b *Backend) Copy(dst, src compute.Tensor) {
	if dst.Len() != src.Len() {
		panic(fmt.Sprintf("cuda: Copy of %d values into %d", src.Len(), dst.Len()))
	}
	switch {
	case dst.Len() == 0:
	case dst.OnHost():
		b.Store(dst.HostSlice(), src)
	case src.OnHost():
		defer b.enter()()
		d, _ := b.ptr(dst, 0, false, false)
		x := src.HostSlice()
		b.must("cuMemcpyHtoD", b.a.htod(d, unsafe.Pointer(&x[0]), uintptr(4*len(x))))
	default:
		defer b.enter()()
		d, _ := b.ptr(dst, 0, false, false)
		s, _ := b.ptr(src, 1, false, false)
		b.must("cuMemcpyDtoD", b.a.dtod(d, s, uintptr(4*src.Len())))
	}
}

// Free implements compute.Memory.
func (b *Backend) Free(t compute.Tensor) {
	if t.OnHost() {
		return
	}
	defer b.enter()()
	addr, off := t.Device()
	if off != 0 {
		panic("cuda: Free of a view: free the tensor Alloc returned")
	}
	b.memFree(uint64(addr))
}

// op is cuBLAS's operation for a transpose flag.
func op(t bool) int32 {
	if t {
		return 1 // CUBLAS_OP_T
	}
	return 0
}

// gemm is Gemm on device addresses.
func (b *Backend) gemm(tA, tB bool, m, n, k int, alpha float32, a uint64, lda int, bb uint64, ldb int, beta float32, c uint64, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if r := b.rec; r != nil && r.note(appendU64(append(r.sig[:0], 'g'), uint64(op(tA)), uint64(op(tB)), uint64(m), uint64(n), uint64(k),
		f32(alpha), a, uint64(lda), bb, uint64(ldb), f32(beta), c, uint64(ldc))) {
		return
	}
	// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the
	// same memory, the operands swapped.
	if r := b.blas.sgemm(b.bh, op(tB), op(tA), int32(n), int32(m), int32(k), &alpha, bb, int32(ldb), a, int32(lda), &beta, c, int32(ldc)); r != 0 {
		panic(fmt.Sprintf("cuda: cublasSgemm %d×%d×%d: status %d (on %s)", m, n, k, r, b.dev))
	}
}

// Gemm implements compute.Backend.
func (b *Backend) Gemm(tA, tB bool, m, n, k int, alpha float32, a compute.Tensor, lda int, bt compute.Tensor, ldb int, beta float32, c compute.Tensor, ldc int) {
	defer b.enter()()
	pa, _ := b.ptr(a, 0, true, false)
	pb, _ := b.ptr(bt, 1, true, false)
	pc, done := b.ptr(c, 2, true, true)
	b.gemm(tA, tB, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
	done()
}

// gatherRows copies the listed rows (cols values at stride ld) of src to
// the gather buffer, packed.
func (b *Backend) gatherRows(src uint64, rows []int, cols, ld int) uint64 {
	g := b.grow(&b.gather, uintptr(4*len(rows)*cols))
	b.gatherInto(g, src, rows, cols, ld)
	return g
}

// gatherInto copies the listed rows of src to dst, packed.
func (b *Backend) gatherInto(dst, src uint64, rows []int, cols, ld int) {
	if len(rows) == 0 {
		return
	}
	ip := b.grow(&b.ints, uintptr(4*len(rows)))
	b.upload(ip, uintptr(4*len(rows)), func(p []byte) {
		idx := unsafe.Slice((*int32)(unsafe.Pointer(&p[0])), len(rows))
		for i, r := range rows {
			idx[i] = int32(r)
		}
	})
	nr, c, l := int32(len(rows)), int32(cols), int32(ld)
	b.launch("gather_rows", blocks(len(rows)*cols, threads), threads, arg(&dst), arg(&src), arg(&ip), arg(&nr), arg(&c), arg(&l))
}

// GatherRows implements compute.Updates.
func (b *Backend) GatherRows(dst, src compute.Tensor, rows []int, cols, ld int) {
	defer b.enter()()
	pd, done := b.ptr(dst, 0, false, true)
	ps, _ := b.ptr(src, 1, true, false)
	b.gatherInto(pd, ps, rows, cols, ld)
	done()
}

// GemmGatherA implements compute.Gatherer.
func (b *Backend) GemmGatherA(n, k int, alpha float32, a compute.Tensor, lda int, rows []int, bt compute.Tensor, ldb int, beta float32, c compute.Tensor, ldc int) {
	if len(rows) == 0 {
		return
	}
	defer b.enter()()
	pa, _ := b.ptr(a, 0, true, false)
	pb, _ := b.ptr(bt, 1, true, false)
	pc, done := b.ptr(c, 2, true, true)
	g := b.gatherRows(pa, rows, k, lda)
	b.gemm(false, true, len(rows), n, k, alpha, g, k, pb, ldb, beta, pc, ldc)
	done()
}

// GemmGatherB implements compute.Gatherer.
func (b *Backend) GemmGatherB(m, n int, alpha float32, a compute.Tensor, lda int, bt compute.Tensor, ldb int, rows []int, beta float32, c compute.Tensor, ldc int) {
	defer b.enter()()
	pa, _ := b.ptr(a, 0, true, false)
	pb, _ := b.ptr(bt, 1, true, false)
	pc, done := b.ptr(c, 2, true, true)
	if len(rows) == 0 {
		b.gemm(true, false, m, n, 0, alpha, pa, lda, pb, ldb, beta, pc, ldc)
	} else {
		g := b.gatherRows(pb, rows, n, ldb)
		b.gemm(true, false, m, n, len(rows), alpha, pa, lda, g, n, beta, pc, ldc)
	}
	done()
}

// BroadcastRows implements compute.Backend.
func (b *Backend) BroadcastRows(dst compute.Tensor, m, n int, v compute.Tensor) {
	defer b.enter()()
	pd, done := b.ptr(dst, 0, false, true)
	pv, _ := b.ptr(v, 1, true, false)
	mm, nn := int32(m), int32(n)
	b.launch("broadcast_rows", blocks(m*n, threads), threads, arg(&pd), arg(&pv), arg(&mm), arg(&nn))
	done()
}

// ReLU implements compute.Backend.
func (b *Backend) ReLU(x compute.Tensor) {
	defer b.enter()()
	px, done := b.ptr(x, 0, true, true)
	n := int64(x.Len())
	b.launch("relu", blocks(x.Len(), threads), threads, arg(&px), arg(&n))
	done()
}

// ReLUBackward implements compute.Backend.
func (b *Backend) ReLUBackward(g, z compute.Tensor) {
	defer b.enter()()
	pg, done := b.ptr(g, 0, true, true)
	pz, _ := b.ptr(z, 1, true, false)
	n := int64(g.Len())
	b.launch("relu_backward", blocks(g.Len(), threads), threads, arg(&pg), arg(&pz), arg(&n))
	done()
}

// ColumnSums implements compute.Backend.
func (b *Backend) ColumnSums(dst, src compute.Tensor, m, n int) {
	defer b.enter()()
	pd, done := b.ptr(dst, 0, false, true)
	ps, _ := b.ptr(src, 1, true, false)
	mm, nn := int32(m), int32(n)
	b.launch("column_sums", blocks(n, 32), 32*colGroups, arg(&pd), arg(&ps), arg(&mm), arg(&nn))
	done()
}

// ColumnSumsAxpby implements compute.Fused.
func (b *Backend) ColumnSumsAxpby(y compute.Tensor, a float32, x compute.Tensor, m, n int, bb float32) {
	if y.Len() != n || x.Len() < m*n {
		panic(fmt.Sprintf("cuda: ColumnSumsAxpby of %d×%d (%d values) into %d", m, n, x.Len(), y.Len()))
	}
	defer b.enter()()
	py, done := b.ptr(y, 0, true, true)
	px, _ := b.ptr(x, 1, true, false)
	mm, nn := int32(m), int32(n)
	b.launch("column_sums_axpby", blocks(n, 32), 32*colGroups, arg(&py), arg(&a), arg(&px), arg(&bb), arg(&mm), arg(&nn))
	done()
}

// ReLUInto implements compute.Fused.
func (b *Backend) ReLUInto(dst, src compute.Tensor) {
	if dst.Len() != src.Len() {
		panic(fmt.Sprintf("cuda: ReLUInto of %d values into %d", src.Len(), dst.Len()))
	}
	defer b.enter()()
	pd, done := b.ptr(dst, 0, false, true)
	ps, _ := b.ptr(src, 1, true, false)
	n := int64(dst.Len())
	b.launch("relu_into", blocks(dst.Len(), threads), threads, arg(&pd), arg(&ps), arg(&n))
	done()
}

// labels copies y to the device.
func (b *Backend) labels(y []int32) uint64 {
	yp := b.grow(&b.ints, uintptr(4*len(y)))
	b.upload(yp, uintptr(4*len(y)), func(p []byte) { copy(p, unsafe.Slice((*byte)(unsafe.Pointer(&y[0])), 4*len(y))) })
	return yp
}

// scalars zeroes the double and the int the loss kernels add to, and
// returns a function that reads them.
func (b *Backend) scalars() (loss, count uint64, read func() (float64, int)) {
	s := b.grow(&b.sums, 16)
	b.must("cuMemsetD32", b.a.memset32(s, 0, 4))
	return s, s + 8, func() (float64, int) {
		var out [2]uint64
		b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&out[0]), s, 16))
		return math.Float64frombits(out[0]), int(int32(uint32(out[1])))
	}
}

// SoftmaxCrossEntropy implements compute.Backend.
func (b *Backend) SoftmaxCrossEntropy(probs, grad, logits compute.Tensor, y []int32, m, n int, scale float32) (float64, int) {
	return b.softmaxXent(probs, grad, logits, y, m, n, scale, nil)
}

// softmaxXent runs softmax_xent; with rows, each row's loss comes back
// there too.
func (b *Backend) softmaxXent(probs, grad, logits compute.Tensor, y []int32, m, n int, scale float32, rows []float64) (float64, int) {
	if m == 0 {
		return 0, 0
	}
	defer b.enter()()
	loss, count, read := b.scalars()
	pr, readRows := b.rowLosses(rows, m)
	b.softmaxXentInto(probs, grad, logits, y, m, n, scale, loss, count, pr)
	readRows()
	return read()
}

// softmaxXentInto queues softmax_xent adding the loss to the double at
// loss and the correct rows to the int at count (row losses to pr unless
// 0); host operands come back when it is done.
func (b *Backend) softmaxXentInto(probs, grad, logits compute.Tensor, y []int32, m, n int, scale float32, loss, count, pr uint64) {
	pl, _ := b.ptr(logits, 0, true, false)
	pp, doneP := pl, func() {}
	if !probs.OnHost() || !logits.OnHost() || &probs.HostSlice()[0] != &logits.HostSlice()[0] {
		pp, doneP = b.ptr(probs, 1, false, true)
	} else {
		_, doneP = b.ptr(logits, 0, false, true) // in place on the host: the logits slot comes back
	}
	pg, doneG := b.ptr(grad, 2, false, true)
	yp := b.labels(y)
	mm, nn := int32(m), int32(n)
	b.launch("softmax_xent", m, rowThreads, arg(&pp), arg(&pg), arg(&pl), arg(&yp), arg(&mm), arg(&nn), arg(&scale), arg(&loss), arg(&count), arg(&pr))
	doneP()
	doneG()
}

// HingeOneVsRest implements compute.Backend.
func (b *Backend) HingeOneVsRest(grad, scores compute.Tensor, y []int32, m, n int, scale float32) (float64, int) {
	return b.hingeOVR(grad, scores, y, m, n, scale, nil)
}

// hingeOVR runs hinge_ovr; with rows, each row's loss comes back there
// too.
func (b *Backend) hingeOVR(grad, scores compute.Tensor, y []int32, m, n int, scale float32, rows []float64) (float64, int) {
	if m == 0 {
		return 0, 0
	}
	defer b.enter()()
	loss, count, read := b.scalars()
	pr, readRows := b.rowLosses(rows, m)
	b.hingeOVRInto(grad, scores, y, m, n, scale, loss, count, pr)
	readRows()
	return read()
}

// hingeOVRInto queues hinge_ovr as softmaxXentInto queues softmax_xent.
func (b *Backend) hingeOVRInto(grad, scores compute.Tensor, y []int32, m, n int, scale float32, loss, count, pr uint64) {
	ps, _ := b.ptr(scores, 0, true, false)
	pg, doneG := b.ptr(grad, 1, false, true)
	yp := b.labels(y)
	mm, nn := int32(m), int32(n)
	b.launch("hinge_ovr", m, rowThreads, arg(&pg), arg(&ps), arg(&yp), arg(&mm), arg(&nn), arg(&scale), arg(&loss), arg(&count), arg(&pr))
	doneG()
}

// rowLosses returns the device buffer the loss kernels write m row
// losses to (0, none, when rows is nil) and a function that copies them
// to rows.
func (b *Backend) rowLosses(rows []float64, m int) (uint64, func()) {
	if rows == nil {
		return 0, func() {}
	}
	p := b.grow(&b.rows, uintptr(8*m))
	return p, func() { b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&rows[:m][0]), p, uintptr(8*m))) }
}
