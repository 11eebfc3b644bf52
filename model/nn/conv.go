package nn

import "runtime"

// Convolutions run as matrix products (im2col): each example's input
// windows are unrolled into a (C·K·K)×(OH·OW) matrix, which the layer's
// (OUT)×(C·K·K) weight multiplies on the backend's GEMM kernels. Examples
// are split between GOMAXPROCS workers, each with its own scratch and,
// going backward, its own weight-gradient accumulator, summed at the end
// in worker order (so the result does not depend on scheduling).

// scratch returns each of k workers' scratch of at least size values.
func (n *Net) scratch(k, size int) [][]float32 {
	for len(n.ws.work) < k {
		n.ws.work = append(n.ws.work, nil)
	}
	for w := range k {
		if len(n.ws.work[w]) < size {
			n.ws.work[w] = make([]float32, size)
		}
	}
	return n.ws.work[:k]
}

func workers(m int) int { return max(1, min(runtime.GOMAXPROCS(0), m)) }

// convForward computes a convolution of m examples; with cols (m
// unrolled inputs) it keeps each example's unrolled input there for the
// backward pass.
func (n *Net) convForward(p plan, params, in, out, cols []float32, m int) {
	ckk, pos := p.in.C*p.Kernel*p.Kernel, p.out.H*p.out.W
	w, b := params[p.w:p.w+p.wn], params[p.b:p.b+p.bn]
	work := n.scratch(workers(m), ckk*pos)
	parallel(m, func(k, lo, hi int) {
		col := work[k][:ckk*pos]
		for e := lo; e < hi; e++ {
			if cols != nil {
				col = cols[e*ckk*pos : (e+1)*ckk*pos]
			}
			im2col(col, in[e*p.in.Size():(e+1)*p.in.Size()], p)
			o := out[e*p.out.Size() : (e+1)*p.out.Size()]
			n.be.Gemm(false, false, p.Out, pos, ckk, 1, host(w), ckk, host(col), pos, 0, host(o), pos)
			for c := range p.Out {
				for j := range pos {
					o[c*pos+j] += b[c]
				}
			}
		}
	})
}

// convBackward adds a convolution's weight and bias gradients over m
// examples to grad and, with din, sets its input's gradient; cols are
// the unrolled inputs its forward pass kept.
func (n *Net) convBackward(p plan, params, grad, cols, dout, din []float32, m int) {
	ckk, pos := p.in.C*p.Kernel*p.Kernel, p.out.H*p.out.W
	w := params[p.w : p.w+p.wn]
	k := workers(m)
	work := n.scratch(k, 2*ckk*pos+p.wn+p.bn)
	for i := range k {
		clear(work[i][2*ckk*pos : 2*ckk*pos+p.wn+p.bn])
	}
	parallel(m, func(k, lo, hi int) {
		dcol := work[k][ckk*pos : 2*ckk*pos]
		dw, db := work[k][2*ckk*pos:2*ckk*pos+p.wn], work[k][2*ckk*pos+p.wn:2*ckk*pos+p.wn+p.bn]
		for e := lo; e < hi; e++ {
			col := cols[e*ckk*pos : (e+1)*ckk*pos]
			d := dout[e*p.out.Size() : (e+1)*p.out.Size()]
			n.be.Gemm(false, true, p.Out, ckk, pos, 1, host(d), pos, host(col), pos, 1, host(dw), ckk)
			for c := range p.Out {
				s := float32(0)
				for _, v := range d[c*pos : (c+1)*pos] {
					s += v
				}
				db[c] += s
			}
			if din != nil {
				n.be.Gemm(true, false, ckk, pos, p.Out, 1, host(w), ckk, host(d), pos, 0, host(dcol), pos)
				col2im(din[e*p.in.Size():(e+1)*p.in.Size()], dcol, p)
			}
		}
	})
	gw, gb := grad[p.w:p.w+p.wn], grad[p.b:p.b+p.bn]
	for i := range k {
		for j, v := range work[i][2*ckk*pos : 2*ckk*pos+p.wn] {
			gw[j] += v
		}
		for j, v := range work[i][2*ckk*pos+p.wn : 2*ckk*pos+p.wn+p.bn] {
			gb[j] += v
		}
	}
}

