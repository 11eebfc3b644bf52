//go:build arm64 && !noasm

#include "textflag.h"

// The NEON small-GEMM kernels (small.go). The Go wrappers in
// kernel_arm64.go reduce the lanes and do the tails (k or n not a multiple
// of 4), so these loops handle whole groups of four floats only.

// func dot4x4NEON(k4 int, a, b *[4]*float32, acc *[64]float32)
// acc[16*... ]: for r, c < 4 the four lanes of Σ a[r][p]·b[c][p] over
// p < k4 (k4 > 0, a multiple of 4) land at acc[(4r+c)*4 : (4r+c)*4+4].
TEXT ·dot4x4NEON(SB), NOSPLIT, $0-32
	MOVD k4+0(FP), R0
	MOVD a+8(FP), R9
	MOVD b+16(FP), R10
	MOVD acc+24(FP), R11
	MOVD 0(R9), R1
	MOVD 8(R9), R2
	MOVD 16(R9), R3
	MOVD 24(R9), R4
	MOVD 0(R10), R5
	MOVD 8(R10), R6
	MOVD 16(R10), R7
	MOVD 24(R10), R8
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	VEOR V12.B16, V12.B16, V12.B16
	VEOR V13.B16, V13.B16, V13.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16
dotloop:
	VLD1.P 16(R1), [V16.S4]
	VLD1.P 16(R2), [V17.S4]
	VLD1.P 16(R3), [V18.S4]
	VLD1.P 16(R4), [V19.S4]
	VLD1.P 16(R5), [V20.S4]
	VLD1.P 16(R6), [V21.S4]
	VLD1.P 16(R7), [V22.S4]
	VLD1.P 16(R8), [V23.S4]
	VFMLA V16.S4, V20.S4, V0.S4
	VFMLA V16.S4, V21.S4, V1.S4
	VFMLA V16.S4, V22.S4, V2.S4
	VFMLA V16.S4, V23.S4, V3.S4
	VFMLA V17.S4, V20.S4, V4.S4
	VFMLA V17.S4, V21.S4, V5.S4
	VFMLA V17.S4, V22.S4, V6.S4
	VFMLA V17.S4, V23.S4, V7.S4
	VFMLA V18.S4, V20.S4, V8.S4
	VFMLA V18.S4, V21.S4, V9.S4
	VFMLA V18.S4, V22.S4, V10.S4
	VFMLA V18.S4, V23.S4, V11.S4
	VFMLA V19.S4, V20.S4, V12.S4
	VFMLA V19.S4, V21.S4, V13.S4
	VFMLA V19.S4, V22.S4, V14.S4
	VFMLA V19.S4, V23.S4, V15.S4
	SUBS $4, R0, R0
	BNE dotloop
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R11)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R11)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R11)
	VST1.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R11)
	RET

// func axpy2x4NEON(n4 int, coef *[32]float32, b *[4]*float32, c *[2]*float32)
// c[r][j] += coef[16r+4q]·b[q][j] for q = 0..3 in order, j < n4 (n4 > 0, a
// multiple of 4); coef holds each coefficient repeated in four lanes.
TEXT ·axpy2x4NEON(SB), NOSPLIT, $0-32
	MOVD n4+0(FP), R0
	MOVD coef+8(FP), R9
	MOVD b+16(FP), R10
	MOVD c+24(FP), R11
	VLD1.P 64(R9), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1 (R9), [V4.S4, V5.S4, V6.S4, V7.S4]
	MOVD 0(R10), R1
	MOVD 8(R10), R2
	MOVD 16(R10), R3
	MOVD 24(R10), R4
	MOVD 0(R11), R5
	MOVD 8(R11), R6
axloop:
	VLD1.P 16(R1), [V16.S4]
	VLD1.P 16(R2), [V17.S4]
	VLD1.P 16(R3), [V18.S4]
	VLD1.P 16(R4), [V19.S4]
	VLD1 (R5), [V20.S4]
	VLD1 (R6), [V21.S4]
	VFMLA V0.S4, V16.S4, V20.S4
	VFMLA V1.S4, V17.S4, V20.S4
	VFMLA V2.S4, V18.S4, V20.S4
	VFMLA V3.S4, V19.S4, V20.S4
	VFMLA V4.S4, V16.S4, V21.S4
	VFMLA V5.S4, V17.S4, V21.S4
	VFMLA V6.S4, V18.S4, V21.S4
	VFMLA V7.S4, V19.S4, V21.S4
	VST1.P [V20.S4], 16(R5)
	VST1.P [V21.S4], 16(R6)
	SUBS $4, R0, R0
	BNE axloop
	RET
