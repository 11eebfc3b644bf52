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
	v, _ := unzeroed(n)
	return v
}

// unzeroed is Unzeroed, and whether the vector is the allocator's
// uncleared memory (TestUnzeroed holds the Go release to it).
func unzeroed(n int) ([]float32, bool) {
	if n <= 0 {
		return make([]float32, 0), false
	}
	var b strings.Builder
	b.Grow(4 * n)
	// The empty string's data pointer is its buffer's, untouched: writing
	// even one byte would fault in the first page of each vector, which
	// took a third of a D-PSGD simulation's host time on a GPU.
	p := unsafe.StringData(b.String())
	if p == nil || b.Cap() < 4*n || uintptr(unsafe.Pointer(p))%unsafe.Alignof(float32(0)) != 0 {
		return make([]float32, n), false // not the buffer itself
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), n), true
}

// UnzeroedRows returns k vectors of n values each, unspecified as
// Unzeroed's, cut from one allocation: a batch's results that live and
// die together (a round's gradients) cost the allocator and the
// collector one object instead of k. Each vector's capacity is its
// length; all k stay in memory while any of them is reachable.
func UnzeroedRows(k, n int) [][]float32 {
	rows, n := make([][]float32, max(k, 0)), max(n, 0)
	all := Unzeroed(len(rows) * n)
	for i := range rows {
		rows[i] = all[i*n : (i+1)*n : (i+1)*n]
	}
	return rows
}
