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

// Net is a network built for an input shape and a number of classes: a
// list of layers (one type per kind, each in its own file). It computes
// forward passes, losses and gradients on a compute backend (the CPU's
// kernels, chosen at run time, or a device's), its parameters, inputs
// and gradients tensors of that backend. A Net is not safe for
// concurrent use: its layers own scratch buffers.
type Net struct {
	spec    Spec
	in      Shape
	classes int
	layers  []layer
	params  []Param
	size    int
	be      compute.Backend
	ly      compute.Layers
	// acts and dacts hold each layer's output and its gradient for up
	// to cap examples; xin a host input's copy on a device backend.
	acts, dacts []compute.Tensor
	xin         compute.Tensor
	cap         int
	onHost      bool // the backend computes on host memory
	sum         compute.LossSum
	last        compute.Tensor // the last pass's input, where it computed
}

// Bounds on what Build accepts: a job's spec comes from the network, and
// a network this large would exhaust a member's memory before it
// trained (LEAF's CNN has 6.6 M parameters and 0.04 M values per
// example).
const (
	MaxParams      = 1 << 27 // 134 M parameters: 512 MiB
	MaxActivations = 1 << 24 // values per example over all layers
)

// fuseReLUPool lets a max pool apply the ReLU before it (pooledReLU);
// tests turn it off to check the result against the layers run in turn.
var fuseReLUPool = true

// Build checks spec's shapes for inputs of shape in and classes outputs
// and returns the network, computing on be (nil: compute.NewCPU()),
// which must compute layers (compute.Layers). An error names the layer
// and the shapes that do not fit.
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
	ly, ok := be.(compute.Layers)
	if !ok {
		return nil, fmt.Errorf("%w: the %s backend does not compute convolutional networks' layers", ErrSpec, be.Name())
	}
	probe := be.Alloc(1)
	onHost := probe.OnHost()
	be.Free(probe)
	n := &Net{spec: spec, in: in, classes: classes, be: be, ly: ly, onHost: onHost}
	s, acts := in, float64(in.Size())
	for i, l := range spec {
		ly, err := n.newLayer(i, l, s, i == len(spec)-1)
		if err != nil {
			return nil, fmt.Errorf("%w: layer %d (%s) on input %s: %v", ErrSpec, i+1, l, s, err)
		}
		if p, ok := ly.(*pool); ok && p.isMax && i > 0 && spec[i-1].Kind == ReLU && fuseReLUPool {
			p.relu = true
			n.layers[i-1] = &pooledReLU{n.layers[i-1].(*activation).io}
		}
		n.layers = append(n.layers, ly)
		_, s = ly.shapes()
		acts += min(float64(s.C)*float64(s.H)*float64(s.W), MaxActivations+1)
		if n.size > MaxParams || acts > MaxActivations {
			return nil, fmt.Errorf("%w: layer %d (%s): the network grows to %d parameters and %d values per example, beyond the %d and %d gossipd trains",
				ErrSpec, i+1, l, n.size, int(acts), MaxParams, MaxActivations)
		}
	}
	return n, nil
}

// newLayer makes layer i of kind l.Kind for input shape s.
func (n *Net) newLayer(i int, l Layer, s Shape, last bool) (layer, error) {
	switch l.Kind {
	case Dense:
		if s.Spatial() {
			return nil, fmt.Errorf("a dense layer takes a flat input: put flatten before it")
		}
		out := l.Out
		if out == 0 {
			if !last {
				return nil, fmt.Errorf("only the last layer is the output")
			}
			out = n.classes
		}
		return &dense{io{s, Shape{out, 1, 1}}, n.addParams(i, []int{out, s.C}, out, s.C)}, nil
	case Conv:
		if s.H+2*l.Pad < l.Kernel || s.W+2*l.Pad < l.Kernel {
			if !s.Spatial() {
				return nil, fmt.Errorf("a %d×%d kernel needs an image: give the input's shape (e.g. --input-shape 1×28×28)", l.Kernel, l.Kernel)
			}
			return nil, fmt.Errorf("a %d×%d kernel does not fit", l.Kernel, l.Kernel)
		}
		if l.Pad >= l.Kernel {
			return nil, fmt.Errorf("padding %d must be less than the kernel", l.Pad)
		}
		g, err := compute.NewWindow(s.C, s.H, s.W, l.Kernel, l.Stride, l.Pad)
		if err != nil {
			return nil, err
		}
		out := Shape{l.Out, g.OH, g.OW}
		w := n.addParams(i, []int{l.Out, s.C, l.Kernel, l.Kernel}, l.Out, s.C*l.Kernel*l.Kernel)
		return &conv{window: window{io{s, out}, g}, weights: w, ch: l.Out}, nil
	case MaxPool, AvgPool:
		if s.H < l.Kernel || s.W < l.Kernel {
			return nil, fmt.Errorf("a %d×%d window does not fit", l.Kernel, l.Kernel)
		}
		g, err := compute.NewWindow(s.C, s.H, s.W, l.Kernel, l.Stride, 0)
		if err != nil {
			return nil, err
		}
		return &pool{window: window{io{s, Shape{s.C, g.OH, g.OW}}, g}, isMax: l.Kind == MaxPool}, nil
	case Flatten:
		return &flatten{io{s, Shape{s.Size(), 1, 1}}}, nil
	case ReLU:
		return &activation{io{s, s}, compute.ActReLU}, nil
	case Tanh:
		return &activation{io{s, s}, compute.ActTanh}, nil
	case GELU:
		return &activation{io{s, s}, compute.ActGELU}, nil
	case Dropout:
		return &dropout{io: io{s, s}, p: l.P}, nil
	case LayerNorm:
		shape := []int{s.C, s.H, s.W}
		if !s.Spatial() {
			shape = []int{s.C}
		}
		return &norm{io: io{s, s}, weights: n.addParams(i, shape, s.Size(), 0, shape...), groups: 1, size: s.Size(), hw: 1}, nil
	case GroupNorm:
		if s.C%l.Groups != 0 {
			return nil, fmt.Errorf("%d groups do not divide %d channels", l.Groups, s.C)
		}
		return &norm{io: io{s, s}, weights: n.addParams(i, []int{s.C}, s.C, 0), groups: l.Groups, size: s.Size() / l.Groups, hw: s.H * s.W}, nil
	}
	return nil, fmt.Errorf("unknown kind %q", l.Kind)
}

// addParams places layer i's weight of shape w and bias of b values;
// past MaxParams it stops counting (Build then refuses the network).
func (n *Net) addParams(i int, w []int, b, fanIn int, bshape ...int) weights {
	size := 1.0
	for _, d := range w {
		size *= float64(d)
	}
	if float64(n.size)+size+float64(b) > MaxParams {
		n.size = MaxParams + 1
		return weights{}
	}
	p := weights{w: n.size, wn: int(size)}
	n.params = append(n.params, Param{Name: fmt.Sprintf("%d.weight", i), Shape: w, Off: p.w, FanIn: fanIn})
	n.size += p.wn
	p.b, p.bn = n.size, b
	if bshape == nil {
		bshape = []int{b}
	}
	n.params = append(n.params, Param{Name: fmt.Sprintf("%d.bias", i), Shape: bshape, Off: p.b, FanIn: fanIn})
	n.size += b
	return p
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
	s := make([]Shape, len(n.layers))
	for i, l := range n.layers {
		_, s[i] = l.shapes()
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
