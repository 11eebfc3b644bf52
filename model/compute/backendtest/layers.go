package backendtest

import (
	"math"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// Layers checks a backend's layer kernels (compute.Layers) against
// float64 reference code, on windows with and without padding and
// stride, summed and per-example gradients. Tolerances, for inputs in
// [−1, 1): convolution outputs and gradients ≤ 1e-5·(terms summed + 1);
// pools exact (max) and ≤ 1e-6 (average), their gradients ≤ 1e-6·K²
// (overlapping windows add up); activations ≤ 1e-6 (ReLU
// exact); normalisations ≤ 1e-4 (their 1/σ amplifies float32 inputs'
// rounding); ChannelSums ≤ 1e-5·(pos + 1); Mul and Zero exact.
func Layers(t T, be compute.Backend) {
	t.Helper()
	ly, ok := be.(compute.Layers)
	if !ok {
		t.Errorf("%s does not compute layers (compute.Layers)", be.Name())
		return
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ c, h, w, k, s, p, ch int }{
		{1, 6, 6, 3, 1, 0, 2},
		{2, 7, 5, 3, 2, 1, 3},
		{3, 5, 5, 5, 1, 2, 4},
		{2, 4, 9, 1, 1, 0, 1},
		{3, 6, 7, 3, 1, 1, 5},
	} {
		g, err := compute.NewWindow(c.c, c.h, c.w, c.k, c.s, c.p)
		if err != nil {
			t.Errorf("window %+v: %v", c, err)
			continue
		}
		conv(t, be, ly, rng, g, c.ch)
	}
	for _, c := range []struct{ c, h, w, k, s int }{{2, 6, 6, 2, 2}, {3, 7, 9, 2, 2}, {1, 7, 7, 3, 2}, {2, 5, 5, 3, 1}} {
		g, _ := compute.NewWindow(c.c, c.h, c.w, c.k, c.s, 0)
		pools(t, be, ly, rng, g)
	}
	activations(t, be, ly, rng)
	norms(t, be, ly, rng)
	small(t, be, ly, rng)
}

// get copies t back to the host.
func get(be compute.Backend, t compute.Tensor) []float32 {
	out := make([]float32, t.Len())
	be.Store(out, t)
	return out
}

// worstRel is the largest |got − want| / tol over the values, and where.
func worstRel(got []float32, want []float64, tol float64) (float64, int) {
	w, at := 0.0, -1
	for i, v := range want {
		if d := math.Abs(float64(got[i])-v) / tol; d > w || math.IsNaN(d) {
			w, at = d, i
		}
	}
	return w, at
}

func check(t T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if w, at := worstRel(got, want, tol); w > 1 {
		t.Errorf("%s: value %d is %v, want %v (tolerance %.2g)", what, at, got[at], want[at], tol)
	}
}

func conv(t T, be compute.Backend, ly compute.Layers, rng *rand.Rand, g compute.Window, ch int) {
	t.Helper()
	const m = 3
	ckk, pos := g.C*g.K*g.K, g.Positions()
	x, w, b := randSlice(rng, m*g.In()), randSlice(rng, ch*ckk), randSlice(rng, ch)
	dout := randSlice(rng, m*ch*pos)
	// The reference: out[e,o,p] = b[o] + Σ w[o,r]·col[e,r,p].
	col := func(e, r, p int) float64 {
		c, ki, kj := r/(g.K*g.K), r/g.K%g.K, r%g.K
		ih, iw := p/g.OW*g.S-g.P+ki, p%g.OW*g.S-g.P+kj
		if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
			return 0
		}
		return float64(x[e*g.In()+c*g.H*g.W+ih*g.W+iw])
	}
	want := make([]float64, m*ch*pos)
	dw, db := make([]float64, m*ch*ckk), make([]float64, m*ch)
	dx := make([]float64, m*g.In())
	for e := range m {
		for o := range ch {
			for p := range pos {
				s, d := float64(b[o]), float64(dout[(e*ch+o)*pos+p])
				db[e*ch+o] += d
				for r := range ckk {
					s += float64(w[o*ckk+r]) * col(e, r, p)
					dw[(e*ch+o)*ckk+r] += d * col(e, r, p)
					c, ki, kj := r/(g.K*g.K), r/g.K%g.K, r%g.K
					ih, iw := p/g.OW*g.S-g.P+ki, p%g.OW*g.S-g.P+kj
					if ih >= 0 && ih < g.H && iw >= 0 && iw < g.W {
						dx[e*g.In()+c*g.H*g.W+ih*g.W+iw] += d * float64(w[o*ckk+r])
					}
				}
				want[(e*ch+o)*pos+p] = s
			}
		}
	}
	tol := 1e-5 * float64(ckk+pos+1)
	xt, wt, bt, dt := be.Load(x), be.Load(w), be.Load(b), be.Load(dout)
	out, cols := be.Alloc(m*ch*pos), be.Alloc(m*g.Cols())
	defer func() {
		for _, v := range []compute.Tensor{xt, wt, bt, dt, out, cols} {
			be.Free(v)
		}
	}()
	ly.ConvForward(out, compute.Tensor{}, xt, wt, bt, g, ch, m)
	check(t, "ConvForward (no cols)", get(be, out), want, tol)
	for range 2 { // twice: cols reused
		ly.ConvForward(out, cols, xt, wt, bt, g, ch, m)
	}
	check(t, "ConvForward", get(be, out), want, tol)
	// Summed gradients, added to what is there (1s).
	size := ch*ckk + ch + 5 // a parameter vector's row: weight, bias, more
	ones := make([]float32, size)
	for i := range ones {
		ones[i] = 1
	}
	gt, dxt := be.Load(ones), be.Alloc(m*g.In())
	ly.ConvBackward(dxt, gt.Slice(0, ch*ckk), gt.Slice(ch*ckk, ch*ckk+ch), dt, cols, wt, g, ch, m, 0)
	sum := make([]float64, size)
	for i := range sum {
		sum[i] = 1
	}
	for e := range m {
		for j := range ch * ckk {
			sum[j] += dw[e*ch*ckk+j]
		}
		for j := range ch {
			sum[ch*ckk+j] += db[e*ch+j]
		}
	}
	check(t, "ConvBackward weight and bias", get(be, gt), sum, tol*m)
	check(t, "ConvBackward input", get(be, dxt), dx, tol)
	be.Free(gt)
	// Per example, rows of size values; no input gradient.
	pt := be.Alloc(m * size)
	ly.ConvBackward(compute.Tensor{}, pt, pt.Slice(ch*ckk, pt.Len()), dt, cols, wt, g, ch, m, size)
	per := make([]float64, m*size)
	for e := range m {
		copy(per[e*size:], dw[e*ch*ckk:(e+1)*ch*ckk])
		copy(per[e*size+ch*ckk:], db[e*ch:(e+1)*ch])
	}
	check(t, "ConvBackward per example", get(be, pt), per, tol)
	be.Free(pt)
	be.Free(dxt)
}

