package compute

import "unsafe"

// The small-GEMM path. Training steps multiply small matrices (a batch of 32
// rows by a 784×10 softmax layer, say) many thousands of times; at that size
// packing the operands into panels and handing the work to other threads
// costs more than the arithmetic. These routines read A and B where they
// lie, with two kinds of micro-kernel:
//
//   - dot: C = op(A)·Bᵀ reads rows of A and rows of B that are both
//     contiguous along k, and computes a block of dot products at once:
//     4×4 (pure Go, NEON), 2×5 (AVX2: ten accumulators fit its sixteen
//     registers) or 4×5 (AVX-512). Five columns fit the ten classes of the
//     softmax layer without computing columns that are thrown away.
//   - axpy: C = op(A)·B with B not transposed adds rows of B, scaled by
//     elements of A, into two rows of C at a time, four rows of B per pass.
//
// Each has a pure-Go version and, on amd64, AVX2/FMA and AVX-512 versions
// (kernels.go selects one). The versions add in different orders (the
// vector ones keep a partial sum per lane), so their results differ by
// rounding; each is deterministic.

// smallMaxWork is the work (m·n·k) up to which every GEMM takes the small
// path; beyond it, shapes with a side of at most smallNarrow still do: a
// batch of 32 or 64 rows, or a layer of 10 outputs, reuses too little of a
// packed panel to pay for packing it (BenchmarkTrainShapes: 32×128×784 runs
// 3–4× faster here than packed, on one thread against two).
const (
	smallMaxWork = 1 << 21
	smallNarrow  = 64
)

// useSmall reports whether the small path should compute an m×n×k GEMM.
func useSmall(m, n, k int) bool {
	return m*n*k <= smallMaxWork || min(m, n, k) <= smallNarrow
}

// dotKernel computes out[5·r+c] = Σ_{p<k} a[r][p]·b[c][p] for the rows
// r and columns c of its block (kernels.dotRows × kernels.dotCols, at most
// 4 × 5). Meanwhile it may prefetch the first k floats of the block's rows
// in pf into the cache (the vector kernels do; pf may repeat a).
type dotKernel func(k int, a *[4]*float32, b *[5]*float32, out *[20]float32, pf *[4]*float32)

// axpyKernel adds Σ_{q<4} coef[4·r+q]·b[q][0:n] to c[r][0:n] for r < 2.
type axpyKernel func(n int, coef *[8]float32, b *[4]*float32, c *[2]*float32)

// smallDot handles op(B) = Bᵀ: C[i][j] += alpha·Σ_p op(A)[i][p]·B[j][p].
// With transA the rows of op(A) are columns of A, so it copies them into
// contiguous rows first (A is small on this path). rowsA, if not nil, lists
// the rows of A that make op(A) (without transA); rowsB, if not nil, the
// rows of B.
func smallDot(ks *kernels, transA bool, m, n, k int, alpha float32, a []float32, lda int, rowsA []int, b []float32, ldb int, rowsB []int, c []float32, ldc int) {
	if transA {
		at := make([]float32, m*k)
		for p := 0; p < k; p++ {
			row := a[p*lda : p*lda+m]
			for i, v := range row {
				at[i*k+p] = v
			}
		}
		a, lda = at, k
	}
	mr, nr := ks.dotRows, ks.dotCols
	var ap, next [4]*float32
	var bp [5]*float32
	var out [20]float32
	rowPtr := func(i int) *float32 {
		if rowsA != nil {
			i = rowsA[i]
		}
		return &a[i*lda]
	}
	for i0 := 0; i0 < m; i0 += mr {
		ri := min(mr, m-i0)
		for r := range mr {
			// Rows past the edge repeat the last row: their results are
			// computed and dropped, and nothing past the matrix is read.
			ap[r] = rowPtr(i0 + min(r, ri-1))
		}
		// Gathered rows lie anywhere in memory, where the hardware's
		// prefetcher cannot guess them: the first call on this block of
		// rows fetches the next block's meanwhile.
		pf := &ap
		if rowsA != nil && i0+mr < m {
			rn := min(mr, m-i0-mr)
			for r := range mr {
				next[r] = rowPtr(i0 + mr + min(r, rn-1))
			}
			pf = &next
		}
		for j0 := 0; j0 < n; j0 += nr {
			cj := min(nr, n-j0)
			for q := range nr {
				j := j0 + min(q, cj-1)
				if rowsB != nil {
					j = rowsB[j]
				}
				bp[q] = &b[j*ldb]
			}
			ks.dot(k, &ap, &bp, &out, pf)
			pf = &ap
			for r := 0; r < ri; r++ {
				crow := c[(i0+r)*ldc+j0 : (i0+r)*ldc+j0+cj]
				for q := range crow {
					crow[q] += alpha * out[5*r+q]
				}
			}
		}
	}
}

