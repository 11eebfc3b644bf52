package compute

import (
	"fmt"
	"sync"
)

// The CPU's convolution: im2col, each example's unrolled input
// multiplied by the weight on the small-GEMM path, examples split
// between the backend's threads, each with its own scratch and, going
// backward, its own weight-gradient accumulator, summed in thread order
// (the result does not depend on scheduling; it does on the thread
// count, by rounding).

// scratchPool lends the threads their buffers.
var scratchPool = sync.Pool{New: func() any { return new([]float32) }}

// scratch returns a buffer of n values (not zeroed) and its release.
func scratch(n int) ([]float32, func()) {
	p := scratchPool.Get().(*[]float32)
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	return (*p)[:n], func() { scratchPool.Put(p) }
}

// split runs f(w, lo, hi) over m examples split between up to the
// backend's threads.
func (c *CPU) split(m int, f func(w, lo, hi int)) {
	k := min(c.threads, m)
	if k <= 1 {
		f(0, 0, m)
		return
	}
	var wg sync.WaitGroup
	for w := range k {
		lo, hi := w*m/k, (w+1)*m/k
		wg.Go(func() { f(w, lo, hi) })
	}
	wg.Wait()
}

func (c *CPU) workers(m int) int { return max(1, min(c.threads, m)) }

// ConvForward implements Layers.
func (c *CPU) ConvForward(outT, colsT, xT, wT, bT Tensor, g Window, ch, m int) {
	CheckWindow("ConvForward", g, m, ch, xT, outT)
	ckk, pos := g.Cols()/g.Positions(), g.Positions()
	out, x, w, b := host(outT), host(xT), host(wT), host(bT)
	if len(w) < ch*ckk || len(b) < ch {
		panic("compute: ConvForward: weight or bias too short")
	}
	var cols []float32
	if colsT.Len() > 0 {
		if colsT.Len() < m*g.Cols() {
			panic("compute: ConvForward: cols too short")
		}
		cols = host(colsT)
	}
	c.split(m, func(_, lo, hi int) {
		var col []float32
		if cols == nil {
			buf, done := scratch(g.Cols())
			defer done()
			clear(buf) // the padding entries, which im2col skips
			col = buf
		}
		for e := lo; e < hi; e++ {
			if cols != nil {
				col = cols[e*g.Cols() : (e+1)*g.Cols()]
			}
			im2col(col, x[e*g.In():(e+1)*g.In()], g)
			o := out[e*ch*pos : (e+1)*ch*pos]
			gemm(c.ks, 1, c.path, false, false, ch, pos, ckk, 1, w, ckk, col, pos, 0, o, pos)
			for k := range ch {
				row, v := o[k*pos:(k+1)*pos], b[k]
				for j := range row {
					row[j] += v
				}
			}
		}
	})
}

// ConvBackward implements Layers.
func (c *CPU) ConvBackward(dxT, dwT, dbT, doutT, colsT, wT Tensor, g Window, ch, m, stride int) {
	ckk, pos := g.Cols()/g.Positions(), g.Positions()
	checkConvBackward(g, ch, m, stride, dxT, dwT, dbT, doutT, colsT)
	cols, dout, w := host(colsT), host(doutT), host(wT)
	dwAll, dbAll := host(dwT), host(dbT)
	var dx []float32
	if dxT.Len() > 0 {
		dx = host(dxT)
	}
	wn := ch * ckk
	acc := 0 // per thread: its own weight and bias gradients, unless per example
	if stride == 0 {
		acc = wn + ch
	}
	k := c.workers(m)
	bufs := make([][]float32, k)
	for i := range bufs {
		var done func()
		bufs[i], done = scratch(ckk*pos + acc)
		defer done()
		clear(bufs[i][ckk*pos:])
	}
	c.split(m, func(t, lo, hi int) {
		dcol := bufs[t][:ckk*pos]
		var dw, db []float32
		if stride == 0 {
			dw, db = bufs[t][ckk*pos:ckk*pos+wn], bufs[t][ckk*pos+wn:]
		}
		for e := lo; e < hi; e++ {
			if stride != 0 {
				dw, db = dwAll[e*stride:e*stride+wn], dbAll[e*stride:e*stride+ch]
			}
			col := cols[e*g.Cols() : (e+1)*g.Cols()]
			d := dout[e*ch*pos : (e+1)*ch*pos]
			gemm(c.ks, 1, c.path, false, true, ch, ckk, pos, 1, d, pos, col, pos, 1, dw, ckk)
			for k := range ch {
				sum := float32(0)
				for _, v := range d[k*pos : (k+1)*pos] {
					sum += v
				}
				db[k] += sum
			}
			if dx != nil {
				gemm(c.ks, 1, c.path, true, false, ckk, pos, ch, 1, w, ckk, d, pos, 0, dcol, pos)
				col2im(dx[e*g.In():(e+1)*g.In()], dcol, g)
			}
		}
	})
	if stride != 0 {
		return
	}
	for _, b := range bufs {
		for j, v := range b[ckk*pos : ckk*pos+wn] {
			dwAll[j] += v
		}
		for j, v := range b[ckk*pos+wn : ckk*pos+acc] {
			dbAll[j] += v
		}
	}
}

// checkConvBackward panics unless ConvBackward's tensors fit.
func checkConvBackward(g Window, ch, m, stride int, dx, dw, db, dout, cols Tensor) {
	if g.inN == 0 || m < 0 || stride < 0 {
		panic("compute: ConvBackward: a window not made by NewWindow, or a negative count")
	}
	rows := max(0, m-1) * stride
	wn := ch * g.Cols() / g.Positions()
	if cols.Len() < m*g.Cols() || dout.Len() < m*ch*g.Positions() || (dx.Len() > 0 && dx.Len() < m*g.In()) ||
		dw.Len() < rows+wn || db.Len() < rows+ch || (stride > 0 && stride < wn) {
		panic(fmt.Sprintf("compute: ConvBackward of %d examples (%d channels out, stride %d): cols %d, dout %d, dx %d, dweight %d, dbias %d values",
			m, ch, stride, cols.Len(), dout.Len(), dx.Len(), dw.Len(), db.Len()))
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
// (oh, ow) holds x[c, oh·S−P+ki, ow·S−P+kj], 0 outside the input. It
// writes only the entries inside the input: col must hold zeros in the
// others, which stay so when col is only ever written by im2col for the
// same window.
func im2col(col, x []float32, g Window) {
	H, W, K, S, P := g.H, g.W, g.K, g.S, g.P
	OH, OW := g.OH, g.OW
	r := 0
	for c := range g.C {
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
func col2im(dx, col []float32, g Window) {
	H, W, K, S, P := g.H, g.W, g.K, g.S, g.P
	OH, OW := g.OH, g.OW
	clear(dx)
	r := 0
	for c := range g.C {
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
