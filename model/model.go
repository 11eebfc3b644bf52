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
	"github.com/gossipd/gossipd/model/nn"
)

// host wraps a host slice (input data, a caller's buffer) as a tensor for
// the backend: the CPU uses it in place, a device backend copies it over.
func host(x []float32) compute.Tensor { return compute.Host(x) }

// Model is a stack of fully connected layers with ReLU between them and a
// loss head: softmax cross-entropy (softmax, mlp) or one-vs-rest hinge (svm).
// Its parameters and activations live in its backend's memory; values
// cross to the host where they leave the model (StoreParams, gradients
// and factors returned to the caller, evaluation results).
type Model struct {
	spec    Spec
	layout  Layout
	params  compute.Tensor
	layers  []layer
	backend compute.Backend
	ws      workspace
	// rows, during SGDStepRows, lists the rows of the input that layer 0
	// reads through gather.
	rows   []int
	gather compute.Gatherer
	// sum, when set (SumLosses), is where the loss kernels add the
	// steps' losses (the steps then return 0): read once in a while, not
	// every step.
	sum compute.LossSum
	// net is a layered network's computation (kind Net; layers is then
	// empty), netRng its dropout masks' source, netGrad its gradient
	// scratch.
	net     *nn.Net
	netRng  *rand.Rand
	netGrad compute.Tensor
}

// SumLosses makes the model's training steps (SGDStep, SGDStepRows,
// GradientOn and the others that return a step's loss) add their summed
// loss (the SVM's with n·λ/2·‖W‖²) to s, a LossSum of the model's backend,
// and return 0 instead, so that a loop of steps on a device does not
// wait for it at each; nil ends it. Train sums its epochs so, and a
// node's trainer its local updates.
func (m *Model) SumLosses(s compute.LossSum) { m.sum = s }

// layer is one fully connected layer: out×in weight at wOff, out bias at bOff.
type layer struct {
	in, out    int
	wOff, bOff int
	wName      string
}

