package backendtest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/model/compute"
)

// quantizeRows checks compute.Rows' QuantizeRows on host and device
// tensors against what a receiver of each row sent by gossip/compress
// decompresses (Compress, then Decompress), bit for bit but for NaNs
// (any NaN equal to any other): fp16 and int8, rows of 1, 300 and 1,100
// values (int8's last chunk short), one row in place, on values that
// hold binary16's ties and subnormals, overflows, −0, infinities, NaNs
// and chunks of zeros.
func quantizeRows(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	specials := []float32{0, float32(math.Copysign(0, -1)), 65504, 65520, 65519.99, -70000, 1e-8, -3e-8, 5.96e-8, 2.98e-8, 1 + 1.0/2048, 1 + 3.0/2048,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 6.1e-5, -6.1e-5}
	for _, n := range []int{1, 300, 1100} {
		const m = 6
		x := randSlice(rng, m*n)
		for i := range x {
			switch rng.IntN(8) {
			case 0:
				x[i] = specials[rng.IntN(len(specials))]
			case 1:
				x[i] *= 1e-6
			}
		}
		clear(x[2*n : 2*n+min(n, compress.Int8Chunk)]) // a chunk of zeros
		// Row 0's first values are exact ties of int8 at scale 1 (127 its
		// largest magnitude) and of binary16's subnormals (k·2⁻²⁵, k odd),
		// whose rounding is checked against known values below.
		ties := []float32{127, 0.5, 1.5, -2.5, 126.5, -0.5, 0x1p-25, 0x3p-25, -0x5p-25, 0x7p-25}
		if n >= len(ties) {
			copy(x, ties)
			for j := len(ties); j < min(n, compress.Int8Chunk); j++ {
				x[j] = float32(j%100) / 7 // finite, below 127
			}
		}
		row := func(v []float32, r int32) []float32 { return v[int(r)*n:][:n] }
		for _, q := range []compute.Quantization{compute.QuantFP16, compute.QuantInt8} {
			kind := map[compute.Quantization]compress.Kind{compute.QuantFP16: compress.FP16, compute.QuantInt8: compress.Int8}[q]
			// 1 ← 0, 3 ← 3 (in place), 5 ← 2.
			rows, from := []int32{1, 3, 5}, []int32{0, 3, 2}
			want := slices.Clone(x)
			for i, d := range rows {
				var p compress.Payload
				compress.Compress(&p, row(x, from[i]), compress.Spec{Kind: kind}, nil)
				compress.Decompress(row(want, d), &p)
			}
			if n >= len(ties) { // rounded half away from zero; ties to even
				known := map[compute.Quantization][]float32{
					compute.QuantInt8: {127, 1, 2, -3, 127, -1, 0, 0, 0, 0},
					compute.QuantFP16: {127, 0.5, 1.5, -2.5, 126.5, -0.5, 0, 0x1p-23, -0x1p-23, 0x2p-23},
				}[q]
				for j, v := range known {
					if w := row(want, 1)[j]; w != v {
						t.Errorf("%v of %v: %v, want %v", kind, ties[j], w, v)
						return
					}
				}
			}
			for _, onDevice := range []bool{false, true} {
				got := slices.Clone(x)
				if onDevice {
					d := be.Load(got)
					be.QuantizeRows(d, d, n, rows, from, q, compress.Int8Chunk)
					be.Store(got, d)
					be.Free(d)
				} else {
					be.QuantizeRows(compute.Host(got), compute.Host(got), n, rows, from, q, compress.Int8Chunk)
				}
				if j := firstDiffNaN(got, want); j >= 0 {
					t.Errorf("%s: QuantizeRows %v (device %v, rows of %d): value %d (row %d) = %v (%#x), want %v (%#x)", name, kind, onDevice, n, j, j/n, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
					return
				}
			}
		}
	}
}

// maskRows checks compute.Rows' MaskRows on host and device tensors
// against what a receiver of each row sent by gossip/compress as rand-k
// decompresses (the values kept at compress.RandIndices, zeros
// elsewhere), bit for bit, NaNs too: rows of 1, 300 and 1,100 values,
// keeping none, some (the first and last among them) and all of a row,
// one row in place, on values that hold −0, infinities and NaNs.
func maskRows(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	specials := []float32{float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7fc00123)}
	for _, n := range []int{1, 300, 1100} {
		const m = 6
		x := randSlice(rng, m*n)
		for i := range x {
			if rng.IntN(6) == 0 {
				x[i] = specials[rng.IntN(len(specials))]
			}
		}
		row := func(v []float32, r int32) []float32 { return v[int(r)*n:][:n] }
		// 1 ← 0 (a tenth), 3 ← 3 in place (a third, with the first and
		// last indices), 5 ← 2 (all), 4 ← 0 (none).
		rows, from := []int32{1, 3, 5, 4}, []int32{0, 3, 2, 0}
		kept := [][]uint32{
			compress.RandIndices(nil, n, compress.Spec{Kind: compress.RandK, Fraction: 0.1}.Keep(n), rng.Uint64()),
			compress.RandIndices(nil, n, compress.Spec{Kind: compress.RandK, Fraction: 0.3}.Keep(n), rng.Uint64()),
			compress.RandIndices(nil, n, n, rng.Uint64()),
			nil,
		}
		if k := kept[1]; n > 2 {
			kept[1] = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(k), 0, uint32(n-1)))))
		}
		start, keep := []int32{0}, []int32(nil)
		want := slices.Clone(x)
		for i, d := range rows {
			var p compress.Payload
			p.Kind, p.N, p.Indices = compress.TopK, n, kept[i] // the kept values, as a payload names them
			for _, k := range kept[i] {
				p.Values = append(p.Values, row(x, from[i])[k])
				keep = append(keep, int32(k))
			}
			compress.Decompress(row(want, d), &p)
			start = append(start, int32(len(keep)))
		}
		for _, onDevice := range []bool{false, true} {
			got := slices.Clone(x)
			if onDevice {
				d := be.Load(got)
				be.MaskRows(d, d, n, rows, start, from, keep)
				be.Store(got, d)
				be.Free(d)
			} else {
				be.MaskRows(compute.Host(got), compute.Host(got), n, rows, start, from, keep)
			}
			if j := firstDiff(got, want); j >= 0 {
				t.Errorf("%s: MaskRows (device %v, rows of %d): value %d (row %d) = %v (%#x), want %v (%#x)", name, onDevice, n, j, j/n, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
				return
			}
		}
	}
}

