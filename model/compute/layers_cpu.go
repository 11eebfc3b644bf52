package compute

import (
	"fmt"
	"math"
)

// The CPU's element-wise layers and normalisations (Layers).

// chunks runs f over [0, n) in blocks split between the threads.
func (c *CPU) chunks(n int, f func(lo, hi int)) {
	const block = 1 << 14
	b := (n + block - 1) / block
	c.split(b, func(_, lo, hi int) { f(lo*block, min(n, hi*block)) })
}

// Activate implements Layers.
func (c *CPU) Activate(outT, inT Tensor, f Activation) {
	out, in := host(outT), host(inT)
	sameLen("Activate", out, in)
	c.chunks(len(in), func(lo, hi int) { activate(out[lo:hi], in[lo:hi], f) })
}

func activate(out, in []float32, f Activation) {
	out = out[:len(in)]
	switch f {
	case ActReLU:
		for j, v := range in {
			out[j] = max(v, 0)
		}
	case ActTanh:
		for j, v := range in {
			out[j] = float32(math.Tanh(float64(v)))
		}
	case ActGELU:
		for j, v := range in {
			out[j] = float32(Gelu(float64(v)))
		}
	default:
		panic(fmt.Sprintf("compute: activation %d", f))
	}
}

// ActivateBackward implements Layers.
func (c *CPU) ActivateBackward(dinT, doutT, inT, outT Tensor, f Activation) {
	din, dout, in, out := host(dinT), host(doutT), host(inT), host(outT)
	sameLen("ActivateBackward", din, dout)
	sameLen("ActivateBackward", in, out)
	sameLen("ActivateBackward", din, in)
	c.chunks(len(in), func(lo, hi int) { derive(din[lo:hi], dout[lo:hi], in[lo:hi], out[lo:hi], f) })
}

func derive(din, dout, in, out []float32, f Activation) {
	dout, din = dout[:len(out)], din[:len(out)]
	switch f {
	case ActReLU:
		// out is max(in, 0) ≥ 0: its bits are 0 where it is zero. A mask
		// from them instead of a branch, which real data (half zeros)
		// mispredicts.
		for j, v := range out {
			zero := uint32(int32(math.Float32bits(v)-1) >> 31)
			din[j] = math.Float32frombits(math.Float32bits(dout[j]) &^ zero)
		}
	case ActTanh:
		for j, v := range out {
			din[j] = dout[j] * (1 - v*v)
		}
	case ActGELU:
		for j, v := range in[:len(out)] {
			din[j] = dout[j] * float32(GeluGrad(float64(v)))
		}
	default:
		panic(fmt.Sprintf("compute: activation %d", f))
	}
}

// normEps is the normalisations' ε, PyTorch's default.
const normEps = 1e-5

// Norm implements Layers.
func (c *CPU) Norm(outT, statsT, inT, wT, bT Tensor, m, groups, size, hw int) {
	CheckNorm("Norm", m, groups, size, hw, 0, inT, outT, statsT, wT)
	in, out, stats, weight, bias := host(inT), host(outT), host(statsT), host(wT), host(bT)
	c.split(m, func(_, lo, hi int) {
		for e := lo; e < hi; e++ {
			for q := range groups {
				off := (e*groups + q) * size
				x := in[off : off+size]
				mean, sq := 0.0, 0.0
				for _, v := range x {
					mean += float64(v)
				}
				mean /= float64(size)
				for _, v := range x {
					d := float64(v) - mean
					sq += d * d
				}
				rstd := 1 / math.Sqrt(sq/float64(size)+normEps)
				stats[2*(e*groups+q)], stats[2*(e*groups+q)+1] = float32(mean), float32(rstd)
				o := out[off : off+size]
				for j, v := range x {
					ch := (q*size + j) / hw
					o[j] = float32((float64(v)-mean)*rstd)*weight[ch] + bias[ch]
				}
			}
		}
	})
}

// NormBackward implements Layers. Its weight and bias gradients are
// summed in example order (one thread) unless per example.
func (c *CPU) NormBackward(dinT, dwT, dbT, doutT, inT, wT, statsT Tensor, m, groups, size, hw, stride int) {
	CheckNorm("NormBackward", m, groups, size, hw, stride, inT, doutT, statsT, wT, dwT, dbT)
	in, dout, weight, stats := host(inT), host(doutT), host(wT), host(statsT)
	dwAll, dbAll := host(dwT), host(dbT)
	var din []float32
	if dinT.Len() > 0 {
		din = host(dinT)
	}
	for e := range m {
		dw, db := dwAll, dbAll
		if stride > 0 {
			dw, db = dwAll[e*stride:], dbAll[e*stride:]
		}
		for q := range groups {
			off := (e*groups + q) * size
			mean, rstd := float64(stats[2*(e*groups+q)]), float64(stats[2*(e*groups+q)+1])
			x, d := in[off:off+size], dout[off:off+size]
			sg, sgx := 0.0, 0.0
			for j, v := range x {
				ch := (q*size + j) / hw
				xh := (float64(v) - mean) * rstd
				dw[ch] += float32(float64(d[j]) * xh)
				db[ch] += d[j]
				gj := float64(d[j]) * float64(weight[ch])
				sg += gj
				sgx += gj * xh
			}
			if din == nil {
				continue
			}
			sg /= float64(size)
			sgx /= float64(size)
			dx := din[off : off+size]
			for j, v := range x {
				ch := (q*size + j) / hw
				xh := (float64(v) - mean) * rstd
				dx[j] = float32(rstd * (float64(d[j])*float64(weight[ch]) - sg - xh*sgx))
			}
		}
	}
}

// ChannelSums implements Layers.
func (c *CPU) ChannelSums(dstT, srcT Tensor, m, ch, pos, stride int) {
	CheckChannelSums(m, ch, pos, stride, dstT, srcT)
	dst, src := host(dstT), host(srcT)
	for e := range m {
		d := dst[e*stride : e*stride+ch]
		for k := range ch {
			sum := float32(0)
			for _, v := range src[(e*ch+k)*pos : (e*ch+k+1)*pos] {
				sum += v
			}
			d[k] += sum
		}
	}
}

// Mul implements Layers.
func (c *CPU) Mul(dstT, aT, bT Tensor) {
	dst, a, b := host(dstT), host(aT), host(bT)
	sameLen("Mul", dst, a)
	sameLen("Mul", a, b)
	for j, v := range a {
		dst[j] = v * b[j]
	}
}

// Zero implements Layers.
func (c *CPU) Zero(x Tensor) { clear(host(x)) }
