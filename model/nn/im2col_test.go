package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestIm2colAgainstNaive checks the unrolling against its definition,
// and col2im as its adjoint (⟨im2col(x), c⟩ = ⟨x, col2im(c)⟩), over
// kernels, strides and paddings beyond the PyTorch vectors'.
func TestIm2colAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 2, 3, 5, 7} {
		for _, s := range []int{1, 2, 3} {
			for pad := range k {
				in := Shape{2, 7, 9}
				if k == 7 {
					in = Shape{1, 3, 3} // a kernel wider than the input, fitting by its padding
				}
				if in.H+2*pad < k {
					continue
				}
				oh, ow := (in.H+2*pad-k)/s+1, (in.W+2*pad-k)/s+1
				p := window{io{in, Shape{1, oh, ow}}, k, s, pad}
				x := make([]float32, in.Size())
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				col := make([]float32, in.C*k*k*oh*ow) // zeros, as im2col's contract asks
				im2col(col, x, p)
				im2col(col, x, p) // again: the same buffer, the same result
				c := make([]float32, len(col))
				for i := range c {
					c[i] = float32(rng.NormFloat64())
				}
				dot := 0.0
				r := 0
				for ch := range in.C {
					for ki := range k {
						for kj := range k {
							for y := range oh {
								for z := range ow {
									ih, iw := y*s-pad+ki, z*s-pad+kj
									want := float32(0)
									if ih >= 0 && ih < in.H && iw >= 0 && iw < in.W {
										want = x[ch*in.H*in.W+ih*in.W+iw]
									}
									got := col[r*oh*ow+y*ow+z]
									if got != want {
										t.Fatalf("k %d s %d p %d: col[%d][%d,%d] = %v, want %v", k, s, pad, r, y, z, got, want)
									}
									dot += float64(got) * float64(c[r*oh*ow+y*ow+z])
								}
							}
							r++
						}
					}
				}
				dx := make([]float32, in.Size())
				col2im(dx, c, p)
				adj := 0.0
				for i := range x {
					adj += float64(x[i]) * float64(dx[i])
				}
				if math.Abs(dot-adj) > 1e-4*(1+math.Abs(dot)) {
					t.Fatalf("k %d s %d p %d: ⟨im2col(x), c⟩ = %v, ⟨x, col2im(c)⟩ = %v", k, s, pad, dot, adj)
				}
			}
		}
	}
}

// TestMaxPool2: the 2×2 fast path agrees with the definition on odd
// sizes, ties going to the first value in row order.
func TestMaxPool2(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	in := Shape{3, 7, 9}
	p := window{io{in, Shape{3, 3, 4}}, 2, 2, 0}
	m := 2
	x := make([]float32, m*in.Size())
	for i := range x {
		x[i] = float32(rng.IntN(3)) // many ties
	}
	out, idx := make([]float32, m*p.out.Size()), make([]int32, m*p.out.Size())
	poolForward(p, true, x, out, idx, m)
	for e := range m {
		for c := range in.C {
			for oh := range 3 {
				for ow := range 4 {
					best, at := float32(-1), -1
					for ki := range 2 {
						for kj := range 2 {
							j := c*in.H*in.W + (2*oh+ki)*in.W + 2*ow + kj
							if v := x[e*in.Size()+j]; v > best {
								best, at = v, j
							}
						}
					}
					o := e*p.out.Size() + c*12 + oh*4 + ow
					if out[o] != best || int(idx[o]) != at {
						t.Fatalf("example %d channel %d (%d,%d): %v at %d, want %v at %d", e, c, oh, ow, out[o], idx[o], best, at)
					}
				}
			}
		}
	}
}
