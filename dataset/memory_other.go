//go:build !(linux && (amd64 || arm64 || riscv64 || ppc64le || loong64))

package dataset

// frozenFloats returns n float32s filled by fill, on the Go heap: on this
// platform they are neither placed in huge pages nor protected.
func frozenFloats(n int, fill func([]float32) error) ([]float32, error) {
	x := make([]float32, n)
	return x, fill(x)
}
