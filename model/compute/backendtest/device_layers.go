package backendtest

import "github.com/gossipd/gossipd/model/compute"

// The emulated device's layers (compute.Layers): the CPU's kernels on
// its memory. An empty tensor stays empty (it means "none").

func (d *Device) opt(t compute.Tensor) compute.Tensor {
	if t.Len() == 0 {
		return compute.Tensor{}
	}
	return d.at(t)
}

// ConvForward implements compute.Layers.
func (d *Device) ConvForward(out, cols, x, w, b compute.Tensor, g compute.Window, ch, m int) {
	d.cpu.ConvForward(d.at(out), d.opt(cols), d.at(x), d.at(w), d.at(b), g, ch, m)
}

// ConvBackward implements compute.Layers.
func (d *Device) ConvBackward(dx, dw, db, dout, cols, w compute.Tensor, g compute.Window, ch, m, stride int) {
	d.cpu.ConvBackward(d.opt(dx), d.at(dw), d.at(db), d.at(dout), d.at(cols), d.at(w), g, ch, m, stride)
}

// Pool implements compute.Layers.
func (d *Device) Pool(out, in compute.Tensor, g compute.Window, m int, isMax bool) {
	d.cpu.Pool(d.at(out), d.at(in), g, m, isMax)
}

// PoolBackward implements compute.Layers.
func (d *Device) PoolBackward(din, dout, in compute.Tensor, g compute.Window, m int, isMax bool) {
	d.cpu.PoolBackward(d.at(din), d.at(dout), d.at(in), g, m, isMax)
}

// Activate implements compute.Layers.
func (d *Device) Activate(out, in compute.Tensor, f compute.Activation) {
	d.cpu.Activate(d.at(out), d.at(in), f)
}

// ActivateBackward implements compute.Layers.
func (d *Device) ActivateBackward(din, dout, in, out compute.Tensor, f compute.Activation) {
	d.cpu.ActivateBackward(d.at(din), d.at(dout), d.at(in), d.at(out), f)
}

// Norm implements compute.Layers.
func (d *Device) Norm(out, stats, in, w, b compute.Tensor, m, groups, size, hw int) {
	d.cpu.Norm(d.at(out), d.at(stats), d.at(in), d.at(w), d.at(b), m, groups, size, hw)
}

// NormBackward implements compute.Layers.
func (d *Device) NormBackward(din, dw, db, dout, in, w, stats compute.Tensor, m, groups, size, hw, stride int) {
	d.cpu.NormBackward(d.opt(din), d.at(dw), d.at(db), d.at(dout), d.at(in), d.at(w), d.at(stats), m, groups, size, hw, stride)
}

// ChannelSums implements compute.Layers.
func (d *Device) ChannelSums(dst, src compute.Tensor, m, ch, pos, stride int) {
	d.cpu.ChannelSums(d.at(dst), d.at(src), m, ch, pos, stride)
}

// Mul implements compute.Layers.
func (d *Device) Mul(dst, a, b compute.Tensor) { d.cpu.Mul(d.at(dst), d.at(a), d.at(b)) }

// Zero implements compute.Layers.
func (d *Device) Zero(x compute.Tensor) { d.cpu.Zero(d.at(x)) }

var _ compute.Layers = (*Device)(nil)
