//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"errors"
	"fmt"
	"io"
)

var _ io.Closer = (*Backend)(nil)

// Close frees what the backend holds besides its callers' tensors (they
// free those): its scratch buffers, its upload ring, the kernels' module,
// the cuBLAS handle and its workspace; then it releases the device's
// primary context. It waits for the work queued first. The backend is
// not used after; a second Close does nothing.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	a := b.a
	errs := []error{a.check("cuCtxSetCurrent", a.setCtx(b.ctx)), a.check("cuCtxSynchronize", a.syncCtx())}
	free := func(p uint64) {
		if p != 0 {
			errs = append(errs, a.check("cuMemFree", a.free(p)))
			b.mem.forget(p)
		}
	}
	for _, buf := range append(append(b.host[:], b.conv[:]...), b.gather, b.ints, b.sums, b.rows, b.scales) {
		free(buf.p)
	}
	if b.stage.p != nil && a.graph.freeHost != nil { // a driver without it keeps the ring
		errs = append(errs, a.check("cuMemFreeHost", a.graph.freeHost(b.stage.p)))
		b.stage.p = nil
	}
	if r := b.blas.destroy(b.bh); r != 0 {
		errs = append(errs, fmt.Errorf("cuda: cublasDestroy: status %d", r))
	}
	free(b.workspace.p) // after the handle that works in it
	errs = append(errs, a.check("cuModuleUnload", a.unloadMod(b.mod)), a.check("cuDevicePrimaryCtxRelease", a.release(int32(b.dev.Index))))
	return errors.Join(errs...)
}
