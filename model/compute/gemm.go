package compute

import (
	"fmt"
	"sync"
)

// Blocking parameters of the packed GEMM (Goto & van de Geijn 2008; the BLIS
// framework, Van Zee & van de Geijn 2015). The micro-kernel updates an mr×nr
// tile of C from an mr×kc panel of A and a kc×nr panel of B, both packed so
// that the kernel streams them contiguously: kc·(mr+nr) floats stay in L1,
// an mc×kc block of A in L2.
const (
	mr = 6
	nr = 16
	kc = 256
	mc = 96
	nc = 4096
)

// gemmMinParallel is the work (m·n·k) below which Gemm stays on one goroutine.
const gemmMinParallel = 1 << 17

// kernelFunc computes C[0:mr, 0:nr] += Ap·Bp over kc steps, where Ap holds
// kc groups of mr floats and Bp kc groups of nr floats; ldc is C's row
// stride. kc ≥ 1.
type kernelFunc func(kc int, a, b, c []float32, ldc int)

type packBuf struct {
	a []float32
	b []float32
}

var packPool = sync.Pool{New: func() any {
	return &packBuf{a: make([]float32, mc*kc), b: make([]float32, kc*nc)}
}}

// gemm is the shared driver: it checks shapes, applies beta, splits the work
// among threads and runs the blocked algorithm with the given kernel.
// gemmPath chooses between the small path and the packed one: by shape
// (pathAuto), or forced, for tests.
type gemmPath uint8

const (
	pathAuto gemmPath = iota
	pathSmall
	pathPacked
)

func gemm(ks *kernels, threads int, path gemmPath, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if !scaleC(m, n, beta, c, ldc) || k == 0 || alpha == 0 {
		return
	}
	if smallPath(path, m, n, k) {
		if transB {
			smallDot(ks, transA, m, n, k, alpha, a, lda, nil, b, ldb, nil, c, ldc)
		} else {
			smallAxpy(ks.axpy, transA, m, n, k, alpha, a, lda, b, ldb, nil, c, ldc)
		}
		return
	}
	g := gemmArgs{kernel: ks.packed, transA: transA, transB: transB, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	if threads <= 1 || m*n*k < gemmMinParallel {
		g.run(0, m, 0, n)
		return
	}
	// Split the larger dimension (counted in micro-tiles) into one chunk per
	// thread, on tile boundaries so each C element has exactly one writer and
	// the result does not depend on the thread count.
	tilesM, tilesN := (m+mr-1)/mr, (n+nr-1)/nr
	var wg sync.WaitGroup
	if tilesN >= tilesM {
		t := min(threads, tilesN)
		for w := 0; w < t; w++ {
			lo, hi := w*tilesN/t*nr, min(n, (w+1)*tilesN/t*nr)
			wg.Go(func() { g.run(0, m, lo, hi) })
		}
	} else {
		t := min(threads, tilesM)
		for w := 0; w < t; w++ {
			lo, hi := w*tilesM/t*mr, min(m, (w+1)*tilesM/t*mr)
			wg.Go(func() { g.run(lo, hi, 0, n) })
		}
	}
	wg.Wait()
}

// smallPath reports whether a product of this shape takes the small path.
func smallPath(path gemmPath, m, n, k int) bool {
	return path == pathSmall || path == pathAuto && useSmall(m, n, k)
}

// scaleC applies C = beta·C to the m×n matrix C and reports whether C is
// not empty.
func scaleC(m, n int, beta float32, c []float32, ldc int) bool {
	if m == 0 || n == 0 {
		return false
	}
	if beta != 1 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
			} else {
				for j := range row {
					row[j] *= beta
				}
			}
		}
	}
	return true
}

type gemmArgs struct {
	kernel         kernelFunc
	transA, transB bool
	k              int
	alpha          float32
	a, b, c        []float32
	lda, ldb, ldc  int
}

// run computes the block C[i0:i1, j0:j1] += alpha·op(A)[i0:i1,:]·op(B)[:,j0:j1].
func (g *gemmArgs) run(i0, i1, j0, j1 int) {
	buf := packPool.Get().(*packBuf)
	defer packPool.Put(buf)
	var tile [mr * nr]float32
	for jc := j0; jc < j1; jc += nc {
		ncb := min(nc, j1-jc)
		for pc := 0; pc < g.k; pc += kc {
			kcb := min(kc, g.k-pc)
			g.packB(buf.b, pc, kcb, jc, ncb)
			for ic := i0; ic < i1; ic += mc {
				mcb := min(mc, i1-ic)
				g.packA(buf.a, ic, mcb, pc, kcb)
				for jr := 0; jr < ncb; jr += nr {
					nrb := min(nr, ncb-jr)
					bp := buf.b[jr*kcb : (jr+nr)*kcb]
					for ir := 0; ir < mcb; ir += mr {
						mrb := min(mr, mcb-ir)
						ap := buf.a[ir*kcb : (ir+mr)*kcb]
						ci := (ic+ir)*g.ldc + jc + jr
						if mrb == mr && nrb == nr {
							g.kernel(kcb, ap, bp, g.c[ci:], g.ldc)
							continue
						}
						clear(tile[:])
						g.kernel(kcb, ap, bp, tile[:], nr)
						for i := 0; i < mrb; i++ {
							crow := g.c[ci+i*g.ldc : ci+i*g.ldc+nrb]
							for j := range crow {
								crow[j] += tile[i*nr+j]
							}
						}
					}
				}
			}
		}
	}
}

