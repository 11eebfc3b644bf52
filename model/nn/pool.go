package nn

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
	poolForward(l.window, l.isMax, in, out, l.idx, s.m)
}

func (l *pool) backward(s *pass, _, _, dout, din []float32) {
	if din != nil {
		poolBackward(l.window, l.isMax, dout, din, l.idx, s.m)
	}
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
				for ow := range oo {
					j := 2 * ow
					best, at := r0[j], 2*oh*W+j
					if v := r0[j+1]; v > best {
						best, at = v, 2*oh*W+j+1
					}
					if v := r1[j]; v > best {
						best, at = v, (2*oh+1)*W+j
					}
					if v := r1[j+1]; v > best {
						best, at = v, (2*oh+1)*W+j+1
					}
					oo[ow], io[ow] = best, int32(c*H*W+at)
				}
			}
		}
	}
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
