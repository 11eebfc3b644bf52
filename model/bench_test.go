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
						opt.Step(be, compute.Host(m.Params()), compute.Host(grad))
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

// BenchmarkSGDStepRows compares a fused step on a minibatch copied out of
// a dataset-sized matrix with one that reads the rows in place.
func BenchmarkSGDStepRows(b *testing.B) {
	spec := Spec{Kind: Softmax, Inputs: 784, Classes: 10}
	const N, batch = 60000, 32
	x, y := randBatch(rand.New(rand.NewPCG(1, 1)), N, spec.Inputs, spec.Classes)
	rng := rand.New(rand.NewPCG(2, 2))
	rows, yb := make([]int, batch), make([]int32, batch)
	xb := make([]float32, batch*spec.Inputs)
	for _, mode := range []string{"copy", "gather"} {
		b.Run(mode, func(b *testing.B) {
			m, _ := New(spec)
			for b.Loop() {
				for i := range rows {
					rows[i] = rng.IntN(N)
					yb[i] = y[rows[i]]
				}
				if mode == "gather" {
					m.SGDStepRows(x, rows, yb, 0.01)
					continue
				}
				for i, r := range rows {
					copy(xb[i*spec.Inputs:(i+1)*spec.Inputs], x[r*spec.Inputs:(r+1)*spec.Inputs])
				}
				m.SGDStep(xb, yb, batch, 0.01)
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
