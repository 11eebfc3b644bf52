package nn

import "math"

// pool is a max or an average pool: K×K windows at stride s, no padding.
type pool struct {
	window
	isMax bool
	idx   []int32 // a max pool's arg-max per output (its index in the example)
}

func (l *pool) forward(s *pass, in, out []float32) {
	if l.isMax && len(l.idx) < len(out) {
		l.idx = make([]int32, len(out))
	}
	is, os := l.in.Size(), l.out.Size()
	parallel(s.m, func(_, lo, hi int) {
		poolForward(l.window, l.isMax, in[lo*is:hi*is], out[lo*os:hi*os], l.idx[min(len(l.idx), lo*os):min(len(l.idx), hi*os)], hi-lo)
	})
}

func (l *pool) backward(s *pass, _, _, dout, din []float32) {
	if din == nil {
		return
	}
	is, os := l.in.Size(), l.out.Size()
	parallel(s.m, func(_, lo, hi int) {
		poolBackward(l.window, l.isMax, dout[lo*os:hi*os], din[lo*is:hi*is], l.idx[min(len(l.idx), lo*os):min(len(l.idx), hi*os)], hi-lo)
	})
}

// poolForward computes a max or average pool of m examples; a max pool records
// in idx which input value (index within its example) each output took.
func poolForward(p window, isMax bool, in, out []float32, idx []int32, m int) {
	H, W, K, S := p.in.H, p.in.W, p.k, p.s
	OH, OW := p.out.H, p.out.W
	inv := 1 / float32(K*K)
	if isMax && K == 2 && S == 2 {
		maxPool2(p, in, out, idx, m)
		return
	}
	for e := range m {
		for c := range p.in.C {
			base := e*p.in.Size() + c*H*W
			ob := e*p.out.Size() + c*OH*OW
			for oh := range OH {
				for ow := range OW {
					o := ob + oh*OW + ow
					if isMax {
						bi := (oh*S)*W + ow*S
						best := in[base+bi]
						for ki := range K {
							for kj := range K {
								j := (oh*S+ki)*W + ow*S + kj
								if v := in[base+j]; v > best {
									best, bi = v, j
								}
							}
						}
						out[o], idx[o] = best, int32(c*H*W+bi)
						continue
					}
					s := float32(0)
					for ki := range K {
						for kj := range K {
							s += in[base+(oh*S+ki)*W+ow*S+kj]
						}
					}
					out[o] = s * inv
				}
			}
		}
	}
}

// maxPool2 is pool for the commonest window, 2×2 max pooling of stride
// 2: the same results, ties to the first in row order.
func maxPool2(p window, in, out []float32, idx []int32, m int) {
	H, W, OH, OW := p.in.H, p.in.W, p.out.H, p.out.W
	for e := range m {
		for c := range p.in.C {
			x := in[e*p.in.Size()+c*H*W : e*p.in.Size()+(c+1)*H*W]
			o := out[e*p.out.Size()+c*OH*OW : e*p.out.Size()+(c+1)*OH*OW]
			ix := idx[e*p.out.Size()+c*OH*OW : e*p.out.Size()+(c+1)*OH*OW]
			for oh := range OH {
				r0, r1 := x[2*oh*W:(2*oh+1)*W], x[(2*oh+1)*W:(2*oh+2)*W]
				oo, io := o[oh*OW:(oh+1)*OW], ix[oh*OW:(oh+1)*OW]
				base := int32(c*H*W + 2*oh*W)
				for ow := range oo {
					// Compared as ordered integers (key), which the
					// compiler selects without branches: real data,
					// half zeros after a ReLU, mispredicts them.
					j := 2 * ow
					best, at := key(r0[j]), int32(j)
					if k := key(r0[j+1]); k > best {
						best, at = k, int32(j+1)
					}
					if k := key(r1[j]); k > best {
						best, at = k, int32(W+j)
					}
					if k := key(r1[j+1]); k > best {
						best, at = k, int32(W+j+1)
					}
					oo[ow], io[ow] = unkey(best), base+at
				}
			}
		}
	}
}

// key maps a float's bits to an int32 of the same order (−0 below +0,
// where the floats tie; NaN never arises from finite weights and
// inputs, which the core checks); unkey maps it back.
func key(f float32) int32 {
	b := int32(math.Float32bits(f))
	return b ^ (b >> 31 & 0x7fffffff)
}

func unkey(k int32) float32 {
	return math.Float32frombits(uint32(k ^ (k >> 31 & 0x7fffffff)))
}

// poolBackward sets din from dout through a pool.
func poolBackward(p window, isMax bool, dout, din []float32, idx []int32, m int) {
	clear(din)
	H, W, K, S := p.in.H, p.in.W, p.k, p.s
	OH, OW := p.out.H, p.out.W
	inv := 1 / float32(K*K)
	for e := range m {
		db := din[e*p.in.Size() : (e+1)*p.in.Size()]
		for c := range p.in.C {
			ob := e*p.out.Size() + c*OH*OW
			for o := range OH * OW {
				d := dout[ob+o]
				if isMax {
					db[idx[ob+o]] += d
					continue
				}
				oh, ow := o/OW, o%OW
				for ki := range K {
					for kj := range K {
						db[c*H*W+(oh*S+ki)*W+ow*S+kj] += d * inv
					}
				}
			}
		}
	}
}
