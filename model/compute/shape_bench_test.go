package compute

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkTrainShapes times the GEMMs of a training step at batch 32
// (softmax 784→10 and the MLP 784→128→10) on each path and kernel set.
func BenchmarkTrainShapes(b *testing.B) {
	shapes := []struct {
		name    string
		tA, tB  bool
		m, n, k int
	}{
		{"fwd32x10x784", false, true, 32, 10, 784},
		{"gradW10x784x32", true, false, 10, 784, 32},
		{"fwd32x128x784", false, true, 32, 128, 784},
		{"gradW128x784x32", true, false, 128, 784, 32},
		{"back32x128x10", false, false, 32, 128, 10},
		{"eval512x10x784", false, true, 512, 10, 784},
		{"eval512x128x784", false, true, 512, 128, 784},
		{"big256x256x784", false, false, 256, 256, 784},
	}
	for _, sh := range shapes {
		for _, kn := range Kernels() {
			for _, p := range []struct {
				name string
				path gemmPath
				th   int
			}{{"small", pathSmall, 1}, {"packed1", pathPacked, 1}, {"packed2", pathPacked, 2}} {
				b.Run(fmt.Sprintf("%s/%s/%s", sh.name, kn, p.name), func(b *testing.B) {
					rng := rand.New(rand.NewPCG(1, 1))
					a, bb, c := randSlice(rng, sh.m*sh.k), randSlice(rng, sh.k*sh.n), make([]float32, sh.m*sh.n)
					lda, ldb := sh.k, sh.n
					if sh.tA {
						lda = sh.m
					}
					if sh.tB {
						ldb = sh.k
					}
					be := NewCPU(WithKernel(kn), withPath(p.path), WithThreads(p.th))
					for b.Loop() {
						be.Gemm(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, Host(a), lda, Host(bb), ldb, 0, Host(c), sh.n)
					}
					b.ReportMetric(2*float64(sh.m*sh.n*sh.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
