package compute

import (
	"fmt"
	"math"
)

// MomentBlock is how many coordinates Moments sums at a time: their sums
// stay in a core's cache while every vector's values are added.
const MomentBlock = 2048

// Moments sets mu[j] and sd[j] to the mean and the (population) standard
// deviation of value j of the vectors xs (at least one, all as long as
// mu and sd): Σ x over the vectors in their order in float64, divided by
// len(xs); then Σ (x − mean)², each square rounded to float64 on its own
// (fused into no multiply-add on any machine), in the same order,
// divided by len(xs), and its square root. Blocks of MomentBlock
// coordinates go to up to workers goroutines; every coordinate's sums
// are the same whichever. This is what MomentsRows computes on every
// backend, with these bits: the honest peers' moments that the
// simulator's omniscient attacks (ipm, alie) send.
func Moments(mu, sd []float64, xs [][]float32, workers int) {
	n := len(mu)
	if len(xs) == 0 || len(sd) != n {
		panic(fmt.Sprintf("compute: Moments of %d vectors into %d means and %d deviations", len(xs), n, len(sd)))
	}
	for _, x := range xs {
		if len(x) != n {
			panic(fmt.Sprintf("compute: Moments of a vector of %d values into %d", len(x), n))
		}
	}
	inv := float64(len(xs))
	ForEach((n+MomentBlock-1)/MomentBlock, workers, func(b int) {
		lo, hi := b*MomentBlock, min(n, (b+1)*MomentBlock)
		m, d := mu[lo:hi], sd[lo:hi]
		clear(m)
		clear(d)
		for _, x := range xs {
			for i, v := range x[lo:hi] {
				m[i] += float64(v)
			}
		}
		for i := range m {
			m[i] /= inv
		}
		for _, x := range xs {
			for i, v := range x[lo:hi] {
				e := float64(v) - m[i]
				d[i] += float64(e * e)
			}
		}
		for i := range d {
			d[i] = math.Sqrt(d[i] / inv)
		}
	})
}

// CheckMoments panics unless a MomentsRows call's rows lie in src, there
// is at least one, and out holds 2·n values.
func CheckMoments(out []float64, src Tensor, n int, rows []int32) {
	CheckRows("MomentsRows", src, n, rows)
	if len(rows) == 0 || len(out) != 2*n {
		panic(fmt.Sprintf("compute: MomentsRows of %d rows of %d values into %d", len(rows), n, len(out)))
	}
}

// MomentsRows implements Rows.
func (c *CPU) MomentsRows(out []float64, st Tensor, n int, rows []int32) {
	CheckMoments(out, st, n, rows)
	s := host(st)
	xs := make([][]float32, len(rows))
	for i, r := range rows {
		xs[i] = s[int(r)*n : int(r+1)*n]
	}
	Moments(out[:n], out[n:], xs, c.rowWorkers(len(rows), n))
}
