package compute

import "fmt"

// Rows is the part of a Backend that combines rows of matrices: the
// parameter vectors of many peers kept side by side in one tensor (a
// simulator's peers resident on a device), merged, averaged and checked
// for all of them in one call instead of one call per peer. The kernels
// read rows of a matrix src and write rows of a matrix dst, both of rows
// of n values (row r is x[r·n : (r+1)·n]); dst and src may be the same
// tensor. Rows are given as int32 indices, the form a device reads them
// in.
//
// The combining kernels round as merge's functions do, every product and
// every sum to float32 on its own (no fused multiply-add), so that their
// results are the same bit for bit on every backend and every machine.
type Rows interface {
	// InterpolateRows sets row rows[i] of dst to a + w[i]·(b − a), where
	// a is row a[i] and b is row b[i] of src, for every i: gossip
	// learning's age-weighted merge (merge.Interpolate). The rows written
	// must differ from each other and, when dst is src, no i may read a
	// row another i writes (an i may write a row it reads).
	InterpolateRows(dst, src Tensor, n int, rows, a, b []int32, w []float32)
	// CombineRows sets row rows[i] of dst to Σ_k w[k]·(row from[k] of
	// src) over k in [start[i], start[i+1]), summed in the order of k:
	// the first product, then each next added (merge.Weighted, Axpy with
	// a weight 1 on the row itself, Scale, a copy with one weight 1).
	// start has len(rows)+1 entries, rising, from 0 to len(from) = len(w).
	// The same rules of aliasing as InterpolateRows hold.
	CombineRows(dst, src Tensor, n int, rows, start, from []int32, w []float32)
	// SumSquaresRows sets out[i] to Σ x² over row rows[i], accumulated in
	// float64: NaN or +Inf exactly when the row holds a non-finite value
	// (a float32's square cannot overflow a float64, nor can a sum of
	// fewer than 2⁸⁰ of them), so that one call both checks the rows and
	// gives their norms. The order of summation may differ between
	// backends (within 1e-9 relative for rows of up to 10⁶ values).
	SumSquaresRows(out []float64, x Tensor, n int, rows []int32)
	// MeanRows sets dst's first n values to the mean of rows rows of
	// src, every value summed in float64 over the rows in their order,
	// multiplied by 1/len(rows) in float64 and converted to float32,
	// float32(Σ_i x_i · (1/len(rows))): the mean
	// merge.ConsensusDistanceN measures from, with the same bits on
	// every backend. rows must not be empty.
	MeanRows(dst, src Tensor, n int, rows []int32)
	// DistanceRows sets out[i·c + k], for the c = ⌈n/chunk⌉ chunks of
	// chunk values of a row, to Σ (x − ref)² over chunk k of row rows[i]
	// of x and the same values of ref (a vector of n values): each
	// difference rounded to float32, its square and the sums in float64
	// as SquaredDistance4 takes them (four running sums, no fused
	// multiply-add), so with the same bits on every backend. The squared
	// distances of many peers' models from their mean (MeanRows), chunk
	// by chunk as merge.ConsensusDistanceN adds them, in one call.
	DistanceRows(out []float64, x Tensor, n int, rows []int32, ref Tensor, chunk int)
	// MomentsRows sets out[j] to the mean and out[n+j] to the standard
	// deviation of value j over the rows rows of src (at least one; a row
	// may repeat), as Moments computes them from those rows, with its bits
	// on every backend; out has 2·n values.
	MomentsRows(out []float64, src Tensor, n int, rows []int32)
	// TrimmedRows sets value j of row rows[i] of dst to Trimmed of value
	// j of the rows from[k] of src, k in [start[i], start[i+1]), with
	// trim[i] (Median: the median): the coordinate-wise median or trimmed
	// mean of merge's robust rules, with the host's bits (but for a NaN a
	// sum makes, whose sign and payload may differ). Each result
	// is taken over 1 to MaxTrimmedInputs rows (CheckTrimmed); start has
	// len(rows)+1 entries, rising, from 0 to len(from). The same rules of
	// aliasing as InterpolateRows hold.
	TrimmedRows(dst, src Tensor, n int, rows, start, from, trim []int32)
	// PairDistanceRows sets out[i] to SquaredDistance4 of rows a[i] and
	// b[i] of x, with its bits: the distances Krum scores its inputs by
	// and clipped gossip clips by (merge.SquaredDistance).
	PairDistanceRows(out []float64, x Tensor, n int, a, b []int32)
	// AverageRows sets value j of row rows[i] of dst to float32(Σ_k
	// x_k / m) over value j of the m rows from[k] of src, k in
	// [start[i], start[i+1]) (at least one), summed in float64 from 0 in
	// the order of k and divided in float64: multi-Krum's mean of the
	// inputs it keeps. The same rules of aliasing as InterpolateRows
	// hold.
	AverageRows(dst, src Tensor, n int, rows, start, from []int32)
	// ClipRows sets value j of row rows[i] of dst to ClipValue of value
	// j of the rows from[k] of src, k in [start[i], start[i+1]) (at
	// least one; the first is the node's own), with the scales
	// scale[k]: clipped gossip's x + Σ s_k·(x_k − x), in float64. The
	// same rules of aliasing as InterpolateRows hold.
	ClipRows(dst, src Tensor, n int, rows, start, from []int32, scale []float64)
	// QuantizeRows sets row rows[i] of dst to row from[i] of src rounded
	// as q rounds it and widened back (RoundTrip; chunk values share an
	// int8 scale): what the receiver of a vector sent quantized holds.
	// A NaN may come back as another NaN. The same rules of aliasing as
	// InterpolateRows hold.
	QuantizeRows(dst, src Tensor, n int, rows, from []int32, q Quantization, chunk int)
	// MaskRows sets row rows[i] of dst to row from[i] of src at the
	// indices keep[start[i]:start[i+1]] (ascending, below n) and to 0
	// elsewhere: a rand-k compression of the row as its receivers
	// decompress it. The same rules of aliasing as InterpolateRows hold.
	MaskRows(dst, src Tensor, n int, rows, start, from, keep []int32)
	// TopKRows sets row rows[i] of dst to row from[i] of src at its k
	// largest magnitudes and to 0 elsewhere (TopKInto: ties to the lower
	// index, magnitudes by their bits), and bytes[i] to the bytes of the
	// kept indices' encoding: a top-k compression of the row as its
	// receivers decompress it, and what its indices cost on the wire.
	// The same rules of aliasing as InterpolateRows hold.
	TopKRows(dst, src Tensor, n int, rows, from []int32, k int, bytes []int32)
}

