package backendtest

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/model/compute"
)

// trimmedRows checks compute.Rows' TrimmedRows on host and device
// tensors, bit for bit against a sort written apart from the backends'
// (a NaN that a sum made is any NaN: a GPU makes its own):
// medians of odd and even counts, trimmed means, one row in place, a
// result over a single row, and over MaxTrimmedInputs rows (a row listed
// many times), on values that hold ties of −0 and +0, NaNs of both signs
// (first, whatever their sign), infinities and repeats, where the order
// matters.
func trimmedRows(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	nan, negNaN := float32(math.NaN()), math.Float32frombits(math.Float32bits(float32(math.NaN()))|1<<31)
	negZero := float32(math.Copysign(0, -1))
	specials := []float32{0, negZero, nan, negNaN, float32(math.Inf(1)), float32(math.Inf(-1)), 1, -1}
	for _, n := range []int{1, 5, 300} {
		const m = 9
		x := randSlice(rng, m*n)
		for i := range x {
			if rng.IntN(3) == 0 {
				x[i] = specials[rng.IntN(len(specials))]
			}
		}
		row := func(v []float32, r int32) []float32 { return v[int(r)*n:][:n] }
		// 1 ← median{1, 2, 8} (reads itself), 3 ← median{2, 4, 6, 8},
		// 7 ← trimmed:1{2, 4, 6, 7, 8}, 0 ← trimmed:0{4}, 5 ← trimmed:2
		// over MaxTrimmedInputs rows (6, 8 and 2 in turn); the other rows
		// stay.
		dst := []int32{1, 3, 7, 0, 5}
		trim := []int32{compute.Median, compute.Median, 1, 0, 2}
		from := []int32{1, 2, 8, 2, 4, 6, 8, 2, 4, 6, 7, 8, 4}
		for k := range compute.MaxTrimmedInputs {
			from = append(from, []int32{6, 8, 2}[k%3])
		}
		start := []int32{0, 3, 7, 12, 13, int32(len(from))}
		want := slices.Clone(x)
		for i, d := range dst {
			out := row(want, d)
			for j := range out {
				var col []float32
				for _, r := range from[start[i]:start[i+1]] {
					col = append(col, row(x, r)[j])
				}
				out[j] = refTrimmed(col, int(trim[i]))
			}
		}
		for _, onDevice := range []bool{false, true} {
			got := slices.Clone(x)
			if onDevice {
				d := be.Load(got)
				be.TrimmedRows(d, d, n, dst, start, from, trim)
				be.Store(got, d)
				be.Free(d)
			} else {
				be.TrimmedRows(compute.Host(got), compute.Host(got), n, dst, start, from, trim)
			}
			if j := firstDiffNaN(got, want); j >= 0 {
				t.Errorf("%s: TrimmedRows (device %v, rows of %d): value %d (row %d) = %v (%#x), want %v (%#x)", name, onDevice, n, j, j/n, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
				return
			}
		}
	}
}

// refTrimmed is compute.Trimmed written apart: the values ordered NaNs
// first, in their order, then by value with −0 before +0.
func refTrimmed(col []float32, trim int) float32 {
	slices.SortStableFunc(col, func(a, b float32) int {
		an, bn := a != a, b != b
		switch {
		case an || bn:
			return cmp.Compare(b2i(!an), b2i(!bn))
		case a == b: // −0 before +0
			return cmp.Compare(b2i(!math.Signbit(float64(a))), b2i(!math.Signbit(float64(b))))
		}
		return cmp.Compare(a, b)
	})
	n := len(col)
	if trim == compute.Median {
		if n%2 == 1 {
			return col[n/2]
		}
		return float32((float64(col[n/2-1]) + float64(col[n/2])) / 2)
	}
	s := 0.0
	for _, v := range col[trim : n-trim] {
		s += float64(v)
	}
	return float32(s / float64(n-2*trim))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// firstDiffNaN is firstDiff, any NaN equal to any other.
func firstDiffNaN(got, want []float32) int {
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && (got[i] == got[i] || want[i] == want[i]) {
			return i
		}
	}
	return -1
}
