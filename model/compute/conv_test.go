package compute

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
				in := struct{ C, H, W int }{2, 7, 9}
				if k == 7 {
					in.C, in.H, in.W = 1, 3, 3 // a kernel wider than the input, fitting by its padding
				}
				if in.H+2*pad < k {
					continue
				}
				p, err := NewWindow(in.C, in.H, in.W, k, s, pad)
				if err != nil {
					t.Fatal(err)
				}
				oh, ow := p.OH, p.OW
				x := make([]float32, p.In())
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
				dx := make([]float32, p.In())
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
// sizes, forward and backward, ties going to the first value in row
// order.
func TestMaxPool2(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g, err := NewWindow(3, 7, 9, 2, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, g.In())
	for i := range x {
		x[i] = float32(rng.IntN(3)) // many ties
	}
	os := g.C * g.Positions()
	out, dout := make([]float32, os), make([]float32, os)
	maxPool2(g, x, out, nil)
	for i := range dout {
		dout[i] = float32(i + 1)
	}
	dx := make([]float32, g.In())
	maxPool2(g, x, dout, dx)
	want := make([]float32, g.In())
	for c := range g.C {
		for oh := range g.OH {
			for ow := range g.OW {
				best, at := float32(-1), -1
				for ki := range 2 {
					for kj := range 2 {
						j := c*g.H*g.W + (2*oh+ki)*g.W + 2*ow + kj
						if v := x[j]; v > best {
							best, at = v, j
						}
					}
				}
				o := c*g.Positions() + oh*g.OW + ow
				if out[o] != best {
					t.Fatalf("channel %d (%d,%d): %v, want %v", c, oh, ow, out[o], best)
				}
				want[at] += dout[o]
			}
		}
	}
	for i := range want {
		if dx[i] != want[i] {
			t.Fatalf("gradient at %d: %v, want %v", i, dx[i], want[i])
		}
	}
}
