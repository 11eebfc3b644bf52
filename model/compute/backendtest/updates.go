package backendtest

import (
	"math"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// relNear reports |got − want| ≤ tol·max(1, |want|).
func relNear(got, want, tol float64) bool { return near(got, want, tol*max(1, math.Abs(want))) }

// updates checks compute.Updates: the optimizers' steps, the reductions
// and the softmax, against float64 reference code.
func updates(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	const n = 1031
	x, y := randSlice(rng, n), randSlice(rng, n)
	for _, ab := range [][2]float32{{-0.1, 1}, {0.3, 0.9}} {
		got := append([]float32(nil), y...)
		be.Axpby(compute.Host(got), ab[0], compute.Host(x), ab[1])
		for i := range got {
			if want := float64(ab[1])*float64(y[i]) + float64(ab[0])*float64(x[i]); !relNear(float64(got[i]), want, 1e-6) {
				t.Errorf("%s: Axpby a,b=%v [%d] = %v, want %v", name, ab, i, got[i], want)
				return
			}
		}
	}

	// SGD: plain, with weight decay, and with momentum over three steps.
	for _, c := range []struct{ lr, mu, wd float32 }{{0.1, 0, 0}, {0.05, 0, 0.01}, {0.05, 0.9, 0.001}} {
		w, v := append([]float32(nil), y...), be.Alloc(n)
		ref, rv := make([]float64, n), make([]float64, n)
		for i := range ref {
			ref[i] = float64(y[i])
		}
		for step := range 3 {
			g := randSlice(rng, n)
			be.SGDUpdate(compute.Host(w), compute.Host(g), v, c.lr, c.mu, c.wd, step == 0)
			for i := range ref {
				gi := float64(g[i]) + float64(c.wd)*ref[i]
				if c.mu != 0 {
					if step == 0 {
						rv[i] = gi
					} else {
						rv[i] = float64(c.mu)*rv[i] + gi
					}
					gi = rv[i]
				}
				ref[i] -= float64(c.lr) * gi
			}
		}
		for i := range w {
			if !relNear(float64(w[i]), ref[i], 1e-5) {
				t.Errorf("%s: SGDUpdate lr %v mu %v wd %v: w[%d] = %v, want %v", name, c.lr, c.mu, c.wd, i, w[i], ref[i])
				return
			}
		}
	}

	// Adam over three steps, bias-corrected as model.Adam does.
	{
		const lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 0.001
		w, m, v := append([]float32(nil), y...), be.Alloc(n), be.Alloc(n)
		ref, rm, rv := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range ref {
			ref[i] = float64(y[i])
		}
		for step := 1; step <= 3; step++ {
			g := randSlice(rng, n)
			c1, c2 := 1-math.Pow(b1, float64(step)), 1-math.Pow(b2, float64(step))
			be.AdamUpdate(compute.Host(w), compute.Host(g), m, v, float32(lr/c1), b1, b2, float32(1/math.Sqrt(c2)), eps, wd)
			for i := range ref {
				gi := float64(g[i]) + wd*ref[i]
				rm[i] = b1*rm[i] + (1-b1)*gi
				rv[i] = b2*rv[i] + (1-b2)*gi*gi
				ref[i] -= lr / c1 * rm[i] / (math.Sqrt(rv[i])/math.Sqrt(c2) + eps)
			}
		}
		for i := range w {
			if !relNear(float64(w[i]), ref[i], 1e-5) {
				t.Errorf("%s: AdamUpdate: w[%d] = %v, want %v", name, i, w[i], ref[i])
				return
			}
		}
	}

	// Reductions and row scaling.
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	if got := be.SumSquares(compute.Host(x)); !relNear(got, ss, 1e-6) {
		t.Errorf("%s: SumSquares = %v, want %v", name, got, ss)
	}
	const rows, cols = 9, 113
	mat := x[:rows*cols]
	norms := make([]float64, rows)
	be.RowSumSquares(norms, compute.Host(mat), rows, cols)
	scale := make([]float32, rows)
	for i := range rows {
		var s float64
		for _, v := range mat[i*cols : (i+1)*cols] {
			s += float64(v) * float64(v)
		}
		if !relNear(norms[i], s, 1e-6) {
			t.Errorf("%s: RowSumSquares [%d] = %v, want %v", name, i, norms[i], s)
			return
		}
		scale[i] = float32(i%3) / 2 // 0, ½ and 1
	}
	scaled := append([]float32(nil), mat...)
	be.ScaleRows(compute.Host(scaled), rows, cols, scale)
	for i, v := range scaled {
		if want := mat[i] * scale[i/cols]; v != want {
			t.Errorf("%s: ScaleRows [%d] = %v, want %v", name, i, v, want)
			return
		}
	}

	// GatherRows: exact copies of the listed rows.
	{
		const ld, cols = 37, 30
		src := randSlice(rng, 12*ld)
		rows := []int{11, 0, 5, 5, 3}
		got := make([]float32, len(rows)*cols)
		be.GatherRows(compute.Host(got), compute.Host(src), rows, cols, ld)
		for i, r := range rows {
			for j := range cols {
				if got[i*cols+j] != src[r*ld+j] {
					t.Errorf("%s: GatherRows row %d (source %d) col %d = %v, want %v", name, i, r, j, got[i*cols+j], src[r*ld+j])
					return
				}
			}
		}
	}

	// Softmax, in place and not.
	const m, c = 17, 10
	logits := randSlice(rng, m*c)
	for i := range logits {
		logits[i] *= 8
	}
	probs := make([]float32, m*c)
	be.Softmax(compute.Host(probs), compute.Host(logits), m, c)
	in := append([]float32(nil), logits...)
	be.Softmax(compute.Host(in), compute.Host(in), m, c)
	for i := range m {
		z := logits[i*c : (i+1)*c]
		mx := z[0]
		for _, v := range z {
			mx = max(mx, v)
		}
		var s float64
		for _, v := range z {
			s += math.Exp(float64(v - mx))
		}
		for j, v := range z {
			p := math.Exp(float64(v-mx)) / s
			if !near(float64(probs[i*c+j]), p, 1e-6) || in[i*c+j] != probs[i*c+j] {
				t.Errorf("%s: Softmax row %d col %d = %v (in place %v), want %v", name, i, j, probs[i*c+j], in[i*c+j], p)
				return
			}
		}
	}
}
