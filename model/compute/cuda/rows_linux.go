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
func (b *Backend) InterpolateRows(dst, src compute.Tensor, n int, rows, a, bb []int32, w []float32) {
	compute.CheckInterpolate(dst, src, n, rows, a, bb, w)
	b.combine("interpolate_rows", dst, src, n, len(rows), w, rows, a, bb)
}

// combine launches a Rows kernel writing count rows of dst from rows of
// src, with its lists and weights uploaded as one buffer.
func (b *Backend) combine(kernel string, dst, src compute.Tensor, n, count int, w []float32, lists ...[]int32) {
	if count == 0 {
		return
	}
	defer b.enter()()
	pd, ps, done := b.rowTensors(dst, src)
	idx, wp := b.uploadRowArgs(w, lists...)
	cnt, nn := int32(count), int32(n)
	b.launch(kernel, blocks(count*n, threads), threads, arg(&pd), arg(&ps), arg(&idx), arg(&wp), arg(&cnt), arg(&nn))
	done()
}

// rowTensors returns the device addresses of a Rows kernel's dst and src
// (one address where they are the same host tensor) and the function
// that copies dst back where it is on the host.
func (b *Backend) rowTensors(dst, src compute.Tensor) (pd, ps uint64, done func()) {
	if dst.OnHost() && src.OnHost() && dst.Len() > 0 && src.Len() > 0 && &dst.HostSlice()[0] == &src.HostSlice()[0] && dst.Len() == src.Len() {
		pd, done = b.ptr(dst, 0, true, true)
		return pd, pd, done
	}
	pd, done = b.ptr(dst, 0, true, true)
	ps, _ = b.ptr(src, 1, true, false)
	return pd, ps, done
}

// CombineRows implements compute.Rows.
func (b *Backend) CombineRows(dst, src compute.Tensor, n int, rows, start, from []int32, w []float32) {
	compute.CheckCombine(dst, src, n, rows, start, from, w)
	b.combine("combine_rows", dst, src, n, len(rows), w, rows, start, from)
}

// TrimmedRows implements compute.Rows.
func (b *Backend) TrimmedRows(dst, src compute.Tensor, n int, rows, start, from, trim []int32) {
	compute.CheckTrimmed(dst, src, n, rows, start, from, trim)
	b.listed("trimmed_rows", dst, src, n, len(rows), rows, start, trim, from)
}

// listed launches a Rows kernel of one thread a value that writes count
// rows of dst from rows of src, its lists uploaded as one buffer: the
// kernels whose only arguments are dst, src, the lists, count and n.
func (b *Backend) listed(kernel string, dst, src compute.Tensor, n, count int, lists ...[]int32) {
	if count == 0 {
		return
	}
	defer b.enter()()
	pd, ps, done := b.rowTensors(dst, src)
	idx, _ := b.uploadRowArgs(nil, lists...)
	cnt, nn := int32(count), int32(n)
	b.launch(kernel, blocks(count*n, threads), threads, arg(&pd), arg(&ps), arg(&idx), arg(&cnt), arg(&nn))
	done()
}

// PairDistanceRows implements compute.Rows.
func (b *Backend) PairDistanceRows(out []float64, x compute.Tensor, n int, a, bb []int32) {
	compute.CheckPairs(out, x, n, a, bb)
	if len(a) == 0 {
		return
	}
	defer b.enter()()
	px, _ := b.ptr(x, 0, true, false)
	idx, _ := b.uploadRowArgs(nil, a, bb)
	po := b.grow(&b.rows, uintptr(8*len(a)))
	count, nn := int32(len(a)), int32(n)
	b.launch("pair_distance_rows", blocks(len(a), threads), threads, arg(&po), arg(&px), arg(&idx), arg(&count), arg(&nn))
	b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&out[0]), po, uintptr(8*len(a))))
}

// AverageRows implements compute.Rows.
func (b *Backend) AverageRows(dst, src compute.Tensor, n int, rows, start, from []int32) {
	compute.CheckLists("AverageRows", dst, src, n, rows, start, from)
	b.listed("average_rows", dst, src, n, len(rows), rows, start, from)
}

// ClipRows implements compute.Rows: the scales go up after the lists,
// in the same buffer, at a multiple of 8 bytes.
func (b *Backend) ClipRows(dst, src compute.Tensor, n int, rows, start, from []int32, scale []float64) {
	compute.CheckLists("ClipRows", dst, src, n, rows, start, from, len(scale))
	if len(rows) == 0 {
		return
	}
	defer b.enter()()
	pd, ps, done := b.rowTensors(dst, src)
	words := len(rows) + len(start) + len(from)
	words += words % 2 // the scales 8-byte aligned
	bytes := uintptr(4*words + 8*len(scale))
	idx := b.grow(&b.ints, bytes)
	b.upload(idx, bytes, func(p []byte) {
		out := unsafe.Slice((*int32)(unsafe.Pointer(&p[0])), words)
		k := copy(out, rows)
		k += copy(out[k:], start)
		copy(out[k:], from)
		copy(unsafe.Slice((*float64)(unsafe.Pointer(&p[4*words])), len(scale)), scale)
	})
	sp := idx + uint64(4*words)
	cnt, nn := int32(len(rows)), int32(n)
	b.launch("clip_rows", blocks(len(rows)*n, threads), threads, arg(&pd), arg(&ps), arg(&idx), arg(&sp), arg(&cnt), arg(&nn))
	done()
}

