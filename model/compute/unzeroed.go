package compute

import (
	"strings"
	"unsafe"
)

// Unzeroed returns a vector of n values whose contents are unspecified:
// memory the allocator hands out without clearing it (a strings.Builder's
// buffer), for a vector that is written in full before it is read. A
// simulator on a GPU gives every merged model such a host vector, which
// the device fills only if the model is ever fetched (most never are):
// clearing 400 KB for each of them took most of the host's time. Where
// the allocator's memory cannot be had this way, the vector is make's.
func Unzeroed(n int) []float32 {
	if n <= 0 {
		return make([]float32, 0)
	}
	var b strings.Builder
	b.Grow(4 * n)
	b.WriteByte(0) // the data pointer of a string of one byte is its buffer's
	p := unsafe.StringData(b.String())
	if p == nil || b.Cap() < 4*n || p != unsafe.StringData(b.String()) || uintptr(unsafe.Pointer(p))%unsafe.Alignof(float32(0)) != 0 {
		return make([]float32, n) // not the buffer itself
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), n)
}