func pools(t T, be compute.Backend, ly compute.Layers, rng *rand.Rand, g compute.Window) {
	t.Helper()
	const m = 2
	x := randSlice(rng, m*g.In())
	for i := range x {
		if i%3 == 0 {
			x[i] = float32(rng.IntN(2)) // ties: the first in row order wins
		}
	}
	os := g.C * g.Positions()
	dout := randSlice(rng, m*os)
	for _, isMax := range []bool{true, false} {
		want, dx := make([]float64, m*os), make([]float64, m*g.In())
		for e := range m {
			for c := range g.C {
				for p := range g.Positions() {
					oh, ow := p/g.OW, p%g.OW
					best, at, s := math.Inf(-1), 0, 0.0
					for ki := range g.K {
						for kj := range g.K {
							j := e*g.In() + c*g.H*g.W + (oh*g.S+ki)*g.W + ow*g.S + kj
							s += float64(x[j])
							if float64(x[j]) > best {
								best, at = float64(x[j]), j
							}
						}
					}
					o := e*os + c*g.Positions() + p
					n := float64(g.K * g.K)
					if isMax {
						want[o] = best
						dx[at] += float64(dout[o])
						continue
					}
					want[o] = s / n
					for ki := range g.K {
						for kj := range g.K {
							dx[e*g.In()+c*g.H*g.W+(oh*g.S+ki)*g.W+ow*g.S+kj] += float64(dout[o]) / n
						}
					}
				}
			}
		}
		xt, dt, out, dxt := be.Load(x), be.Load(dout), be.Alloc(m*os), be.Alloc(m*g.In())
		ly.Pool(out, xt, g, m, isMax)
		ly.PoolBackward(dxt, dt, xt, g, m, isMax)
		tol := 1e-6
		if isMax {
			tol = 1e-30 // exact
		}
		check(t, "Pool", get(be, out), want, tol)
		check(t, "PoolBackward", get(be, dxt), dx, 1e-6*float64(g.K*g.K)) // overlapping windows sum
		for _, v := range []compute.Tensor{xt, dt, out, dxt} {
			be.Free(v)
		}
	}
}