// topKRows checks compute.Rows' TopKRows on host and device tensors
// against what a receiver of each row sent by gossip/compress as top-k
// decompresses, bit for bit, NaNs too, and its byte counts against the
// payload's encoding: rows of 1, 300 and 1,100 values, on values that
// hold −0, infinities, NaNs and many ties (values of a few levels), one
// row in place, keeping one value, some and all of a row.
func topKRows(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	specials := []float32{float32(math.Copysign(0, -1)), 0, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7fc00123), 0.5, -0.5}
	for _, n := range []int{1, 300, 1100} {
		const m = 6
		x := randSlice(rng, m*n)
		for i := range x {
			if rng.IntN(3) == 0 {
				x[i] = specials[rng.IntN(len(specials))]
			}
		}
		row := func(v []float32, r int32) []float32 { return v[int(r)*n:][:n] }
		if n >= 300 { // row 0's largest at 127 and 255: gaps of 127, one byte each (128 would take two)
			r := row(x, 0)
			for j := range r {
				r[j] = float32(rng.NormFloat64())
			}
			r[127], r[255] = 1e30, -1e30
		}
		for _, frac := range []float64{1e-9, 2.0 / float64(n), 0.1, 0.3, 1} {
			spec := compress.Spec{Kind: compress.TopK, Fraction: frac}
			k := spec.Keep(n)
			// 1 ← 0, 3 ← 3 in place, 5 ← 2.
			rows, from := []int32{1, 3, 5}, []int32{0, 3, 2}
			want, wantBytes := slices.Clone(x), make([]int32, len(rows))
			for i, d := range rows {
				var p compress.Payload
				compress.Compress(&p, row(x, from[i]), spec, nil)
				wantBytes[i] = int32(compress.EncodedSize(&p) - 9 - 4*len(p.Values))
				compress.Decompress(row(want, d), &p)
			}
			for _, onDevice := range []bool{false, true} {
				got, bytes := slices.Clone(x), make([]int32, len(rows))
				if onDevice {
					d := be.Load(got)
					be.TopKRows(d, d, n, rows, from, k, bytes)
					be.Store(got, d)
					be.Free(d)
				} else {
					be.TopKRows(compute.Host(got), compute.Host(got), n, rows, from, k, bytes)
				}
				if j := firstDiff(got, want); j >= 0 {
					t.Errorf("%s: TopKRows of %d (device %v, rows of %d): value %d (row %d) = %v (%#x), want %v (%#x)", name, k, onDevice, n, j, j/n, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
					return
				}
				if !slices.Equal(bytes, wantBytes) {
					t.Errorf("%s: TopKRows of %d (device %v, rows of %d): index bytes %v, the encodings' %v", name, k, onDevice, n, bytes, wantBytes)
					return
				}
			}
		}
	}
}
