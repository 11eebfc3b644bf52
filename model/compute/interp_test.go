package compute

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestInterpKernels: every kernel set this CPU runs, and the amd64 sets
// on the interpreter, interpolate two models to the pure-Go loop's values
// bit for bit, over every length of a tail and a model's length, into a
// vector of its own and into a or b itself; nothing past the n values is
// read or written (the interpreter fails a kernel that touches memory it
// was not lent, and the guards around the rows must keep their values).
func TestInterpKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	sets := append(slices.Clone(kernelSets), emulatedKernels(t)...)
	// Every tail after every mix of the 32- and 8-value passes, and a
	// model's length.
	var lengths []int
	for n := range 80 {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 101770)
	for _, ks := range sets {
		for _, n := range lengths {
			if n > 1000 && strings.HasSuffix(ks.name, "-emulated") {
				continue // the interpreter is slow; short rows cover its paths
			}
			for _, w := range []float32{0.5, 0.3, 1e-3, 0.9999} {
				a, b := randSlice(rng, n), randSlice(rng, n)
				for i := range b {
					b[i] *= 1e3 // magnitudes apart, where rounding shows
				}
				want := make([]float32, n)
				interpGo(want, a, b, w)
				check := func(how string, g []float32) {
					t.Helper()
					checkGuarded(t, fmt.Sprintf("%s n=%d w=%v %s", ks.name, n, w, how), g, want)
				}
				ga, gb, gd := guarded(a), guarded(b), guarded(make([]float32, n))
				ks.interp(gd[1:n+1], ga[1:n+1], gb[1:n+1], w)
				check("into a vector of its own", gd)
				ks.interp(ga[1:n+1], ga[1:n+1], gb[1:n+1], w)
				check("into a", ga)
				ga = guarded(a)
				ks.interp(gb[1:n+1], ga[1:n+1], gb[1:n+1], w)
				check("into b", gb)
			}
		}
	}
}

// guarded returns v between two guard values, which a kernel that writes
// only its row leaves as they are.
func guarded(v []float32) []float32 {
	g := make([]float32, len(v)+2)
	g[0], g[len(v)+1] = 1234, 5678
	copy(g[1:], v)
	return g
}

// checkGuarded fails t unless g's guards (guarded) hold and its row is
// want bit for bit.
func checkGuarded(t *testing.T, what string, g, want []float32) {
	t.Helper()
	n := len(want)
	if g[0] != 1234 || g[n+1] != 5678 {
		t.Fatalf("%s: a guard value changed", what)
	}
	for j, v := range g[1 : n+1] {
		if math.Float32bits(v) != math.Float32bits(want[j]) {
			t.Fatalf("%s: value %d = %v, want %v", what, j, v, want[j])
		}
	}
}

// TestInterpolateIntoNaN: a NaN or an infinity in either model gives NaN
// or infinity at its place only, on every kernel set and through
// InterpolateInto (the kernel set $GOSSIPD_KERNEL names, else the best).
func TestInterpolateIntoNaN(t *testing.T) {
	sets := append(slices.Clone(kernelSets), emulatedKernels(t)...)
	runs := map[string]interpKernel{"InterpolateInto": InterpolateInto}
	for _, ks := range sets {
		runs[ks.name] = ks.interp
	}
	for name, interp := range runs {
		a, b := make([]float32, 19), make([]float32, 23) // b longer: only len(a) values count
		d := make([]float32, 21)
		for i := range b {
			b[i] = float32(2 * i)
		}
		for i := range a {
			a[i] = float32(i)
		}
		a[3], b[5], b[17] = float32(math.NaN()), float32(math.NaN()), float32(math.Inf(1))
		d[20] = 42
		interp(d, a, b, 0.5)
		for i, v := range d[:19] {
			switch i {
			case 3, 5:
				if !math.IsNaN(float64(v)) {
					t.Errorf("%s: value %d = %v, want NaN", name, i, v)
				}
			case 17:
				if !math.IsInf(float64(v), 1) {
					t.Errorf("%s: value 17 = %v, want +Inf", name, v)
				}
			default:
				if want := float32(i) * 1.5; v != want {
					t.Errorf("%s: value %d = %v, want %v", name, i, v, want)
				}
			}
		}
		if d[19] != 0 || d[20] != 42 {
			t.Errorf("%s: wrote past len(a): %v", name, d[19:])
		}
	}
}

// BenchmarkInterpolate: a random walk's merge of two MLP 784-128-10
// models (101,770 values) into a third, on each kernel set.
func BenchmarkInterpolate(b *testing.B) {
	const n = 101770
	rng := rand.New(rand.NewPCG(1, 2))
	x, y, d := randSlice(rng, n), randSlice(rng, n), make([]float32, n)
	for _, ks := range kernelSets {
		b.Run(ks.name, func(b *testing.B) {
			b.SetBytes(3 * 4 * n)
			for b.Loop() {
				ks.interp(d, x, y, 0.5)
			}
		})
	}
}
