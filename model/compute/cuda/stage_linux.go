//go:build cuda && linux && (amd64 || arm64)

package cuda

import "unsafe"

// Uploads (row indices, labels, row scales, a batch's lists) go through a
// ring of page-locked host memory with cuMemcpyHtoDAsync: a copy from
// pageable memory (cuMemcpyHtoD) first waits for every kernel queued
// before it, so a training step that sends its minibatch's indices and
// labels would wait for the GPU two or three times. From the ring the
// copies take their place in the stream, and the host goes on queueing. A
// byte of the ring is written again only after the context has been
// synchronised (when the ring wraps, or grows), so no copy still queued
// reads it changed.
//
// The ring starts at ringBytes and grows, to four times the upload
// rounded up to a power of two, when an upload would take more than a
// quarter of it (a batch of thousands of peers' minibatch indices is
// hundreds of kilobytes); it stops growing at ringLimit. Larger uploads,
// and any where page-locked memory cannot be had, copy synchronously.
type stage struct {
	p      unsafe.Pointer // size bytes of page-locked memory; nil: none yet
	size   uintptr
	off    uintptr
	failed bool // cuMemAllocHost failed: synchronous copies only
	stuck  bool // a larger ring could not be had: this one stays
	wraps  int
	grows  int
	total  uintptr // the bytes uploaded, each upload rounded up to 256
}

const (
	ringBytes = 1 << 20
	ringLimit = 64 << 20
)

// upload copies n bytes, which fill writes, to the device address dst,
// in stream order.
func (b *Backend) upload(dst uint64, n uintptr, fill func([]byte)) {
	if n == 0 {
		return
	}
	st := &b.stage
	st.total += (n + 255) &^ 255
	if r := b.rec; r != nil {
		// A recorded step's upload reads its recording's page-locked
		// memory, written afresh at each replay.
		skip := r.note(appendU64(append(r.sig[:0], 'u'), dst, uint64(n)))
		buf := r.slot(n)
		fill(buf)
		if !skip {
			b.must("cuMemcpyHtoDAsync", b.a.htodAsync(dst, unsafe.Pointer(&buf[0]), n, b.stream))
		}
		return
	}
	if st.p == nil && !st.failed {
		st.size = ringBytes
		st.failed = b.a.allocHost(&st.p, st.size) != 0
	}
	if st.p != nil && !st.stuck && n > st.size/4 && n <= ringLimit/4 {
		b.growStage(n)
	}
	if st.p == nil || n > st.size/4 {
		tmp := make([]byte, n)
		fill(tmp)
		b.must("cuMemcpyHtoD", b.a.htod(dst, unsafe.Pointer(&tmp[0]), n))
		return
	}
	if st.off+n > st.size {
		b.must("cuCtxSynchronize", b.a.syncCtx())
		st.off = 0
		st.wraps++
	}
	buf := unsafe.Slice((*byte)(unsafe.Add(st.p, st.off)), n)
	fill(buf)
	b.must("cuMemcpyHtoDAsync", b.a.htodAsync(dst, unsafe.Pointer(&buf[0]), n, 0))
	st.off += (n + 255) &^ 255
}

// growStage replaces the ring with one of four times n rounded up to a
// power of two, once every copy queued from the old one has run. Where
// the driver cannot free page-locked memory, or the larger ring cannot be
// had, the ring stays as large as it is from then on (a ring of its size
// is taken back).
func (b *Backend) growStage(n uintptr) {
	st := &b.stage
	free := b.a.graph.freeHost
	if free == nil {
		st.stuck = true
		return
	}
	size := st.size
	for size < 4*n {
		size *= 2
	}
	b.must("cuCtxSynchronize", b.a.syncCtx())
	b.must("cuMemFreeHost", free(st.p))
	st.p, st.off = nil, 0
	if b.a.allocHost(&st.p, size) != 0 {
		st.p, st.stuck = nil, true
		if b.a.allocHost(&st.p, st.size) != 0 {
			st.p, st.failed = nil, true
		}
		return
	}
	st.size = size
	st.grows++
}