// smallAxpy handles op(B) = B: C[i][:] += Σ_p alpha·op(A)[i][p]·B[p][:],
// four values of p and two rows of C per kernel call. rowsB, if not nil,
// lists the rows of B to use: B[p] is then b's row rowsB[p].
func smallAxpy(kern axpyKernel, transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, rowsB []int, c []float32, ldc int) {
	// op(A)[i][p] lies at a[i·si + p·sp].
	si, sp := lda, 1
	if transA {
		si, sp = 1, lda
	}
	var zero, spare []float32
	if k%4 != 0 || m%2 != 0 {
		buf, done := scratch(2 * n) // from a pool: conv layers call this per example
		defer done()
		zero, spare = buf[:n], buf[n:]
		clear(zero)
	}
	var coef [8]float32
	var bp [4]*float32
	var cp [2]*float32
	for i0 := 0; i0 < m; i0 += 2 {
		two := i0+1 < m
		cp[0] = &c[i0*ldc]
		if two {
			cp[1] = &c[(i0+1)*ldc]
		} else {
			cp[1] = &spare[0]
		}
		for p0 := 0; p0 < k; p0 += 4 {
			for q := range 4 {
				p := p0 + q
				if p >= k {
					// Past the last row of B: a zero row and zero weights.
					bp[q], coef[q], coef[4+q] = &zero[0], 0, 0
					continue
				}
				if rowsB != nil {
					bp[q] = &b[rowsB[p]*ldb]
				} else {
					bp[q] = &b[p*ldb]
				}
				coef[q] = alpha * a[i0*si+p*sp]
				coef[4+q] = 0
				if two {
					coef[4+q] = alpha * a[(i0+1)*si+p*sp]
				}
			}
			kern(n, &coef, &bp, &cp)
		}
	}
}

// dotGo is the portable dot kernel, 4×4: sixteen running sums over k,
// each in the order p = 0, 1, 2, …
func dotGo(k int, a *[4]*float32, b *[5]*float32, out *[20]float32, _ *[4]*float32) {
	a0, a1, a2, a3 := rowOf(a[0], k), rowOf(a[1], k), rowOf(a[2], k), rowOf(a[3], k)
	b0, b1, b2, b3 := rowOf(b[0], k), rowOf(b[1], k), rowOf(b[2], k), rowOf(b[3], k)
	var s [16]float32
	for p := 0; p < k; p++ {
		x0, x1, x2, x3 := a0[p], a1[p], a2[p], a3[p]
		y0, y1, y2, y3 := b0[p], b1[p], b2[p], b3[p]
		s[0] += x0 * y0
		s[1] += x0 * y1
		s[2] += x0 * y2
		s[3] += x0 * y3
		s[4] += x1 * y0
		s[5] += x1 * y1
		s[6] += x1 * y2
		s[7] += x1 * y3
		s[8] += x2 * y0
		s[9] += x2 * y1
		s[10] += x2 * y2
		s[11] += x2 * y3
		s[12] += x3 * y0
		s[13] += x3 * y1
		s[14] += x3 * y2
		s[15] += x3 * y3
	}
	for r := range 4 {
		copy(out[5*r:5*r+4], s[4*r:4*r+4])
	}
}

// axpyGo is the portable axpy kernel.
func axpyGo(n int, coef *[8]float32, b *[4]*float32, c *[2]*float32) {
	b0, b1, b2, b3 := rowOf(b[0], n), rowOf(b[1], n), rowOf(b[2], n), rowOf(b[3], n)
	c0, c1 := rowOf(c[0], n), rowOf(c[1], n)
	w := *coef
	for j := 0; j < n; j++ {
		x0, x1, x2, x3 := b0[j], b1[j], b2[j], b3[j]
		c0[j] = c0[j] + w[0]*x0 + w[1]*x1 + w[2]*x2 + w[3]*x3
		c1[j] = c1[j] + w[4]*x0 + w[5]*x1 + w[6]*x2 + w[7]*x3
	}
}

// rowOf views n floats from p.
func rowOf(p *float32, n int) []float32 { return unsafe.Slice(p, n) }
