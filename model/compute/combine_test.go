package compute

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// combineRef is the weighted sum term by term over the whole vector (the
// way merge summed before the kernels): the first product, then each
// next product added, each rounded on its own.
func combineRef(d []float32, xs [][]float32, w []float32) {
	for j := range d {
		d[j] = w[0] * xs[0][j]
	}
	for k := 1; k < len(xs); k++ {
		for j := range d {
			d[j] += float32(w[k] * xs[k][j])
		}
	}
}

// TestCombineKernels: every kernel set this CPU runs, and the amd64 sets
// on the interpreter, sum 1 to 17 weighted models (past the 16 whose
// addresses the assembly's wrapper keeps on its stack) to the term-by-term
// loop's values bit for bit, over every length of a tail and a model's
// length, into a vector of its own and into the first or the last model
// itself, and an axpy (a first weight of 1 into the first model, of
// another model and of itself); nothing past the n values is read or written (the interpreter
// fails a kernel that touches memory it was not lent, and the guards
// around the rows must keep their values).
func TestCombineKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	sets := append(slices.Clone(kernelSets), emulatedKernels(t)...)
	var lengths []int
	for n := range 80 {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 300, 101770) // past the Go kernel's block; a model
	for _, ks := range sets {
		emulated := strings.HasSuffix(ks.name, "-emulated")
		for _, n := range lengths {
			if n > 1000 && emulated {
				continue // the interpreter is slow; short rows cover its paths
			}
			for _, k := range []int{1, 2, 3, 5, 17} {
				if emulated && k == 17 && n > 40 {
					continue
				}
				xs, w := make([][]float32, k), make([]float32, k)
				for i := range xs {
					xs[i] = randSlice(rng, n)
					for j := range xs[i] {
						xs[i][j] *= float32(math.Pow(10, float64(i%4))) // magnitudes apart, where rounding shows
					}
					w[i] = rng.Float32()
				}
				want := make([]float32, n)
				combineRef(want, xs, w)
				check := func(how string, g []float32, want []float32) {
					t.Helper()
					checkGuarded(t, fmt.Sprintf("%s n=%d k=%d %s", ks.name, n, k, how), g, want)
				}
				rows := func() [][]float32 {
					gs := make([][]float32, k)
					for i := range gs {
						gs[i] = guarded(xs[i])
					}
					return gs
				}
				inner := func(gs [][]float32) [][]float32 {
					out := make([][]float32, len(gs))
					for i, g := range gs {
						out[i] = g[1 : n+1]
					}
					return out
				}
				gs, gd := rows(), guarded(make([]float32, n))
				ks.combine(gd[1:n+1], inner(gs), w)
				check("into a vector of its own", gd, want)
				for i, g := range gs {
					if !slices.Equal(g[1:n+1], xs[i]) {
						t.Fatalf("%s n=%d k=%d: model %d was written", ks.name, n, k, i)
					}
				}
				ks.combine(gs[0][1:n+1], inner(gs), w)
				check("into the first model", gs[0], want)
				gs = rows()
				ks.combine(gs[k-1][1:n+1], inner(gs), w)
				check("into the last model", gs[k-1], want)
				if k == 2 { // an axpy, d += a·x, of x and of d itself (the Go set's own path)
					w1 := []float32{1, w[1]}
					want1, want2 := make([]float32, n), make([]float32, n)
					combineRef(want1, xs, w1)
					combineRef(want2, [][]float32{xs[0], xs[0]}, w1)
					gs, gd = rows(), guarded(make([]float32, n))
					ks.combine(gd[1:n+1], inner(gs), w1)
					check("a first weight of 1 into a vector of its own", gd, want1)
					ks.combine(gs[0][1:n+1], inner(gs), w1)
					check("axpy into the first model", gs[0], want1)
					gs = rows()
					d := gs[0][1 : n+1]
					ks.combine(d, [][]float32{d, d}, w1)
					check("axpy of the first model into itself", gs[0], want2)
				}
			}
		}
	}
}

// TestCombineIntoNaN: a NaN or an infinity in a model gives NaN or an
// infinity at its place only, on every kernel set and through CombineInto
// (the set $GOSSIPD_KERNEL names, else the best), which refuses a sum of
// no models, with a weight missing, or of a model shorter than d (even
// with the capacity to read past its length).
func TestCombineIntoNaN(t *testing.T) {
	sets := append(slices.Clone(kernelSets), emulatedKernels(t)...)
	runs := map[string]combineKernel{"CombineInto": CombineInto}
	for _, ks := range sets {
		runs[ks.name] = ks.combine
	}
	for name, combine := range runs {
		a, b := make([]float32, 23), make([]float32, 25) // longer than d: only len(d) values count
		d := make([]float32, 21)
		for i := range a {
			a[i] = float32(i)
		}
		for i := range b {
			b[i] = float32(2 * i)
		}
		a[3], b[5], b[17] = float32(math.NaN()), float32(math.NaN()), float32(math.Inf(-1))
		a[20], a[21] = 7, 99 // a[21] is past d
		combine(d[:20], [][]float32{a, b}, []float32{0.5, 0.25})
		for i, v := range d[:20] {
			switch i {
			case 3, 5:
				if !math.IsNaN(float64(v)) {
					t.Errorf("%s: value %d = %v, want NaN", name, i, v)
				}
			case 17:
				if !math.IsInf(float64(v), -1) {
					t.Errorf("%s: value 17 = %v, want -Inf", name, v)
				}
			default:
				if want := float32(i); v != want {
					t.Errorf("%s: value %d = %v, want %v", name, i, v, want)
				}
			}
		}
		if d[20] != 0 {
			t.Errorf("%s: wrote past len(d): %v", name, d[20])
		}
	}
	for _, bad := range []struct {
		xs [][]float32
		w  []float32
	}{{nil, nil}, {[][]float32{{1}, {2}}, []float32{1}}, {[][]float32{{1, 2}, make([]float32, 1, 2)}, []float32{1, 1}}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "CombineInto of") {
					t.Errorf("CombineInto of %d vectors, %d weights: recovered %v, want a panic naming the counts", len(bad.xs), len(bad.w), r)
				}
			}()
			CombineInto(make([]float32, 2), bad.xs, bad.w)
		}()
	}
}

// BenchmarkCombine: a D-PSGD peer's mix of itself and four neighbours'
// MLP 784-128-10 models (101,770 values) into a sixth vector, on each
// kernel set, against the term-by-term loop.
func BenchmarkCombine(b *testing.B) {
	const n, k = 101770, 5
	rng := rand.New(rand.NewPCG(1, 2))
	xs, w, d := make([][]float32, k), make([]float32, k), make([]float32, n)
	for i := range xs {
		xs[i], w[i] = randSlice(rng, n), 0.2
	}
	b.Run("term-by-term", func(b *testing.B) {
		b.SetBytes((k + 1) * 4 * n)
		for b.Loop() {
			combineRef(d, xs, w)
		}
	})
	for _, ks := range kernelSets {
		b.Run(ks.name, func(b *testing.B) {
			b.SetBytes((k + 1) * 4 * n)
			for b.Loop() {
				ks.combine(d, xs, w)
			}
		})
	}
}
