package merge

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestLongVectorsSameBits: Weighted and Axpy split a long vector among
// goroutines (inRanges) and give the bits of a term-by-term sum on one
// goroutine (the weighted sum in one pass, compute.CombineInto), on any
// number of cores, each value written once.
func TestLongVectorsSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	nan := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.NaN())
		}
		return v
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, n := range []int{parallelFrom - 1, parallelFrom, 3*parallelFrom + 7, 101770} {
		xs := [][]float32{vec(n), vec(n), vec(n), vec(n)}
		ws := []float64{0.4, 0.2, 0.3, 0.1}
		w := make([]float32, len(ws))
		var sum float64
		for _, x := range ws {
			sum += x
		}
		for k := range w {
			w[k] = float32(ws[k] / sum)
		}
		wantW := nan(n) // term by term over the whole vector, on one goroutine
		for j := range wantW {
			wantW[j] = w[0] * xs[0][j]
		}
		for k := 1; k < len(xs); k++ {
			axpy(wantW, w[k], xs[k])
		}
		wantA := append([]float32(nil), xs[1]...)
		axpy(wantA, -0.37, xs[2])
		for _, procs := range []int{1, 2, 3, 8} {
			runtime.GOMAXPROCS(procs)
			got := nan(n)
			if err := Weighted(got, xs, ws); err != nil {
				t.Fatal(err)
			}
			same(t, "Weighted", n, procs, got, wantW)
			got = append(got[:0], xs[1]...)
			Axpy(got, -0.37, xs[2])
			same(t, "Axpy", n, procs, got, wantA)
			// Combine is Weighted, then Axpy, in one pass.
			nw, err := Normalized(nil, ws)
			if err != nil {
				t.Fatal(err)
			}
			got = nan(n)
			Combine(got, xs, nw, xs[3], -0.37)
			wantC := append([]float32(nil), wantW...)
			axpy(wantC, -0.37, xs[3])
			same(t, "Combine", n, procs, got, wantC)
		}
	}
}

func same(t *testing.T, what string, n, procs int, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s of %d values on %d cores: [%d] = %v, one goroutine gives %v", what, n, procs, i, got[i], want[i])
		}
	}
}

// TestInRanges: the ranges cover [0, n) once, whatever n and the cores.
func TestInRanges(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 4, 64} {
		runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, parallelFrom - 1, parallelFrom, 5*parallelFrom + 3} {
			seen := make([]int32, n)
			inRanges(n, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					seen[i]++ // ranges are disjoint: no two goroutines write one i
				}
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n %d on %d cores: value %d covered %d times", n, procs, i, c)
				}
			}
		}
	}
}

// TestNormalized: the weights over their sum, as Weighted uses them; a
// negative, infinite or NaN weight, a zero sum and no weights are errors.
func TestNormalized(t *testing.T) {
	w, err := Normalized(nil, []float64{1, 3})
	if err != nil || len(w) != 2 || w[0] != 0.25 || w[1] != 0.75 {
		t.Fatalf("Normalized(1, 3) = %v, %v; want [0.25 0.75]", w, err)
	}
	for _, ws := range [][]float64{{}, {0, 0}, {-1, 2}, {math.Inf(1), 1}, {math.NaN(), 1}} {
		if w, err := Normalized(nil, ws); err == nil {
			t.Errorf("Normalized(%v) = %v, want an error", ws, w)
		}
	}
}
