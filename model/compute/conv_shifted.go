package compute

// The CPU's direct convolution for stride 1: no unrolled matrix. Each
// example's input is copied once into a zero-padded image (C × Hp × Wp,
// plus K−1 zeros); row (c, ki, kj) of the unrolled matrix is then, on a
// "wide" output of OH rows of Wp columns, the padded image read from
// offset c·Hp·Wp + ki·Wp + kj: a contiguous run of OH·Wp values. The
// small-GEMM kernels take these runs as the rows of B (rowsB/rowsA hold
// the offsets), so a convolution is one GEMM per example over an
// implicit matrix; the Wp − OW wide columns per output row that are
// not outputs are computed and dropped (forward) or carry zeros
// (backward). ConvForward keeps the padded image in cols for
// ConvBackward, which is far smaller than the unrolled matrix.

// shiftedPad is the padded image's size per example: C·Hp·Wp values and
// the K−1 zeros that the last row's run reads past the last image row.
func shiftedPad(g Window) int {
	return g.C*(g.H+2*g.P)*(g.W+2*g.P) + g.K - 1
}

// useShifted reports whether the direct path computes g: stride 1, the
// padded image fits in cols' room, and the wide output computes at most
// half again the columns of the real one.
func (c *CPU) useShifted(g Window) bool {
	wp := g.W + 2*g.P
	return !c.im2col && g.S == 1 && shiftedPad(g) <= g.Cols() && 2*wp <= 3*g.OW
}

// shiftedOffsets returns the offset in the padded image of each row
// (c, ki, kj) of the implicit unrolled matrix.
func shiftedOffsets(g Window) []int {
	hp, wp := g.H+2*g.P, g.W+2*g.P
	offs := make([]int, 0, g.C*g.K*g.K)
	for c := range g.C {
		for ki := range g.K {
			for kj := range g.K {
				offs = append(offs, c*hp*wp+ki*wp+kj)
			}
		}
	}
	return offs
}

// padImage copies one example x (C×H×W) into the interior of xp (the
// padded image); xp's border must hold zeros, which stay so.
func padImage(xp, x []float32, g Window) {
	hp, wp := g.H+2*g.P, g.W+2*g.P
	for c := range g.C {
		for h := range g.H {
			copy(xp[c*hp*wp+(h+g.P)*wp+g.P:][:g.W], x[(c*g.H+h)*g.W:][:g.W])
		}
	}
}

// convForwardShifted is ConvForward on the direct path.
func (c *CPU) convForwardShifted(out, cols, x, w, b []float32, g Window, ch, m int) {
	offs, pad, pos := shiftedOffsets(g), shiftedPad(g), g.Positions()
	n := g.OH * (g.W + 2*g.P)
	c.split(m, func(_, lo, hi int) {
		buf, done := scratch(ch*n + pad)
		defer done()
		wide, own := buf[:ch*n], buf[ch*n:]
		clear(own) // the border, for examples without cols
		for e := lo; e < hi; e++ {
			xp := own
			if cols != nil {
				xp = cols[e*g.Cols():][:pad]
			}
			padImage(xp, x[e*g.In():(e+1)*g.In()], g)
			c.shiftedForward(out[e*ch*pos:(e+1)*ch*pos], xp, w, b, wide, offs, g, ch)
		}
	})
}

// shiftedForward computes one example's output o (ch × OH·OW) from its
// padded image xp, with wide (ch·OH·Wp values) as scratch.
func (c *CPU) shiftedForward(o, xp, w, b, wide []float32, offs []int, g Window, ch int) {
	wp := g.W + 2*g.P
	n := g.OH * wp
	clear(wide)
	smallAxpy(c.ks.axpy, false, ch, n, len(offs), 1, w, len(offs), xp, 1, offs, wide, n)
	for k := range ch {
		v := b[k]
		for oh := range g.OH {
			dst, src := o[(k*g.OH+oh)*g.OW:][:g.OW], wide[k*n+oh*wp:][:g.OW]
			for i, s := range src {
				dst[i] = s + v
			}
		}
	}
}

// shiftedBackward adds one example's weight gradient (ch × ckk) to dw
// from its output gradient d and padded image xp, and where dx is not
// nil sets dx to the input's gradient. s holds the scratch.
func (c *CPU) shiftedBackward(dx, dw, d, xp, w []float32, s *shiftedScratch, offs []int, g Window, ch int) {
	wp := g.W + 2*g.P
	n, ckk := g.OH*wp, len(offs)
	dwide := s.dwide
	for k := range ch {
		for oh := range g.OH {
			row := dwide[k*n+oh*wp:][:wp]
			copy(row, d[(k*g.OH+oh)*g.OW:][:g.OW])
			clear(row[g.OW:])
		}
	}
	// dW += dwide·Bᵀ, B's rows the shifted runs of xp.
	smallDot(c.ks, false, ch, ckk, n, 1, dwide, n, nil, xp, 1, offs, dw, ckk)
	if dx == nil {
		return
	}
	// dxp[off_r:][:n] += Σ_k W[k][r]·dwide[k]: im2col's adjoint without
	// the unrolled gradient. The axpy kernel updates two runs at once,
	// which must not overlap: runs r and r + K² (the same ki, kj of the
	// next input channel) lie Hp·Wp ≥ n apart.
	dxp := s.dxp
	clear(dxp)
	kk := g.K * g.K
	var coef [8]float32
	var bp [4]*float32
	var cp [2]*float32
	for r := range ckk {
		ci := r / kk
		if ci%2 == 1 {
			continue // done with its pair
		}
		two := ci+1 < g.C
		cp[0] = &dxp[offs[r]]
		if two {
			cp[1] = &dxp[offs[r+kk]]
		} else {
			cp[1] = &s.spare[n]
		}
		for p0 := 0; p0 < ch; p0 += 4 {
			for q := range 4 {
				p := p0 + q
				if p >= ch {
					bp[q], coef[q], coef[4+q] = &s.spare[0], 0, 0
					continue
				}
				bp[q] = &dwide[p*n]
				coef[q], coef[4+q] = w[p*ckk+r], 0
				if two {
					coef[4+q] = w[p*ckk+r+kk]
				}
			}
			c.ks.axpy(n, &coef, &bp, &cp)
		}
	}
	hp := g.H + 2*g.P
	for ci := range g.C {
		for h := range g.H {
			copy(dx[(ci*g.H+h)*g.W:][:g.W], dxp[ci*hp*wp+(h+g.P)*wp+g.P:][:g.W])
		}
	}
}

// shiftedScratch is one thread's scratch for shiftedBackward.
type shiftedScratch struct {
	dwide, dxp []float32
	spare      []float32 // n zeros (a kernel's unused row of B), n of scratch (its unused row of C)
}

// newShiftedScratch lends a thread its scratch, returning its release.
func newShiftedScratch(g Window, ch int, dx bool) (*shiftedScratch, func()) {
	n := g.OH * (g.W + 2*g.P)
	size := ch * n
	if dx {
		size += 2*n + shiftedPad(g)
	}
	buf, done := scratch(size)
	s := &shiftedScratch{dwide: buf[:ch*n]}
	if dx {
		rest := buf[ch*n:]
		s.spare, s.dxp = rest[:2*n], rest[2*n:]
		clear(s.spare[:n])
	}
	return s, done
}
