package compute

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// naiveGemm is the reference: a triple loop in float64.
func naiveGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			c[i*ldc+j] = float32(float64(alpha)*s + float64(beta)*float64(c[i*ldc+j]))
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

func withPath(p gemmPath) CPUOption { return func(c *CPU) { c.path = p } }

// backends are every kernel set this CPU runs, each on the small path and
// on the packed one with one and several threads.
func backends() map[string]*CPU {
	out := map[string]*CPU{"default/auto": NewCPU()}
	for _, k := range Kernels() {
		out[k+"/small"] = NewCPU(WithKernel(k), withPath(pathSmall))
		out[k+"/packed/1"] = NewCPU(WithKernel(k), withPath(pathPacked), WithThreads(1))
		out[k+"/packed/3"] = NewCPU(WithKernel(k), withPath(pathPacked), WithThreads(3))
	}
	return out
}

// TestGemmMatchesNaive checks every transpose combination on sizes around
// the micro-tile and block edges, with padded leading dimensions, against a
// float64 triple loop.
func TestGemmMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][3]int{{1, 1, 1}, {6, 16, 1}, {7, 17, 3}, {5, 15, 257}, {13, 33, 300}, {97, 40, 260}, {64, 64, 64}, {32, 128, 784}, {200, 10, 31}, {3, 4100, 5}, {32, 10, 784}, {10, 784, 32}, {33, 11, 17}, {2, 3, 1}, {5, 37, 9}}
	for name, be := range backends() {
		for _, sz := range sizes {
			m, n, k := sz[0], sz[1], sz[2]
			for _, tA := range []bool{false, true} {
				for _, tB := range []bool{false, true} {
					for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}} {
						alpha, beta := ab[0], ab[1]
						lda, ldb, ldc := k+3, n+1, n+2
						if tA {
							lda = m + 3
						}
						if tB {
							ldb = k + 1
						}
						rowsA := m
						if tA {
							rowsA = k
						}
						rowsB := k
						if tB {
							rowsB = n
						}
						a := randSlice(rng, rowsA*lda)
						b := randSlice(rng, rowsB*ldb)
						c := randSlice(rng, m*ldc)
						want := append([]float32(nil), c...)
						naiveGemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
						be.Gemm(tA, tB, m, n, k, alpha, Host(a), lda, Host(b), ldb, beta, Host(c), ldc)
						tol := 1e-4 * float64(k+1) * float64(max(abs32(alpha), 1))
						for i := 0; i < m; i++ {
							for j := 0; j < ldc; j++ {
								got, w := c[i*ldc+j], want[i*ldc+j]
								if j >= n {
									if got != w {
										t.Fatalf("%s %v: wrote outside C at (%d,%d)", name, sz, i, j)
									}
									continue
								}
								if math.Abs(float64(got-w)) > tol {
									t.Fatalf("%s %v tA=%v tB=%v α=%v β=%v: C[%d,%d]=%v want %v", name, sz, tA, tB, alpha, beta, i, j, got, w)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestGemmThreadCountInvariant: the thread split follows tile boundaries, so
// the result is bit-identical whatever the thread count.
func TestGemmThreadCountInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m, n, k := 100, 300, 500
	a, b := randSlice(rng, m*k), randSlice(rng, k*n)
	var ref []float32
	for _, th := range []int{1, 2, 3, 8} {
		c := make([]float32, m*n)
		NewCPU(WithThreads(th)).Gemm(false, false, m, n, k, 1, Host(a), k, Host(b), n, 0, Host(c), n)
		if ref == nil {
			ref = c
			continue
		}
		for i := range c {
			if c[i] != ref[i] {
				t.Fatalf("threads=%d: C[%d]=%v, threads=1 gave %v", th, i, c[i], ref[i])
			}
		}
	}
}

func TestGemmPanicsOnShortSlice(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a short A")
		}
	}()
	NewCPU().Gemm(false, false, 4, 4, 4, 1, Host(make([]float32, 15)), 4, Host(make([]float32, 16)), 4, 0, Host(make([]float32, 16)), 4)
}

func BenchmarkGemm(b *testing.B) {
	for _, sz := range [][3]int{{256, 784, 256}, {1024, 1024, 1024}, {32, 128, 784}} {
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%dx%dx%d/threads=%d", sz[0], sz[1], sz[2], th), func(b *testing.B) {
				m, n, k := sz[0], sz[1], sz[2]
				rng := rand.New(rand.NewPCG(1, 1))
				a, bb, c := randSlice(rng, m*k), randSlice(rng, k*n), make([]float32, m*n)
				be := NewCPU(WithThreads(th))
				b.SetBytes(0)
				for b.Loop() {
					be.Gemm(false, false, m, n, k, 1, Host(a), k, Host(bb), n, 0, Host(c), n)
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestGemmGather: reading rows through an index equals copying them out
// and multiplying, bit for bit, on every kernel set.
func TestGemmGather(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, kn := range Kernels() {
		be := NewCPU(WithKernel(kn))
		for _, sz := range [][3]int{{32, 10, 784}, {7, 3, 5}, {1, 1, 1}, {33, 17, 40}} {
			rowsN, n, k := sz[0], sz[1], sz[2]
			src := randSlice(rng, 100*k)
			rows := make([]int, rowsN)
			gathered := make([]float32, rowsN*k)
			for i := range rows {
				rows[i] = rng.IntN(100)
				copy(gathered[i*k:(i+1)*k], src[rows[i]*k:(rows[i]+1)*k])
			}
			// A[rows]·Bᵀ.
			b := randSlice(rng, n*k)
			c0 := randSlice(rng, rowsN*n)
			want, got := append([]float32(nil), c0...), append([]float32(nil), c0...)
			be.Gemm(false, true, rowsN, n, k, 0.5, Host(gathered), k, Host(b), k, 0.25, Host(want), n)
			be.GemmGatherA(n, k, 0.5, Host(src), k, rows, Host(b), k, 0.25, Host(got), n)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s %v GemmGatherA: C[%d]=%v, copied rows give %v", kn, sz, i, got[i], want[i])
				}
			}
			// Aᵀ·B[rows], with A rowsN×n and C n×k.
			a := randSlice(rng, rowsN*n)
			c1 := randSlice(rng, n*k)
			want, got = append([]float32(nil), c1...), append([]float32(nil), c1...)
			NewCPU(WithKernel(kn), withPath(pathSmall)).Gemm(true, false, n, k, rowsN, -1, Host(a), n, Host(gathered), k, 1, Host(want), k)
			be.GemmGatherB(n, k, -1, Host(a), n, Host(src), k, rows, 1, Host(got), k)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s %v GemmGatherB: C[%d]=%v, copied rows give %v", kn, sz, i, got[i], want[i])
				}
			}
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic for a row index past A")
			}
		}()
		NewCPU().GemmGatherA(1, 4, 1, Host(make([]float32, 8)), 4, []int{2}, Host(make([]float32, 4)), 4, 0, Host(make([]float32, 1)), 1)
	}()
}

// TestKernelChoice: a forced kernel set is used or refused by name.
func TestKernelChoice(t *testing.T) {
	for _, k := range Kernels() {
		if got := NewCPU(WithKernel(k)).Kernel(); got != k {
			t.Errorf("WithKernel(%q) runs %q", k, got)
		}
	}
	if err := CheckKernel("sse9"); err == nil || !strings.Contains(err.Error(), `unknown kernel "sse9"`) {
		t.Errorf("CheckKernel(sse9) = %v", err)
	}
	if got := Kernels(); got[len(got)-1] != "go" {
		t.Errorf("Kernels() = %v, want the pure-Go set last", got)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "unknown kernel") {
			t.Errorf("NewCPU(WithKernel(bogus)) recovered %v", r)
		}
	}()
	NewCPU(WithKernel("bogus"))
}

