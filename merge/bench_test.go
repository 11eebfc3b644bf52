package merge

import "testing"

// BenchmarkMerge1M merges two 1M-parameter models (age-weighted: reads two
// vectors, writes one, 12 MB of traffic) next to the memory-bandwidth
// reference of copying the same bytes; compare the MB/s columns.
func BenchmarkMerge1M(b *testing.B) {
	const n = 1 << 20
	local, remote, dst := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range local {
		local[i], remote[i] = float32(i), float32(-i)
	}
	b.Run("age-weighted", func(b *testing.B) {
		b.SetBytes(12 * n)
		for b.Loop() {
			AgeWeighted(dst, local, 3, remote, 5)
		}
	})
	b.Run("interpolate-in-place", func(b *testing.B) {
		b.SetBytes(12 * n) // reads two, writes one
		for b.Loop() {
			Interpolate(local, local, remote, 0.5)
		}
	})
	b.Run("reference-copy", func(b *testing.B) {
		b.SetBytes(8 * n) // reads one, writes one
		for b.Loop() {
			copy(dst, remote)
		}
	})
}