// QuantizeRows implements compute.Rows.
func (b *Backend) QuantizeRows(dst, src compute.Tensor, n int, rows, from []int32, q compute.Quantization, chunk int) {
	compute.CheckQuantize(dst, src, n, rows, from, q, chunk)
	if len(rows) == 0 {
		return
	}
	defer b.enter()()
	pd, ps, done := b.rowTensors(dst, src)
	idx, _ := b.uploadRowArgs(nil, rows, from)
	chunks := (n + chunk - 1) / chunk
	cnt, nn, qq, ch := int32(len(rows)), int32(n), int32(q), int32(chunk)
	b.launch("quantize_rows", blocks(len(rows)*chunks, threads), threads, arg(&pd), arg(&ps), arg(&idx), arg(&cnt), arg(&nn), arg(&qq), arg(&ch))
	done()
}

// MaskRows implements compute.Rows.
func (b *Backend) MaskRows(dst, src compute.Tensor, n int, rows, start, from, keep []int32) {
	compute.CheckMask(dst, src, n, rows, start, from, keep)
	b.listed("mask_rows", dst, src, n, len(rows), rows, start, from, keep)
}

// TopKRows implements compute.Rows: a block a row.
func (b *Backend) TopKRows(dst, src compute.Tensor, n int, rows, from []int32, k int, bytes []int32) {
	compute.CheckTopK(dst, src, n, rows, from, k, bytes)
	if len(rows) == 0 {
		return
	}
	defer b.enter()()
	pd, ps, done := b.rowTensors(dst, src)
	idx, _ := b.uploadRowArgs(nil, rows, from)
	po := b.grow(&b.rows, uintptr(4*len(rows)))
	cnt, nn, kk := int32(len(rows)), int32(n), int32(k)
	b.launch("top_k_rows", len(rows), rowThreads, arg(&pd), arg(&ps), arg(&idx), arg(&cnt), arg(&nn), arg(&kk), arg(&po))
	done()
	b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&bytes[0]), po, uintptr(4*len(rows))))
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

// MeanRows implements compute.Rows.
func (b *Backend) MeanRows(dst, src compute.Tensor, n int, rows []int32) {
	compute.CheckMean(dst, src, n, rows)
	defer b.enter()()
	pd, done := b.ptr(dst.Slice(0, n), 0, false, true)
	ps, _ := b.ptr(src, 1, true, false)
	idx, _ := b.uploadRowArgs(nil, rows)
	count, nn := int32(len(rows)), int32(n)
	b.launch("mean_rows", blocks(n, threads), threads, arg(&pd), arg(&ps), arg(&idx), arg(&count), arg(&nn))
	done()
}

// MomentsRows implements compute.Rows: a thread a value, the means and
// deviations copied back together.
func (b *Backend) MomentsRows(out []float64, src compute.Tensor, n int, rows []int32) {
	compute.CheckMoments(out, src, n, rows)
	defer b.enter()()
	ps, _ := b.ptr(src, 0, true, false)
	idx, _ := b.uploadRowArgs(nil, rows)
	po := b.grow(&b.rows, uintptr(8*2*n))
	count, nn := int32(len(rows)), int32(n)
	b.launch("moments_rows", blocks(n, threads), threads, arg(&po), arg(&ps), arg(&idx), arg(&count), arg(&nn))
	b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&out[0]), po, uintptr(8*2*n)))
}

// DistanceRows implements compute.Rows.
func (b *Backend) DistanceRows(out []float64, x compute.Tensor, n int, rows []int32, ref compute.Tensor, chunk int) {
	c := compute.CheckDistance(out, x, n, rows, ref, chunk)
	if len(rows) == 0 {
		return
	}
	defer b.enter()()
	px, _ := b.ptr(x, 0, true, false)
	pr, _ := b.ptr(ref.Slice(0, n), 1, true, false)
	idx, _ := b.uploadRowArgs(nil, rows)
	m := len(rows) * c
	po := b.grow(&b.rows, uintptr(8*m))
	count, nn, ch := int32(len(rows)), int32(n), int32(chunk)
	b.launch("distance_rows", blocks(m, threads), threads, arg(&po), arg(&px), arg(&pr), arg(&idx), arg(&count), arg(&nn), arg(&ch))
	b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&out[0]), po, uintptr(8*m)))
}
