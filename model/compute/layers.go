package compute

import (
	"fmt"
	"math"
)

// Window is the geometry of a convolution or a pool over examples of
// C×H×W values (row-major, channel first): K×K windows at stride S with
// zero padding P, giving OH×OW positions per channel.
type Window struct {
	C, H, W    int
	K, S, P    int
	OH, OW     int
	inN, colsN int // per example: input values, unrolled values
}

// NewWindow returns the window of K×K at stride s with padding p over
// inputs of c×h×w, or an error when it does not fit.
func NewWindow(c, h, w, k, s, p int) (Window, error) {
	if c < 1 || h < 1 || w < 1 || k < 1 || s < 1 || p < 0 || h+2*p < k || w+2*p < k {
		return Window{}, fmt.Errorf("compute: a %d×%d window at stride %d, padding %d, does not fit %d×%d×%d", k, k, s, p, c, h, w)
	}
	g := Window{C: c, H: h, W: w, K: k, S: s, P: p, OH: (h+2*p-k)/s + 1, OW: (w+2*p-k)/s + 1}
	g.inN, g.colsN = c*h*w, c*k*k*g.OH*g.OW
	return g, nil
}

// In is the values of one input example, C·H·W.
func (g Window) In() int { return g.inN }

// Positions is the output positions per channel, OH·OW.
func (g Window) Positions() int { return g.OH * g.OW }

// Cols is the values of one example unrolled (im2col): C·K·K rows of
// OH·OW.
func (g Window) Cols() int { return g.colsN }

// Activation is an element-wise function of a layer.
type Activation int

// The activations.
const (
	ActReLU Activation = iota
	ActTanh
	ActGELU
)

// Layers is implemented by backends that compute the layers of
// convolutional networks (model/nn) beside the dense kernels, on m
// examples at a time, each example's values contiguous (row-major,
// channel first). Gradients are added to what dst holds, either summed
// over the examples (stride 0) or each example's into its own row of
// stride values (per-example gradients, DP-SGD). backendtest checks
// every method against float64 reference code.
type Layers interface {
	// ConvForward sets out (m × ch·OH·OW) to the convolution of x (m ×
	// C·H·W) by weight (ch × C·K·K, PyTorch's [out, in, kh, kw]) plus
	// bias (ch). cols (m·Cols() values), when not empty, receives what
	// ConvBackward needs of the inputs, in the backend's own layout (the
	// unrolled inputs; on the CPU, for stride 1, the zero-padded
	// images); it must be a tensor that only ConvForward writes, for
	// this window, zero when first given (entries for the padding are
	// left as they are).
	ConvForward(out, cols, x, weight, bias Tensor, g Window, ch, m int)
	// ConvBackward adds the weight's and bias's gradients from dout and
	// cols (what ConvForward saw) to dweight and dbias (stride as above,
	// counted from their starts), and where dx is not empty sets it to
	// the gradient at the input.
	ConvBackward(dx, dweight, dbias, dout, cols, weight Tensor, g Window, ch, m, stride int)
	// Pool sets out (m × C·OH·OW) to the max or the mean over each
	// window of in (no padding).
	Pool(out, in Tensor, g Window, m int, isMax bool)
	// PoolBackward sets din from dout through the pool that gave out
	// from in: to a max pool's first maximum in row order, or spread
	// evenly.
	PoolBackward(din, dout, in Tensor, g Window, m int, isMax bool)
	// Activate sets out = f(in), element-wise.
	Activate(out, in Tensor, f Activation)
	// ActivateBackward sets din = dout·f′ at in (out is f(in)).
	ActivateBackward(din, dout, in, out Tensor, f Activation)
	// Norm normalises each of m examples' groups (layer norm: 1 group,
	// group norm: C/groups channels; size values per group) to mean 0
	// and variance 1 (ε = 1e-5), then scales and shifts them by weight
	// and bias, per channel of hw values (per value for layer norm: hw
	// 1). stats (2·m·groups) gets each group's mean and 1/σ.
	Norm(out, stats, in, weight, bias Tensor, m, groups, size, hw int)
	// NormBackward adds the weight's and bias's gradients (stride as
	// above) and where din is not empty sets the input's.
	NormBackward(din, dweight, dbias, dout, in, weight, stats Tensor, m, groups, size, hw, stride int)
	// ChannelSums adds to dst each channel's sum over its pos values in
	// src (m × ch × pos): summed over the examples (stride 0) or into
	// example e's row at e·stride. A dense layer's bias gradient is
	// ChannelSums with pos 1.
	ChannelSums(dst, src Tensor, m, ch, pos, stride int)
	// Mul sets dst = a·b element-wise (dst may alias either).
	Mul(dst, a, b Tensor)
	// Zero sets x to zeros.
	Zero(x Tensor)
}

// CheckWindow panics unless x (m inputs) and out (m × ch outputs of g)
// fit; backends check their arguments with it.
func CheckWindow(name string, g Window, m, ch int, in, out Tensor) {
	if g.inN == 0 {
		panic(fmt.Sprintf("compute: %s: a window not made by NewWindow", name))
	}
	if m < 0 || in.Len() < m*g.inN || out.Len() < m*ch*g.OH*g.OW {
		panic(fmt.Sprintf("compute: %s of %d examples: input of %d values (want %d), output of %d (want %d)",
			name, m, in.Len(), m*g.inN, out.Len(), m*ch*g.OH*g.OW))
	}
}

// CheckNorm panics unless a normalisation's tensors fit: in and out (or
// dout) m·groups·size values, stats 2·m·groups, the weight a value per
// hw, and the gradients given (dweight, dbias) rows of that many values
// stride apart (stride 0: one row). Backends check their arguments with
// it.
func CheckNorm(name string, m, groups, size, hw, stride int, in, out, stats, weight Tensor, grads ...Tensor) {
	ok := m >= 0 && groups >= 1 && size >= 1 && hw >= 1 && size*groups%hw == 0 && stride >= 0
	nw := 0
	if ok {
		nw = groups * size / hw
		ok = in.Len() >= m*groups*size && out.Len() >= m*groups*size && stats.Len() >= 2*m*groups && weight.Len() >= nw
		for _, g := range grads {
			ok = ok && g.Len() >= max(0, m-1)*stride+nw
		}
	}
	if !ok {
		lens := []int{in.Len(), out.Len(), stats.Len(), weight.Len()}
		for _, g := range grads {
			lens = append(lens, g.Len())
		}
		panic(fmt.Sprintf("compute: %s of %d examples, %d groups of %d (%d per weight, stride %d): tensors of %v values (input, output, stats, weight, gradients)",
			name, m, groups, size, hw, stride, lens))
	}
}

// CheckChannelSums panics unless ChannelSums' tensors fit.
func CheckChannelSums(m, ch, pos, stride int, dst, src Tensor) {
	if m < 0 || stride < 0 || src.Len() < m*ch*pos || dst.Len() < max(0, m-1)*stride+ch {
		panic(fmt.Sprintf("compute: ChannelSums of %d×%d×%d (stride %d): src %d, dst %d values", m, ch, pos, stride, src.Len(), dst.Len()))
	}
}

// Gelu is GELU (the exact one, with erf) as every backend computes it,
// and GeluGrad its derivative.
func Gelu(z float64) float64 { return 0.5 * z * (1 + math.Erf(z/math.Sqrt2)) }

// GeluGrad is GELU's derivative at z.
func GeluGrad(z float64) float64 {
	return 0.5*(1+math.Erf(z/math.Sqrt2)) + z*math.Exp(-z*z/2)/math.Sqrt(2*math.Pi)
}
