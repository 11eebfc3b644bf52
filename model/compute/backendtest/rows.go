package backendtest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/model/compute"
)

// rows checks compute.Rows on host and device tensors: InterpolateRows
// and CombineRows bit for bit against float32 code that rounds every
// product and sum on its own (in place, with a row read and written by
// the same i, with rows left alone untouched, and an empty sum giving
// zeros), and SumSquaresRows within 1e-9 relative of float64 sums, NaN
// and +Inf for rows holding them.
func rows(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	for _, n := range []int{1, 3, 257, 7850} {
		const m = 9
		x := randSlice(rng, m*n)
		row := func(v []float32, r int32) []float32 { return v[int(r)*n:][:n] }
		for _, onDevice := range []bool{false, true} {
			run := func(f func(compute.Tensor)) []float32 {
				got := slices.Clone(x)
				if !onDevice {
					f(compute.Host(got))
					return got
				}
				d := be.Load(got)
				f(d)
				be.Store(got, d)
				be.Free(d)
				return got
			}
			where := map[bool]string{false: "host", true: "device"}[onDevice]

			// Interpolate: 0 ← 0..1 in place, 2 ← 3..2 writing its b,
			// 4 ← 5..6 into a third row; rows 1, 3, 5, 6, 7, 8 stay.
			dst, a, b := []int32{0, 2, 4}, []int32{0, 3, 5}, []int32{1, 2, 6}
			w := []float32{0.3, 0.71, 1}
			want := slices.Clone(x)
			for i := range dst {
				d, av, bv := row(want, dst[i]), slices.Clone(row(x, a[i])), slices.Clone(row(x, b[i]))
				for j := range d {
					diff := bv[j] - av[j]
					d[j] = av[j] + float32(w[i]*diff)
				}
			}
			got := run(func(t compute.Tensor) { be.InterpolateRows(t, t, n, dst, a, b, w) })
			if j := firstDiff(got, want); j >= 0 {
				t.Errorf("%s: InterpolateRows (%s, rows of %d): value %d (row %d) = %v, want %v", name, where, n, j, j/n, got[j], want[j])
				return
			}

			// Combine: 1 ← ½·1 + ¼·2 − 2·8 (reads itself), 3 ← 1·5 (a
			// copy), 7 ← nothing (zeros), 0 ← 0.1·4 + 0.2·4 + 0.3·6.
			cdst, start := []int32{1, 3, 7, 0}, []int32{0, 3, 4, 4, 7}
			src, cw := []int32{1, 2, 8, 5, 4, 4, 6}, []float32{0.5, 0.25, -2, 1, 0.1, 0.2, 0.3}
			want = slices.Clone(x)
			for i, d := range cdst {
				out := row(want, d)
				acc := make([]float32, n)
				for k := start[i]; k < start[i+1]; k++ {
					s := row(x, src[k])
					for j := range acc {
						p := float32(cw[k] * s[j])
						if k == start[i] {
							acc[j] = p
						} else {
							acc[j] += p
						}
					}
				}
				copy(out, acc)
			}
			got = run(func(t compute.Tensor) { be.CombineRows(t, t, n, cdst, start, src, cw) })
			if j := firstDiff(got, want); j >= 0 {
				t.Errorf("%s: CombineRows (%s, rows of %d): value %d (row %d) = %v, want %v", name, where, n, j, j/n, got[j], want[j])
				return
			}
			got = run(func(t compute.Tensor) { be.CombineRows(t, t, n, nil, []int32{0}, nil, nil) })
			if j := firstDiff(got, x); j >= 0 {
				t.Errorf("%s: CombineRows of no rows (%s) changed value %d", name, where, j)
				return
			}
		}

		// From one matrix into another (host and device each): rows 1 and
		// 3 of a 4-row dst from rows of x; rows 0 and 2 stay.
		for _, where := range [][2]bool{{false, false}, {true, true}, {false, true}, {true, false}} {
			out0 := randSlice(rng, 4*n)
			two := func(f func(dst, src compute.Tensor)) []float32 {
				out := slices.Clone(out0)
				dt, st := compute.Host(out), compute.Host(x)
				if where[0] {
					dt = be.Load(out)
					defer be.Free(dt)
				}
				if where[1] {
					st = be.Load(x)
					defer be.Free(st)
				}
				f(dt, st)
				if where[0] {
					be.Store(out, dt)
				}
				return out
			}
			want := slices.Clone(out0)
			a, b := row(x, 4), row(x, 7)
			for j := range row(want, 1) {
				row(want, 1)[j] = a[j] + float32(0.25*(b[j]-a[j]))
			}
			for j := range row(want, 3) {
				p := float32(0.5 * row(x, 8)[j])
				row(want, 3)[j] = p + float32(-1*row(x, 0)[j])
			}
			got := two(func(d, s compute.Tensor) {
				be.InterpolateRows(d, s, n, []int32{1}, []int32{4}, []int32{7}, []float32{0.25})
				be.CombineRows(d, s, n, []int32{3}, []int32{0, 2}, []int32{8, 0}, []float32{0.5, -1})
			})
			if j := firstDiff(got, want); j >= 0 {
				t.Errorf("%s: Rows from one matrix into another (dst on the device %v, src %v, rows of %d): value %d (row %d) = %v, want %v", name, where[0], where[1], n, j, j/n, got[j], want[j])
				return
			}
		}

		// Sums of squares, with a NaN in row 2 and +Inf in row 6 (last
		// value), rows listed twice and out of order.
		y := slices.Clone(x)
		y[2*n+n/2] = float32(math.NaN())
		y[7*n-1] = float32(math.Inf(-1))
		list := []int32{8, 2, 0, 6, 0, 5}
		for _, onDevice := range []bool{false, true} {
			out := make([]float64, len(list)+1)
			out[len(list)] = 42
			if onDevice {
				d := be.Load(y)
				be.SumSquaresRows(out, d, n, list)
				be.Free(d)
			} else {
				be.SumSquaresRows(out, compute.Host(y), n, list)
			}
			for i, r := range list {
				var want float64
				for _, v := range row(y, r) {
					want += float64(v) * float64(v)
				}
				g := out[i]
				ok := relNear(g, want, 1e-9)
				switch {
				case math.IsNaN(want):
					ok = math.IsNaN(g)
				case math.IsInf(want, 1):
					ok = math.IsInf(g, 1)
				}
				if !ok {
					t.Errorf("%s: SumSquaresRows (device %v, rows of %d): row %d = %v, want %v", name, onDevice, n, r, g, want)
					return
				}
			}
			if out[len(list)] != 42 {
				t.Errorf("%s: SumSquaresRows wrote past its %d rows", name, len(list))
				return
			}
		}
		if !meanDistance(t, be, x, n) {
			return
		}
	}
}

