//go:build !(amd64 || arm64) || noasm

package compute

// archKernels is empty: this build has only the pure-Go kernels.
func archKernels() []*kernels { return nil }
