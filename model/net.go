package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/nn"
)

// A layered network (kind Net) computes through package nn on the
// model's backend, which must compute layers (compute.Layers: the CPU,
// a device). The batched stack (NewStack) does not take it yet, and says
// so; SFB sends its dense layers' weights as factors and the rest whole.

// validateNet checks a layered network's spec, writing its layers in
// canonical form.
func (s *Spec) validateNet() error {
	if len(s.Hidden) > 0 || s.Lambda != 0 {
		return fmt.Errorf("%w: a layered network takes its layers from its spec, not hidden widths or lambda", ErrSpec)
	}
	if s.Inputs <= 0 {
		return fmt.Errorf("%w: %d inputs", ErrSpec, s.Inputs)
	}
	if len(s.Shape) != 0 && len(s.Shape) != 3 {
		return fmt.Errorf("%w: input shape %v, want [C H W]", ErrSpec, s.Shape)
	}
	if sh := s.inputShape(); sh.Size() != s.Inputs {
		return fmt.Errorf("%w: input shape %s holds %d values, the data has %d features", ErrSpec, sh, sh.Size(), s.Inputs)
	}
	layers, err := parseLayers(s.Layers)
	if err != nil {
		return err
	}
	if s.inputShape().Spatial() && layers[0].Kind == nn.Dense {
		// Dense layers on images: flattened first, as an nn.Sequential
		// of the same layers would be written in PyTorch.
		layers = append(nn.Spec{{Kind: nn.Flatten}}, layers...)
	}
	if _, err := nn.Build(layers, s.inputShape(), s.Classes, compute.NewCPU(compute.WithThreads(1))); err != nil {
		return netErr(err)
	}
	s.Layers = layers.String()
	return nil
}

// parseLayers reads a layered --model value: a preset or a layer list.
func parseLayers(name string) (nn.Spec, error) {
	layers, err := nn.Parse(name)
	if err != nil && !strings.ContainsAny(name, ":,") {
		return nil, fmt.Errorf("%w: model %q: want softmax, svm, mlp, a preset (%s) or layers such as conv:32:5,relu,maxpool:2,dense", ErrSpec, name, strings.Join(nn.PresetNames(), ", "))
	}
	if err != nil {
		return nil, netErr(err)
	}
	return layers, nil
}

// CheckLayers checks a layered --model value's syntax before the data
// (and so the input shape) is known; Validate checks the shapes.
func CheckLayers(name string) error {
	_, err := parseLayers(name)
	return err
}

// inputShape is the network's input shape (a flat vector when unset).
func (s Spec) inputShape() nn.Shape {
	if len(s.Shape) == 3 {
		return nn.Shape{C: s.Shape[0], H: s.Shape[1], W: s.Shape[2]}
	}
	return nn.Shape{C: s.Inputs, H: 1, W: 1}
}

// buildNet builds a validated net spec on be.
func buildNet(spec Spec, be compute.Backend) (*nn.Net, error) {
	layers, err := nn.Parse(spec.Layers)
	if err != nil {
		return nil, netErr(err)
	}
	n, err := nn.Build(layers, spec.inputShape(), spec.Classes, be)
	if err != nil {
		return nil, netErr(err)
	}
	return n, nil
}

// netErr is an nn error as this package's ErrSpec, said once.
func netErr(err error) error {
	return fmt.Errorf("%w: %s", ErrSpec, strings.TrimPrefix(err.Error(), nn.ErrSpec.Error()+": "))
}

// netLayout is a layered network's layout: PyTorch's state_dict names.
func netLayout(n *nn.Net) *Layout {
	var l Layout
	for _, p := range n.Params() {
		l.add(p.Name, p.Shape...)
	}
	return &l
}

// newNet builds a layered model, initialised as PyTorch initialises the
// same layers from a seeded generator.
func newNet(spec Spec, o options) (*Model, error) {
	n, err := buildNet(spec, o.backend)
	if err != nil {
		return nil, err
	}
	m := &Model{spec: spec, backend: o.backend, layout: *netLayout(n), net: n}
	m.spec.Shape = append([]int(nil), spec.Shape...)
	m.netRng = rand.New(rand.NewPCG(o.seed, 0x64726f70)) // dropout masks
	init := make([]float32, m.layout.Size)
	n.Init(init, rand.New(rand.NewPCG(o.seed, 0x6d6f64656c)))
	m.params = m.backend.Load(init)
	return m, nil
}

