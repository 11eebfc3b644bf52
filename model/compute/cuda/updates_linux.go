//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"unsafe"

	"github.com/gossipd/gossipd/model/compute"
)

// Axpby implements compute.Updates.
func (b *Backend) Axpby(y compute.Tensor, a float32, x compute.Tensor, bb float32) {
	defer b.enter()()
	py, done := b.ptr(y, 0, true, true)
	px, _ := b.ptr(x, 1, true, false)
	n := int64(y.Len())
	b.launch("axpby", blocks(y.Len(), threads), threads, arg(&py), arg(&a), arg(&px), arg(&bb), arg(&n))
	done()
}

// SGDUpdate implements compute.Updates.
func (b *Backend) SGDUpdate(w, g, v compute.Tensor, lr, mu, wd float32, first bool) {
	defer b.enter()()
	pw, doneW := b.ptr(w, 0, true, true)
	pg, _ := b.ptr(g, 1, true, false)
	pv, doneV := b.ptr(v, 2, true, true)
	f, n := int32(0), int64(w.Len())
	if first {
		f = 1
	}
	b.launch("sgd_update", blocks(w.Len(), threads), threads, arg(&pw), arg(&pg), arg(&pv), arg(&lr), arg(&mu), arg(&wd), arg(&f), arg(&n))
	doneW()
	doneV()
}

// AdamUpdate implements compute.Updates.
func (b *Backend) AdamUpdate(w, g, m, v compute.Tensor, step, b1, b2, sc2, eps, wd float32) {
	defer b.enter()()
	pw, doneW := b.ptr(w, 0, true, true)
	pg, _ := b.ptr(g, 1, true, false)
	pm, doneM := b.ptr(m, 2, true, true)
	pv, doneV := b.ptr(v, 3, true, true)
	n := int64(w.Len())
	b.launch("adam_update", blocks(w.Len(), threads), threads, arg(&pw), arg(&pg), arg(&pm), arg(&pv), arg(&step), arg(&b1), arg(&b2), arg(&sc2), arg(&eps), arg(&wd), arg(&n))
	doneW()
	doneM()
	doneV()
}

// SumSquares implements compute.Updates.
func (b *Backend) SumSquares(x compute.Tensor) float64 {
	if x.Len() == 0 {
		return 0
	}
	defer b.enter()()
	px, _ := b.ptr(x, 0, true, false)
	out, _, read := b.scalars()
	b.sumSquares(px, x.Len(), 1, out)
	s, _ := read()
	return s
}

// sumSquares queues out[0] += w·Σx² over the n values at px.
func (b *Backend) sumSquares(px uint64, n int, w float64, out uint64) {
	nn := int64(n)
	b.launch("sum_squares", min(blocks(n, rowThreads), 1024), rowThreads, arg(&px), arg(&nn), arg(&w), arg(&out))
}

// RowSumSquares implements compute.Updates.
func (b *Backend) RowSumSquares(dst []float64, x compute.Tensor, m, n int) {
	if m == 0 {
		return
	}
	defer b.enter()()
	px, _ := b.ptr(x, 0, true, false)
	out := b.grow(&b.gather, uintptr(8*m))
	mm, nn := int32(m), int32(n)
	b.launch("row_sum_squares", m, rowThreads, arg(&out), arg(&px), arg(&mm), arg(&nn))
	b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&dst[:m][0]), out, uintptr(8*m)))
}

// ScaleRows implements compute.Updates.
func (b *Backend) ScaleRows(x compute.Tensor, m, n int, s []float32) {
	if m == 0 {
		return
	}
	defer b.enter()()
	px, done := b.ptr(x, 0, true, true)
	ps := b.grow(&b.scales, uintptr(4*m))
	b.upload(ps, uintptr(4*m), func(p []byte) { copy(p, unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*m)) })
	mm, nn := int32(m), int32(n)
	b.launch("scale_rows", blocks(m*n, threads), threads, arg(&px), arg(&ps), arg(&mm), arg(&nn))
	done()
}

// Softmax implements compute.Updates.
func (b *Backend) Softmax(dst, logits compute.Tensor, m, n int) {
	if m == 0 {
		return
	}
	defer b.enter()()
	pl, _ := b.ptr(logits, 0, true, false)
	pd, done := b.ptr(dst, 1, false, true)
	if dst.OnHost() && logits.OnHost() && &dst.HostSlice()[0] == &logits.HostSlice()[0] {
		pd, done = b.ptr(logits, 0, false, true) // in place on the host
	}
	mm, nn := int32(m), int32(n)
	b.launch("softmax", m, rowThreads, arg(&pd), arg(&pl), arg(&mm), arg(&nn))
	done()
}
