//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"unsafe"

	"github.com/gossipd/gossipd/model/compute"
)

// uploadRowArgs uploads the int32 lists and then the float32 weights of a
// Rows kernel as one buffer and returns the addresses of both parts.
func (b *Backend) uploadRowArgs(w []float32, lists ...[]int32) (idx, wp uint64) {
	words := len(w)
	for _, l := range lists {
		words += len(l)
	}
	idx = b.grow(&b.ints, uintptr(4*max(words, 1)))
	b.upload(idx, uintptr(4*words), func(p []byte) {
		out := unsafe.Slice((*int32)(unsafe.Pointer(&p[0])), words)
		k := 0
		for _, l := range lists {
			k += copy(out[k:], l)
		}
		for _, v := range w {
			out[k] = int32(*(*uint32)(unsafe.Pointer(&v)))
			k++
		}
	})
	return idx, idx + 4*uint64(words-len(w))
}

// InterpolateRows implements compute.Rows.
func (b *Backend) InterpolateRows(x compute.Tensor, n int, dst, a, bb []int32, w []float32) {
	if len(a) != len(dst) || len(bb) != len(dst) || len(w) != len(dst) {
		panic("cuda: InterpolateRows: lists of different lengths")
	}
	compute.CheckRows("InterpolateRows", x, n, dst, a, bb)
	if len(dst) == 0 {
		return
	}
	defer b.enter()()
	px, done := b.ptr(x, 0, true, true)
	idx, wp := b.uploadRowArgs(w, dst, a, bb)
	count, nn := int32(len(dst)), int32(n)
	b.launch("interpolate_rows", blocks(len(dst)*n, threads), threads, arg(&px), arg(&idx), arg(&wp), arg(&count), arg(&nn))
	done()
}

// CombineRows implements compute.Rows.
func (b *Backend) CombineRows(x compute.Tensor, n int, dst, start, src []int32, w []float32) {
	compute.CheckCombine(x, n, dst, start, src, w)
	if len(dst) == 0 {
		return
	}
	defer b.enter()()
	px, done := b.ptr(x, 0, true, true)
	idx, wp := b.uploadRowArgs(w, dst, start, src)
	count, nn := int32(len(dst)), int32(n)
	b.launch("combine_rows", blocks(len(dst)*n, threads), threads, arg(&px), arg(&idx), arg(&wp), arg(&count), arg(&nn))
	done()
}

// SumSquaresRows implements compute.Rows.
func (b *Backend) SumSquaresRows(out []float64, x compute.Tensor, n int, rows []int32) {
	if len(out) < len(rows) {
		panic("cuda: SumSquaresRows into too few sums")
	}
	compute.CheckRows("SumSquaresRows", x, n, rows)
	if len(rows) == 0 {
		return
	}
	defer b.enter()()
	px, _ := b.ptr(x, 0, true, false)
	idx, _ := b.uploadRowArgs(nil, rows)
	po := b.grow(&b.rows, uintptr(8*len(rows)))
	count, nn := int32(len(rows)), int32(n)
	b.launch("sum_squares_rows", len(rows), rowThreads, arg(&po), arg(&px), arg(&idx), arg(&count), arg(&nn))
	b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&out[0]), po, uintptr(8*len(rows))))
}
