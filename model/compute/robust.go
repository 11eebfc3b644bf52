package compute

import "fmt"

// PairDistanceRows, AverageRows and ClipRows are the kernels of Krum,
// multi-Krum and clipped gossip over rows (Rows): the distances a rule
// scores its inputs by, then the combination it picks.

// CheckPairs panics unless a PairDistanceRows call's lists agree and lie
// in x, and out has room for every pair.
func CheckPairs(out []float64, x Tensor, n int, a, b []int32) {
	CheckRows("PairDistanceRows", x, n, a, b)
	if len(a) != len(b) || len(out) < len(a) {
		panic(fmt.Sprintf("compute: PairDistanceRows of %d and %d rows into %d sums", len(a), len(b), len(out)))
	}
}

// PairDistanceRows implements Rows.
func (c *CPU) PairDistanceRows(out []float64, xt Tensor, n int, a, b []int32) {
	CheckPairs(out, xt, n, a, b)
	x := host(xt)
	ForEach(len(a), c.rowWorkers(len(a), n), func(i int) {
		out[i] = SquaredDistance4(x[int(a[i])*n:][:n], x[int(b[i])*n:][:n])
	})
}

// CheckLists panics unless a Rows call that takes, for each row rows[i]
// it writes, the rows from[start[i]:start[i+1]] (at least one) lies in
// its matrices and its lists agree; extra lists (per source row) have
// len(from) entries.
func CheckLists(name string, dst, src Tensor, n int, rows, start, from []int32, extra ...int) {
	CheckRows(name, dst, n, rows)
	CheckRows(name, src, n, from)
	if len(start) != len(rows)+1 || start[0] != 0 || int(start[len(rows)]) != len(from) {
		panic(fmt.Sprintf("compute: %s: %d rows, %d starts, %d sources", name, len(rows), len(start), len(from)))
	}
	for _, e := range extra {
		if e != len(from) {
			panic(fmt.Sprintf("compute: %s: %d sources, %d per-source values", name, len(from), e))
		}
	}
	for i := range rows {
		if start[i+1] <= start[i] {
			panic(fmt.Sprintf("compute: %s: row %d of no sources", name, i))
		}
	}
}

// AverageRows implements Rows.
func (c *CPU) AverageRows(dt, st Tensor, n int, rows, start, from []int32) {
	CheckLists("AverageRows", dt, st, n, rows, start, from)
	x, s := host(dt), host(st)
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		lo, hi := int(start[i]), int(start[i+1])
		d := x[int(rows[i])*n:][:n]
		for j := range d {
			var sum float64
			for _, r := range from[lo:hi] {
				sum += float64(s[int(r)*n+j])
			}
			d[j] = float32(sum / float64(hi-lo))
		}
	})
}

// ClipRows implements Rows.
func (c *CPU) ClipRows(dt, st Tensor, n int, rows, start, from []int32, scale []float64) {
	CheckLists("ClipRows", dt, st, n, rows, start, from, len(scale))
	x, s := host(dt), host(st)
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		lo, hi := int(start[i]), int(start[i+1])
		d := x[int(rows[i])*n:][:n]
		for j := range d {
			d[j] = ClipValue(s, n, j, from[lo:hi], scale[lo:hi])
		}
	})
}

// ClipValue is value j of ClipRows' result from the rows from of x (rows
// of n values) with their scales: the first row's value v plus Σ
// scale[k]·(x_k − v) over the others, in float64, the terms and sums in
// their order, each product rounded apart from its sum, converted to
// float32 at the end (merge.ClippedGossip's arithmetic).
func ClipValue(x []float32, n, j int, from []int32, scale []float64) float32 {
	v := float64(x[int(from[0])*n+j])
	var acc float64
	for k := 1; k < len(from); k++ {
		acc += float64(scale[k] * (float64(x[int(from[k])*n+j]) - v))
	}
	return float32(v + acc)
}
