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
// (oh, ow) holds x[c, oh·S−P+ki, ow·S−P+kj], 0 outside the input. It
// writes only the entries inside the input: col must hold zeros in the
// others, which stay so when col is only ever written by im2col for the
// same window (conv keeps such buffers).
func im2col(col, x []float32, w window) {
	H, W, K, S, P := w.in.H, w.in.W, w.k, w.s, w.p
	OH, OW := w.out.H, w.out.W
	r := 0
	for c := range w.in.C {
		xc := x[c*H*W : (c+1)*H*W]
		for ki := range K {
			for kj := range K {
				row := col[r*OH*OW : (r+1)*OH*OW]
				r++
				lo, hi := span(kj, W, OW, S, P)
				if lo == hi {
					continue
				}
				for oh := range OH {
					ih := oh*S - P + ki
					if ih < 0 || ih >= H {
						continue
					}
					dst := row[oh*OW+lo : oh*OW+hi]
					if S == 1 {
						src := xc[ih*W+lo-P+kj:]
						src = src[:len(dst)]
						for i := range dst { // rows are short: a loop beats memmove's call
							dst[i] = src[i]
						}
						continue
					}
					src := xc[ih*W:]
					for i, iw := 0, lo*S-P+kj; i < len(dst); i, iw = i+1, iw+S {
						dst[i] = src[iw]
					}
				}
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
						d := dst[lo-P+kj:]
						d = d[:len(src)]
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