// span is the range [lo, hi) of output columns ow whose input column
// ow·S − P + k lies inside [0, w).
func span(k, w, ow, s, p int) (lo, hi int) {
	lo = min(ow, max(0, -floorDiv(k-p, s))) // ⌈(p−k)/s⌉
	hi = min(ow, floorDiv(w-1+p-k, s)+1)
	return lo, max(lo, hi)
}

// floorDiv is ⌊a/b⌋ for b > 0 (Go's / truncates toward zero).
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// im2col unrolls one example x (C×H×W) into col: row (c, ki, kj), column
// (oh, ow) holds x[c, oh·S−P+ki, ow·S−P+kj], 0 outside the input.
func im2col(col, x []float32, p plan) {
	H, W, K, S, P := p.in.H, p.in.W, p.Kernel, p.Stride, p.Pad
	OH, OW := p.out.H, p.out.W
	r := 0
	for c := range p.in.C {
		xc := x[c*H*W : (c+1)*H*W]
		for ki := range K {
			for kj := range K {
				row := col[r*OH*OW : (r+1)*OH*OW]
				lo, hi := span(kj, W, OW, S, P)
				for oh := range OH {
					ih := oh*S - P + ki
					dst := row[oh*OW : (oh+1)*OW]
					if ih < 0 || ih >= H {
						clear(dst)
						continue
					}
					clear(dst[:lo])
					clear(dst[hi:])
					src := xc[ih*W : (ih+1)*W]
					if S == 1 {
						if lo < hi {
							copy(dst[lo:hi], src[lo-P+kj:])
						}
						continue
					}
					for ow, iw := lo, lo*S-P+kj; ow < hi; ow, iw = ow+1, iw+S {
						dst[ow] = src[iw]
					}
				}
				r++
			}
		}
	}
}

// col2im sets dx (C×H×W) to the sum of col's entries over the windows
// that read each input value: im2col's adjoint.
func col2im(dx, col []float32, p plan) {
	H, W, K, S, P := p.in.H, p.in.W, p.Kernel, p.Stride, p.Pad
	OH, OW := p.out.H, p.out.W
	clear(dx)
	r := 0
	for c := range p.in.C {
		xc := dx[c*H*W : (c+1)*H*W]
		for ki := range K {
			for kj := range K {
				row := col[r*OH*OW : (r+1)*OH*OW]
				lo, hi := span(kj, W, OW, S, P)
				for oh := range OH {
					ih := oh*S - P + ki
					if ih < 0 || ih >= H || lo == hi {
						continue
					}
					dst := xc[ih*W : (ih+1)*W]
					src := row[oh*OW+lo : oh*OW+hi]
					if S == 1 {
						d := dst[lo-P+kj : lo-P+kj+len(src)]
						for i, v := range src {
							d[i] += v
						}
						continue
					}
					for i, iw := 0, lo*S-P+kj; i < len(src); i, iw = i+1, iw+S {
						dst[iw] += src[i]
					}
				}
				r++
			}
		}
	}
}

// pool computes a max or average pool of m examples; a max pool records
// in idx which input value (index within its example) each output took.
func pool(p plan, in, out []float32, idx []int32, m int) {
	H, W, K, S := p.in.H, p.in.W, p.Kernel, p.Stride
	OH, OW := p.out.H, p.out.W
	inv := 1 / float32(K*K)
	if p.Kind == MaxPool && K == 2 && S == 2 {
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
					if p.Kind == MaxPool {
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
func maxPool2(p plan, in, out []float32, idx []int32, m int) {
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
func poolBackward(p plan, dout, din []float32, idx []int32, m int) {
	clear(din)
	H, W, K, S := p.in.H, p.in.W, p.Kernel, p.Stride
	OH, OW := p.out.H, p.out.W
	inv := 1 / float32(K*K)
	for e := range m {
		db := din[e*p.in.Size() : (e+1)*p.in.Size()]
		for c := range p.in.C {
			ob := e*p.out.Size() + c*OH*OW
			for o := range OH * OW {
				d := dout[ob+o]
				if p.Kind == MaxPool {
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
