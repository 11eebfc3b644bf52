//go:build !amd64 || noasm

package compute

// haveAsm is false: this build has only the pure-Go micro-kernel.
const haveAsm = false

const asmName = ""

func kernelAsm(kc int, a, b, c []float32, ldc int) { kernelGo(kc, a, b, c, ldc) }
