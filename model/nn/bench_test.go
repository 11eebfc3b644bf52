package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/gossipd/gossipd/model/compute"
)

// BenchmarkStep times one training pass (forward, backward) of each
// preset on a minibatch of 32 Fashion-MNIST-sized images.
func BenchmarkStep(b *testing.B) {
	for _, name := range PresetNames() {
		b.Run(name, func(b *testing.B) {
			spec, _ := Parse(name)
			n, err := Build(spec, Shape{1, 28, 28}, 10, nil)
			if err != nil {
				b.Fatal(err)
			}
			p := make([]float32, n.NumParams())
			n.Init(p, rand.New(rand.NewPCG(1, 2)))
			xs, y := inputsFor(n, 32)
			params, x, grad := compute.Host(p), compute.Host(xs), compute.Host(make([]float32, n.NumParams()))
			b.ResetTimer()
			for b.Loop() {
				n.Loss(grad, params, x, y, 32, 1.0/32, nil)
			}
			b.ReportMetric(float64(32*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
