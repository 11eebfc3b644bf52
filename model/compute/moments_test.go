package compute

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMoments: the moments summed in blocks on several goroutines are,
// bit for bit, one loop's over the vectors in order (lengths across blocks, not
// a multiple of one, and within one).
func TestMoments(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 7, MomentBlock, 2*MomentBlock + 333} {
		xs := make([][]float32, 9)
		for k := range xs {
			xs[k] = make([]float32, n)
			for i := range xs[k] {
				xs[k][i] = float32(rng.NormFloat64() * float64(1+k))
			}
		}
		mu, sd := make([]float64, n), make([]float64, n)
		Moments(mu, sd, xs, 3)
		for i := range n {
			var m, d float64
			for _, x := range xs {
				m += float64(x[i])
			}
			m /= float64(len(xs))
			for _, x := range xs {
				e := float64(x[i]) - m
				d += float64(e * e)
			}
			d = math.Sqrt(d / float64(len(xs)))
			if math.Float64bits(mu[i]) != math.Float64bits(m) || math.Float64bits(sd[i]) != math.Float64bits(d) {
				t.Fatalf("n %d, coordinate %d: mean %v, sd %v; one loop's %v, %v", n, i, mu[i], sd[i], m, d)
			}
		}
	}
}
