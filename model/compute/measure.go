package compute

import (
	"time"

	"gonum.org/v1/gonum/blas"
	gonumblas "gonum.org/v1/gonum/blas/gonum"
)

// GEMMRate is the measured speed of C = A·B for one size, in GFLOP/s.
type GEMMRate struct {
	M, K, N int
	// Fast is this backend's kernel, PureGo its portable Go kernel and
	// Gonum gonum's pure-Go Sgemm, all with the same threads.
	Fast, PureGo, Gonum float64
	// Backend names the fast backend.
	Backend string
}

// MeasureGEMM times float32 GEMM at sizes (m, k, n), each kernel for at
// least minTime, and returns the rates (for `gossipd bench`; benchmarks
// in tests use testing.B).
func MeasureGEMM(threads int, minTime time.Duration, sizes [][3]int) []GEMMRate {
	fast := NewCPU(WithThreads(threads))
	slow := NewCPU(WithThreads(threads), WithPureGo())
	var out []GEMMRate
	for _, sz := range sizes {
		m, k, n := sz[0], sz[1], sz[2]
		a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
		for i := range a {
			a[i] = float32(i%7) - 3
		}
		for i := range b {
			b[i] = float32(i%5) - 2
		}
		flops := 2 * float64(m*n*k)
		var impl gonumblas.Implementation
		out = append(out, GEMMRate{M: m, K: k, N: n, Backend: fast.Name(),
			Fast:   gflops(flops, minTime, func() { fast.Gemm(false, false, m, n, k, 1, Host(a), k, Host(b), n, 0, Host(c), n) }),
			PureGo: gflops(flops, minTime, func() { slow.Gemm(false, false, m, n, k, 1, Host(a), k, Host(b), n, 0, Host(c), n) }),
			Gonum:  gflops(flops, minTime, func() { impl.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 0, c, n) }),
		})
	}
	return out
}

// gflops runs f until minTime has passed (at least 3 times, after one
// warm-up) and returns the rate.
func gflops(flops float64, minTime time.Duration, f func()) float64 {
	f()
	n := 0
	start := time.Now()
	for time.Since(start) < minTime || n < 3 {
		f()
		n++
	}
	return flops * float64(n) / time.Since(start).Seconds() / 1e9
}
