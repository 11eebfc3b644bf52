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
