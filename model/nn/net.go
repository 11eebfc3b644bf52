package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// Param names one parameter tensor of a network: PyTorch's state_dict
// name ("3.weight"), its shape and where it starts in the flat vector.
type Param struct {
	Name  string
	Shape []int
	Off   int
	// FanIn is the inputs per output of its layer (PyTorch's default
	// initialisation draws from ±1/√FanIn); 0 for normalisation.
	FanIn int
}

// Size is the number of values.
func (p Param) Size() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// plan is one layer built for its input shape.
type plan struct {
	Layer
	in, out Shape
	// w, b are the offsets of the weight and bias in the parameter
	// vector (−1: none); wn, bn their sizes.
	w, b, wn, bn int
}

// Net is a network built for an input shape and a number of classes. It
// computes forward passes, losses and gradients on host memory, its
// matrix products on a compute backend (the CPU's kernels, chosen at run
// time). A Net is not safe for concurrent use: it owns scratch buffers.
type Net struct {
	spec    Spec
	in      Shape
	classes int
	plans   []plan
	params  []Param
	size    int
	be      compute.Backend
	ws      workspace
}

// Bounds on what Build accepts: a job's spec comes from the network, and
// a network this large would exhaust a member's memory before it
// trained (LEAF's CNN has 6.6 M parameters and 0.04 M values per
// example).
const (
	MaxParams      = 1 << 27 // 134 M parameters: 512 MiB
	MaxActivations = 1 << 24 // values per example over all layers
)

// Build checks spec's shapes for inputs of shape in and classes outputs
// and returns the network, computing on be (nil: compute.NewCPU()). An
// error names the layer and the shapes that do not fit.
func Build(spec Spec, in Shape, classes int, be compute.Backend) (*Net, error) {
	if in.C < 1 || in.H < 1 || in.W < 1 {
		return nil, fmt.Errorf("%w: input shape %d×%d×%d", ErrSpec, in.C, in.H, in.W)
	}
	if classes < 2 {
		return nil, fmt.Errorf("%w: %d classes, need at least 2", ErrSpec, classes)
	}
	if len(spec) == 0 {
		return nil, fmt.Errorf("%w: no layers", ErrSpec)
	}
	if be == nil {
		be = compute.NewCPU()
	}
	n := &Net{spec: spec, in: in, classes: classes, be: be}
	s, acts := in, float64(in.Size())
	for i, l := range spec {
		p := plan{Layer: l, in: s, w: -1, b: -1}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("%w: layer %d (%s) on input %s: %s", ErrSpec, i+1, l, s, fmt.Sprintf(format, a...))
		}
		switch l.Kind {
		case Dense:
			if s.Spatial() {
				return nil, fail("a dense layer takes a flat input: put flatten before it")
			}
			out := l.Out
			if out == 0 {
				if i != len(spec)-1 {
					return nil, fail("only the last layer is the output")
				}
				out = classes
			}
			p.out = Shape{out, 1, 1}
			n.addParams(&p, i, []int{out, s.C}, out, s.C)
		case Conv:
			oh, ow := (s.H+2*l.Pad-l.Kernel)/l.Stride+1, (s.W+2*l.Pad-l.Kernel)/l.Stride+1
			if s.H+2*l.Pad < l.Kernel || s.W+2*l.Pad < l.Kernel {
				if !s.Spatial() {
					return nil, fail("a %d×%d kernel needs an image: give the input's shape (e.g. --input-shape 1×28×28)", l.Kernel, l.Kernel)
				}
				return nil, fail("a %d×%d kernel does not fit", l.Kernel, l.Kernel)
			}
			if l.Pad >= l.Kernel {
				return nil, fail("padding %d must be less than the kernel", l.Pad)
			}
			p.out = Shape{l.Out, oh, ow}
			n.addParams(&p, i, []int{l.Out, s.C, l.Kernel, l.Kernel}, l.Out, s.C*l.Kernel*l.Kernel)
		case MaxPool, AvgPool:
			if s.H < l.Kernel || s.W < l.Kernel {
				return nil, fail("a %d×%d window does not fit", l.Kernel, l.Kernel)
			}
			p.out = Shape{s.C, (s.H-l.Kernel)/l.Stride + 1, (s.W-l.Kernel)/l.Stride + 1}
		case Flatten:
			p.out = Shape{s.Size(), 1, 1}
		case ReLU, Tanh, GELU, Dropout:
			p.out = s
		case LayerNorm:
			p.out = s
			shape := []int{s.C, s.H, s.W}
			if !s.Spatial() {
				shape = []int{s.C}
			}
			n.addParams(&p, i, shape, s.Size(), 0)
		case GroupNorm:
			if s.C%l.Groups != 0 {
				return nil, fail("%d groups do not divide %d channels", l.Groups, s.C)
			}
			p.out = s
			n.addParams(&p, i, []int{s.C}, s.C, 0)
		default:
			return nil, fail("unknown kind")
		}
		n.plans = append(n.plans, p)
		s = p.out
		acts += min(float64(p.out.C)*float64(p.out.H)*float64(p.out.W), MaxActivations+1)
		if n.size > MaxParams || acts > MaxActivations {
			return nil, fmt.Errorf("%w: layer %d (%s): the network grows to %d parameters and %d values per example, beyond the %d and %d gossipd trains",
				ErrSpec, i+1, l, n.size, int(acts), MaxParams, MaxActivations)
		}
	}
	return n, nil
}

// addParams gives p a weight of shape w and a bias of b values; past
// MaxParams it stops counting (Build then refuses the network).
func (n *Net) addParams(p *plan, i int, w []int, b, fanIn int) {
	p.w, p.wn = n.size, 1
	size := 1.0
	for _, d := range w {
		size *= float64(d)
	}
	if float64(n.size)+size+float64(b) > MaxParams {
		n.size = MaxParams + 1
		return
	}
	for _, d := range w {
		p.wn *= d
	}
	n.params = append(n.params, Param{Name: fmt.Sprintf("%d.weight", i), Shape: w, Off: p.w, FanIn: fanIn})
	n.size += p.wn
	p.b, p.bn = n.size, b
	n.params = append(n.params, Param{Name: fmt.Sprintf("%d.bias", i), Shape: []int{b}, Off: p.b, FanIn: fanIn})
	n.size += b
}

// Spec, Input, Classes: what the network was built from.
func (n *Net) Spec() Spec     { return n.spec }
func (n *Net) Input() Shape   { return n.in }
func (n *Net) Classes() int   { return n.classes }
func (n *Net) NumParams() int { return n.size }

// Params lists the parameter tensors in order.
func (n *Net) Params() []Param { return n.params }

// Shapes lists each layer's output shape.
func (n *Net) Shapes() []Shape {
	s := make([]Shape, len(n.plans))
	for i, p := range n.plans {
		s[i] = p.out
	}
	return s
}

// Init fills params (NumParams values) as PyTorch initialises the same
// layers: weights and biases of dense and convolution layers uniform in
// ±1/√fan-in, normalisations' weights 1 and biases 0.
func (n *Net) Init(params []float32, rng *rand.Rand) {
	for _, p := range n.params {
		v := params[p.Off : p.Off+p.Size()]
		if p.FanIn == 0 {
			fill := float32(0)
			if p.Name[len(p.Name)-6:] == "weight" {
				fill = 1
			}
			for i := range v {
				v[i] = fill
			}
			continue
		}
		bound := 1 / math.Sqrt(float64(p.FanIn))
		for i := range v {
			v[i] = float32((2*rng.Float64() - 1) * bound)
		}
	}
}
