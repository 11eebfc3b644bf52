package model

import (
	"fmt"
	"math"

	"github.com/gossipd/gossipd/model/compute"
)

// Gradient computes the mean loss over the n examples in x (n×Inputs) with
// labels y, and writes its gradient with respect to the parameters into grad
// (len NumParams). For the SVM the loss and gradient include λ/2·‖W‖².
func (m *Model) Gradient(grad, x []float32, y []int32, n int) float64 {
	if len(grad) != m.params.Len() {
		panic(fmt.Sprintf("model: gradient buffer %d, want %d", len(grad), m.params.Len()))
	}
	return m.GradientTensor(host(grad), x, y, n)
}

// GradientTensor is Gradient into a tensor of the model's backend (a
// device backend's gradient then stays on the device, for an
// Optimizer.Step on ParamTensor).
func (m *Model) GradientTensor(grad compute.Tensor, x []float32, y []int32, n int) float64 {
	return m.GradientOn(grad, host(x), y, n)
}

// GradientOn is Gradient with its inputs and its gradient as tensors of
// the model's backend: a minibatch gathered on a device (GatherRows)
// stays there.
func (m *Model) GradientOn(grad, x compute.Tensor, y []int32, n int) float64 {
	m.checkT(x, y, n)
	if grad.Len() != m.params.Len() {
		panic(fmt.Sprintf("model: gradient buffer %d, want %d", grad.Len(), m.params.Len()))
	}
	if m.net != nil {
		return m.netLoss(grad, x, y, n, 1/float32(n))
	}
	loss, _ := m.backward(x, y, n, 1/float32(n))
	m.weightGrads(grad, x, n)
	m.addRegGrad(grad)
	return m.stepLoss(loss, n)
}

// weightGrads writes every layer's weight and bias gradient, from the
// errors backward left in ws.dz, into grad.
func (m *Model) weightGrads(grad, x compute.Tensor, n int) {
	be := m.backend
	for l, ly := range m.layers {
		dz := m.ws.dz[l].Slice(0, n*ly.out)
		be.Gemm(true, false, ly.out, ly.in, n, 1, dz, ly.out, m.input(x, l), ly.in, 0, grad.Slice(ly.wOff, ly.bOff), ly.in)
		be.ColumnSums(grad.Slice(ly.bOff, ly.bOff+ly.out), dz, n, ly.out)
	}
}

// addRegGrad adds the SVM's λ·W (weights and bias) to grad.
func (m *Model) addRegGrad(grad compute.Tensor) {
	if m.spec.Kind != SVM {
		return
	}
	m.backend.Axpby(grad.Slice(0, m.params.Len()), float32(m.spec.Lambda), m.params, 1)
}

// PerExampleGradients writes the gradient of each example's loss into the
// rows of grads (n × NumParams): row i is ∇ℓ(x_i, y_i) (plus λW for the SVM),
// so the rows average to Gradient's result. DP-SGD clips these rows.
func (m *Model) PerExampleGradients(grads, x []float32, y []int32, n int) {
	m.PerExampleGradientsOn(host(grads), host(x), y, n)
}

// PerExampleGradientsOn is PerExampleGradients on tensors of the model's
// backend. For a fully connected layer example i's weight gradient is the
// outer product u_i·v_iᵀ of its error and its input, and its bias
// gradient u_i: one strided-batched GEMM each over the n examples
// (compute.Batched), and one more adds the SVM's λW to every row.
func (m *Model) PerExampleGradientsOn(grads, x compute.Tensor, y []int32, n int) {
	m.checkT(x, y, n)
	P := m.params.Len()
	if grads.Len() < n*P {
		panic(fmt.Sprintf("model: per-example buffer %d, want %d×%d", grads.Len(), n, P))
	}
	if n == 0 {
		return
	}
	if m.net != nil {
		m.net.PerExampleGradients(grads, m.params, x, y, n)
		return
	}
	m.backward(x, y, n, 1)
	be := m.backend
	if m.ws.one.Len() == 0 {
		m.ws.one = be.Load([]float32{1})
	}
	for l, ly := range m.layers {
		u := m.ws.dz[l].Slice(0, n*ly.out)
		be.GemmStrided(false, false, ly.out, ly.in, 1, 1, u, 1, ly.out, m.input(x, l), ly.in, ly.in, 0, grads.Slice(ly.wOff, grads.Len()), ly.in, P, n)
		be.GemmStrided(false, false, 1, ly.out, 1, 1, m.ws.one, 1, 0, u, ly.out, ly.out, 0, grads.Slice(ly.bOff, grads.Len()), ly.out, P, n)
	}
	if m.spec.Kind == SVM {
		be.GemmStrided(false, false, 1, P, 1, float32(m.spec.Lambda), m.ws.one, 1, 0, m.params, P, 0, 1, grads, P, P, n)
	}
}