// CheckMean panics unless a MeanRows call's rows lie in src and dst
// holds n values.
func CheckMean(dst, src Tensor, n int, rows []int32) {
	CheckRows("MeanRows", src, n, rows)
	if len(rows) == 0 || dst.Len() < n {
		panic(fmt.Sprintf("compute: MeanRows of %d rows of %d values into %d", len(rows), n, dst.Len()))
	}
}

// CheckDistance panics unless a DistanceRows call's rows lie in x, ref
// holds n values, chunk is positive and out has room for every chunk
// of every row; it returns the chunks a row.
func CheckDistance(out []float64, x Tensor, n int, rows []int32, ref Tensor, chunk int) int {
	CheckRows("DistanceRows", x, n, rows)
	if chunk <= 0 || ref.Len() < n {
		panic(fmt.Sprintf("compute: DistanceRows of rows of %d values from %d in chunks of %d", n, ref.Len(), chunk))
	}
	c := (n + chunk - 1) / chunk
	if len(out) < len(rows)*c {
		panic(fmt.Sprintf("compute: DistanceRows of %d rows of %d chunks into %d sums", len(rows), c, len(out)))
	}
	return c
}

// CheckRows panics unless every row index lies in x's rows of n values:
// the programmer errors that the Rows kernels refuse.
func CheckRows(name string, x Tensor, n int, lists ...[]int32) {
	if n <= 0 {
		panic(fmt.Sprintf("compute: %s with rows of %d values", name, n))
	}
	m := x.Len() / n
	for _, l := range lists {
		for _, r := range l {
			if r < 0 || int(r) >= m {
				panic(fmt.Sprintf("compute: %s: row %d outside the %d rows of %d values", name, r, m, n))
			}
		}
	}
}

