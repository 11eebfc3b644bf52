package backendtest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// stackDP checks DP-SGD in a stack against each model alone (on the
// pure-Go backend): Stack.ClippedGradRows over shares of which only the
// first counts[i] rows count (none for one model, all for another; the
// padding rows are real rows, which would add to the sum if they
// counted) against Model.ClippedGradientSum over those rows, at a clip
// that clips some examples and not others; then AddRegGrads against
// AddRegGradient, and StepGrads against the update a DP-SGD trainer
// takes of one model.
func stackDP(t T, be compute.Backend, st *model.Stack, models []*model.Model, xt compute.Tensor, x []float32, y []int32, rng *rand.Rand) {
	t.Helper()
	const batch = 7
	spec, k, d, P := st.Spec(), len(models), st.Spec().Inputs, st.NumParams()
	counts := []int{5, 0, 7, 2, 3, 7, 1}[:k]
	rows, labels := make([]int, k*batch), make([]int32, k*batch)
	for i := range rows {
		rows[i] = rng.IntN(len(y))
		labels[i] = y[rows[i]]
	}
	xb := make([]float32, batch*d)
	gather := func(i int) {
		for r, row := range rows[i*batch : i*batch+counts[i]] {
			copy(xb[r*d:(r+1)*d], x[row*d:(row+1)*d])
		}
	}
	// A clip between the smallest and the largest per-example norm (of
	// the data's gradient: each row's sum, unclipped).
	one := make([]float32, P)
	var norms []float64
	for i, m := range models {
		gather(i)
		for r := range counts[i] {
			m.ClippedGradientSum(one, xb[r*d:(r+1)*d], labels[i*batch+r:], 1, math.Inf(1))
			var ss float64
			for _, v := range one {
				ss += float64(v) * float64(v)
			}
			norms = append(norms, math.Sqrt(ss))
		}
	}
	slices.Sort(norms)
	mid := len(norms) / 2
	clip := (norms[mid-1] + norms[mid]) / 2 // no example on the edge

	grads := make([][]float32, k)
	for i := range grads {
		grads[i] = randSlice(rng, P) // overwritten
	}
	clipped := st.ClippedGradRows(xt, rows, labels, batch, counts, clip, grads)
	want := make([]float32, P)
	wantClipped := 0
	for i, m := range models {
		clear(want)
		if counts[i] > 0 {
			gather(i)
			wantClipped += m.ClippedGradientSum(want, xb, labels[i*batch:], counts[i], clip)
		}
		if j := Mismatch(grads[i], want, 1e-4); j >= 0 {
			t.Errorf("%s: stacked %v: model %d's clipped gradient sum over %d of %d rows: %d = %v, alone on pure Go %v", be.Name(), spec, i, counts[i], batch, j, grads[i][j], want[j])
		}
	}
	if clipped != wantClipped || clipped == 0 || clipped == len(norms) {
		t.Errorf("%s: stacked %v: %d of %d examples clipped, alone %d", be.Name(), spec, clipped, len(norms), wantClipped)
	}

	// The noisy gradients a trainer would make of them, its regulariser
	// and its step.
	for _, g := range grads {
		for j := range g {
			g[j] += float32(rng.NormFloat64())
		}
	}
	withReg := make([][]float32, k)
	for i, g := range grads {
		withReg[i] = slices.Clone(g)
	}
	st.AddRegGrads(withReg)
	lr := make([]float32, k)
	for i, m := range models {
		lr[i] = float32(0.01 * float64(i+1))
		w := slices.Clone(grads[i])
		m.AddRegGradient(w)
		if j := Mismatch(withReg[i], w, 1e-5); j >= 0 {
			t.Errorf("%s: stacked %v: model %d's regularised gradient %d = %v, alone on pure Go %v", be.Name(), spec, i, j, withReg[i][j], w[j])
		}
		m.Backend().Axpby(m.ParamTensor(), -lr[i], compute.Host(w), 1)
	}
	st.StepGrads(grads, lr)
	got := make([][]float32, k)
	for i := range got {
		got[i] = make([]float32, P)
	}
	st.Store(got)
	for i, m := range models {
		if j := Mismatch(got[i], m.CopyParams(), 1e-5); j >= 0 {
			t.Errorf("%s: stacked %v: model %d after StepGrads: parameter %d = %v, alone on pure Go %v", be.Name(), spec, i, j, got[i][j], m.CopyParams()[j])
		}
	}
}
