package compute

import (
	"math"
	"testing"
)

// TestExpf compares expf with math.Exp rounded to float32 over its range,
// in ulps, and checks the ends.
func TestExpf(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x <= 88; x += 0.0137 {
		want := float32(math.Exp(float64(x)))
		got := expf(x)
		ulp := float64(math.Nextafter32(want, float32(math.Inf(1))) - want)
		if d := math.Abs(float64(got-want)) / ulp; d > worst {
			worst = d
		}
	}
	if worst > 2 {
		t.Errorf("expf is %.2f ulp off at worst, want ≤ 2", worst)
	}
	if expf(-100) != 0 || !math.IsInf(float64(expf(100)), 1) || expf(0) != 1 {
		t.Errorf("expf(-100)=%v expf(100)=%v expf(0)=%v", expf(-100), expf(100), expf(0))
	}
}

// TestExpKernels runs every kernel set's exp over lengths around the vector
// widths (with guard values past the end that must stay untouched), against
// expf within an ulp, and checks the special values: 0 below −87.34, +Inf
// above 88.73 and for +Inf, 0 for −Inf, NaN for NaN.
func TestExpKernels(t *testing.T) {
	special := []float32{0, -87.33654, -87.34, -100, -1e30, float32(math.Inf(-1)), 88.7, 88.72283, 88.73, 100, 1e30,
		float32(math.Inf(1)), float32(math.NaN()), -1e-30, 1e-30, -0.5, 0.5, -87, 88}
	for _, ks := range kernelSets {
		for n := 0; n <= 40; n++ {
			x := make([]float32, n+3)
			for i := range n {
				x[i] = -88 + 176*float32(i*7919%97)/97 + float32(n)*0.0013
			}
			copy(x, special[:min(n, len(special))])
			guard := []float32{1, 2, 3}
			copy(x[n:], guard)
			in := append([]float32(nil), x...)
			ks.exp(x[:n])
			for i := range n {
				want := expf(in[i])
				got := x[i]
				if math.IsNaN(float64(want)) {
					if !math.IsNaN(float64(got)) {
						t.Fatalf("%s n=%d: exp(%v) = %v, want NaN", ks.name, n, in[i], got)
					}
					continue
				}
				if want == got {
					continue
				}
				ulp := float64(math.Nextafter32(want, float32(math.Inf(1))) - want)
				if math.IsInf(float64(want), 0) || math.Abs(float64(got-want)) > ulp {
					t.Fatalf("%s n=%d: exp(%v) = %v, want %v (expf)", ks.name, n, in[i], got, want)
				}
			}
			for i, g := range guard {
				if x[n+i] != g {
					t.Fatalf("%s n=%d: wrote past the end", ks.name, n)
				}
			}
		}
	}
}
