//go:build cuda && linux && (amd64 || arm64)

package cuda

import "github.com/gossipd/gossipd/model/compute"

var _ compute.MemoryCounter = (*Backend)(nil)

// memCount is what the backend holds in device memory: each allocation's
// size by address, their total and its high-water mark.
type memCount struct {
	sizes       map[uint64]uintptr
	inUse, peak int64
}

// memAlloc allocates bytes of device memory (cuMemAlloc) and counts them.
// The caller holds the backend (enter).
func (b *Backend) memAlloc(bytes uintptr) uint64 {
	var p uint64
	b.must("cuMemAlloc", b.a.alloc(&p, bytes))
	b.mem.count(p, bytes)
	return p
}

// count counts bytes of device memory allocated at p.
func (m *memCount) count(p uint64, bytes uintptr) {
	if m.sizes == nil {
		m.sizes = map[uint64]uintptr{}
	}
	m.sizes[p] = bytes
	m.inUse += int64(bytes)
	m.peak = max(m.peak, m.inUse)
}

// memFree frees device memory memAlloc returned (cuMemFree). The caller
// holds the backend.
func (b *Backend) memFree(p uint64) {
	b.must("cuMemFree", b.a.free(p))
	b.mem.forget(p)
}

// forget uncounts the allocation at p, freed.
func (m *memCount) forget(p uint64) {
	m.inUse -= int64(m.sizes[p])
	delete(m.sizes, p)
}

// TotalMemory implements compute.MemorySizer: the device's memory.
func (b *Backend) TotalMemory() int64 { return int64(b.dev.Memory) }

// DeviceMemory implements compute.MemoryCounter: the bytes the backend's
// tensors, loss sums, scratch buffers and cuBLAS's workspace (the
// backend's own, where cuBLAS takes one) hold in device memory now, and
// the most they held at once. The kernels' module, cuBLAS's own memory
// and the context itself are not counted (nvidia-smi shows them).
func (b *Backend) DeviceMemory() (inUse, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem.inUse, b.mem.peak
}
