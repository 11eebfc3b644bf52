// Package model holds gossipd's learning models: softmax regression, the
// linear SVM (Pegasos, one-vs-rest) and the multi-layer perceptron, as one
// flat float32 parameter vector with a named tensor layout, so that merging,
// codecs and differential privacy work on every model alike.
//
// A Model computes forward passes, minibatch gradients, per-example gradients
// (for DP-SGD) and the rank-one sufficient factors of each fully connected
// layer (for sufficient-factor broadcasting); optimizers (SGD with momentum
// and weight decay, Adam, Pegasos) update it; Evaluate measures accuracy,
// loss and the confusion matrix. Numeric work runs on a compute.Backend.
//
// A Model is not safe for concurrent use: it owns scratch buffers. Same spec,
// same seed, same backend: same numbers.
package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// host wraps a host slice as a tensor for the backend. The model's state
// is in host memory for now; docs/GPU.md says how it moves to the
// backend's.
func host(x []float32) compute.Tensor { return compute.Host(x) }

// Model is a stack of fully connected layers with ReLU between them and a
// loss head: softmax cross-entropy (softmax, mlp) or one-vs-rest hinge (svm).
type Model struct {
	spec    Spec
	layout  Layout
	params  []float32
	layers  []layer
	backend compute.Backend
	ws      workspace
	// rows, during SGDStepRows, lists the rows of the input that layer 0
	// reads through gather.
	rows   []int
	gather compute.Gatherer
}

// layer is one fully connected layer: out×in weight at wOff, out bias at bOff.
type layer struct {
	in, out    int
	wOff, bOff int
	wName      string
}

// workspace holds the activations of the last forward pass for up to cap rows.
type workspace struct {
	cap int
	z   [][]float32 // pre-activations of each layer (last: logits/probs)
	a   [][]float32 // post-ReLU activations of hidden layers
	dz  [][]float32 // ∂loss/∂z of each layer
	// colSums holds one layer's bias gradient (SGDStep); xg a gathered
	// minibatch for backends that cannot gather (SGDStepRows).
	colSums []float32
	xg      []float32
	probs   []float32 // evaluation's probabilities (TallyWith)
	// norms holds DP-SGD's per-example squared norms (three rows of n:
	// the sum, one layer's errors, its inputs) and clip their scales
	// (ClippedGradientSum).
	norms []float64
	clip  []float32
}

// Option configures New.
type Option func(*options)

type options struct {
	seed    uint64
	backend compute.Backend
}

// WithSeed sets the seed of the parameter initialisation (default 0).
func WithSeed(seed uint64) Option { return func(o *options) { o.seed = seed } }

// WithBackend sets the compute backend (default: compute.NewCPU()).
func WithBackend(b compute.Backend) Option { return func(o *options) { o.backend = b } }

// LayoutOf returns the parameter layout of spec's model without building it.
func LayoutOf(spec Spec) (*Layout, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	var l Layout
	w := spec.widths()
	for i := 0; i+1 < len(w); i++ {
		name := fmt.Sprintf("fc%d", i+1)
		l.add(name+".weight", w[i+1], w[i])
		l.add(name+".bias", w[i+1])
	}
	return &l, nil
}

// New builds a model from spec. Weights and biases of the softmax and MLP
// layers start uniform in ±1/√fan_in (PyTorch's nn.Linear default); the SVM
// starts at zero, as Pegasos does.
func New(spec Spec, opts ...Option) (*Model, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	o := options{}
	for _, f := range opts {
		f(&o)
	}
	if o.backend == nil {
		o.backend = compute.NewCPU()
	}
	layout, _ := LayoutOf(spec)
	m := &Model{spec: spec, backend: o.backend, layout: *layout}
	m.spec.Hidden = append([]int(nil), spec.Hidden...)
	for l := 0; l < len(layout.Tensors); l += 2 {
		w, b := layout.Tensors[l], layout.Tensors[l+1]
		m.layers = append(m.layers, layer{in: w.Shape[1], out: w.Shape[0], wOff: w.Offset, bOff: b.Offset, wName: w.Name})
	}
	m.params = make([]float32, m.layout.Size)
	if spec.Kind != SVM {
		rng := rand.New(rand.NewPCG(o.seed, 0x6d6f64656c))
		for _, ly := range m.layers {
			bound := 1 / math.Sqrt(float64(ly.in))
			for i := ly.wOff; i < ly.bOff+ly.out; i++ {
				m.params[i] = float32((2*rng.Float64() - 1) * bound)
			}
		}
	}
	return m, nil
}