// netLoss runs the network's forward and backward pass over n examples,
// writing scale·∇(summed loss) to grad (empty: forward only), dropout
// on. It returns the step's loss as stepLoss does.
func (m *Model) netLoss(grad, x compute.Tensor, y []int32, n int, scale float32) float64 {
	m.net.SumLosses(m.sum)
	loss, _ := m.net.Loss(grad, m.params, x, y, n, scale, m.netRng)
	if m.sum != nil {
		return 0
	}
	return loss / float64(n)
}

// gradBuf is the model's own gradient buffer for a layered network.
func (m *Model) gradBuf() compute.Tensor {
	if m.netGrad.Len() != m.layout.Size {
		m.netGrad = m.backend.Alloc(m.layout.Size)
	}
	return m.netGrad
}

// netStep is sgdStep for a layered network.
func (m *Model) netStep(x compute.Tensor, y []int32, n int, lr float32) float64 {
	g := m.gradBuf()
	loss := m.netLoss(g, x, y, n, 1/float32(n))
	m.backend.Axpby(m.params, -lr, g, 1)
	return loss
}

// netRows is a minibatch of rows of x for a layered network: gathered
// on the host, or by the backend where x is its (a device's) tensor.
func (m *Model) netRows(x compute.Tensor, rows []int) compute.Tensor {
	if x.OnHost() {
		return host(m.hostRows(x.HostSlice(), rows))
	}
	return m.gatherRows(x, rows, len(rows))
}

// gatherRows gathers rows of x (Inputs columns) on the backend into the
// workspace's tensor, grown where needed to hold room rows.
func (m *Model) gatherRows(x compute.Tensor, rows []int, room int) compute.Tensor {
	d := m.spec.Inputs
	if m.ws.xt.Len() < len(rows)*d {
		if m.ws.xt.Len() > 0 {
			m.backend.Free(m.ws.xt)
		}
		m.ws.xt = m.backend.Alloc(max(room, len(rows)) * d)
	}
	xt := m.ws.xt.Slice(0, len(rows)*d)
	m.backend.GatherRows(xt, x, rows, d, d)
	return xt
}

// hostRows gathers rows of x (Inputs columns) into the workspace, for
// what cannot read them in place (a backend that does not gather, a
// layered network).
func (m *Model) hostRows(x []float32, rows []int) []float32 {
	d := m.spec.Inputs
	if len(m.ws.xg) < len(rows)*d {
		m.ws.xg = make([]float32, len(rows)*d)
	}
	for i, r := range rows {
		copy(m.ws.xg[i*d:(i+1)*d], x[r*d:(r+1)*d])
	}
	return m.ws.xg[:len(rows)*d]
}

// netClipped is ClippedGradientSum for a layered network: each example's
// gradient, clipped to norm clip, added to grad.
func (m *Model) netClipped(grad, x compute.Tensor, y []int32, n int, clip float64) int {
	g, be := m.gradBuf(), m.backend
	m.net.SumLosses(nil)
	m.net.Zero(grad)
	clipped, d := 0, m.spec.Inputs
	for e := range n {
		m.net.Loss(g, m.params, x.Slice(e*d, (e+1)*d), y[e:e+1], 1, 1, m.netRng)
		s := float32(1)
		if norm := math.Sqrt(be.SumSquares(g)); norm > clip {
			s = float32(clip / norm)
			clipped++
		}
		be.Axpby(grad, s, g, 1)
	}
	return clipped
}

// netTally is tally for a layered network.
func (m *Model) netTally(t *Tally, x []float32, y []int32, n int) {
	C := m.spec.Classes
	if len(m.ws.out) < 512*C {
		m.ws.out = make([]float32, 512*C)
	}
	for lo := 0; lo < n; lo += 512 {
		k := min(512, n-lo)
		probs := m.ws.out[:k*C]
		m.net.Predict(probs, m.params, host(x[lo*m.spec.Inputs:(lo+k)*m.spec.Inputs]), k)
		tallyProbs(probs, y[lo:lo+k], C, &t.Loss, &t.Correct, t.Confusion)
	}
	t.N += n
}

