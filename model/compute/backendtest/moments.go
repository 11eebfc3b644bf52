package backendtest

import (
	"math"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// momentsRows checks compute.Rows' MomentsRows on host and device
// tensors, bit for bit against the mean and deviation summed in float64
// over the listed rows in their order (a row listed twice, out of
// order), on rows of values across ten orders of magnitude, ±0 and
// equal columns, and lengths within one of compute.MomentBlock's blocks
// and across several.
func momentsRows(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	const k = 9
	list := []int32{8, 2, 0, 6, 0, 5, 7}
	for _, n := range []int{1, 5, 300, 2*compute.MomentBlock + 333} {
		x := make([]float32, k*n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(11)-5)))
		}
		x[0], x[n] = float32(math.Copysign(0, -1)), 0 // −0 and 0
		for _, r := range list {
			x[int(r)*n+n-1] = 3.25 // a column of one value: deviation 0
		}
		want := make([]float64, 2*n)
		for j := range n {
			var m, d float64
			for _, r := range list {
				m += float64(x[int(r)*n+j])
			}
			m /= float64(len(list))
			for _, r := range list {
				e := float64(x[int(r)*n+j]) - m
				d += float64(e * e)
			}
			want[j], want[n+j] = m, math.Sqrt(d/float64(len(list)))
		}
		for _, onDevice := range []bool{false, true} {
			xt := compute.Host(x)
			if onDevice {
				xt = be.Load(x)
			}
			out := make([]float64, 2*n)
			be.MomentsRows(out, xt, n, list)
			if onDevice {
				be.Free(xt)
			}
			for j := range out {
				if math.Float64bits(out[j]) != math.Float64bits(want[j]) {
					what := map[bool]string{false: "mean", true: "deviation"}[j >= n]
					t.Errorf("%s: MomentsRows (device %v, rows of %d): %s of value %d = %v, want %v", name, onDevice, n, what, j%n, out[j], want[j])
					return
				}
			}
		}
	}
}