func activations(t T, be compute.Backend, ly compute.Layers, rng *rand.Rand) {
	t.Helper()
	n := 3*(1<<14) + 17 // past a CPU's block
	x, d := randSlice(rng, n), randSlice(rng, n)
	x[0], x[1] = 0, float32(math.Copysign(0, -1))
	for _, f := range []compute.Activation{compute.ActReLU, compute.ActTanh, compute.ActGELU} {
		want, dx := make([]float64, n), make([]float64, n)
		for i, v := range x {
			z := float64(v)
			switch f {
			case compute.ActReLU:
				want[i] = max(z, 0)
				if z > 0 {
					dx[i] = float64(d[i])
				}
			case compute.ActTanh:
				want[i] = math.Tanh(z)
				dx[i] = float64(d[i]) * (1 - want[i]*want[i])
			case compute.ActGELU:
				want[i], dx[i] = compute.Gelu(z), float64(d[i])*compute.GeluGrad(z)
			}
		}
		xt, dt, out, dxt := be.Load(x), be.Load(d), be.Alloc(n), be.Alloc(n)
		ly.Activate(out, xt, f)
		ly.ActivateBackward(dxt, dt, xt, out, f)
		tol := 1e-6
		if f == compute.ActReLU {
			tol = 1e-30
		}
		check(t, "Activate", get(be, out), want, tol)
		check(t, "ActivateBackward", get(be, dxt), dx, tol)
		for _, v := range []compute.Tensor{xt, dt, out, dxt} {
			be.Free(v)
		}
	}
}