// tallyProbs adds the loss of the rows of C probabilities, one row at a
// time, to *loss, the rows whose first arg-max is their label y[r] to
// *correct and, with confusion, each row to confusion[label][arg-max]: a
// layered network's tally (netTally, Stack.TallyRows).
func tallyProbs(probs []float32, y []int32, C int, loss *float64, correct *int, confusion [][]int) {
	for r, label := range y {
		row := probs[r*C : (r+1)*C]
		*loss -= math.Log(max(float64(row[label]), 1e-45))
		p := argmax(row)
		if p == int(label) {
			*correct++
		}
		if confusion != nil {
			confusion[label][p]++
		}
	}
}

// noFactors panics for a layered network: SufficientFactors is for the
// fully connected models, whose every weight is a dense layer's; a
// layered network's factors come with its gradient
// (GradientWithFactorsOn).
func (m *Model) noFactors() {
	if m.net != nil {
		panic("model: SufficientFactors of a layered network: use GradientWithFactorsOn (factors for its dense layers, the rest dense)")
	}
}

// netFactors copies to the host the sufficient factors of the dense
// layers' weights named in layers, from the pass just run (SFB's hybrid:
// factors for dense layers, whole gradients for the others).
func (m *Model) netFactors(layers []string, n int) []Factors {
	var out []Factors
	for _, name := range layers {
		u, v, J, D, ok := m.net.DenseFactors(name, n)
		if !ok {
			panic(fmt.Sprintf("model: factors of %q, which is not a dense layer's weight", name))
		}
		f := Factors{Weight: name, K: n, J: J, D: D, U: make([]float32, n*J), V: make([]float32, n*D)}
		m.backend.Store(f.U, u)
		m.backend.Store(f.V, v)
		out = append(out, f)
	}
	return out
}

// Help describes --model's values, for every command's help.
const Help = "model: softmax|svm|mlp, a preset (lenet5, leaf-cnn, small-cnn) or layers such as \"conv:32:5,relu,maxpool:2,dense\" (docs/reference/models.md)"

// IsLayered reports whether a --model value names a layered network (a
// preset or a layer spec) rather than softmax, svm or mlp.
func IsLayered(name string) bool { return !slices.Contains(Kinds, name) }

// SpecFor is the spec a --model value names for data of inputs features
// (shaped shape, [C, H, W] or nil) and classes classes: hidden applies to
// mlp, shape to a layered network. Validate checks it.
func SpecFor(name string, hidden []int, inputs, classes int, shape []int) Spec {
	if IsLayered(name) {
		return Spec{Kind: Net, Layers: name, Inputs: inputs, Classes: classes, Shape: slices.Clone(shape)}
	}
	s := Spec{Kind: name, Inputs: inputs, Classes: classes}
	if name == MLP {
		s.Hidden = slices.Clone(hidden)
	}
	return s
}

// Stochastic reports whether a spec's training draws random numbers (a
// layered network with a dropout layer, as Model.Stochastic); an
// unparsable spec is not.
func (s Spec) Stochastic() bool {
	if s.Kind != Net {
		return false
	}
	layers, err := parseLayers(s.Layers)
	if err != nil {
		return false
	}
	for _, l := range layers {
		if l.Kind == nn.Dropout {
			return true
		}
	}
	return false
}

// Stochastic reports whether the model draws randomness of its own in
// training (a layered network with dropout).
func (m *Model) Stochastic() bool { return m.net != nil && m.net.HasDropout() }

// SeedDropout reseeds the source of dropout's masks: a caller that
// trains several peers on one model gives each step's run its peer's
// seed, so that the masks do not depend on the order the peers reach the
// model.
func (m *Model) SeedDropout(seed uint64) {
	if m.net != nil {
		m.netRng = rand.New(rand.NewPCG(seed, 0x64726f70))
	}
}
