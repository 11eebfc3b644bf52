//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"errors"
	"unsafe"
)

// AllocPinned implements compute.PinnedHost: page-locked host memory
// (cuMemAllocHost), which the device copies to and from at the bus's full
// speed, where it copies ordinary memory through the driver's own
// staging.
func (b *Backend) AllocPinned(n int) ([]float32, func(), error) {
	if n <= 0 || b.a.allocHost == nil || b.a.graph.freeHost == nil {
		return nil, nil, errors.New("cuda: no page-locked memory (cuMemAllocHost and cuMemFreeHost)")
	}
	defer b.enter()()
	var p unsafe.Pointer
	if err := b.a.check("cuMemAllocHost", b.a.allocHost(&p, uintptr(4*n))); err != nil {
		return nil, nil, err
	}
	free := func() {
		defer b.enter()()
		b.must("cuMemFreeHost", b.a.graph.freeHost(p))
	}
	return unsafe.Slice((*float32)(p), n), free, nil
}
