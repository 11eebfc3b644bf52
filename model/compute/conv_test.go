package compute

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
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
// order and −0 below +0, with every kernel set this CPU runs and the
// amd64 sets on the interpreter (which fails any access past a row).
func TestMaxPool2(t *testing.T) {
	sets := slices.Clone(kernelSets)
	if runtime.GOARCH == "amd64" {
		sets = append(sets, emulatedKernels(t)...)
	}
	for _, ks := range sets {
		for _, w := range []int{9, 37, 50} {
			t.Run(fmt.Sprintf("%s/W%d", ks.name, w), func(t *testing.T) { checkMaxPool2(t, ks, w) })
		}
	}
}

func checkMaxPool2(t *testing.T, ks *kernels, w int) {
	rng := rand.New(rand.NewPCG(3, uint64(w)))
	g, err := NewWindow(3, 7, w, 2, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, g.In())
	values := []float32{-2, -1, float32(math.Copysign(0, -1)), 0, 1, 2}
	for i := range x {
		x[i] = values[rng.IntN(len(values))] // many ties, both zeros
	}
	os := g.C * g.Positions()
	out, dout := make([]float32, os), make([]float32, os)
	maxPool2(ks, g, x, out, nil)
	for i := range dout {
		dout[i] = float32(i + 1)
	}
	dx := make([]float32, g.In())
	maxPool2(ks, g, x, dout, dx)
	want := make([]float32, g.In())
	for c := range g.C {
		for oh := range g.OH {
			for ow := range g.OW {
				at := -1
				for ki := range 2 {
					for kj := range 2 {
						j := c*g.H*g.W + (2*oh+ki)*g.W + 2*ow + kj
						if at < 0 || x[j] > x[at] || x[j] == 0 && x[at] == 0 && !math.Signbit(float64(x[j])) && math.Signbit(float64(x[at])) {
							at = j
						}
					}
				}
				o := c*g.Positions() + oh*g.OW + ow
				if math.Float32bits(out[o]) != math.Float32bits(x[at]) {
					t.Fatalf("channel %d (%d,%d): %v, want %v", c, oh, ow, out[o], x[at])
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

// withIm2col makes a CPU compute every convolution by im2col.
func withIm2col() CPUOption { return func(c *CPU) { c.im2col = true } }

// TestShiftedAgainstIm2col checks the direct stride-1 convolution
// (conv_shifted.go) against im2col over kernels, paddings, channel
// counts (odd and even, below and above the kernels' blocks of 4) and
// input widths: outputs, summed and per-example gradients, input
// gradients.
func TestShiftedAgainstIm2col(t *testing.T) {
	ref := NewCPU(withIm2col(), WithThreads(2))
	shiftedAgainst(t, ref, NewCPU(WithThreads(2)), 1)
	// The x86 kernels under the emulator, which fails a read or write
	// outside the rows a kernel is lent (the shifted runs end near the
	// padded image's end): on every fourth window, since it is slow.
	for _, ks := range emulatedKernels(t) {
		shiftedAgainst(t, ref, &CPU{threads: 1, ks: ks}, 4)
	}
}

// shiftedAgainst compares direct with ref (by im2col) on every every-th
// window of the grid.
func shiftedAgainst(t *testing.T, ref, direct *CPU, every int) {
	rng := rand.New(rand.NewPCG(3, 4))
	const m = 5
	ran, seen := 0, 0
	for _, k := range []int{1, 2, 3, 5} {
		for pad := range k {
			for _, c := range []int{1, 2, 3} {
				for _, ch := range []int{1, 4, 6} {
					for _, hw := range []struct{ h, w int }{{k, k + 1}, {6, 9}, {11, 7}} {
						g, err := NewWindow(c, hw.h, hw.w, k, 1, pad)
						if err != nil || !direct.useShifted(g) {
							continue
						}
						if seen++; seen%every != 0 {
							continue
						}
						ran++
						name := fmt.Sprintf("%s: c%d %dx%d k%d p%d ch%d", direct.ks.name, c, hw.h, hw.w, k, pad, ch)
						ckk, pos := c*k*k, g.Positions()
						x, w, b := randSlice(rng, m*g.In()), randSlice(rng, ch*ckk), randSlice(rng, ch)
						dout := randSlice(rng, m*ch*pos)
						type result struct{ out, dw, db, dx, per []float32 }
						run := func(be *CPU) result {
							var r result
							r.out = make([]float32, m*ch*pos)
							cols := make([]float32, m*g.Cols())
							be.ConvForward(Host(r.out), Host(cols), Host(x), Host(w), Host(b), g, ch, m)
							r.dw, r.db, r.dx = make([]float32, ch*ckk), make([]float32, ch), make([]float32, m*g.In())
							be.ConvBackward(Host(r.dx), Host(r.dw), Host(r.db), Host(dout), Host(cols), Host(w), g, ch, m, 0)
							size := ch*ckk + ch
							r.per = make([]float32, m*size)
							be.ConvBackward(Host(nil), Host(r.per), Host(r.per[ch*ckk:]), Host(dout), Host(cols), Host(w), g, ch, m, size)
							return r
						}
						want, got := run(ref), run(direct)
						for _, v := range []struct {
							what      string
							got, want []float32
						}{{"output", got.out, want.out}, {"weight gradient", got.dw, want.dw}, {"bias gradient", got.db, want.db},
							{"input gradient", got.dx, want.dx}, {"per-example gradients", got.per, want.per}} {
							for i := range v.want {
								if d := math.Abs(float64(v.got[i] - v.want[i])); d > 1e-4*(1+math.Abs(float64(v.want[i]))) {
									t.Fatalf("%s: %s[%d] = %v, im2col gives %v", name, v.what, i, v.got[i], v.want[i])
								}
							}
						}
					}
				}
			}
		}
	}
	if ran < 50/every {
		t.Fatalf("%s: the direct path took only %d windows", direct.ks.name, ran)
	}
}
