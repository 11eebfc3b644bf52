package backendtest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// trainData is n random examples of d features in [−1, 1) with labels
// of classes, and a spec of each model kind for them.
func trainData(rng *rand.Rand, n, d, classes int) ([]float32, []int32, []model.Spec) {
	x := randSlice(rng, n*d)
	y := make([]int32, n)
	for i := range y {
		y[i] = int32(rng.IntN(classes))
	}
	specs := []model.Spec{{Kind: model.Softmax, Inputs: d, Classes: classes}, {Kind: model.SVM, Inputs: d, Classes: classes, Lambda: 0.01},
		{Kind: model.MLP, Inputs: d, Hidden: []int{32}, Classes: classes}}
	return x, y, specs
}

// netSpec is a small convolutional network over 784 features as 1×28×28
// images with every layer kind, for TrainSteps.
func netSpec(d, classes int) model.Spec {
	return model.Spec{Kind: model.Net, Inputs: d, Classes: classes, Shape: []int{1, 28, 28},
		Layers: "conv:4:5:2:2,gelu,maxpool:2,groupnorm:2,conv:6:3,relu,avgpool:2,flatten,dropout:0.2,dense:16,tanh,layernorm,dense"}
}

// TrainSteps trains every model kind (softmax, linear SVM, MLP, a
// convolutional network with every layer kind) with every
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
	x, y, specs := trainData(rng, n, d, classes)
	for _, spec := range append(specs, netSpec(d, classes)) {
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
			if i := Mismatch(got, want, 1e-4); i >= 0 {
				t.Errorf("%s: %v with %s: parameter %d = %v, pure Go %v", be.Name(), spec, oc.Name, i, got[i], want[i])
			}
		}
	}
}

// StackSteps trains five models of every kind side by side in a
// model.Stack on be (with room for eight) for three steps, each model on
// its own rows at its own learning rate (Pegasos' 1/(λ·t) for the SVM,
// from different ages), and each alone with Model.SGDStepRows on the
// pure-Go CPU backend. It wants the same parameters within 1e-4 of the
// reference's largest, each step's losses within 1e-5 relative, and the
// slots past the five untouched. Then Stack.GradRows: each model's
// gradient on new rows within 1e-4 of the largest of Model.Gradient's
// alone, the loss within 1e-5 relative, and the parameters unchanged;
// Stack.GradRowsFactors: each model's sufficient factors (U, V) within
// 1e-4 of the largest of Model.GradientWithFactors' alone.
func StackSteps(t T, be compute.Backend) {
	t.Helper()
	ref := compute.NewCPU(compute.WithPureGo(), compute.WithThreads(1))
	const d, classes, n, batch, k, slots = 784, 10, 96, 6, 5, 8
	rng := rand.New(rand.NewPCG(23, 24))
	x, y, specs := trainData(rng, n, d, classes)
	for _, spec := range specs {
		models := make([]*model.Model, k)
		start := make([][]float32, k)
		for i := range models {
			m, err := model.New(spec, model.WithSeed(uint64(40+i)), model.WithBackend(ref))
			if err != nil {
				t.Errorf("%v: %v", spec, err)
				return
			}
			if spec.Kind == model.SVM { // not at zero, so that the shrinkage counts
				p := randSlice(rng, m.NumParams())
				if err := m.SetParams(p); err != nil {
					t.Errorf("%v: %v", spec, err)
					return
				}
			}
			models[i], start[i] = m, m.CopyParams()
		}
		st, err := model.NewStack(spec, slots, model.WithBackend(be))
		if err != nil {
			t.Errorf("%v: %v", spec, err)
			return
		}
		if err := st.Load(start); err != nil {
			t.Errorf("%v: %v", spec, err)
			return
		}
		xt := be.Load(x)
		rows, labels := make([]int, k*batch), make([]int32, k*batch)
		lr, loss := make([]float32, k), make([]float64, k)
		for step := range 3 {
			for i := range rows {
				rows[i] = rng.IntN(n)
				labels[i] = y[rows[i]]
			}
			for i := range lr {
				lr[i] = float32(0.05 * float64(i+1))
				if spec.Kind == model.SVM {
					lr[i] = float32(1 / (spec.Lambda * float64(10*i+step+1)))
				}
			}
			st.StepRows(xt, rows, labels, batch, lr, loss)
			for i, m := range models {
				want := m.SGDStepRows(x, rows[i*batch:(i+1)*batch], labels[i*batch:(i+1)*batch], lr[i])
				if math.Abs(loss[i]-want) > 1e-5*max(1, math.Abs(want)) {
					t.Errorf("%s: stacked %v, step %d: model %d loss %v, alone on pure Go %v", be.Name(), spec, step, i, loss[i], want)
				}
			}
		}
		got := make([][]float32, slots)
		for i := range got {
			got[i] = make([]float32, st.NumParams())
		}
		st.Store(got)
		for i, m := range models {
			want := m.CopyParams()
			if j := Mismatch(got[i], want, 1e-4); j >= 0 {
				t.Errorf("%s: stacked %v: model %d parameter %d = %v, alone on pure Go %v", be.Name(), spec, i, j, got[i][j], want[j])
			}
		}
		for i := k; i < slots; i++ {
			for j, v := range got[i] {
				if v != 0 {
					t.Errorf("%s: stacked %v: slot %d (unused) parameter %d = %v, want 0", be.Name(), spec, i, j, v)
					break
				}
			}
		}
		stackGradients(t, be, st, models, xt, x, y, rng)
		stackDP(t, be, st, models, xt, x, y, rng)
		stackTally(t, be, st, models, xt, x, y)
		be.Free(xt)
		st.Close()
	}
}