// Spec returns the model's spec.
func (m *Model) Spec() Spec { return m.spec }

// Layout returns the layout of the parameter vector.
func (m *Model) Layout() *Layout { return &m.layout }

// Params returns the live parameter vector: writes change the model.
func (m *Model) Params() []float32 { return m.params }

// NumParams returns the number of parameters.
func (m *Model) NumParams() int { return m.layout.Size }

// Backend returns the compute backend.
func (m *Model) Backend() compute.Backend { return m.backend }

// SetParams copies p into the model's parameters.
func (m *Model) SetParams(p []float32) error {
	if len(p) != len(m.params) {
		return fmt.Errorf("%w: %d parameters, model has %d", ErrShape, len(p), len(m.params))
	}
	copy(m.params, p)
	return nil
}

// Clone returns an independent copy of the model on the same backend.
func (m *Model) Clone() *Model {
	c := *m
	c.params = append([]float32(nil), m.params...)
	c.layers = append([]layer(nil), m.layers...)
	c.ws = workspace{}
	return &c
}

func (m *Model) grow(n int) {
	if n <= m.ws.cap {
		return
	}
	n = max(n, 2*m.ws.cap)
	L := len(m.layers)
	m.ws = workspace{cap: n, z: make([][]float32, L), a: make([][]float32, L), dz: make([][]float32, L)}
	for l, ly := range m.layers {
		m.ws.colSums = make([]float32, max(len(m.ws.colSums), ly.out))
		m.ws.z[l] = make([]float32, n*ly.out)
		m.ws.dz[l] = make([]float32, n*ly.out)
		if l < L-1 {
			m.ws.a[l] = make([]float32, n*ly.out)
		}
	}
}

func (m *Model) check(x []float32, y []int32, n int) {
	if len(x) < n*m.spec.Inputs {
		panic(fmt.Sprintf("model: x holds %d values, need %d×%d", len(x), n, m.spec.Inputs))
	}
	if y != nil {
		m.checkLabels(y, n)
	}
}

func (m *Model) checkLabels(y []int32, n int) {
	if len(y) < n {
		panic(fmt.Sprintf("model: %d labels for %d rows", len(y), n))
	}
	for _, v := range y[:n] {
		if v < 0 || int(v) >= m.spec.Classes {
			panic(fmt.Sprintf("model: label %d out of range [0,%d)", v, m.spec.Classes))
		}
	}
}

// input returns the activations that feed layer l.
func (m *Model) input(x []float32, l int) []float32 {
	if l == 0 {
		return x
	}
	return m.ws.a[l-1]
}

// forward computes every layer's pre-activation (and ReLU activation) for n
// rows of x; the last layer's z holds the logits (scores).
func (m *Model) forward(x []float32, n int) {
	m.grow(n)
	be := m.backend
	for l, ly := range m.layers {
		z := m.ws.z[l][:n*ly.out]
		be.BroadcastRows(host(z), n, ly.out, host(m.params[ly.bOff:ly.bOff+ly.out]))
		if l == 0 && m.rows != nil {
			m.gather.GemmGatherA(ly.out, ly.in, 1, host(x), ly.in, m.rows, host(m.params[ly.wOff:ly.bOff]), ly.in, 1, host(z), ly.out)
		} else {
			be.Gemm(false, true, n, ly.out, ly.in, 1, host(m.input(x, l)), ly.in, host(m.params[ly.wOff:ly.bOff]), ly.in, 1, host(z), ly.out)
		}
		if l < len(m.layers)-1 {
			a := m.ws.a[l][:n*ly.out]
			copy(a, z)
			be.ReLU(host(a))
		}
	}
}

