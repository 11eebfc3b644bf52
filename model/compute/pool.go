package compute

import (
	"fmt"
	"math"
)

// The CPU's pooling. A max pool's backward finds each window's maximum
// again in its input (which the network keeps) instead of keeping the
// arg-max: the same comparisons, so the same value, ties to the first in
// row order, and no index tensor on a device.

func checkPool(name string, g Window, m int, in, out Tensor) {
	if g.P != 0 {
		panic(fmt.Sprintf("compute: %s with padding %d: pools take none", name, g.P))
	}
	CheckWindow(name, g, m, g.C, in, out)
}

// Pool implements Layers.
func (c *CPU) Pool(outT, inT Tensor, g Window, m int, isMax bool) {
	checkPool("Pool", g, m, inT, outT)
	in, out := host(inT), host(outT)
	os := g.C * g.Positions()
	c.split(m, func(_, lo, hi int) {
		for e := lo; e < hi; e++ {
			poolExample(c.ks, g, isMax, in[e*g.In():(e+1)*g.In()], out[e*os:(e+1)*os], nil)
		}
	})
}

// PoolBackward implements Layers.
func (c *CPU) PoolBackward(dinT, doutT, inT Tensor, g Window, m int, isMax bool) {
	checkPool("PoolBackward", g, m, inT, doutT)
	checkPool("PoolBackward", g, m, dinT, doutT)
	din, dout, in := host(dinT), host(doutT), host(inT)
	os := g.C * g.Positions()
	c.split(m, func(_, lo, hi int) {
		for e := lo; e < hi; e++ {
			dx := din[e*g.In() : (e+1)*g.In()]
			clear(dx)
			poolExample(c.ks, g, isMax, in[e*g.In():(e+1)*g.In()], dout[e*os:(e+1)*os], dx)
		}
	})
}

// poolExample pools one example x into out or, with dx, adds out (then
// the gradient at the pool's output) back through the pool into dx.
func poolExample(ks *kernels, g Window, isMax bool, x, out, dx []float32) {
	H, W, K, S, OH, OW := g.H, g.W, g.K, g.S, g.OH, g.OW
	if isMax && K == 2 && S == 2 {
		maxPool2(ks, g, x, out, dx)
		return
	}
	inv := 1 / float32(K*K)
	for ch := range g.C {
		xc := x[ch*H*W : (ch+1)*H*W]
		oc := out[ch*OH*OW : (ch+1)*OH*OW]
		var dc []float32
		if dx != nil {
			dc = dx[ch*H*W : (ch+1)*H*W]
		}
		for oh := range OH {
			for ow := range OW {
				o := oh*OW + ow
				if isMax {
					bi := oh*S*W + ow*S
					best := key(xc[bi])
					for ki := range K {
						for kj := range K {
							j := (oh*S+ki)*W + ow*S + kj
							if v := key(xc[j]); v > best {
								best, bi = v, j
							}
						}
					}
					if dc != nil {
						dc[bi] += oc[o]
					} else {
						oc[o] = unkey(best)
					}
					continue
				}
				if dc != nil {
					d := oc[o] * inv
					for ki := range K {
						for kj := range K {
							dc[(oh*S+ki)*W+ow*S+kj] += d
						}
					}
					continue
				}
				s := float32(0)
				for ki := range K {
					for kj := range K {
						s += xc[(oh*S+ki)*W+ow*S+kj]
					}
				}
				oc[o] = s * inv
			}
		}
	}
}

// maxPool2 is poolExample for the commonest window, 2×2 max pooling of
// stride 2; forward (the kernel set's pool2) and backward are separate
// loops, each without a branch on which it is.
func maxPool2(ks *kernels, g Window, x, out, dx []float32) {
	H, W, OH, OW := g.H, g.W, g.OH, g.OW
	for ch := range g.C {
		xc := x[ch*H*W : (ch+1)*H*W]
		oc := out[ch*OH*OW : (ch+1)*OH*OW]
		for oh := range OH {
			r0, r1 := xc[2*oh*W:(2*oh+1)*W], xc[(2*oh+1)*W:(2*oh+2)*W]
			oo := oc[oh*OW : (oh+1)*OW]
			if dx != nil {
				dr := dx[ch*H*W+2*oh*W : ch*H*W+(2*oh+2)*W]
				ks.pool2Back(r0, r1, oo, dr[:W], dr[W:])
				continue
			}
			ks.pool2(r0, r1, oo)
		}
	}
}

// pool2Kernel pools one row of 2×2 windows of stride 2 over rows r0
// and r1 (at least 2·len(out) values each) into out.
type pool2Kernel func(r0, r1, out []float32)

// maxPool2Go is the portable pool2 kernel.
func maxPool2Go(r0, r1, out []float32) {
	r0, r1 = r0[:2*len(out)], r1[:2*len(out)]
	for ow := range out {
		// Compared as ordered integers (key), which the compiler
		// selects without branches: real data, half zeros after a
		// ReLU, mispredicts them.
		j := 2 * ow
		out[ow] = unkey(max(key(r0[j]), key(r0[j+1]), key(r1[j]), key(r1[j+1])))
	}
}

// pool2BackKernel sets, for each window i of one row of 2×2 windows of
// stride 2 over rows r0 and r1, dx0[2i], dx0[2i+1], dx1[2i] and
// dx1[2i+1] to d[i] at the window's first maximum (in that order, by key)
// and to 0 at the others.
type pool2BackKernel func(r0, r1, d, dx0, dx1 []float32)

// maxPool2BackGo is the portable pool2Back kernel.
func maxPool2BackGo(r0, r1, d, dx0, dx1 []float32) {
	n := 2 * len(d)
	r0, r1, dx0, dx1 = r0[:n], r1[:n], dx0[:n], dx1[:n]
	for ow, v := range d {
		j := 2 * ow
		best, at := key(r0[j]), 0
		if k := key(r0[j+1]); k > best {
			best, at = k, 1
		}
		if k := key(r1[j]); k > best {
			best, at = k, 2
		}
		if k := key(r1[j+1]); k > best {
			at = 3
		}
		dx0[j], dx0[j+1], dx1[j], dx1[j+1] = 0, 0, 0, 0
		switch at {
		case 0:
			dx0[j] = v
		case 1:
			dx0[j+1] = v
		case 2:
			dx1[j] = v
		default:
			dx1[j+1] = v
		}
	}
}

// key maps a float's bits to an int32 of the same order (−0 below +0,
// where the floats tie; NaN never arises from finite weights and inputs,
// which the core checks); unkey maps it back.
func key(f float32) int32 {
	b := int32(math.Float32bits(f))
	return b ^ (b >> 31 & 0x7fffffff)
}

func unkey(k int32) float32 {
	return math.Float32frombits(uint32(k ^ (k >> 31 & 0x7fffffff)))
}
