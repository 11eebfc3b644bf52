package compute

import (
	"fmt"
	"math"
)

// Updates is the part of a Backend that updates parameters and reduces
// them: the optimizers' steps, the SVM's regulariser, DP-SGD's per-example
// clipping and the softmax of predictions, so that none of them needs the
// parameters on the host. Every method works on its tensors in place.
type Updates interface {
	// Axpby sets y ← b·y + a·x (x and y of the same length).
	Axpby(y Tensor, a float32, x Tensor, b float32)
	// SGDUpdate is torch.optim.SGD's step on weights w with gradient g:
	// g' = g + wd·w; with momentum mu > 0, v ← mu·v + g' (v ← g' when
	// first: the buffer starts as the gradient) and w ← w − lr·v;
	// without (v may be empty), w ← w − lr·g'.
	SGDUpdate(w, g, v Tensor, lr, mu, wd float32, first bool)
	// AdamUpdate is torch.optim.Adam's step: g' = g + wd·w,
	// m ← b1·m + (1−b1)·g', v ← b2·v + (1−b2)·g'², and
	// w ← w − step·m / (√v·sc2 + eps), where the caller passes the
	// bias corrections as step = lr/(1−b1ᵗ) and sc2 = 1/√(1−b2ᵗ).
	AdamUpdate(w, g, m, v Tensor, step, b1, b2, sc2, eps, wd float32)
	// SumSquares returns Σ x², accumulated in float64.
	SumSquares(x Tensor) float64
	// RowSumSquares sets dst[i] = Σ_j x[i·n+j]², accumulated in float64,
	// for the m rows of the m×n matrix x.
	RowSumSquares(dst []float64, x Tensor, m, n int)
	// ScaleRows multiplies row i of the m×n matrix x by s[i].
	ScaleRows(x Tensor, m, n int, s []float32)
	// Softmax writes the row-wise softmax of the m×n logits to dst (may
	// alias logits), computed in float64 per value.
	Softmax(dst, logits Tensor, m, n int)
	// GatherRows copies the listed rows of src (cols values each, at row
	// stride ld) to the rows of dst, packed: a minibatch taken from a
	// dataset where it lies.
	GatherRows(dst, src Tensor, rows []int, cols, ld int)
}

func sameLen(name string, a, b []float32) {
	if len(a) != len(b) {
		panic(fmt.Sprintf("compute: %s of %d and %d values", name, len(a), len(b)))
	}
}

// Axpby implements Updates.
func (c *CPU) Axpby(yt Tensor, a float32, xt Tensor, b float32) {
	y, x := host(yt), host(xt)
	sameLen("Axpby", y, x)
	if b == 1 {
		for i, v := range x {
			y[i] += a * v
		}
		return
	}
	for i, v := range x {
		y[i] = b*y[i] + a*v
	}
}

// SGDUpdate implements Updates.
func (c *CPU) SGDUpdate(wt, gt, vt Tensor, lr, mu, wd float32, first bool) {
	w, g := host(wt), host(gt)
	sameLen("SGDUpdate", w, g)
	if mu == 0 {
		if wd == 0 {
			for i, gi := range g {
				w[i] -= lr * gi
			}
			return
		}
		for i, gi := range g {
			w[i] -= lr * (gi + wd*w[i])
		}
		return
	}
	v := host(vt)
	sameLen("SGDUpdate", w, v)
	if first {
		for i, gi := range g {
			v[i] = gi + wd*w[i]
			w[i] -= lr * v[i]
		}
		return
	}
	for i, gi := range g {
		v[i] = mu*v[i] + gi + wd*w[i]
		w[i] -= lr * v[i]
	}
}

// AdamUpdate implements Updates.
func (c *CPU) AdamUpdate(wt, gt, mt, vt Tensor, step, b1, b2, sc2, eps, wd float32) {
	w, g, m, v := host(wt), host(gt), host(mt), host(vt)
	sameLen("AdamUpdate", w, g)
	sameLen("AdamUpdate", w, m)
	sameLen("AdamUpdate", w, v)
	for i, gi := range g {
		gi += wd * w[i]
		m[i] = b1*m[i] + (1-b1)*gi
		v[i] = b2*v[i] + (1-b2)*gi*gi
		w[i] -= step * m[i] / (float32(math.Sqrt(float64(v[i])))*sc2 + eps)
	}
}

// SumSquares implements Updates.
func (c *CPU) SumSquares(xt Tensor) float64 {
	var s float64
	for _, v := range host(xt) {
		s += float64(v) * float64(v)
	}
	return s
}

// RowSumSquares implements Updates.
func (c *CPU) RowSumSquares(dst []float64, xt Tensor, m, n int) {
	x := host(xt)
	if len(dst) < m || len(x) < m*n {
		panic(fmt.Sprintf("compute: RowSumSquares of %d×%d into %d rows of %d values", m, n, len(dst), len(x)))
	}
	for i := range m {
		var s float64
		for _, v := range x[i*n : (i+1)*n] {
			s += float64(v) * float64(v)
		}
		dst[i] = s
	}
}

// ScaleRows implements Updates.
func (c *CPU) ScaleRows(xt Tensor, m, n int, s []float32) {
	x := host(xt)
	if len(s) < m || len(x) < m*n {
		panic(fmt.Sprintf("compute: ScaleRows of %d×%d by %d scales over %d values", m, n, len(s), len(x)))
	}
	for i := range m {
		if f := s[i]; f != 1 {
			row := x[i*n : (i+1)*n]
			for j := range row {
				row[j] *= f
			}
		}
	}
}

// Softmax implements Updates.
func (c *CPU) Softmax(dt, lt Tensor, m, n int) {
	dst, z := host(dt), host(lt)
	if len(dst) < m*n || len(z) < m*n {
		panic(fmt.Sprintf("compute: Softmax of %d×%d from %d into %d values", m, n, len(z), len(dst)))
	}
	for i := range m {
		row, out := z[i*n:(i+1)*n], dst[i*n:(i+1)*n]
		mx := row[0]
		for _, v := range row {
			mx = max(mx, v)
		}
		var s float32
		for j, v := range row {
			out[j] = float32(math.Exp(float64(v - mx)))
			s += out[j]
		}
		for j := range out {
			out[j] /= s
		}
	}
}

// GatherRows implements Updates.
func (c *CPU) GatherRows(dt, st Tensor, rows []int, cols, ld int) {
	dst, src := host(dt), host(st)
	if len(dst) < len(rows)*cols {
		panic(fmt.Sprintf("compute: GatherRows of %d rows of %d into %d values", len(rows), cols, len(dst)))
	}
	checkRows("GatherRows", rows, src, ld, cols)
	for i, r := range rows {
		copy(dst[i*cols:(i+1)*cols], src[r*ld:r*ld+cols])
	}
}