// packA packs alpha·op(A)[ic:ic+mcb, pc:pc+kcb] into panels of mr rows; each
// panel holds kcb groups of mr values, zero-padded past the last row.
func (g *gemmArgs) packA(dst []float32, ic, mcb, pc, kcb int) {
	alpha := g.alpha
	for ir := 0; ir < mcb; ir += mr {
		p := dst[ir*kcb : (ir+mr)*kcb]
		rows := min(mr, mcb-ir)
		if rows < mr {
			clear(p)
		}
		for r := 0; r < rows; r++ {
			i := ic + ir + r
			if !g.transA {
				src := g.a[i*g.lda+pc : i*g.lda+pc+kcb]
				for q, v := range src {
					p[q*mr+r] = alpha * v
				}
			} else {
				for q := 0; q < kcb; q++ {
					p[q*mr+r] = alpha * g.a[(pc+q)*g.lda+i]
				}
			}
		}
	}
}

// packB packs op(B)[pc:pc+kcb, jc:jc+ncb] into panels of nr columns; each
// panel holds kcb groups of nr values, zero-padded past the last column.
func (g *gemmArgs) packB(dst []float32, pc, kcb, jc, ncb int) {
	for jr := 0; jr < ncb; jr += nr {
		p := dst[jr*kcb : (jr+nr)*kcb]
		cols := min(nr, ncb-jr)
		if cols < nr {
			clear(p)
		}
		j := jc + jr
		if !g.transB {
			for q := 0; q < kcb; q++ {
				row := (pc + q) * g.ldb
				copy(p[q*nr:q*nr+cols], g.b[row+j:row+j+cols])
			}
		} else {
			for c := 0; c < cols; c++ {
				src := g.b[(j+c)*g.ldb+pc : (j+c)*g.ldb+pc+kcb]
				for q, v := range src {
					p[q*nr+c] = v
				}
			}
		}
	}
}

func checkGemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("compute: negative GEMM size %d×%d×%d", m, n, k))
	}
	need := func(name string, s []float32, rows, cols, ld int) {
		if rows == 0 || cols == 0 {
			return
		}
		if ld < cols {
			panic(fmt.Sprintf("compute: GEMM %s: leading dimension %d < %d columns", name, ld, cols))
		}
		if len(s) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("compute: GEMM %s: len %d < %d×%d with stride %d", name, len(s), rows, cols, ld))
		}
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if a != nil {
		need("A", a, ar, ac, lda)
	}
	if b != nil {
		need("B", b, br, bc, ldb)
	}
	need("C", c, m, n, ldc)
}

// kernelGo is the portable micro-kernel. It walks the mr×nr tile in 2×4
// sub-tiles whose eight accumulators, two A values and four B values fit in
// registers (16 on amd64, 32 on arm64), so each k step does 16 flops per 6
// loads instead of loading and storing C.
func kernelGo(kc int, a, b, c []float32, ldc int) {
	a = a[:kc*mr]
	b = b[:kc*nr]
	for i := 0; i < mr; i += 2 {
		for j := 0; j < nr; j += 4 {
			var c00, c01, c02, c03, c10, c11, c12, c13 float32
			ai, bj := i, j
			for p := 0; p < kc; p++ {
				aa := a[ai : ai+2 : ai+2]
				bb := b[bj : bj+4 : bj+4]
				a0, a1 := aa[0], aa[1]
				b0, b1, b2, b3 := bb[0], bb[1], bb[2], bb[3]
				c00 += a0 * b0
				c01 += a0 * b1
				c02 += a0 * b2
				c03 += a0 * b3
				c10 += a1 * b0
				c11 += a1 * b1
				c12 += a1 * b2
				c13 += a1 * b3
				ai += mr
				bj += nr
			}
			r0 := c[i*ldc+j : i*ldc+j+4 : i*ldc+j+4]
			r1 := c[(i+1)*ldc+j : (i+1)*ldc+j+4 : (i+1)*ldc+j+4]
			r0[0] += c00
			r0[1] += c01
			r0[2] += c02
			r0[3] += c03
			r1[0] += c10
			r1[1] += c11
			r1[2] += c12
			r1[3] += c13
		}
	}
}