// workspace holds the activations of the last forward pass for up to cap
// rows, in the backend's memory.
type workspace struct {
	cap int
	z   []compute.Tensor // pre-activations of each layer (last: logits/probs)
	a   []compute.Tensor // post-ReLU activations of hidden layers
	dz  []compute.Tensor // ∂loss/∂z of each layer
	// colSums holds one layer's bias gradient (SGDStep); probs the
	// probabilities of an evaluation chunk (TallyWith, Predict).
	colSums, probs compute.Tensor
	// xg is a gathered minibatch for backends that cannot gather
	// (SGDStepRows); out the host copy of evaluation results.
	xg, out []float32
	// norms holds DP-SGD's per-example squared norms (three rows of n:
	// the sum, one layer's errors, its inputs) and clip their scales
	// (ClippedGradientSum).
	norms []float64
	clip  []float32
	// one is a tensor holding 1 (PerExampleGradientsOn's GEMMs).
	one compute.Tensor
	// xt is a minibatch gathered once, in the backend's memory, for
	// backends that gather once (compute.GathersOnce).
	xt compute.Tensor
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

// resolve applies opts to the defaults (a new CPU backend).
func resolve(opts []Option) options {
	o := options{}
	for _, f := range opts {
		f(&o)
	}
	if o.backend == nil {
		o.backend = compute.NewCPU()
	}
	return o
}

// LayoutOf returns the parameter layout of spec's model without building it.
func LayoutOf(spec Spec) (*Layout, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Kind == Net {
		n, err := buildNet(spec, compute.NewCPU(compute.WithThreads(1)))
		if err != nil {
			return nil, err
		}
		return netLayout(n), nil
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
	o := resolve(opts)
	if spec.Kind == Net {
		return newNet(spec, o)
	}
	layout, _ := LayoutOf(spec)
	m := &Model{spec: spec, backend: o.backend, layout: *layout}
	m.spec.Hidden = append([]int(nil), spec.Hidden...)
	m.layers = layersOf(layout)
	init := make([]float32, m.layout.Size)
	if spec.Kind != SVM {
		rng := rand.New(rand.NewPCG(o.seed, 0x6d6f64656c))
		for _, ly := range m.layers {
			bound := 1 / math.Sqrt(float64(ly.in))
			for i := ly.wOff; i < ly.bOff+ly.out; i++ {
				init[i] = float32((2*rng.Float64() - 1) * bound)
			}
		}
	}
	m.params = m.backend.Load(init)
	return m, nil
}

// layersOf lists the layers of a layout (weight and bias, in turn).
func layersOf(layout *Layout) []layer {
	var out []layer
	for l := 0; l < len(layout.Tensors); l += 2 {
		w, b := layout.Tensors[l], layout.Tensors[l+1]
		out = append(out, layer{in: w.Shape[1], out: w.Shape[0], wOff: w.Offset, bOff: b.Offset, wName: w.Name})
	}
	return out
}

// Spec returns the model's spec.
func (m *Model) Spec() Spec { return m.spec }

// Layout returns the layout of the parameter vector.
func (m *Model) Layout() *Layout { return &m.layout }

// Params returns the live parameter vector on a host backend (the
// CPU's): writes change the model. A device backend keeps the parameters
// in its memory, and Params panics there: StoreParams copies them out,
// SetParams in, and ParamTensor is the live tensor.
func (m *Model) Params() []float32 {
	if !m.params.OnHost() {
		panic("model: Params on a device backend: the parameters are in device memory (StoreParams copies them out)")
	}
	return m.params.HostSlice()
}

// ParamTensor returns the live parameters in the backend's memory.
func (m *Model) ParamTensor() compute.Tensor { return m.params }

// StoreParams copies the parameters into dst (len NumParams).
func (m *Model) StoreParams(dst []float32) {
	if len(dst) != m.params.Len() {
		panic(fmt.Sprintf("model: StoreParams into %d values, model has %d", len(dst), m.params.Len()))
	}
	m.backend.Store(dst, m.params)
}

// CopyParams returns a copy of the parameters on the host.
func (m *Model) CopyParams() []float32 {
	out := make([]float32, m.params.Len())
	m.backend.Store(out, m.params)
	return out
}

// NumParams returns the number of parameters.
func (m *Model) NumParams() int { return m.layout.Size }

// Backend returns the compute backend.
func (m *Model) Backend() compute.Backend { return m.backend }

// SetParams copies p into the model's parameters.
func (m *Model) SetParams(p []float32) error {
	if len(p) != m.params.Len() {
		return fmt.Errorf("%w: %d parameters, model has %d", ErrShape, len(p), m.params.Len())
	}
	m.backend.Copy(m.params, host(p))
	return nil
}

// Clone returns an independent copy of the model on the same backend.
func (m *Model) Clone() *Model {
	c := *m
	c.params = m.backend.Alloc(m.params.Len())
	m.backend.Copy(c.params, m.params)
	c.layers = append([]layer(nil), m.layers...)
	c.ws = workspace{}
	if m.net != nil {
		c.net, _ = buildNet(m.spec, m.backend) // built before: cannot fail
		c.netRng = rand.New(rand.NewPCG(m.netRng.Uint64(), 0x64726f70))
		c.netGrad = compute.Tensor{}
	}
	return &c
}

// Close gives the model's memory back to its backend (device memory; on
// the CPU it is the garbage collector's anyway). The model must not be
// used after.
func (m *Model) Close() {
	m.freeWorkspace()
	if m.net != nil {
		m.net.Free()
		if m.netGrad.Len() > 0 {
			m.backend.Free(m.netGrad)
			m.netGrad = compute.Tensor{}
		}
	}
	m.backend.Free(m.params)
	m.params = compute.Tensor{}
}

// grow makes the workspace hold n rows.
func (m *Model) grow(n int) {
	if n <= m.ws.cap {
		return
	}
	n = max(n, 2*m.ws.cap)
	m.freeWorkspace()
	L, be := len(m.layers), m.backend
	m.ws.cap = n
	m.ws.z, m.ws.a, m.ws.dz = make([]compute.Tensor, L), make([]compute.Tensor, L), make([]compute.Tensor, L)
	widest := 0
	for l, ly := range m.layers {
		widest = max(widest, ly.out)
		m.ws.z[l] = be.Alloc(n * ly.out)
		m.ws.dz[l] = be.Alloc(n * ly.out)
		if l < L-1 {
			m.ws.a[l] = be.Alloc(n * ly.out)
		}
	}
	m.ws.colSums = be.Alloc(widest)
	m.ws.probs = be.Alloc(n * m.spec.Classes)
}

// freeWorkspace gives the workspace's tensors back to the backend.
func (m *Model) freeWorkspace() {
	be := m.backend
	for _, t := range []*compute.Tensor{&m.ws.one, &m.ws.xt} { // a layered network's too
		if t.Len() > 0 {
			be.Free(*t)
			*t = compute.Tensor{}
		}
	}
	if m.ws.cap == 0 {
		return
	}
	for _, ts := range [][]compute.Tensor{m.ws.z, m.ws.a, m.ws.dz} {
		for _, t := range ts {
			if t.Len() > 0 {
				be.Free(t)
			}
		}
	}
	be.Free(m.ws.colSums)
	be.Free(m.ws.probs)
	m.ws.cap = 0
}

// toHost returns t's values on the host: the memory itself for a host
// tensor, else a copy into buf (grown as needed).
func (m *Model) toHost(t compute.Tensor, buf *[]float32) []float32 {
	if t.OnHost() {
		return t.HostSlice()
	}
	if len(*buf) < t.Len() {
		*buf = make([]float32, t.Len())
	}
	m.backend.Store((*buf)[:t.Len()], t)
	return (*buf)[:t.Len()]
}

func (m *Model) check(x []float32, y []int32, n int) { m.checkT(host(x), y, n) }

func (m *Model) checkT(x compute.Tensor, y []int32, n int) {
	if x.Len() < n*m.spec.Inputs {
		panic(fmt.Sprintf("model: x holds %d values, need %d×%d", x.Len(), n, m.spec.Inputs))
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

// input returns the activations that feed layer l: x itself for the
// first layer.
func (m *Model) input(x compute.Tensor, l int) compute.Tensor {
	if l == 0 {
		return x
	}
	return m.ws.a[l-1]
}

// weights and bias return layer ly's parameters.
func (m *Model) weights(ly layer) compute.Tensor { return m.params.Slice(ly.wOff, ly.bOff) }
func (m *Model) bias(ly layer) compute.Tensor    { return m.params.Slice(ly.bOff, ly.bOff+ly.out) }

// forward computes every layer's pre-activation (and ReLU activation) for n
// rows of x; the last layer's z holds the logits (scores).
func (m *Model) forward(x compute.Tensor, n int) {
	m.grow(n)
	be := m.backend
	for l, ly := range m.layers {
		z := m.ws.z[l].Slice(0, n*ly.out)
		be.BroadcastRows(z, n, ly.out, m.bias(ly))
		if l == 0 && m.rows != nil {
			m.gather.GemmGatherA(ly.out, ly.in, 1, x, ly.in, m.rows, m.weights(ly), ly.in, 1, z, ly.out)
		} else {
			be.Gemm(false, true, n, ly.out, ly.in, 1, m.input(x, l), ly.in, m.weights(ly), ly.in, 1, z, ly.out)
		}
		if l < len(m.layers)-1 {
			reluInto(be, m.ws.a[l].Slice(0, n*ly.out), z)
		}
	}
}

// backward runs the forward pass and back-propagates the loss, leaving in
// ws.dz[l] the error at each layer's output scaled by scale (so scale = 1/n
// gives the mean-loss gradient and scale = 1 per-example errors). It returns
// the summed data loss and the number of correct predictions.
func (m *Model) backward(x compute.Tensor, y []int32, n int, scale float32) (float64, int) {
	m.forward(x, n)
	be := m.backend
	L := len(m.layers)
	last := m.layers[L-1]
	logits := m.ws.z[L-1].Slice(0, n*last.out)
	dz := m.ws.dz[L-1].Slice(0, n*last.out)
	var loss float64
	var correct int
	switch {
	case m.sum != nil && m.spec.Kind == SVM:
		be.HingeOneVsRestSum(m.sum, dz, logits, y, n, last.out, scale)
	case m.sum != nil:
		be.SoftmaxCrossEntropySum(m.sum, logits, dz, logits, y, n, last.out, scale)
	case m.spec.Kind == SVM:
		loss, correct = be.HingeOneVsRest(dz, logits, y, n, last.out, scale)
	default:
		loss, correct = be.SoftmaxCrossEntropy(logits, dz, logits, y, n, last.out, scale)
	}
	for l := L - 1; l > 0; l-- {
		ly, prev := m.layers[l], m.layers[l-1]
		dprev := m.ws.dz[l-1].Slice(0, n*prev.out)
		be.Gemm(false, false, n, prev.out, ly.out, 1, m.ws.dz[l], ly.out, m.weights(ly), ly.in, 0, dprev, prev.out)
		be.ReLUBackward(dprev, m.ws.z[l-1].Slice(0, n*prev.out))
	}
	return loss, correct
}

// stepLoss is a step's loss from the summed data loss of its n examples:
// their mean plus the SVM's λ/2·‖W‖². While the model sums its losses
// (SumLosses) the data loss is in m.sum already; stepLoss adds n times
// the regulariser there and returns 0, so that the step does not wait for
// the device.
func (m *Model) stepLoss(loss float64, n int) float64 {
	if m.sum == nil {
		return loss/float64(n) + m.regLoss()
	}
	if m.spec.Kind == SVM {
		m.backend.AddSumSquares(m.sum, m.spec.Lambda/2*float64(n), m.params)
	}
	return 0
}

// regLoss is the SVM's λ/2·‖W‖². The bias counts as the weight of a
// constant feature 1 and is regularised too, so that Pegasos' (1 − 1/t)
// shrinkage also tames it after the large first steps.
func (m *Model) regLoss() float64 {
	if m.spec.Kind != SVM {
		return 0
	}
	// The layers' weights and biases tile the parameter vector.
	return m.spec.Lambda / 2 * m.backend.SumSquares(m.params)
}
