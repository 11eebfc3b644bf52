package compute

import "fmt"

// Tensor is a view of float32 values in a backend's memory: host memory
// for the CPU backend, device memory for a GPU one. Backend methods take
// tensors, so that a model's parameters, gradients and activations can
// live where its backend computes; values cross to the host only through
// Backend.Store (or, for host tensors, HostSlice).
//
// Host wraps a Go slice without copying it. A host tensor is valid on
// every backend: the CPU uses it in place, a device backend copies it over
// (so the CPU path costs nothing, and a device path works before its data
// is made resident).
type Tensor struct {
	host []float32
	// A device backend's memory: an address in its own space and the
	// buffer's length; off and n select the view.
	dev    uintptr
	devLen int
	off, n int
}

// Host returns a host tensor over x (no copy).
func Host(x []float32) Tensor { return Tensor{host: x, n: len(x)} }

// DeviceTensor returns a view of n values at a device address, for device
// backends.
func DeviceTensor(addr uintptr, n int) Tensor { return Tensor{dev: addr, devLen: n, n: n} }

// Len is the number of values in the view.
func (t Tensor) Len() int { return t.n }

// OnHost reports whether the tensor is in host memory.
func (t Tensor) OnHost() bool { return t.dev == 0 }

// Device returns a device tensor's address and offset (in values).
func (t Tensor) Device() (addr uintptr, off int) { return t.dev, t.off }

// Slice returns the view of values lo to hi.
func (t Tensor) Slice(lo, hi int) Tensor {
	if lo < 0 || hi < lo || hi > t.n {
		panic(fmt.Sprintf("compute: tensor slice [%d:%d] of %d values", lo, hi, t.n))
	}
	t.off += lo
	t.n = hi - lo
	return t
}

// HostSlice returns a host tensor's values (the memory itself, not a
// copy); it panics on a device tensor.
func (t Tensor) HostSlice() []float32 {
	if t.dev != 0 {
		panic("compute: HostSlice of a device tensor: copy it out with Backend.Store")
	}
	if t.host == nil {
		return nil
	}
	return t.host[t.off : t.off+t.n]
}

// Memory is the part of a Backend that owns tensors.
type Memory interface {
	// Alloc returns n zeroed values in the backend's memory.
	Alloc(n int) Tensor
	// Load copies x into the backend's memory; the CPU returns Host(x)
	// itself, without a copy.
	Load(x []float32) Tensor
	// Store copies t's values into dst (len t.Len()).
	Store(dst []float32, t Tensor)
	// Copy copies src's values into dst (same length); either may be a
	// host tensor.
	Copy(dst, src Tensor)
	// Free gives back memory that Alloc or Load returned; t must not be
	// used after. The CPU leaves host memory to the garbage collector.
	Free(t Tensor)
}