func norms(t T, be compute.Backend, ly compute.Layers, rng *rand.Rand) {
	t.Helper()
	const m = 3
	for _, c := range []struct{ groups, size, hw int }{{1, 40, 1}, {2, 18, 9}, {4, 8, 4}} {
		n := m * c.groups * c.size
		nw := c.groups * c.size / c.hw
		x, d, w, b := randSlice(rng, n), randSlice(rng, n), randSlice(rng, nw), randSlice(rng, nw)
		want, dx := make([]float64, n), make([]float64, n)
		dw, db := make([]float64, m*nw), make([]float64, m*nw)
		for e := range m {
			for q := range c.groups {
				off := (e*c.groups + q) * c.size
				mean, sq := 0.0, 0.0
				for j := range c.size {
					mean += float64(x[off+j])
				}
				mean /= float64(c.size)
				for j := range c.size {
					sq += (float64(x[off+j]) - mean) * (float64(x[off+j]) - mean)
				}
				rstd := 1 / math.Sqrt(sq/float64(c.size)+1e-5)
				sg, sgx := 0.0, 0.0
				for j := range c.size {
					ch := (q*c.size + j) / c.hw
					xh := (float64(x[off+j]) - mean) * rstd
					want[off+j] = xh*float64(w[ch]) + float64(b[ch])
					dw[e*nw+ch] += float64(d[off+j]) * xh
					db[e*nw+ch] += float64(d[off+j])
					gj := float64(d[off+j]) * float64(w[ch])
					sg += gj / float64(c.size)
					sgx += gj * xh / float64(c.size)
				}
				for j := range c.size {
					ch := (q*c.size + j) / c.hw
					xh := (float64(x[off+j]) - mean) * rstd
					dx[off+j] = rstd * (float64(d[off+j])*float64(w[ch]) - sg - xh*sgx)
				}
			}
		}
		xt, dt, wt, bt := be.Load(x), be.Load(d), be.Load(w), be.Load(b)
		out, stats, dxt := be.Alloc(n), be.Alloc(2*m*c.groups), be.Alloc(n)
		grads := be.Alloc(m * 2 * nw) // per example: weight then bias
		ly.Norm(out, stats, xt, wt, bt, m, c.groups, c.size, c.hw)
		check(t, "Norm", get(be, out), want, 1e-4)
		ly.NormBackward(dxt, grads, grads.Slice(nw, grads.Len()), dt, xt, wt, stats, m, c.groups, c.size, c.hw, 2*nw)
		check(t, "NormBackward input", get(be, dxt), dx, 1e-4)
		per := make([]float64, m*2*nw)
		for e := range m {
			copy(per[e*2*nw:], dw[e*nw:(e+1)*nw])
			copy(per[e*2*nw+nw:], db[e*nw:(e+1)*nw])
		}
		check(t, "NormBackward per example", get(be, grads), per, 1e-4)
		sums := be.Alloc(2 * nw)
		ly.NormBackward(compute.Tensor{}, sums, sums.Slice(nw, 2*nw), dt, xt, wt, stats, m, c.groups, c.size, c.hw, 0)
		sum := make([]float64, 2*nw)
		for e := range m {
			for j := range 2 * nw {
				sum[j] += per[e*2*nw+j]
			}
		}
		check(t, "NormBackward summed", get(be, sums), sum, 1e-4*m)
		for _, v := range []compute.Tensor{xt, dt, wt, bt, out, stats, dxt, grads, sums} {
			be.Free(v)
		}
	}
}

func small(t T, be compute.Backend, ly compute.Layers, rng *rand.Rand) {
	t.Helper()
	const m, ch, pos, stride = 3, 4, 7, 6
	src := randSlice(rng, m*ch*pos)
	want := make([]float64, (m-1)*stride+ch)
	all := make([]float64, ch)
	for e := range m {
		for c := range ch {
			for j := range pos {
				want[e*stride+c] += float64(src[(e*ch+c)*pos+j])
				all[c] += float64(src[(e*ch+c)*pos+j])
			}
		}
	}
	st, dst, dsum := be.Load(src), be.Alloc(len(want)), be.Alloc(ch)
	ly.ChannelSums(dst, st, m, ch, pos, stride)
	ly.ChannelSums(dsum, st, m, ch, pos, 0)
	check(t, "ChannelSums per example", get(be, dst), want, 1e-5*(pos+1))
	check(t, "ChannelSums", get(be, dsum), all, 1e-5*(m*pos+1))
	a, b := randSlice(rng, 100), randSlice(rng, 100)
	prod := make([]float64, 100)
	for i := range a {
		prod[i] = float64(a[i] * b[i])
	}
	at, bt := be.Load(a), be.Load(b)
	ly.Mul(at, at, bt)
	check(t, "Mul", get(be, at), prod, 1e-30)
	ly.Zero(at)
	check(t, "Zero", get(be, at), make([]float64, 100), 1e-30)
	for _, v := range []compute.Tensor{st, dst, dsum, at, bt} {
		be.Free(v)
	}
}
