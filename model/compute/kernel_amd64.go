//go:build amd64 && !noasm

package compute

import "golang.org/x/sys/cpu"

// haveAsm reports whether the AVX2/FMA micro-kernel can run here.
var haveAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

const asmName = "avx2-fma"

//go:noescape
func kernel6x16AVX2(kc int, a, b, c *float32, ldc int)

func kernelAsm(kc int, a, b, c []float32, ldc int) {
	_ = a[kc*mr-1]
	_ = b[kc*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kernel6x16AVX2(kc, &a[0], &b[0], &c[0], ldc)
}
