//go:build cuda && linux && (amd64 || arm64)

package cuda

import "unsafe"

// Small uploads (row indices, labels, row scales) go through a ring of
// page-locked host memory with cuMemcpyHtoDAsync: a copy from pageable
// memory (cuMemcpyHtoD) first waits for every kernel queued before it, so
// a training step that sends its minibatch's indices and labels would
// wait for the GPU two or three times. From the ring the copies take
// their place in the stream, and the host goes on queueing. A byte of
// the ring is written again only after the context has been synchronised
// (when the ring wraps), so no copy still queued reads it changed.
// Larger uploads, and any where page-locked memory cannot be had, copy
// synchronously.
type stage struct {
	p      unsafe.Pointer // ringBytes of page-locked memory; nil: none yet
	off    uintptr
	failed bool // cuMemAllocHost failed: synchronous copies only
	wraps  int
	total  uintptr // the bytes uploaded, each upload rounded up to 256
}

const (
	ringBytes = 1 << 20
	ringMax   = ringBytes / 4
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
		st.failed = b.a.allocHost(&st.p, ringBytes) != 0
	}
	if n > ringMax || st.p == nil {
		tmp := make([]byte, n)
		fill(tmp)
		b.must("cuMemcpyHtoD", b.a.htod(dst, unsafe.Pointer(&tmp[0]), n))
		return
	}
	if st.off+n > ringBytes {
		b.must("cuCtxSynchronize", b.a.syncCtx())
		st.off = 0
		st.wraps++
	}
	buf := unsafe.Slice((*byte)(unsafe.Add(st.p, st.off)), n)
	fill(buf)
	b.must("cuMemcpyHtoDAsync", b.a.htodAsync(dst, unsafe.Pointer(&buf[0]), n, 0))
	st.off += (n + 255) &^ 255
}
