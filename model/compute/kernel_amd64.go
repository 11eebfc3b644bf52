//go:build amd64 && !noasm

package compute

import "golang.org/x/sys/cpu"

// archKernels returns the assembly kernel sets this CPU can run: AVX-512
// (F and VL, for the small path; the packed GEMM keeps its AVX2 kernel),
// then AVX2 with FMA.
func archKernels() []*kernels {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return nil
	}
	avx2 := &kernels{name: "avx2", packed: kernelAsm, dot: dot2x5AVX2, dotRows: 2, dotCols: 5, axpy: axpy2x4AVX2, exp: expVecAVX2, pool2: maxPool2VecAVX2, pool2Back: maxPool2BackVecAVX2, interp: interpVecAVX2, combine: combineVecAVX2, combineVec: true}
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL {
		return []*kernels{{name: "avx512", packed: kernelAsm, dot: dot4x5AVX512, dotRows: 4, dotCols: 5, axpy: axpy2x4AVX512, exp: expVecAVX512, pool2: maxPool2VecAVX2, pool2Back: maxPool2BackVecAVX2, interp: interpVecAVX2, combine: combineVecAVX2, combineVec: true}, avx2}
	}
	return []*kernels{avx2}
}

//go:noescape
func kernel6x16AVX2(kc int, a, b, c *float32, ldc int)

func kernelAsm(kc int, a, b, c []float32, ldc int) {
	_ = a[kc*mr-1]
	_ = b[kc*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kernel6x16AVX2(kc, &a[0], &b[0], &c[0], ldc)
}

//go:noescape
func dot2x5AVX2(k int, a *[4]*float32, b *[5]*float32, out *[20]float32, pf *[4]*float32)

//go:noescape
func dot4x5AVX512(k int, a *[4]*float32, b *[5]*float32, out *[20]float32, pf *[4]*float32)

//go:noescape
func axpy2x4AVX2(n int, coef *[8]float32, b *[4]*float32, c *[2]*float32)

//go:noescape
func axpy2x4AVX512(n int, coef *[8]float32, b *[4]*float32, c *[2]*float32)

func expAVX2(n int, x *float32)

func expAVX512(n int, x *float32)

func expVecAVX2(x []float32) {
	if len(x) > 0 {
		expAVX2(len(x), &x[0])
	}
}

func expVecAVX512(x []float32) {
	if len(x) > 0 {
		expAVX512(len(x), &x[0])
	}
}

//go:noescape
func maxPool2RowAVX2(n int, r0, r1, out *float32)

//go:noescape
func maxPool2BackRowAVX2(n int, r0, r1, d, dx0, dx1 *float32)

// maxPool2VecAVX2 and maxPool2BackVecAVX2 are the pool2 kernels in
// assembly (the AVX-512 set uses them too: the loops are bound by their
// loads and shuffles).
func maxPool2VecAVX2(r0, r1, out []float32) {
	if n := len(out); n > 0 {
		_, _ = r0[2*n-1], r1[2*n-1]
		maxPool2RowAVX2(n, &r0[0], &r1[0], &out[0])
	}
}

func maxPool2BackVecAVX2(r0, r1, d, dx0, dx1 []float32) {
	if n := len(d); n > 0 {
		_, _, _, _ = r0[2*n-1], r1[2*n-1], dx0[2*n-1], dx1[2*n-1]
		maxPool2BackRowAVX2(n, &r0[0], &r1[0], &d[0], &dx0[0], &dx1[0])
	}
}

//go:noescape
func interpRowAVX2(n int, d, a, b *float32, w float32)

// interpVecAVX2 is the interp kernel in assembly. The AVX-512 set uses
// it too: a merge in a simulation reads its models from memory (whether
// sixteen lanes would beat eight on models in cache is not measured).
func interpVecAVX2(d, a, b []float32, w float32) {
	if n := len(a); n > 0 {
		_, _ = d[n-1], b[n-1]
		interpRowAVX2(n, &d[0], &a[0], &b[0], w)
	}
}

//go:noescape
func combineRowAVX2(n int, d *float32, xs **float32, w *float32, k int)

// combineVec is the vector combine kernel, called directly.
func combineVec(d []float32, xs [][]float32, w []float32) { combineVecAVX2(d, xs, w) }

// combineVecAVX2 is the combine kernel in assembly. The AVX-512 set uses
// it too: the sum reads its models from memory.
func combineVecAVX2(d []float32, xs [][]float32, w []float32) {
	n := len(d)
	if n == 0 {
		return
	}
	var buf [16]*float32
	ptrs := buf[:0]
	if len(xs) > len(buf) {
		ptrs = make([]*float32, 0, len(xs))
	}
	for _, x := range xs {
		ptrs = append(ptrs, &x[:n][0])
	}
	_ = w[len(xs)-1]
	combineRowAVX2(n, &d[0], &ptrs[0], &w[0], len(xs))
}
