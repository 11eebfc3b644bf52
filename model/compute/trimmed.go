package compute

import (
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// MaxTrimmedInputs is the most rows one TrimmedRows result may be taken
// over: a device sorts each coordinate's values in a thread's own
// memory. A caller with more (a D-PSGD peer of more than 63 neighbours)
// aggregates on the host.
const MaxTrimmedInputs = 64

// Median is TrimmedRows' trim for a coordinate-wise median.
const Median = -1

// Trimmed returns the coordinate-wise statistic of col that merge's
// robust rules take: with trim ≥ 0 the mean of the values left when the
// trim smallest and the trim largest are dropped (merge.TrimmedMean),
// summed in float64 from 0 in ascending order and divided by their count
// in float64; with trim Median the middle value, or for an even count
// the float64 mean of the two middle ones (merge.Median). The values are
// ordered as sortTotal orders them, so that every backend picks the same
// one. It sorts col in place; col holds more than 2·trim values.
func Trimmed(col []float32, trim int) float32 {
	sortTotal(col)
	n := len(col)
	if trim == Median {
		if n%2 == 1 {
			return col[n/2]
		}
		return float32((float64(col[n/2-1]) + float64(col[n/2])) / 2)
	}
	keep := col[trim : n-trim]
	var s float64
	for _, v := range keep {
		s += float64(v)
	}
	return float32(s / float64(len(keep)))
}

// sortTotal sorts xs stably with NaNs first, whatever their sign (the
// sign of a NaN that arithmetic made differs between machines), and the
// numbers after them by sortKey: −0 before +0. A device sorts by the same
// order (insertion, as here for a few values).
func sortTotal(xs []float32) {
	if len(xs) <= 16 {
		for i := 1; i < len(xs); i++ {
			v := xs[i]
			j := i
			for ; j > 0 && sortsBefore(v, xs[j-1]); j-- {
				xs[j] = xs[j-1]
			}
			xs[j] = v
		}
		return
	}
	nan := 0 // the NaNs to the front, in their order
	for i, v := range xs {
		if v != v {
			copy(xs[nan+1:i+1], xs[nan:i])
			xs[nan] = v
			nan++
		}
	}
	rest := xs[nan:]
	if len(rest) == 0 {
		return
	}
	ks := unsafe.Slice((*uint32)(unsafe.Pointer(&rest[0])), len(rest)) // the keys in rest's place
	for i, v := range rest {
		ks[i] = sortKey(v)
	}
	slices.Sort(ks)
	for i, k := range ks {
		rest[i] = fromSortKey(k)
	}
}

// sortsBefore is sortTotal's order: a NaN before a number, numbers by
// sortKey.
func sortsBefore(a, b float32) bool {
	if a != a || b != b {
		return a != a && b == b
	}
	return sortKey(a) < sortKey(b)
}

// sortKey maps a number to an unsigned key that orders as the values do,
// with −0 before +0 (the IEEE 754 totalOrder): the bits with the sign
// flipped, or all of them flipped for a negative value.
func sortKey(v float32) uint32 {
	b := math.Float32bits(v)
	if b&(1<<31) != 0 {
		return ^b
	}
	return b | 1<<31
}

// fromSortKey inverts sortKey.
func fromSortKey(k uint32) float32 {
	if k&(1<<31) != 0 {
		return math.Float32frombits(k &^ (1 << 31))
	}
	return math.Float32frombits(^k)
}

// CheckTrimmed panics unless a TrimmedRows call's lists agree, lie in
// its matrices, and every result is taken over 1 to MaxTrimmedInputs
// rows, more than twice its trim (or any number, for a median).
func CheckTrimmed(dst, src Tensor, n int, rows, start, from, trim []int32) {
	CheckLists("TrimmedRows", dst, src, n, rows, start, from)
	if len(trim) != len(rows) {
		panic(fmt.Sprintf("compute: TrimmedRows: %d rows, %d trims", len(rows), len(trim)))
	}
	for i := range rows {
		k := int(start[i+1]) - int(start[i])
		if k > MaxTrimmedInputs || trim[i] < Median || (trim[i] >= 0 && k <= 2*int(trim[i])) {
			panic(fmt.Sprintf("compute: TrimmedRows: result %d over %d rows with trim %d", i, k, trim[i]))
		}
	}
}

// TrimmedRows implements Rows.
func (c *CPU) TrimmedRows(dt, st Tensor, n int, rows, start, from, trim []int32) {
	CheckTrimmed(dt, st, n, rows, start, from, trim)
	x, s := host(dt), host(st)
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		lo, hi := int(start[i]), int(start[i+1])
		d := x[int(rows[i])*n:][:n]
		var buf [MaxTrimmedInputs]float32
		col := buf[:hi-lo]
		for j := range d {
			for k := range col {
				col[k] = s[int(from[lo+k])*n+j]
			}
			d[j] = Trimmed(col, int(trim[i]))
		}
	})
}
