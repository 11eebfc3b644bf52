package compute

import (
	"fmt"
	"iter"
	"math"
)

// Top-k sparsification keeps a vector's k values of largest magnitude,
// ties to the lower index, and zeroes the others (compress's topk, and
// CHOCO's steps under it). Magnitudes are ordered by their bits, |x|'s
// IEEE pattern read as an unsigned integer: the order of the numbers,
// with −0 equal to +0, and a NaN above +Inf (kept first, so that a step
// that went NaN shows where it is sent). Every backend selects by these
// keys, so the same values are kept everywhere.

// TopKey is the key TopK orders v by: |v|'s bits.
func TopKey(v float32) uint32 { return math.Float32bits(v) &^ (1 << 31) }

// TopKThreshold returns the key t of the k-th largest magnitude of x
// (1 ≤ k ≤ len(x)) and how many of the values whose key is t are kept,
// the first ones: every value above t is kept. It selects by the keys'
// bytes from the highest (a radix select, four passes over x), as a
// device does.
func TopKThreshold(x []float32, k int) (t uint32, ties int) {
	if k < 1 || k > len(x) {
		panic(fmt.Sprintf("compute: the top %d of %d values", k, len(x)))
	}
	want, mask := k, uint32(0)
	for shift := 24; shift >= 0; shift -= 8 {
		var hist [256]int
		for _, v := range x {
			if key := TopKey(v); key&mask == t {
				hist[key>>shift&255]++
			}
		}
		d := 255
		for ; d > 0 && hist[d] < want; d-- {
			want -= hist[d]
		}
		t |= uint32(d) << shift
		mask |= 255 << shift
	}
	return t, want
}

// TopK yields the indices of x's k largest magnitudes (TopKThreshold's
// keys, ties to the lower index), in increasing order. k may be 0.
func TopK(x []float32, k int) iter.Seq[int] {
	return func(yield func(int) bool) {
		if k == 0 {
			return
		}
		t, ties := TopKThreshold(x, k)
		for j, v := range x {
			if key := TopKey(v); key > t || key == t && ties > 0 {
				if key == t {
					ties--
				}
				if !yield(j) {
					return
				}
			}
		}
	}
}

// TopKInto sets dst to src at its k largest magnitudes (TopK) and to 0
// elsewhere, and returns the bytes of the kept indices as compress
// encodes them: each gap from the previous kept index (from −1) less
// one, as a uvarint. dst may be src.
func TopKInto(dst, src []float32, k int) int {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("compute: TopKInto of %d values into %d", len(src), len(dst)))
	}
	prev, bytes := -1, 0
	for j := range TopK(src, k) {
		clear(dst[prev+1 : j]) // src below j is read already
		dst[j] = src[j]
		bytes += UvarintLen(uint64(j - prev - 1))
		prev = j
	}
	clear(dst[prev+1:])
	return bytes
}

// UvarintLen is the length of v's uvarint encoding.
func UvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// CheckTopK panics unless a TopKRows call's rows lie in its tensors, k
// is in 1…n and bytes has room for every row.
func CheckTopK(dst, src Tensor, n int, rows, from []int32, k int, bytes []int32) {
	CheckRows("TopKRows", dst, n, rows)
	CheckRows("TopKRows", src, n, from)
	if len(rows) != len(from) || len(bytes) < len(rows) || k < 1 || k > n {
		panic(fmt.Sprintf("compute: TopKRows: %d rows, %d sources, %d byte counts, the top %d of %d", len(rows), len(from), len(bytes), k, n))
	}
}

// TopKRows implements Rows.
func (c *CPU) TopKRows(dt, st Tensor, n int, rows, from []int32, k int, bytes []int32) {
	CheckTopK(dt, st, n, rows, from, k, bytes)
	x, s := host(dt), host(st)
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		bytes[i] = int32(TopKInto(x[int(rows[i])*n:][:n], s[int(from[i])*n:][:n], k))
	})
}
