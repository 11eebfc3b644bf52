package nn

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/model/compute"
)

// TestReLUPoolFused: a ReLU followed by a max pool, run as one (the pool
// applies the ReLU to its output), gives bit for bit the losses,
// gradients and per-example gradients of the two layers run in turn, on
// inputs with many ties and zeros (which decide where a window's gradient
// goes), on every kernel set.
func TestReLUPoolFused(t *testing.T) {
	for _, kernel := range kernels() {
		for _, text := range []string{"lenet5", "conv:4:3:1:1,relu,maxpool:2,conv:3:3,relu,maxpool:3:2,flatten,dense:8,relu,dense", "relu,maxpool:2,flatten,dense"} {
			spec, err := Parse(text)
			if err != nil {
				t.Fatal(err)
			}
			in := Shape{1, 28, 28}
			run := func(fuse bool) (loss float64, correct int, grad, per []float32) {
				fuseReLUPool = fuse
				defer func() { fuseReLUPool = true }()
				be := compute.NewCPU(compute.WithKernel(kernel))
				n, err := Build(spec, in, 10, be)
				if err != nil {
					t.Fatal(err)
				}
				fused := 0
				for _, l := range n.layers {
					if _, ok := l.(*pooledReLU); ok {
						fused++
					}
				}
				if (fused > 0) != fuse {
					t.Fatalf("%s: %d ReLUs fused with fusion %v", text, fused, fuse)
				}
				rng := rand.New(rand.NewPCG(3, 4))
				params := make([]float32, n.NumParams())
				n.Init(params, rng)
				const m = 5
				x := make([]float32, m*in.Size())
				for i := range x {
					x[i] = float32(rng.IntN(5)-2) / 2 // −1…1 in halves: ties and zeros
				}
				y := make([]int32, m)
				for i := range y {
					y[i] = int32(rng.IntN(10))
				}
				grad = make([]float32, n.NumParams())
				loss, correct = n.Loss(compute.Host(grad), compute.Host(params), compute.Host(x), y, m, 1, nil)
				per = make([]float32, m*n.NumParams())
				n.PerExampleGradients(compute.Host(per), compute.Host(params), compute.Host(x), y, m)
				return loss, correct, grad, per
			}
			l1, c1, g1, p1 := run(false)
			l2, c2, g2, p2 := run(true)
			if l1 != l2 || c1 != c2 || !slices.Equal(g1, g2) || !slices.Equal(p1, p2) {
				t.Errorf("%s on %s: fused loss %v (%d right), layers in turn %v (%d); gradients equal: %v, per example: %v",
					text, kernel, l2, c2, l1, c1, slices.Equal(g1, g2), slices.Equal(p1, p2))
			}
		}
	}
}
