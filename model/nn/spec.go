// Package nn describes and computes layered networks: dense and 2-D
// convolution layers, max and average pooling, flatten, ReLU, tanh, GELU,
// dropout, layer and group normalisation, ending in a softmax
// cross-entropy output. A network is written as a short spec,
//
//	conv:32:5:1:2,relu,maxpool:2,conv:64:5:1:2,relu,maxpool:2,dense:2048,relu,dense
//
// or named by a preset (Presets: lenet5, leaf-cnn, small-cnn), and its shapes are
// checked when it is built for an input shape (Build). Its parameters are
// one flat float32 vector in PyTorch's layouts and order (an
// nn.Sequential of the same layers: conv weights [out, in, kh, kw], dense
// [out, in], each layer's weight then its bias, named "INDEX.weight" and
// "INDEX.bias"), so that merging, codecs and privacy work on it as on
// every other model, and PyTorch's state_dict maps onto it by name.
package nn

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Layer kinds, as written in a spec.
const (
	Dense     = "dense"     // dense:OUT; the last layer, "dense", has one output per class
	Conv      = "conv"      // conv:OUT:KERNEL[:STRIDE[:PADDING]] (stride 1, padding 0)
	MaxPool   = "maxpool"   // maxpool:KERNEL[:STRIDE] (stride = kernel)
	AvgPool   = "avgpool"   // avgpool:KERNEL[:STRIDE] (stride = kernel)
	Flatten   = "flatten"   // C×H×W to C·H·W (inserted before the first dense after a spatial layer)
	ReLU      = "relu"      // max(x, 0)
	Tanh      = "tanh"      // tanh(x)
	GELU      = "gelu"      // x·Φ(x), the exact (erf) form
	Dropout   = "dropout"   // dropout:P, P in [0, 1): zeroes each value with probability P when training
	LayerNorm = "layernorm" // normalises each example over all its values, with a weight and bias per value
	GroupNorm = "groupnorm" // groupnorm:GROUPS: normalises each group of channels, weight and bias per channel
)

// Kinds lists the layer kinds.
var Kinds = []string{Dense, Conv, MaxPool, AvgPool, Flatten, ReLU, Tanh, GELU, Dropout, LayerNorm, GroupNorm}

// Presets are named specs.
var Presets = map[string]string{
	// LeNet-5 (LeCun et al. 1998) with ReLU and max pooling, padded so
	// that a 28×28 input has the original's 32×32 receptive field.
	"lenet5": "conv:6:5:1:2,relu,maxpool:2,conv:16:5,relu,maxpool:2,flatten,dense:120,relu,dense:84,relu,dense",
	// LEAF's FEMNIST CNN (Caldas et al. 2018): two 5×5 "same"
	// convolutions of 32 and 64 channels, each with 2×2 max pooling, a
	// 2,048-unit dense layer and the output.
	"leaf-cnn": "conv:32:5:1:2,relu,maxpool:2,conv:64:5:1:2,relu,maxpool:2,flatten,dense:2048,relu,dense",
	// A small CNN for small images (the 8×8 digits and up): two 3×3
	// convolutions of 8 and 16 channels, each with 2×2 max pooling, and
	// a 32-unit dense layer.
	"small-cnn": "conv:8:3:1:1,relu,maxpool:2,conv:16:3:1:1,relu,maxpool:2,flatten,dense:32,relu,dense",
}

// ErrSpec is returned for a spec that cannot be parsed or built.
var ErrSpec = errors.New("nn: invalid network spec")

// Layer is one layer of a spec.
type Layer struct {
	Kind string
	// Out is a dense layer's units (0 for the output layer: one per
	// class) or a convolution's output channels.
	Out int
	// Kernel, Stride and Pad are a convolution's or a pool's window.
	Kernel, Stride, Pad int
	// Groups is a group normalisation's number of groups.
	Groups int
	// P is a dropout's probability of zeroing a value.
	P float64
}

// String writes the layer as in a spec.
func (l Layer) String() string {
	switch l.Kind {
	case Dense:
		if l.Out == 0 {
			return Dense
		}
		return fmt.Sprintf("dense:%d", l.Out)
	case Conv:
		s := fmt.Sprintf("conv:%d:%d", l.Out, l.Kernel)
		if l.Stride != 1 || l.Pad != 0 {
			s += fmt.Sprintf(":%d", l.Stride)
		}
		if l.Pad != 0 {
			s += fmt.Sprintf(":%d", l.Pad)
		}
		return s
	case MaxPool, AvgPool:
		if l.Stride != l.Kernel {
			return fmt.Sprintf("%s:%d:%d", l.Kind, l.Kernel, l.Stride)
		}
		return fmt.Sprintf("%s:%d", l.Kind, l.Kernel)
	case Dropout:
		return "dropout:" + strconv.FormatFloat(l.P, 'g', -1, 64)
	case GroupNorm:
		return fmt.Sprintf("groupnorm:%d", l.Groups)
	}
	return l.Kind
}

// Spec is a network: its layers in order, the last the output.
type Spec []Layer

