package backendtest

import (
	"math"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// TrainSteps trains every model kind (softmax, linear SVM, MLP) with every
// optimizer that applies (SGD, SGD with momentum, Adam, Pegasos; the fused
// SGD step, plain and through row indices; DP-SGD's clipped gradient sum)
// for a few minibatches on be and on the pure-Go CPU backend, from the same
// start on the same data, and wants the same parameters within 1e-4 of the
// reference's largest.
func TrainSteps(t T, be compute.Backend) {
	t.Helper()
	ref := compute.NewCPU(compute.WithPureGo(), compute.WithThreads(1))
	const d, classes, n, batch = 784, 10, 96, 32
	rng := rand.New(rand.NewPCG(21, 22))
	x := randSlice(rng, n*d)
	y := make([]int32, n)
	for i := range y {
		y[i] = int32(rng.IntN(classes))
	}
	specs := []model.Spec{{Kind: model.Softmax, Inputs: d, Classes: classes}, {Kind: model.SVM, Inputs: d, Classes: classes, Lambda: 0.01},
		{Kind: model.MLP, Inputs: d, Hidden: []int{32}, Classes: classes}}
	for _, spec := range specs {
		opts := []model.OptimizerConfig{{Name: "sgd", LR: 0.1}, {Name: "sgd", LR: 0.05, Momentum: 0.9, WeightDecay: 1e-3}, {Name: "adam", LR: 0.001}, {Name: "fused"}, {Name: "rows"}, {Name: "dp"}}
		if spec.Kind == model.SVM {
			opts = append(opts, model.OptimizerConfig{Name: "pegasos", Lambda: spec.Lambda})
		}
		for _, oc := range opts {
			run := func(b compute.Backend) []float32 {
				m, err := model.New(spec, model.WithSeed(3), model.WithBackend(b))
				if err != nil {
					t.Errorf("%v: %v", spec, err)
					return nil
				}
				var opt model.Optimizer
				switch oc.Name {
				case "fused", "rows", "dp":
				default:
					if opt, err = model.NewOptimizer(oc); err != nil {
						t.Errorf("%v: %v", oc, err)
						return nil
					}
				}
				grad := make([]float32, m.NumParams())
				for lo := 0; lo < n; lo += batch {
					xb, yb := x[lo*d:(lo+batch)*d], y[lo:lo+batch]
					switch oc.Name {
					case "fused":
						m.SGDStep(xb, yb, batch, 0.1)
					case "rows":
						rows := make([]int, batch)
						for i := range rows {
							rows[i] = (lo + 7*i) % n
						}
						m.SGDStepRows(x, rows, y, 0.1)
					case "dp":
						m.ClippedGradientSum(grad, xb, yb, batch, 0.5)
						b.Axpby(m.ParamTensor(), -0.1/batch, compute.Host(grad), 1)
					default:
						m.Gradient(grad, xb, yb, batch)
						opt.Step(b, m.ParamTensor(), compute.Host(grad))
					}
				}
				return m.CopyParams()
			}
			got, want := run(be), run(ref)
			if got == nil || want == nil {
				return
			}
			var big float64
			for _, w := range want {
				big = max(big, math.Abs(float64(w)))
			}
			for i := range want {
				if math.Abs(float64(got[i]-want[i])) > 1e-4*max(big, 1e-3) {
					t.Errorf("%s: %v with %s: parameter %d = %v, pure Go %v", be.Name(), spec, oc.Name, i, got[i], want[i])
					break
				}
			}
		}
	}
}