// CheckInterpolate panics unless an InterpolateRows call's lists agree
// and lie in its matrices.
func CheckInterpolate(dst, src Tensor, n int, rows, a, b []int32, w []float32) {
	if len(a) != len(rows) || len(b) != len(rows) || len(w) != len(rows) {
		panic(fmt.Sprintf("compute: InterpolateRows: %d rows, %d a, %d b, %d weights", len(rows), len(a), len(b), len(w)))
	}
	CheckRows("InterpolateRows", dst, n, rows)
	CheckRows("InterpolateRows", src, n, a, b)
}

// CheckCombine panics unless a CombineRows call's lists agree and lie in
// its matrices.
func CheckCombine(dst, src Tensor, n int, rows, start, from []int32, w []float32) {
	CheckRows("CombineRows", dst, n, rows)
	CheckRows("CombineRows", src, n, from)
	if len(start) != len(rows)+1 || start[0] != 0 || int(start[len(rows)]) != len(from) || len(w) != len(from) {
		panic(fmt.Sprintf("compute: CombineRows: %d rows, %d starts, %d sources, %d weights", len(rows), len(start), len(from), len(w)))
	}
	for i := range rows {
		if start[i+1] < start[i] {
			panic(fmt.Sprintf("compute: CombineRows: start[%d] = %d > start[%d] = %d", i, start[i], i+1, start[i+1]))
		}
	}
}

// InterpolateRows implements Rows.
func (c *CPU) InterpolateRows(dt, st Tensor, n int, rows, a, b []int32, w []float32) {
	CheckInterpolate(dt, st, n, rows, a, b, w)
	d, s := host(dt), host(st)
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		c.ks.interp(d[int(rows[i])*n:][:n], s[int(a[i])*n:][:n], s[int(b[i])*n:][:n], w[i])
	})
}

// InterpolateInto sets d = a + w·(b − a), rounding the difference, the
// product and the sum each (no fused multiply-add): merge's Interpolate
// and InterpolateRows on every backend, which give the same values bit
// for bit. It runs the kernel set $GOSSIPD_KERNEL names, else the best
// this CPU has (vector code on amd64, which rounds the same way). d may
// be a or b itself, and must not overlap them otherwise.
func InterpolateInto(d, a, b []float32, w float32) {
	ks, err := envKernels()
	if err != nil {
		panic(err) // as NewCPU does: programs check $GOSSIPD_KERNEL at start
	}
	ks.interp(d[:len(a)], a, b[:len(a)], w)
}

// interpKernel sets d = a + w·(b − a) over len(a) values, as
// InterpolateInto; d and b hold at least as many.
type interpKernel func(d, a, b []float32, w float32)

// interpGo is the interp kernel in Go: the explicit conversion forbids
// fusing the product and the sum.
func interpGo(d, a, b []float32, w float32) {
	b, d = b[:len(a)], d[:len(a)]
	for j, av := range a {
		d[j] = av + float32(w*(b[j]-av))
	}
}

// CombineRows implements Rows.
func (c *CPU) CombineRows(dt, st Tensor, n int, rows, start, from []int32, w []float32) {
	CheckCombine(dt, st, n, rows, start, from, w)
	x, s := host(dt), host(st)
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		lo, hi := int(start[i]), int(start[i+1])
		d := x[int(rows[i])*n:][:n]
		if lo == hi {
			clear(d)
			return
		}
		srcs := make([][]float32, hi-lo)
		for k := range srcs {
			srcs[k] = s[int(from[lo+k])*n:][:n]
		}
		c.ks.combine(d, srcs, w[lo:hi])
	})
}