// backward runs the forward pass and back-propagates the loss, leaving in
// ws.dz[l] the error at each layer's output scaled by scale (so scale = 1/n
// gives the mean-loss gradient and scale = 1 per-example errors). It returns
// the summed data loss and the number of correct predictions.
func (m *Model) backward(x []float32, y []int32, n int, scale float32) (float64, int) {
	m.forward(x, n)
	be := m.backend
	L := len(m.layers)
	last := m.layers[L-1]
	logits := m.ws.z[L-1][:n*last.out]
	dz := m.ws.dz[L-1][:n*last.out]
	var loss float64
	var correct int
	if m.spec.Kind == SVM {
		loss, correct = be.HingeOneVsRest(host(dz), host(logits), y, n, last.out, scale)
	} else {
		loss, correct = be.SoftmaxCrossEntropy(host(logits), host(dz), host(logits), y, n, last.out, scale)
	}
	for l := L - 1; l > 0; l-- {
		ly, prev := m.layers[l], m.layers[l-1]
		dprev := m.ws.dz[l-1][:n*prev.out]
		be.Gemm(false, false, n, prev.out, ly.out, 1, host(m.ws.dz[l]), ly.out, host(m.params[ly.wOff:ly.bOff]), ly.in, 0, host(dprev), prev.out)
		be.ReLUBackward(host(dprev), host(m.ws.z[l-1][:n*prev.out]))
	}
	return loss, correct
}

// regLoss is the SVM's λ/2·‖W‖². The bias counts as the weight of a
// constant feature 1 and is regularised too, so that Pegasos' (1 − 1/t)
// shrinkage also tames it after the large first steps.
func (m *Model) regLoss() float64 {
	if m.spec.Kind != SVM {
		return 0
	}
	// The layers' weights and biases tile the parameter vector.
	return m.spec.Lambda / 2 * m.backend.SumSquares(host(m.params))
}

// Gradient computes the mean loss over the n examples in x (n×Inputs) with
// labels y, and writes its gradient with respect to the parameters into grad
// (len NumParams). For the SVM the loss and gradient include λ/2·‖W‖².
func (m *Model) Gradient(grad, x []float32, y []int32, n int) float64 {
	m.check(x, y, n)
	if len(grad) != len(m.params) {
		panic(fmt.Sprintf("model: gradient buffer %d, want %d", len(grad), len(m.params)))
	}
	loss, _ := m.backward(x, y, n, 1/float32(n))
	be := m.backend
	for l, ly := range m.layers {
		dz := m.ws.dz[l][:n*ly.out]
		be.Gemm(true, false, ly.out, ly.in, n, 1, host(dz), ly.out, host(m.input(x, l)), ly.in, 0, host(grad[ly.wOff:ly.bOff]), ly.in)
		be.ColumnSums(host(grad[ly.bOff:ly.bOff+ly.out]), host(dz), n, ly.out)
	}
	m.addRegGrad(grad)
	return loss/float64(n) + m.regLoss()
}

// addRegGrad adds the SVM's λ·W (weights and bias) to grad.
func (m *Model) addRegGrad(grad []float32) {
	if m.spec.Kind != SVM {
		return
	}
	m.backend.Axpby(host(grad[:len(m.params)]), float32(m.spec.Lambda), host(m.params), 1)
}

