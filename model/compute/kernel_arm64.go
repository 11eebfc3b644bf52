//go:build arm64 && !noasm

package compute

// archKernels returns the NEON kernel set: Advanced SIMD is part of every
// arm64 CPU. The packed GEMM keeps the portable micro-kernel.
func archKernels() []*kernels {
	return []*kernels{{name: "neon", packed: kernelGo, dot: dotNEON, dotRows: 4, dotCols: 4, axpy: axpyNEON, exp: expGo, pool2: maxPool2Go, pool2Back: maxPool2BackGo, interp: interpGo, combine: combineGo}}
}

//go:noescape
func dot4x4NEON(k4 int, a, b *[4]*float32, acc *[64]float32)

//go:noescape
func axpy2x4NEON(n4 int, coef *[32]float32, b *[4]*float32, c *[2]*float32)

// dotNEON is the dot kernel: the assembly loop over groups of four, then
// the lanes summed and the last k mod 4 products added here.
func dotNEON(k int, a *[4]*float32, b *[5]*float32, out *[20]float32, _ *[4]*float32) {
	var acc [64]float32
	k4 := k &^ 3
	if k4 > 0 {
		dot4x4NEON(k4, a, (*[4]*float32)(b[:4]), &acc)
	}
	for r := range 4 {
		ar := rowOf(a[r], k)
		for c := range 4 {
			l := acc[(4*r+c)*4 : (4*r+c)*4+4]
			s := (l[0] + l[1]) + (l[2] + l[3])
			br := rowOf(b[c], k)
			for p := k4; p < k; p++ {
				s += ar[p] * br[p]
			}
			out[5*r+c] = s
		}
	}
}

// axpyNEON is the axpy kernel: the assembly loop over groups of four
// columns, the last n mod 4 here.
func axpyNEON(n int, coef *[8]float32, b *[4]*float32, c *[2]*float32) {
	n4 := n &^ 3
	if n4 > 0 {
		var wide [32]float32
		for i, w := range coef {
			wide[4*i], wide[4*i+1], wide[4*i+2], wide[4*i+3] = w, w, w, w
		}
		axpy2x4NEON(n4, &wide, b, c)
	}
	if n4 == n {
		return
	}
	// The last n mod 4 columns: the portable kernel on the rows' tails.
	var bt [4]*float32
	var ct [2]*float32
	for q := range bt {
		bt[q] = &rowOf(b[q], n)[n4]
	}
	for r := range ct {
		ct[r] = &rowOf(c[r], n)[n4]
	}
	axpyGo(n-n4, coef, &bt, &ct)
}

// combineVec is the Go loop: no set here has a vector combine kernel.
func combineVec(d []float32, xs [][]float32, w []float32) { combineGo(d, xs, w) }
