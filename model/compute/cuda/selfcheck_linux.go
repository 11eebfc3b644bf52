//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"fmt"
	"math"

	"github.com/gossipd/gossipd/model/compute"
)

// SelfCheck runs a GEMM, a softmax cross-entropy and an SGD update on the
// device and compares them with the same sums on the host, so that a
// backend whose kernels or libraries misbehave (a driver that JITs the
// PTX wrongly, a mismatched cuBLAS) is refused when it opens, not found
// out by a model that will not learn. backendtest holds the full checks.
func (b *Backend) SelfCheck() error {
	const m, n, k = 7, 10, 33
	x, w := make([]float32, m*k), make([]float32, n*k)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	for i := range w {
		w[i] = float32(math.Cos(float64(3 * i)))
	}
	want := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				s += float64(x[i*k+p]) * float64(w[j*k+p])
			}
			want[i*n+j] = float32(s)
		}
	}
	xt, wt, zt := b.Load(x), b.Load(w), b.Alloc(m*n)
	defer func() { b.Free(xt); b.Free(wt); b.Free(zt) }()
	b.Gemm(false, true, m, n, k, 1, xt, k, wt, k, 0, zt, n)
	got := make([]float32, m*n)
	b.Store(got, zt)
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > 1e-4*(k+1) {
			return fmt.Errorf("cuda: self-check on %s: GEMM [%d] = %v, want %v", b.dev, i, got[i], want[i])
		}
	}
	y := make([]int32, m)
	var wantLoss float64
	for i := range m {
		y[i] = int32(i % n)
		row := want[i*n : (i+1)*n]
		mx := row[0]
		for _, v := range row {
			mx = max(mx, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(float64(v - mx))
		}
		wantLoss += math.Log(s) - float64(row[y[i]]-mx)
	}
	loss, _ := b.SoftmaxCrossEntropy(zt, compute.Tensor{}, zt, y, m, n, 0)
	if math.Abs(loss-wantLoss) > 1e-4*max(1, wantLoss) {
		return fmt.Errorf("cuda: self-check on %s: softmax cross-entropy loss %v, want %v", b.dev, loss, wantLoss)
	}
	b.SGDUpdate(wt, wt, compute.Tensor{}, 0.5, 0, 0, false) // w ← w − ½·w
	half := make([]float32, n*k)
	b.Store(half, wt)
	for i, v := range half {
		if v != w[i]-0.5*w[i] {
			return fmt.Errorf("cuda: self-check on %s: SGD update [%d] = %v, want %v", b.dev, i, v, w[i]-0.5*w[i])
		}
	}
	return nil
}