// CombineInto sets d = Σ_k w[k]·xs[k] over len(d) values, summed in the
// order of k (the first product, then each next added), rounding every
// product and every sum on its own: merge's Weighted and CombineRows on
// every backend, which give the same values bit for bit. It runs the
// kernel set $GOSSIPD_KERNEL names, else the best this CPU has, in one
// pass over the values (each block is summed over all the models before
// it is stored). d may be any of xs itself, and must not overlap them
// otherwise; every xs[k] holds at least len(d) values, and len(w) =
// len(xs) ≥ 1 (it panics otherwise). It allocates nothing for up to 16
// models. (A signalling NaN is the one exception to the same bits: the
// Go loop may leave one in d as it is where the vector code quiets it.)
func CombineInto(d []float32, xs [][]float32, w []float32) {
	if len(xs) == 0 || len(w) != len(xs) {
		panic(fmt.Sprintf("compute: CombineInto of %d vectors with %d weights", len(xs), len(w)))
	}
	for k, x := range xs {
		if len(x) < len(d) {
			panic(fmt.Sprintf("compute: CombineInto of %d values from a vector %d of %d", len(d), k, len(x)))
		}
	}
	ks, err := envKernels()
	if err != nil {
		panic(err) // as NewCPU does: programs check $GOSSIPD_KERNEL at start
	}
	combineDirect(ks, d, xs, w)
}

// combineDirect runs ks's combine kernel by a direct call, so that the
// arguments stay on the caller's stack (merge allocates nothing on its
// hot path): the vector kernel where ks has one, else the Go loop.
func combineDirect(ks *kernels, d []float32, xs [][]float32, w []float32) {
	if ks.combineVec {
		combineVec(d, xs, w)
		return
	}
	combineGo(d, xs, w)
}

// combineKernel is CombineInto's kernel: d = Σ_k w[k]·xs[k] over len(d)
// values, len(xs) = len(w) ≥ 1.
type combineKernel func(d []float32, xs [][]float32, w []float32)

// combineGo is the combine kernel in Go, a block of values at a time
// (summed in a buffer that stays in the cache, then stored): the
// explicit conversion forbids fusing a product and its sum.
func combineGo(d []float32, xs [][]float32, w []float32) {
	n := len(d)
	switch {
	case n == 0:
		return
	case len(xs) == 1: // a scale, value by value
		scaleGo(d, xs[0], w[0])
		return
	case len(xs) == 2 && w[0] == 1 && &xs[0][0] == &d[0]: // an axpy into d (1·d is d)
		addScaledGo(d, xs[1], w[1])
		return
	}
	var acc [256]float32
	for j0 := 0; j0 < n; j0 += len(acc) {
		blk := acc[:min(len(acc), n-j0)]
		scaleGo(blk, xs[0][j0:][:len(blk)], w[0])
		for k := 1; k < len(xs); k++ {
			addScaledGo(blk, xs[k][j0:][:len(blk)], w[k])
		}
		copy(d[j0:], blk)
	}
}

// scaleGo sets d = a·x, and addScaledGo d += a·x (the product rounded
// before the sum), over len(d) values; unrolled by four (each value is
// computed alone, so the result is the same): a one-value loop ran at
// half speed or full speed depending on where the linker placed it.
func scaleGo(d, x []float32, a float32) {
	x = x[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		dd, v := d[i:i+4:i+4], x[i:i+4:i+4]
		dd[0], dd[1], dd[2], dd[3] = a*v[0], a*v[1], a*v[2], a*v[3]
	}
	for ; i < len(d); i++ {
		d[i] = a * x[i]
	}
}

