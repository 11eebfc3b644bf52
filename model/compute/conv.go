package compute

import (
	"fmt"
	"sync"
)

// The CPU's convolution: im2col, each example's unrolled input
// multiplied by the weight on the small-GEMM path, examples split
// between the backend's threads. Going backward, the weight gradients
// of each chunk of convChunk examples go to an accumulator of their own,
// added up in chunk order: the result does not depend on the number of
// threads or their scheduling.

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
	if c.useShifted(g) {
		c.convForwardShifted(out, cols, x, w, b, g, ch, m)
		return
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
	CheckConvBackward(g, ch, m, stride, dxT, dwT, dbT, doutT, colsT)
	cols, dout, w := host(colsT), host(doutT), host(wT)
	dwAll, dbAll := host(dwT), host(dbT)
	var dx []float32
	if dxT.Len() > 0 {
		dx = host(dxT)
	}
	wn := ch * ckk
	// Summed gradients: each chunk of convChunk examples adds into an
	// accumulator of its own, in example order, and the chunks' are then
	// added in chunk order: the same sums on any number of threads.
	chunks := (m + convChunk - 1) / convChunk
	acc := 0
	if stride == 0 {
		acc = wn + ch
	}
	accs, doneAcc := scratch(chunks * acc)
	defer doneAcc()
	clear(accs)
	direct := c.useShifted(g)
	var offs []int
	if direct {
		offs = shiftedOffsets(g)
	}
	k := c.workers(chunks)
	dcols := make([][]float32, k)
	for i := range dcols {
		if direct {
			break
		}
		var done func()
		dcols[i], done = scratch(ckk * pos)
		defer done()
	}
	c.split(chunks, func(t, clo, chi int) {
		dcol := dcols[t]
		var sc *shiftedScratch
		if direct {
			var done func()
			sc, done = newShiftedScratch(g, ch, dx != nil)
			defer done()
		}
		for q := clo; q < chi; q++ {
			var dw, db []float32
			if stride == 0 {
				dw, db = accs[q*acc:q*acc+wn], accs[q*acc+wn:(q+1)*acc]
			}
			for e := q * convChunk; e < min(m, (q+1)*convChunk); e++ {
				if stride != 0 {
					dw, db = dwAll[e*stride:e*stride+wn], dbAll[e*stride:e*stride+ch]
				}
				col := cols[e*g.Cols() : (e+1)*g.Cols()]
				d := dout[e*ch*pos : (e+1)*ch*pos]
				sumRows(db, d, ch, pos)
				if direct {
					var dxe []float32
					if dx != nil {
						dxe = dx[e*g.In() : (e+1)*g.In()]
					}
					c.shiftedBackward(dxe, dw, d, col[:shiftedPad(g)], w, sc, offs, g, ch)
					continue
				}
				gemm(c.ks, 1, c.path, false, true, ch, ckk, pos, 1, d, pos, col, pos, 1, dw, ckk)
				if dx != nil {
					gemm(c.ks, 1, c.path, true, false, ckk, pos, ch, 1, w, ckk, d, pos, 0, dcol, pos)
					col2im(dx[e*g.In():(e+1)*g.In()], dcol, g)
				}
			}
		}
	})
	if stride != 0 {
		return
	}
	for q := range chunks {
		for j, v := range accs[q*acc : q*acc+wn] {
			dwAll[j] += v
		}
		for j, v := range accs[q*acc+wn : (q+1)*acc] {
			dbAll[j] += v
		}
	}
}

// sumRows adds the sum of each of d's ch rows of pos values to db, in
// four running sums (one add chain would wait on each add's latency).
func sumRows(db, d []float32, ch, pos int) {
	for k := range ch {
		row := d[k*pos : (k+1)*pos]
		var s0, s1, s2, s3 float32
		i := 0
		for ; i+4 <= len(row); i += 4 {
			s0 += row[i]
			s1 += row[i+1]
			s2 += row[i+2]
			s3 += row[i+3]
		}
		for ; i < len(row); i++ {
			s0 += row[i]
		}
		db[k] += (s0 + s1) + (s2 + s3)
	}
}

// convChunk is how many examples' weight gradients ConvBackward sums
// into one accumulator.
const convChunk = 4

// CheckConvBackward panics unless ConvBackward's tensors fit; backends
// check their arguments with it.
func CheckConvBackward(g Window, ch, m, stride int, dx, dw, db, dout, cols Tensor) {
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