// ClippedGradientSum writes Σ_i clip(∇ℓ_i, C) into grad: each example's
// data-loss gradient scaled to L2 norm at most C, then summed — DP-SGD's
// clipping — without materialising per-example gradients. For a fully
// connected layer ∇_W ℓ_i = u_i·v_iᵀ and ∇_b ℓ_i = u_i (u the error at its
// output, v its input), so ‖∇ℓ_i‖² = Σ_l ‖u_il‖²·(‖v_il‖² + 1); scaling
// example i's errors by min(1, C/‖∇ℓ_i‖) and taking the usual gradient
// products gives the clipped sum at the cost of one backward pass. The
// SVM's regulariser is not included (it is data-independent; see
// AddRegGradient). It returns how many examples were clipped.
func (m *Model) ClippedGradientSum(grad, x []float32, y []int32, n int, clip float64) int {
	return m.ClippedGradientSumOn(host(grad), host(x), y, n, clip)
}

// ClippedGradientSumOn is ClippedGradientSum on tensors of the model's
// backend.
func (m *Model) ClippedGradientSumOn(grad, xt compute.Tensor, y []int32, n int, clip float64) int {
	m.checkT(xt, y, n)
	if grad.Len() != m.params.Len() {
		panic(fmt.Sprintf("model: gradient buffer %d, want %d", grad.Len(), m.params.Len()))
	}
	if m.net != nil {
		return m.netClipped(grad, xt, y, n, clip)
	}
	m.backward(xt, y, n, 1)
	if len(m.ws.norms) < 3*n {
		m.ws.norms, m.ws.clip = make([]float64, 3*n), make([]float32, n)
	}
	clipped := clipRows(m.backend, m.layers, func(l int) compute.Tensor { return m.ws.dz[l] },
		func(l int) compute.Tensor { return m.input(xt, l) }, n, clip, m.ws.norms, m.ws.clip, nil)
	m.weightGrads(grad, xt, n)
	return clipped
}

// clipRows is DP-SGD's per-example clipping in one backward pass: it
// scales each of n rows' errors in every layer (dz(l)) so that the row's
// gradient has L2 norm at most clip. For a fully connected layer the
// row's gradient is u·vᵀ and u (its error at the layer's output and its
// input, in(l)), so ‖∇ℓ_j‖² = Σ_l ‖u_jl‖²·(‖v_jl‖² + 1). Rows where
// pad(j) (pad may be nil) are scaled by 0: they count for nothing.
// norms (3n values) and scale (n) are scratch. It returns how many rows
// were clipped.
func clipRows(be compute.Backend, layers []layer, dz, in func(l int) compute.Tensor, n int, clip float64, norms []float64, scale []float32, pad func(j int) bool) int {
	ss, uu, vv := norms[:n], norms[n:2*n], norms[2*n:3*n]
	clear(ss)
	for l, ly := range layers {
		be.RowSumSquares(uu, dz(l), n, ly.out)
		be.RowSumSquares(vv, in(l), n, ly.in)
		for j := range ss {
			ss[j] += uu[j] * (vv[j] + 1)
		}
	}
	clipped := 0
	scale = scale[:n]
	for j := range scale {
		switch norm := math.Sqrt(ss[j]); {
		case pad != nil && pad(j):
			scale[j] = 0
		case norm > clip:
			clipped++
			scale[j] = float32(clip / norm)
		default:
			scale[j] = 1
		}
	}
	for l, ly := range layers {
		be.ScaleRows(dz(l), n, ly.out, scale)
	}
	return clipped
}