// TestSplitSmallSameBits: WithSplitSmall splits a small-path product's
// rows of C among the threads and gives the values of one thread bit for
// bit, for odd and even rows, k a multiple of 4 or not, op(A) transposed
// or not, on every kernel set; the shapes the packed path takes, and those
// with Bᵀ, are left to it.
func TestSplitSmallSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for _, ks := range kernelSets {
		one := &CPU{threads: 1, ks: ks}
		for _, sz := range [][3]int{{784, 128, 32}, {785, 130, 31}, {127, 1000, 33}, {9, 40000, 2}, {1001, 10, 32}} {
			m, n, k := sz[0], sz[1], sz[2]
			for _, transA := range []bool{false, true} {
				lda := k + 3
				rowsA := m
				if transA {
					lda, rowsA = m+1, k
				}
				a, b := randSlice(rng, rowsA*lda), randSlice(rng, k*(n+2))
				c0 := randSlice(rng, m*(n+1))
				for _, threads := range []int{2, 3, 8} {
					split := NewCPU(WithKernel(ks.name), WithThreads(threads), WithSplitSmall())
					for _, beta := range []float32{0, 1, 0.5} {
						want, got := slices.Clone(c0), slices.Clone(c0)
						one.Gemm(transA, false, m, n, k, -0.37, Host(a), lda, Host(b), n+2, beta, Host(want), n+1)
						split.Gemm(transA, false, m, n, k, -0.37, Host(a), lda, Host(b), n+2, beta, Host(got), n+1)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s %v transA=%v threads=%d beta=%v: C[%d] = %v, want %v", ks.name, sz, transA, threads, beta, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}