// PerExampleGradients writes the gradient of each example's loss into the
// rows of grads (n × NumParams): row i is ∇ℓ(x_i, y_i) (plus λW for the SVM),
// so the rows average to Gradient's result. DP-SGD clips these rows.
func (m *Model) PerExampleGradients(grads, x []float32, y []int32, n int) {
	m.check(x, y, n)
	P := len(m.params)
	if len(grads) < n*P {
		panic(fmt.Sprintf("model: per-example buffer %d, want %d×%d", len(grads), n, P))
	}
	m.backward(x, y, n, 1)
	for i := 0; i < n; i++ {
		g := grads[i*P : (i+1)*P]
		for l, ly := range m.layers {
			u := m.ws.dz[l][i*ly.out : (i+1)*ly.out]
			v := m.input(x, l)[i*ly.in : (i+1)*ly.in]
			w := g[ly.wOff:ly.bOff]
			for r, ur := range u {
				row := w[r*ly.in : (r+1)*ly.in]
				for c, vc := range v {
					row[c] = ur * vc
				}
			}
			copy(g[ly.bOff:ly.bOff+ly.out], u)
		}
		m.addRegGrad(g)
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
	m.check(x, y, n)
	if len(grad) != len(m.params) {
		panic(fmt.Sprintf("model: gradient buffer %d, want %d", len(grad), len(m.params)))
	}
	m.backward(x, y, n, 1)
	be := m.backend
	if len(m.ws.norms) < 3*n {
		m.ws.norms, m.ws.clip = make([]float64, 3*n), make([]float32, n)
	}
	ss, uu, vv := m.ws.norms[:n], m.ws.norms[n:2*n], m.ws.norms[2*n:3*n]
	clear(ss)
	for l, ly := range m.layers {
		be.RowSumSquares(uu, host(m.ws.dz[l]), n, ly.out)
		be.RowSumSquares(vv, host(m.input(x, l)), n, ly.in)
		for i := range ss {
			ss[i] += uu[i] * (vv[i] + 1)
		}
	}
	clipped := 0
	scale := m.ws.clip[:n]
	for i := range scale {
		scale[i] = 1
		if norm := math.Sqrt(ss[i]); norm > clip {
			clipped++
			scale[i] = float32(clip / norm)
		}
	}
	for l, ly := range m.layers {
		be.ScaleRows(host(m.ws.dz[l]), n, ly.out, scale)
	}
	for l, ly := range m.layers {
		dz := m.ws.dz[l][:n*ly.out]
		be.Gemm(true, false, ly.out, ly.in, n, 1, host(dz), ly.out, host(m.input(x, l)), ly.in, 0, host(grad[ly.wOff:ly.bOff]), ly.in)
		be.ColumnSums(host(grad[ly.bOff:ly.bOff+ly.out]), host(dz), n, ly.out)
	}
	return clipped
}

// AddRegGradient adds the regulariser's gradient (the SVM's λ·W; nothing
// for the other models) to grad.
func (m *Model) AddRegGradient(grad []float32) { m.addRegGrad(grad) }

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

// SufficientFactors returns the sufficient factors of every layer's weight
// gradient for the minibatch, and the mean loss. The factors are copies.
func (m *Model) SufficientFactors(x []float32, y []int32, n int) ([]Factors, float64) {
	m.check(x, y, n)
	loss, _ := m.backward(x, y, n, 1/float32(n))
	out := make([]Factors, len(m.layers))
	for l, ly := range m.layers {
		out[l] = Factors{Weight: ly.wName, K: n, J: ly.out, D: ly.in,
			U: append([]float32(nil), m.ws.dz[l][:n*ly.out]...),
			V: append([]float32(nil), m.input(x, l)[:n*ly.in]...)}
	}
	return out, loss/float64(n) + m.regLoss()
}

// GradientWithFactors is Gradient that also returns the sufficient factors
// of the weight tensors named in layers, from the same backward pass.
func (m *Model) GradientWithFactors(grad, x []float32, y []int32, n int, layers []string) ([]Factors, float64) {
	loss := m.Gradient(grad, x, y, n)
	var out []Factors
	for l, ly := range m.layers {
		for _, name := range layers {
			if name == ly.wName {
				out = append(out, Factors{Weight: ly.wName, K: n, J: ly.out, D: ly.in,
					U: append([]float32(nil), m.ws.dz[l][:n*ly.out]...),
					V: append([]float32(nil), m.input(x, l)[:n*ly.in]...)})
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
	C := m.spec.Classes
	const chunk = 512
	for lo := 0; lo < n; lo += chunk {
		k := min(chunk, n-lo)
		m.forward(x[lo*m.spec.Inputs:], k)
		z := m.ws.z[len(m.layers)-1][:k*C]
		dst := out[lo*C : (lo+k)*C]
		if m.spec.Kind == SVM {
			copy(dst, z)
			continue
		}
		m.backend.Softmax(host(dst), host(z), k, C)
	}
}
