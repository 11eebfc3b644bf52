package nn

// window is a convolution's or a pool's geometry: K×K windows at
// stride s with padding p over inputs of shape in, giving out.
type window struct {
	io
	k, s, p int
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
func im2col(col, x []float32, w window) {
	H, W, K, S, P := w.in.H, w.in.W, w.k, w.s, w.p
	OH, OW := w.out.H, w.out.W
	r := 0
	for c := range w.in.C {
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
func col2im(dx, col []float32, w window) {
	H, W, K, S, P := w.in.H, w.in.W, w.k, w.s, w.p
	OH, OW := w.out.H, w.out.W
	clear(dx)
	r := 0
	for c := range w.in.C {
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