// stackTally checks Stack.TallyRows (the models measured side by side
// on the same examples, in two calls) against each model's
// Model.TallyWith alone on the pure-Go backend: the loss within 1e-5
// relative, the correct predictions within one (a near tie that
// rounding tips).
func stackTally(t T, be compute.Backend, st *model.Stack, models []*model.Model, xt compute.Tensor, x []float32, y []int32) {
	t.Helper()
	params := make([][]float32, len(models))
	for i, m := range models {
		params[i] = m.CopyParams()
	}
	if err := st.Load(params); err != nil {
		t.Errorf("%s: %v", be.Name(), err)
		return
	}
	n, half, d := len(y), len(y)/2, st.Spec().Inputs
	loss, correct := make([]float64, len(models)), make([]int, len(models))
	st.TallyRows(xt, y, half, loss, correct)
	st.TallyRows(xt.Slice(half*d, n*d), y[half:], n-half, loss, correct)
	for i, m := range models {
		var want model.Tally
		m.TallyWith(&want, params[i], x, y, n)
		if math.Abs(loss[i]-want.Loss) > 1e-5*max(1, math.Abs(want.Loss)) || correct[i] < want.Correct-1 || correct[i] > want.Correct+1 {
			t.Errorf("%s: stacked %v: model %d measured side by side: loss %v, %d correct; alone on pure Go %v, %d", be.Name(), st.Spec(), i, loss[i], correct[i], want.Loss, want.Correct)
		}
	}
}

// stackGradients checks Stack.GradRows on the models the stack holds
// against each model's Model.Gradient alone (on the pure-Go backend).
func stackGradients(t T, be compute.Backend, st *model.Stack, models []*model.Model, xt compute.Tensor, x []float32, y []int32, rng *rand.Rand) {
	t.Helper()
	const batch = 7
	spec, k, d, P := st.Spec(), len(models), st.Spec().Inputs, st.NumParams()
	before := make([][]float32, k)
	for i := range before {
		before[i] = make([]float32, P)
	}
	st.Store(before)
	rows, labels := make([]int, k*batch), make([]int32, k*batch)
	for i := range rows {
		rows[i] = rng.IntN(len(y))
		labels[i] = y[rows[i]]
	}
	grads, loss := make([][]float32, k), make([]float64, k)
	for i := range grads {
		grads[i] = make([]float32, P)
	}
	st.GradRows(xt, rows, labels, batch, grads, loss)
	xb := make([]float32, batch*d)
	want := make([]float32, P)
	for i, m := range models {
		for r, row := range rows[i*batch : (i+1)*batch] {
			copy(xb[r*d:(r+1)*d], x[row*d:(row+1)*d])
		}
		wl := m.Gradient(want, xb, labels[i*batch:(i+1)*batch], batch)
		if math.Abs(loss[i]-wl) > 1e-5*max(1, math.Abs(wl)) {
			t.Errorf("%s: stacked %v: model %d gradient's loss %v, alone on pure Go %v", be.Name(), spec, i, loss[i], wl)
		}
		if j := Mismatch(grads[i], want, 1e-4); j >= 0 {
			t.Errorf("%s: stacked %v: model %d gradient %d = %v, alone on pure Go %v", be.Name(), spec, i, j, grads[i][j], want[j])
		}
	}
	// The sufficient factors of every weight, from a pass over the same
	// rows: each model's as GradientWithFactors gives them alone.
	all, _ := models[0].SufficientFactors(xb, labels[:batch], batch)
	var names []string
	for _, f := range all {
		names = append(names, f.Weight)
	}
	fs := st.GradRowsFactors(xt, rows, labels, batch, grads, loss, names)
	for i, m := range models {
		for r, row := range rows[i*batch : (i+1)*batch] {
			copy(xb[r*d:(r+1)*d], x[row*d:(row+1)*d])
		}
		wf, _ := m.GradientWithFactors(want, xb, labels[i*batch:(i+1)*batch], batch, names)
		if len(fs[i]) != len(wf) {
			t.Errorf("%s: stacked %v: model %d has %d factors, alone %d", be.Name(), spec, i, len(fs[i]), len(wf))
			continue
		}
		for l, f := range fs[i] {
			w := wf[l]
			if f.Weight != w.Weight || f.K != w.K || f.J != w.J || f.D != w.D || Mismatch(f.U, w.U, 1e-4) >= 0 || Mismatch(f.V, w.V, 1e-4) >= 0 {
				t.Errorf("%s: stacked %v: model %d factors of %s (%d×%d×%d) differ from alone (%s, %d×%d×%d)", be.Name(), spec, i, f.Weight, f.K, f.J, f.D, w.Weight, w.K, w.J, w.D)
			}
		}
	}
	after := make([][]float32, k)
	for i := range after {
		after[i] = make([]float32, P)
	}
	st.Store(after)
	for i := range after {
		if !slices.Equal(after[i], before[i]) {
			t.Errorf("%s: stacked %v: GradRows changed model %d", be.Name(), spec, i)
		}
	}
}
