package compute

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTopKInto checks TopKInto against a sort: the k values whose
// magnitudes' bits are largest, ties to the lower index (a NaN above
// +Inf, −0 equal to +0), kept in place, the rest zero, and the bytes of
// the kept indices' gaps as uvarints.
func TestTopKInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	levels := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 2, float32(math.Inf(1)), float32(math.NaN()), -3}
	for _, n := range []int{1, 2, 7, 300, 5000} {
		for _, k := range []int{1, 2, n / 3, n} {
			if k < 1 || k > n {
				continue
			}
			x := make([]float32, n)
			for i := range x {
				if rng.IntN(2) == 0 {
					x[i] = levels[rng.IntN(len(levels))]
				} else {
					x[i] = float32(rng.NormFloat64() * 1e3)
				}
			}
			order := make([]int, n)
			for i := range order {
				order[i] = i
			}
			slices.SortStableFunc(order, func(a, b int) int {
				ka, kb := math.Float32bits(x[a])&^(1<<31), math.Float32bits(x[b])&^(1<<31)
				switch {
				case ka > kb:
					return -1
				case ka < kb:
					return 1
				}
				return 0
			})
			kept := slices.Sorted(slices.Values(order[:k]))
			want, wantBytes, prev := make([]float32, n), 0, -1
			for _, j := range kept {
				want[j] = x[j]
				wantBytes += UvarintLen(uint64(j - prev - 1))
				prev = j
			}
			got := slices.Clone(x)
			bytes := TopKInto(got, got, k)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("n %d, k %d: value %d = %v, want %v", n, k, j, got[j], want[j])
				}
			}
			if bytes != wantBytes {
				t.Fatalf("n %d, k %d: %d index bytes, want %d", n, k, bytes, wantBytes)
			}
		}
	}
}
