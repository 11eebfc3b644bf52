package compute

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkConv times lenet5's and leaf-cnn's convolutions at batch 32,
// forward and backward (weight, bias and input gradients), on each GEMM
// path with one thread.
func BenchmarkConv(b *testing.B) {
	shapes := []struct {
		name             string
		c, h, w, k, s, p int
		ch               int
		dx               bool
	}{
		{"lenet5-conv1", 1, 28, 28, 5, 1, 2, 6, false},
		{"lenet5-conv2", 6, 14, 14, 5, 1, 0, 16, true},
		{"leaf-conv2", 32, 14, 14, 5, 1, 2, 64, true},
	}
	const m = 32
	for _, sh := range shapes {
		g, err := NewWindow(sh.c, sh.h, sh.w, sh.k, sh.s, sh.p)
		if err != nil {
			b.Fatal(err)
		}
		ckk := g.Cols() / g.Positions()
		rng := rand.New(rand.NewPCG(1, 1))
		x, w, bias := randSlice(rng, m*g.In()), randSlice(rng, sh.ch*ckk), randSlice(rng, sh.ch)
		dout := randSlice(rng, m*sh.ch*g.Positions())
		for _, p := range []struct {
			name string
			path gemmPath
		}{{"auto", pathAuto}, {"small", pathSmall}, {"packed", pathPacked}} {
			be := NewCPU(withPath(p.path), WithThreads(1))
			out, cols := make([]float32, m*sh.ch*g.Positions()), make([]float32, m*g.Cols())
			flops := 2 * float64(m*sh.ch*ckk*g.Positions())
			b.Run(fmt.Sprintf("%s/forward/%s", sh.name, p.name), func(b *testing.B) {
				for b.Loop() {
					be.ConvForward(Host(out), Host(cols), Host(x), Host(w), Host(bias), g, sh.ch, m)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
			var dx []float32
			n := 2.0
			if sh.dx {
				dx, n = make([]float32, m*g.In()), 3
			}
			dw, db := make([]float32, sh.ch*ckk), make([]float32, sh.ch)
			b.Run(fmt.Sprintf("%s/backward/%s", sh.name, p.name), func(b *testing.B) {
				for b.Loop() {
					be.ConvBackward(Host(dx), Host(dw), Host(db), Host(dout), Host(cols), Host(w), g, sh.ch, m, 0)
				}
				b.ReportMetric((n-1)*flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