// AddRegGradient adds the regulariser's gradient (the SVM's λ·W; nothing
// for the other models) to grad.
func (m *Model) AddRegGradient(grad []float32) { m.addRegGrad(host(grad)) }

// Factors are the sufficient factors of one fully connected layer's weight
// gradient over a minibatch of K examples (Xie et al. 2016): the gradient is
// ΔW = Uᵀ·V, i.e. ΔW[j][d] = Σ_k U[k][j]·V[k][d]. U holds the errors at the
// layer's output, already scaled by 1/K; V holds the layer's inputs. Biases
// and the SVM's regulariser are not included: they travel dense.
type Factors struct {
	// Weight names the weight tensor, e.g. "fc1.weight".
	Weight string
	// K examples; J outputs; D inputs.
	K, J, D int
	// U is K×J, V is K×D, both row-major.
	U, V []float32
}

// factors copies layer l's sufficient factors of the last backward pass
// over n rows of x to the host.
func (m *Model) factors(l int, x compute.Tensor, n int) Factors {
	ly := m.layers[l]
	f := Factors{Weight: ly.wName, K: n, J: ly.out, D: ly.in, U: make([]float32, n*ly.out), V: make([]float32, n*ly.in)}
	m.backend.Store(f.U, m.ws.dz[l].Slice(0, n*ly.out))
	m.backend.Store(f.V, m.input(x, l).Slice(0, n*ly.in))
	return f
}

// SufficientFactors returns the sufficient factors of every layer's weight
// gradient for the minibatch, and the mean loss. The factors are copies.
func (m *Model) SufficientFactors(x []float32, y []int32, n int) ([]Factors, float64) {
	m.check(x, y, n)
	m.noFactors()
	loss, _ := m.backward(host(x), y, n, 1/float32(n))
	out := make([]Factors, len(m.layers))
	for l := range m.layers {
		out[l] = m.factors(l, host(x), n)
	}
	return out, m.stepLoss(loss, n)
}

// GradientWithFactors is Gradient that also returns the sufficient factors
// of the weight tensors named in layers, from the same backward pass.
func (m *Model) GradientWithFactors(grad, x []float32, y []int32, n int, layers []string) ([]Factors, float64) {
	return m.GradientWithFactorsOn(host(grad), host(x), y, n, layers)
}

// GradientWithFactorsOn is GradientWithFactors on tensors of the model's
// backend; the factors come to the host.
func (m *Model) GradientWithFactorsOn(grad, x compute.Tensor, y []int32, n int, layers []string) ([]Factors, float64) {
	loss := m.GradientOn(grad, x, y, n)
	if m.net != nil {
		return m.netFactors(layers, n), loss
	}
	var out []Factors
	for l, ly := range m.layers {
		for _, name := range layers {
			if name == ly.wName {
				out = append(out, m.factors(l, x, n))
			}
		}
	}
	return out, loss
}

// Reconstruct writes f's weight gradient Uᵀ·V into dst (J×D).
func (f *Factors) Reconstruct(be compute.Backend, dst []float32) {
	be.Gemm(true, false, f.J, f.D, f.K, 1, host(f.U), f.J, host(f.V), f.D, 0, host(dst), f.D)
}

// Predict writes the model's output for n rows of x into out (n×Classes):
// class probabilities for softmax and mlp, decision scores for svm.
func (m *Model) Predict(out, x []float32, n int) {
	m.check(x, nil, n)
	if m.net != nil {
		m.net.Predict(out, m.params, host(x), n)
		return
	}
	C := m.spec.Classes
	const chunk = 512
	for lo := 0; lo < n; lo += chunk {
		k := min(chunk, n-lo)
		m.forward(host(x[lo*m.spec.Inputs:]), k)
		z := m.ws.z[len(m.layers)-1].Slice(0, k*C)
		if m.spec.Kind != SVM {
			p := m.ws.probs.Slice(0, k*C)
			m.backend.Softmax(p, z, k, C)
			z = p
		}
		m.backend.Store(out[lo*C:(lo+k)*C], z)
	}
}