// meanDistance checks MeanRows and DistanceRows on the 9 rows of n
// values of x, on host and device tensors, bit for bit against float64
// sums in the order the interface gives, in chunks of 1024 values (the
// consensus distance's), of 3 and of the whole row; it reports whether
// they passed.
func meanDistance(t T, be compute.Backend, x []float32, n int) bool {
	t.Helper()
	name := be.Name()
	list := []int32{8, 2, 0, 6, 0, 5} // out of order, row 0 twice
	want := make([]float32, n)
	for j := range want {
		var s float64
		for _, r := range list {
			s += float64(x[int(r)*n+j])
		}
		want[j] = float32(s * (1 / float64(len(list))))
	}
	for _, onDevice := range []bool{false, true} {
		xt, mt := compute.Host(x), compute.Host(make([]float32, n+1))
		if onDevice {
			xt, mt = be.Load(x), be.Alloc(n+1)
			defer be.Free(xt)
			defer be.Free(mt)
		}
		be.Copy(mt.Slice(n, n+1), compute.Host([]float32{42}))
		be.MeanRows(mt, xt, n, list)
		mean := make([]float32, n+1)
		be.Store(mean, mt)
		if j := firstDiff(mean[:n], want); j >= 0 || mean[n] != 42 {
			t.Errorf("%s: MeanRows (device %v, rows of %d): value %d = %v, want %v (past the end: %v)", name, onDevice, n, j, mean[max(j, 0)], want[max(j, 0)], mean[n])
			return false
		}
		for _, chunk := range []int{1024, 3, n} {
			c := (n + chunk - 1) / chunk
			out := make([]float64, len(list)*c+1)
			out[len(out)-1] = 42
			be.DistanceRows(out, xt, n, list, mt, chunk)
			for i, r := range list {
				for k := range c {
					a, b := x[int(r)*n+k*chunk:int(r)*n+min(n, (k+1)*chunk)], want[k*chunk:min(n, (k+1)*chunk)]
					var lanes [4]float64
					for j := range a {
						d := float64(a[j] - b[j])
						lane := j % 4
						if j >= len(a)/4*4 {
							lane = 0 // the tail goes to the first sum
						}
						lanes[lane] += float64(d * d)
					}
					w := lanes[0] + lanes[1] + lanes[2] + lanes[3]
					if g := out[i*c+k]; math.Float64bits(g) != math.Float64bits(w) {
						t.Errorf("%s: DistanceRows (device %v, rows of %d, chunks of %d): row %d chunk %d = %v, want %v", name, onDevice, n, chunk, r, k, g, w)
						return false
					}
				}
			}
			if out[len(out)-1] != 42 {
				t.Errorf("%s: DistanceRows wrote past its %d sums", name, len(out)-1)
				return false
			}
		}
	}
	return true
}

// firstDiff returns the first index where got and want differ in their
// bits, or −1.
func firstDiff(got, want []float32) int {
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	return -1
}
