package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gossipd/gossipd/model/compute"
)

// BenchmarkTrainStep measures one minibatch step (forward, backward,
// SGD update) of the reference models on both GEMM kernels, in
// samples per second.
func BenchmarkTrainStep(b *testing.B) {
	for _, spec := range []Spec{
		{Kind: Softmax, Inputs: 784, Classes: 10},
		{Kind: MLP, Inputs: 784, Hidden: []int{128}, Classes: 10},
	} {
		for _, kernel := range []string{"default", "purego"} {
			for _, batch := range []int{32, 128} {
				b.Run(fmt.Sprintf("%s/%s/batch=%d", spec, kernel, batch), func(b *testing.B) {
					be := compute.NewCPU()
					if kernel == "purego" {
						be = compute.NewCPU(compute.WithPureGo())
					}
					m, _ := New(spec, WithBackend(be))
					opt, _ := NewOptimizer(OptimizerConfig{LR: 0.01})
					x, y := randBatch(rand.New(rand.NewPCG(1, 1)), batch, spec.Inputs, spec.Classes)
					grad := make([]float32, m.NumParams())
					for b.Loop() {
						m.Gradient(grad, x, y, batch)
						opt.Step(m.Params(), grad)
					}
					b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "samples/s")
				})
			}
		}
	}
}

func BenchmarkPerExampleGradients(b *testing.B) {
	spec := Spec{Kind: Softmax, Inputs: 784, Classes: 10}
	m, _ := New(spec)
	n := 32
	x, y := randBatch(rand.New(rand.NewPCG(1, 1)), n, spec.Inputs, spec.Classes)
	grads := make([]float32, n*m.NumParams())
	for b.Loop() {
		m.PerExampleGradients(grads, x, y, n)
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "samples/s")
}