func addScaledGo(d, x []float32, a float32) {
	x = x[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		dd, v := d[i:i+4:i+4], x[i:i+4:i+4]
		dd[0] += float32(a * v[0])
		dd[1] += float32(a * v[1])
		dd[2] += float32(a * v[2])
		dd[3] += float32(a * v[3])
	}
	for ; i < len(d); i++ {
		d[i] += float32(a * x[i])
	}
}

// SumSquaresRows implements Rows, summing each row as merge.SumSquares
// does (four running sums).
func (c *CPU) SumSquaresRows(out []float64, xt Tensor, n int, rows []int32) {
	if len(out) < len(rows) {
		panic(fmt.Sprintf("compute: SumSquaresRows of %d rows into %d sums", len(rows), len(out)))
	}
	CheckRows("SumSquaresRows", xt, n, rows)
	x := host(xt)
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		out[i] = SumSquares4(x[int(rows[i])*n:][:n])
	})
}

// SumSquares4 returns Σ v² over x in float64 with four running sums
// (merge.SumSquares, SumSquaresRows).
func SumSquares4(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a, b, c, d := float64(x[i]), float64(x[i+1]), float64(x[i+2]), float64(x[i+3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i]) * float64(x[i])
	}
	return s0 + s1 + s2 + s3
}

// MeanRows implements Rows, a chunk of values on each worker.
func (c *CPU) MeanRows(dt, st Tensor, n int, rows []int32) {
	CheckMean(dt, st, n, rows)
	d, s := host(dt), host(st)
	const chunk = 1024 // its sums stay in the cache while the rows pass
	chunks := (n + chunk - 1) / chunk
	inv := 1 / float64(len(rows))
	ForEach(chunks, c.rowWorkers(len(rows), n), func(k int) {
		lo, hi := k*chunk, min(n, (k+1)*chunk)
		var acc [chunk]float64
		a := acc[:hi-lo]
		for _, r := range rows {
			for j, v := range s[int(r)*n+lo : int(r)*n+hi] {
				a[j] += float64(v)
			}
		}
		for j, v := range a {
			d[lo+j] = float32(v * inv)
		}
	})
}

// DistanceRows implements Rows, a row on each worker.
func (c *CPU) DistanceRows(out []float64, xt Tensor, n int, rows []int32, rt Tensor, chunk int) {
	cs := CheckDistance(out, xt, n, rows, rt, chunk)
	x, ref := host(xt), host(rt)[:n]
	ForEach(len(rows), c.rowWorkers(len(rows), n), func(i int) {
		row := x[int(rows[i])*n:][:n]
		for k := range cs {
			lo, hi := k*chunk, min(n, (k+1)*chunk)
			out[i*cs+k] = SquaredDistance4(row[lo:hi], ref[lo:hi])
		}
	})
}

// SquaredDistance4 returns Σ (a − b)² over a and b (as long as a), each
// difference rounded to float32 and then squared and summed in float64
// with four running sums (merge.SquaredDistance, DistanceRows). The
// conversions forbid fusing a product and a sum, so the result has the
// same bits on every machine.
func SquaredDistance4(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		d0, d1 := float64(a[i]-b[i]), float64(a[i+1]-b[i+1])
		d2, d3 := float64(a[i+2]-b[i+2]), float64(a[i+3]-b[i+3])
		s0 += float64(d0 * d0)
		s1 += float64(d1 * d1)
		s2 += float64(d2 * d2)
		s3 += float64(d3 * d3)
	}
	for ; i < len(a); i++ {
		d := float64(a[i] - b[i])
		s0 += float64(d * d)
	}
	return s0 + s1 + s2 + s3
}

// rowWorkers is how many goroutines share count rows of n values: one
// below a million values, where starting more costs more than it saves.
func (c *CPU) rowWorkers(count, n int) int {
	if count*n < 1<<20 {
		return 1
	}
	return c.threads
}
