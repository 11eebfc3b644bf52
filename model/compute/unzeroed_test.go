package compute

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestUnzeroed: vectors of n values (none for n ≤ 0), aligned, each its
// own memory, writable in full and kept alive by the vector alone, and
// (where n > 0) not cleared: the allocator's memory, not make's.
func TestUnzeroed(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 3, 1000, 101770} {
		a, fast := unzeroed(n)
		if fast != (n > 0) {
			t.Fatalf("Unzeroed(%d): the allocator's uncleared memory %v, want %v (has strings.Builder changed?)", n, fast, n > 0)
		}
		b := Unzeroed(n)
		if len(a) != max(n, 0) || cap(a) != len(a) {
			t.Fatalf("Unzeroed(%d): len %d cap %d", n, len(a), cap(a))
		}
		if n <= 0 {
			continue
		}
		if uintptr(unsafe.Pointer(&a[0]))%4 != 0 || &a[0] == &b[0] {
			t.Fatalf("Unzeroed(%d): at %p and %p", n, &a[0], &b[0])
		}
		for i := range a {
			a[i], b[i] = float32(i), -float32(i)
		}
		runtime.GC() // the vectors' memory must stay theirs
		for _, v := range [][]float32{Unzeroed(n), Unzeroed(n)} {
			for i := range v {
				v[i] = 7
			}
		}
		for i := range a {
			if a[i] != float32(i) || b[i] != -float32(i) {
				t.Fatalf("Unzeroed(%d): value %d = %v, %v after a collection and other vectors written", n, i, a[i], b[i])
			}
		}
	}
}

// TestUnzeroedRows: k vectors of n values, each its own memory of
// capacity n (an append cannot reach the next), writable in full.
func TestUnzeroedRows(t *testing.T) {
	for _, c := range [][2]int{{0, 5}, {3, 0}, {1, 1}, {4, 1000}} {
		k, n := c[0], c[1]
		rows := UnzeroedRows(k, n)
		if len(rows) != k {
			t.Fatalf("UnzeroedRows(%d, %d): %d vectors", k, n, len(rows))
		}
		for i, r := range rows {
			if len(r) != n || cap(r) != n {
				t.Fatalf("UnzeroedRows(%d, %d): vector %d has len %d cap %d", k, n, i, len(r), cap(r))
			}
			for j := range r {
				r[j] = float32(i*n + j)
			}
		}
		for i, r := range rows {
			for j, v := range r {
				if v != float32(i*n+j) {
					t.Fatalf("UnzeroedRows(%d, %d): vector %d value %d = %v", k, n, i, j, v)
				}
			}
		}
	}
}
