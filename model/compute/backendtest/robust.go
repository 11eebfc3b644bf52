package backendtest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/model/compute"
)

// robustRows checks compute.Rows' kernels of Krum and clipped gossip on
// host and device tensors, bit for bit against float64 code written
// apart: PairDistanceRows (pairs in both orders, a row with itself),
// AverageRows (one row read twice, a row writing itself, a mean of three, of one)
// and ClipRows (the first row the node's own, scales of 0 and above 1,
// a row writing itself), on rows of 1, 7 and 4,099 values that hold −0
// and +0 (whose sums must start from +0 as the host's do), infinities
// and NaNs (any NaN equal to any other: a GPU makes its own).
func robustRows(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	negZero := float32(math.Copysign(0, -1))
	specials := []float32{0, negZero, negZero, negZero, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	for _, n := range []int{1, 7, 4099} {
		const m = 8
		x := randSlice(rng, m*n)
		for i := range x {
			if rng.IntN(4) == 0 {
				x[i] = specials[rng.IntN(len(specials))]
			}
		}
		if n == 1 { // a coordinate of −0 in every row
			for i := range x {
				x[i] = negZero
			}
		}
		row := func(v []float32, r int32) []float32 { return v[int(r)*n:][:n] }
		load := func(onDevice bool, v []float32) (compute.Tensor, func() []float32) {
			if !onDevice {
				return compute.Host(v), func() []float32 { return v }
			}
			d := be.Load(v)
			return d, func() []float32 { be.Store(v, d); be.Free(d); return v }
		}
		for _, onDevice := range []bool{false, true} {
			// Distances: 0–1, 1–0, 2–7, 5–5.
			a, b := []int32{0, 1, 2, 5}, []int32{1, 0, 7, 5}
			out := make([]float64, len(a)+1)
			out[len(a)] = 42
			xt, done := load(onDevice, slices.Clone(x))
			be.PairDistanceRows(out, xt, n, a, b)
			done()
			for i := range a {
				var s [4]float64
				ra, rb := row(x, a[i]), row(x, b[i])
				j := 0
				for ; j+4 <= n; j += 4 {
					for l := range 4 {
						d := float64(ra[j+l] - rb[j+l])
						s[l] += float64(d * d)
					}
				}
				for ; j < n; j++ {
					d := float64(ra[j] - rb[j])
					s[0] += float64(d * d)
				}
				if want := s[0] + s[1] + s[2] + s[3]; math.Float64bits(out[i]) != math.Float64bits(want) && !(math.IsNaN(out[i]) && math.IsNaN(want)) {
					t.Errorf("%s: PairDistanceRows (device %v, rows of %d): pair %d = %v, want %v", name, onDevice, n, i, out[i], want)
					return
				}
			}
			if out[len(a)] != 42 {
				t.Errorf("%s: PairDistanceRows wrote past its %d sums", name, len(a))
				return
			}

			// Means: 3 ← mean{2, 4, 4, 6}, 5 ← mean{5, 0, 6} (reads
			// itself), 7 ← mean{1}.
			rows, start, from := []int32{3, 5, 7}, []int32{0, 4, 7, 8}, []int32{2, 4, 4, 6, 5, 0, 6, 1}
			want := slices.Clone(x)
			for i, d := range rows {
				for j := range n {
					var s float64
					for _, r := range from[start[i]:start[i+1]] {
						s += float64(row(x, r)[j])
					}
					row(want, d)[j] = float32(s / float64(start[i+1]-start[i]))
				}
			}
			xt, done = load(onDevice, slices.Clone(x))
			be.AverageRows(xt, xt, n, rows, start, from)
			if got := done(); firstDiffNaN(got, want) >= 0 {
				j := firstDiffNaN(got, want)
				t.Errorf("%s: AverageRows (device %v, rows of %d): value %d (row %d) = %v, want %v", name, onDevice, n, j, j/n, got[j], want[j])
				return
			}

			// Clips: 1 ← 1 pulled by 2, 3 and 6; 0 ← 4 pulled by 5;
			// 7 ← 2 alone.
			rows, start, from = []int32{1, 0, 7}, []int32{0, 4, 6, 7}, []int32{1, 2, 3, 6, 4, 5, 2}
			scale := []float64{9, 0.25, 0, 1.5, 9, 0.125, 9}
			want = slices.Clone(x)
			for i, d := range rows {
				for j := range n {
					v := float64(row(x, from[start[i]])[j])
					var acc float64
					for k := start[i] + 1; k < start[i+1]; k++ {
						p := scale[k] * (float64(row(x, from[k])[j]) - v)
						acc += float64(p)
					}
					row(want, d)[j] = float32(v + acc)
				}
			}
			xt, done = load(onDevice, slices.Clone(x))
			be.ClipRows(xt, xt, n, rows, start, from, scale)
			if got := done(); firstDiffNaN(got, want) >= 0 {
				j := firstDiffNaN(got, want)
				t.Errorf("%s: ClipRows (device %v, rows of %d): value %d (row %d) = %v, want %v", name, onDevice, n, j, j/n, got[j], want[j])
				return
			}
		}
	}
}
