package backendtest

import (
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/model/compute"
)

// lossSums checks the LossSum kernels against the kernels that return
// their loss, on the same backend: the same probabilities and gradients,
// and a sum (over several calls, with a weighted sum of squares) within
// 1e-9 relative of the returned losses added up; Reset zeroes it.
func lossSums(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	s := be.NewLossSum()
	defer s.Free()
	for round := range 2 {
		var want float64
		for _, sz := range [][2]int{{1, 2}, {30, 10}, {7, 3}} {
			m, n := sz[0], sz[1]
			logits, y := logitsAndLabels(rng, m, n)
			const scale = 0.25
			probs, grad := make([]float32, m*n), make([]float32, m*n)
			l, _ := be.SoftmaxCrossEntropy(compute.Host(probs), compute.Host(grad), compute.Host(slices.Clone(logits)), y, m, n, scale)
			sp, sg := make([]float32, m*n), make([]float32, m*n)
			be.SoftmaxCrossEntropySum(s, compute.Host(sp), compute.Host(sg), compute.Host(slices.Clone(logits)), y, m, n, scale)
			hg, shg := make([]float32, m*n), make([]float32, m*n)
			h, _ := be.HingeOneVsRest(compute.Host(hg), compute.Host(logits), y, m, n, scale)
			be.HingeOneVsRestSum(s, compute.Host(shg), compute.Host(logits), y, m, n, scale)
			if !slices.Equal(sp, probs) || !slices.Equal(sg, grad) || !slices.Equal(shg, hg) {
				t.Errorf("%s: the LossSum kernels %v differ from the returning ones in probabilities or gradients", name, sz)
				return
			}
			x := randSlice(rng, m*n+5)
			w := 0.5 * float64(m)
			be.AddSumSquares(s, w, compute.Host(x))
			want += l + h + w*be.SumSquares(compute.Host(x))
		}
		if got := s.Read(); !near(got, want, 1e-9*max(1, want)) {
			t.Errorf("%s: LossSum round %d = %v, want %v (the returned losses added up)", name, round, got, want)
			return
		}
		s.Reset()
		if got := s.Read(); got != 0 {
			t.Errorf("%s: LossSum after Reset = %v, want 0", name, got)
			return
		}
	}
}
