package simulation

import (
	"testing"
	"unsafe"
)

// TestVectorMakerBlocks: where no vector is ready, get makes a block of
// them in one allocation and hands it out next, each vector of its own
// (no two overlap, none can grow into the next), before it makes
// another block; vectors of another length are made apart.
func TestVectorMakerBlocks(t *testing.T) {
	const n, block = 10, 4
	v := newVectorMaker(n, block, 8)
	v.close()
	for len(v.fresh) > 0 || len(v.spare) > 0 { // what the makers made before they stopped
		v.get(n)
	}
	var got [][]float32
	for range 2 * block {
		x := v.get(n)
		if len(x) != n || cap(x) != n {
			t.Fatalf("a vector of len %d, cap %d, want %d", len(x), cap(x), n)
		}
		got = append(got, x)
	}
	start := func(x []float32) uintptr { return uintptr(unsafe.Pointer(&x[0])) }
	for i := range got {
		for j := range got {
			if i != j && start(got[i]) <= start(got[j]) && start(got[j]) < start(got[i])+4*n {
				t.Fatalf("vectors %d and %d overlap", i, j)
			}
		}
	}
	for b := 0; b < len(got); b += block { // one allocation each: adjacent
		for i := b + 1; i < b+block; i++ {
			if start(got[i-1])-start(got[i]) != 4*n {
				t.Fatalf("vectors %d and %d of a block are not adjacent (%#x, %#x)", i-1, i, start(got[i-1]), start(got[i]))
			}
		}
	}
	if x := v.get(n + 1); len(x) != n+1 || len(v.spare) != block-1 {
		t.Fatalf("a vector of %d values from the spares of %d (%d spare)", len(x), n, len(v.spare))
	}
}