// String writes the spec in its canonical form (Parse of it gives it
// back): explicit flatten, defaults left out.
func (s Spec) String() string {
	parts := make([]string, len(s))
	for i, l := range s {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}

// Parse reads a spec (or a preset's name). It checks each layer's
// arguments; Build checks the shapes. A flatten is inserted before the
// first dense layer that follows a convolution or a pool without one, so
// that the layers' indices, and so their parameters' names, are those of
// the same nn.Sequential in PyTorch.
func Parse(text string) (Spec, error) {
	text = strings.TrimSpace(text)
	if p, ok := Presets[text]; ok {
		text = p
	}
	if text == "" {
		return nil, fmt.Errorf("%w: empty", ErrSpec)
	}
	var s Spec
	spatial := false
	for i, field := range strings.Split(text, ",") {
		l, err := parseLayer(strings.TrimSpace(field))
		if err != nil {
			return nil, fmt.Errorf("%w: layer %d %q: %v", ErrSpec, i+1, field, err)
		}
		switch l.Kind {
		case Conv, MaxPool, AvgPool:
			spatial = true
		case Flatten:
			spatial = false
		case Dense:
			if spatial {
				s = append(s, Layer{Kind: Flatten})
				spatial = false
			}
		}
		s = append(s, l)
	}
	for i, l := range s[:len(s)-1] {
		if l.Kind == Dense && l.Out == 0 {
			return nil, fmt.Errorf("%w: layer %d: only the last layer is the output \"dense\"; give the others a width (dense:N)", ErrSpec, i+1)
		}
	}
	if last := s[len(s)-1]; last.Kind != Dense || last.Out != 0 {
		return nil, fmt.Errorf("%w: the last layer must be the output \"dense\" (one unit per class), not %q", ErrSpec, last)
	}
	return s, nil
}

// args is how many numbers each kind takes: at least, at most.
var args = map[string][2]int{
	Dense: {0, 1}, Conv: {2, 4}, MaxPool: {1, 2}, AvgPool: {1, 2}, Flatten: {0, 0},
	ReLU: {0, 0}, Tanh: {0, 0}, GELU: {0, 0}, Dropout: {1, 1}, LayerNorm: {0, 0}, GroupNorm: {1, 1},
}

func parseLayer(field string) (Layer, error) {
	parts := strings.Split(field, ":")
	l := Layer{Kind: strings.ToLower(parts[0])}
	n, ok := args[l.Kind]
	if !ok {
		return l, fmt.Errorf("unknown kind %q, want one of %s", parts[0], strings.Join(Kinds, ", "))
	}
	nums := parts[1:]
	if len(nums) < n[0] || len(nums) > n[1] {
		if n[0] == n[1] {
			return l, fmt.Errorf("%s takes %d arguments, got %d", l.Kind, n[0], len(nums))
		}
		return l, fmt.Errorf("%s takes %d to %d arguments, got %d", l.Kind, n[0], n[1], len(nums))
	}
	if l.Kind == Dropout {
		p, err := strconv.ParseFloat(nums[0], 64)
		if err != nil || !(p >= 0 && p < 1) {
			return l, fmt.Errorf("dropout probability %q, want a number in [0, 1)", nums[0])
		}
		l.P = p
		return l, nil
	}
	v := make([]int, len(nums))
	for i, s := range nums {
		k, err := strconv.Atoi(s)
		if err != nil || k < 0 || k > 1<<20 {
			return l, fmt.Errorf("argument %d %q is not a whole number from 0 to %d", i+1, s, 1<<20)
		}
		v[i] = k
	}
	positive := func(what string, k int) error {
		if k < 1 {
			return fmt.Errorf("%s %d, want at least 1", what, k)
		}
		return nil
	}
	switch l.Kind {
	case Dense:
		if len(v) == 1 {
			l.Out = v[0]
			return l, positive("width", l.Out)
		}
	case Conv:
		l.Out, l.Kernel, l.Stride = v[0], v[1], 1
		if len(v) > 2 {
			l.Stride = v[2]
		}
		if len(v) > 3 {
			l.Pad = v[3]
		}
		return l, errors.Join(positive("channels", l.Out), positive("kernel", l.Kernel), positive("stride", l.Stride))
	case MaxPool, AvgPool:
		l.Kernel, l.Stride = v[0], v[0]
		if len(v) > 1 {
			l.Stride = v[1]
		}
		return l, errors.Join(positive("kernel", l.Kernel), positive("stride", l.Stride))
	case GroupNorm:
		l.Groups = v[0]
		return l, positive("groups", l.Groups)
	}
	return l, nil
}

// Shape is the shape of one example's values: C channels of H×W (a
// flat vector of F features is F×1×1).
type Shape struct{ C, H, W int }

// Size is the number of values.
func (s Shape) Size() int { return s.C * s.H * s.W }

// Spatial reports whether the shape has more than one position.
func (s Shape) Spatial() bool { return s.H > 1 || s.W > 1 }

// String writes "C×H×W" (or "F" for a flat shape).
func (s Shape) String() string {
	if !s.Spatial() {
		return strconv.Itoa(s.C)
	}
	return fmt.Sprintf("%d×%d×%d", s.C, s.H, s.W)
}

// ParseShape reads "C×H×W" (or "CxHxW"), "H×W" (one channel) or "F".
func ParseShape(text string) (Shape, error) {
	f := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r == 'x' || r == '×' || r == '*' })
	v := make([]int, len(f))
	for i, s := range f {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || k < 1 {
			return Shape{}, fmt.Errorf("%w: input shape %q: %q is not a positive whole number", ErrSpec, text, s)
		}
		v[i] = k
	}
	switch len(v) {
	case 1:
		return Shape{v[0], 1, 1}, nil
	case 2:
		return Shape{1, v[0], v[1]}, nil
	case 3:
		return Shape{v[0], v[1], v[2]}, nil
	}
	return Shape{}, fmt.Errorf("%w: input shape %q, want C×H×W, H×W or F", ErrSpec, text)
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var n []string
	for k := range Presets {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}
