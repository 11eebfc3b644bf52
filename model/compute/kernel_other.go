//go:build !(amd64 || arm64) || noasm

package compute

// archKernels is empty: this build has only the pure-Go kernels.
func archKernels() []*kernels { return nil }

// combineVec is the Go loop: no set here has a vector combine kernel.
func combineVec(d []float32, xs [][]float32, w []float32) { combineGo(d, xs, w) }
