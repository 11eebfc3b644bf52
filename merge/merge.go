// Package merge holds the pure math that combines parameter vectors: the
// age-weighted merge of gossip learning, weighted averages with
// Metropolis–Hastings weights (D-PSGD), push-sum shares, the application of
// sufficient factors (SFB), and the Aggregator interface behind which robust
// rules (median, trimmed mean, clipped gossip) plug in.
//
// Functions are destination-first in the style of gonum: they write into dst,
// allocate nothing on the hot path, and panic only on programmer error
// (slices of different lengths). Summation order is fixed, so results are
// deterministic.
package merge

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/gossipd/gossipd/model/compute"
)

// Sentinel errors.
var (
	ErrEmpty   = errors.New("merge: nothing to merge")
	ErrWeights = errors.New("merge: bad weights")
)

func sameLen(dst []float32, xs ...[]float32) {
	for _, x := range xs {
		if len(x) != len(dst) {
			panic(fmt.Sprintf("merge: length mismatch %d vs %d", len(x), len(dst)))
		}
	}
}

// AgeWeight is the weight ω = remoteAge/(localAge+remoteAge) that the
// age-weighted merge gives the remote model; 0 when both ages are 0 (keep
// the local model).
func AgeWeight(localAge, remoteAge float64) float64 {
	if localAge+remoteAge <= 0 {
		return 0
	}
	return remoteAge / (localAge + remoteAge)
}

// AgeWeighted sets dst = (1−ω)·local + ω·remote with ω = AgeWeight(localAge,
// remoteAge) (Ormándi, Hegedűs & Jelasity 2013) and returns the merged age,
// max(localAge, remoteAge). dst may alias local or remote.
func AgeWeighted(dst, local []float32, localAge float64, remote []float32, remoteAge float64) float64 {
	sameLen(dst, local, remote)
	w := float32(AgeWeight(localAge, remoteAge))
	Interpolate(dst, local, remote, w)
	return math.Max(localAge, remoteAge)
}

// Interpolate sets dst = (1−w)·a + w·b, computed as a + w·(b − a) with
// each operation rounded (compute.InterpolateInto, as compute.Rows does
// on every backend). dst may be a or b. It runs the kernel set
// $GOSSIPD_KERNEL names, and panics if this CPU cannot run it: programs
// call compute.CheckKernelEnv at start.
func Interpolate(dst, a, b []float32, w float32) {
	sameLen(dst, a, b)
	compute.InterpolateInto(dst, a, b, w)
}

// InterpolateAt sets dst[idx[j]] = (1−w)·dst[idx[j]] + w·vals[j]: the merge
// of a randomly subsampled model, which carries some coordinates only.
func InterpolateAt(dst []float32, idx []uint32, vals []float32, w float32) {
	if len(idx) != len(vals) {
		panic(fmt.Sprintf("merge: %d indices for %d values", len(idx), len(vals)))
	}
	for j, i := range idx {
		dst[i] += w * (vals[j] - dst[i])
	}
}

// InterpolateStrided sets dst[start+j·stride] = (1−w)·dst[…] + w·vals[j]:
// the merge of one partition of a partitioned model (coordinate k belongs to
// partition k mod stride).
func InterpolateStrided(dst []float32, start, stride int, vals []float32, w float32) {
	for j, v := range vals {
		i := start + j*stride
		dst[i] += w * (v - dst[i])
	}
}

// Strided copies dst[j] = src[start+j·stride] and returns dst, sized to the
// partition.
func Strided(dst, src []float32, start, stride int) []float32 {
	dst = dst[:0]
	for i := start; i < len(src); i += stride {
		dst = append(dst, src[i])
	}
	return dst
}

// Normalized appends to w the weights ws divided by their sum, in
// float32, as Weighted uses them: ws must be non-negative, finite, and
// sum to more than 0.
func Normalized(w []float32, ws []float64) ([]float32, error) {
	if len(ws) == 0 {
		return w, ErrEmpty
	}
	var sum float64
	for _, x := range ws {
		if !(x >= 0) || math.IsInf(x, 0) {
			return w, fmt.Errorf("%w: %v", ErrWeights, x)
		}
		sum += x
	}
	if sum <= 0 {
		return w, fmt.Errorf("%w: weights sum to %v", ErrWeights, sum)
	}
	for _, x := range ws {
		w = append(w, float32(x/sum))
	}
	return w, nil
}

// Weighted sets dst = Σ_k w_k·x_k / Σ_k w_k: the weighted average,
// renormalised over the vectors given (so a D-PSGD round that misses a
// neighbour averages over what arrived). Weights must be non-negative with a
// positive sum. dst must not alias any x_k but the first.
func Weighted(dst []float32, xs [][]float32, ws []float64) error {
	if len(ws) != len(xs) {
		return fmt.Errorf("%w: %d weights for %d vectors", ErrWeights, len(ws), len(xs))
	}
	var small [8]float32
	w, err := Normalized(small[:0], ws)
	if err != nil {
		return err
	}
	sameLen(dst, xs...)
	weighted(dst, xs, w)
	return nil
}

// Combine sets dst = Σ_k w[k]·xs[k] + a·g (no a·g where g is nil), each
// product rounded apart from its sum, the terms added in this order:
// Weighted and then Axpy, the same bits, in one pass over dst. dst must
// not alias any vector but xs[0].
func Combine(dst []float32, xs [][]float32, w []float32, g []float32, a float32) {
	if len(w) != len(xs) || len(xs) == 0 {
		panic(fmt.Sprintf("merge: %d weights for %d vectors", len(w), len(xs)))
	}
	sameLen(dst, xs...)
	if g == nil {
		weighted(dst, xs, w)
		return
	}
	sameLen(dst, g)
	// a·g is one more term, added last.
	var xb [9][]float32
	var wb [9]float32
	weighted(dst, append(append(xb[:0], xs...), g), append(append(wb[:0], w...), a))
}

// weighted sets dst = Σ_k w[k]·xs[k], summed in the order of k, each
// product and sum rounded on its own (compute.CombineInto: one pass, in
// vector code where the CPU has it), a long vector split among
// goroutines by ranges.
func weighted(dst []float32, xs [][]float32, w []float32) {
	if len(dst) < parallelFrom {
		compute.CombineInto(dst, xs, w)
		return
	}
	weightedRanges(dst, slices.Clone(xs), slices.Clone(w))
}

// weightedRanges is weighted of a long vector, range by range side by
// side; it keeps xs and w (its caller's may lie on the caller's stack).
func weightedRanges(dst []float32, xs [][]float32, w []float32) {
	inRanges(len(dst), func(lo, hi int) {
		rs := make([][]float32, len(xs))
		for k, x := range xs {
			rs[k] = x[lo:hi]
		}
		compute.CombineInto(dst[lo:hi], rs, w)
	})
}

// Axpy sets dst += a·x, rounding each product apart from its sum, as
// compute.Rows does on every backend: the weighted sum 1·dst + a·x in one
// pass (compute.CombineInto; the product by 1 is exact). A long vector is
// split among goroutines (inRanges). dst may be x itself.
func Axpy(dst []float32, a float32, x []float32) {
	sameLen(dst, x)
	weighted(dst, [][]float32{dst, x}, []float32{1, a})
}

// axpy is Axpy term by term on one goroutine: the tests' reference.
func axpy(dst []float32, a float32, x []float32) {
	for i, v := range x[:len(dst)] {
		dst[i] += float32(a * v)
	}
}

// Scale sets dst *= a.
func Scale(dst []float32, a float32) { ScaleInto(dst, dst, a) }

// ScaleInto sets dst = a·x (compute.CombineInto of one term); dst may be
// x itself.
func ScaleInto(dst, x []float32, a float32) {
	sameLen(dst, x)
	weighted(dst, [][]float32{x}, []float32{a})
}

// MetropolisHastings is the weight of the edge between nodes of degrees di
// and dj: 1/(1 + max(di, dj)) (Xiao & Boyd 2004). With self-weight
// 1 − Σ_j W_ij, the weight matrix is symmetric and doubly stochastic.
func MetropolisHastings(di, dj int) float64 {
	return 1 / float64(1+max(di, dj))
}

// PushSumShare sets share = p·x and x = (1−p)·x, returning the weights
// (p·w, (1−p)·w): one node's push to one out-neighbour in push-sum
// (Kempe et al. 2003; SGP, Assran et al. 2019). Total mass x and weight w are
// conserved.
func PushSumShare(share, x []float32, w, p float64) (shareW, keepW float64) {
	sameLen(share, x)
	pf := float32(p)
	for i, v := range x {
		s := pf * v
		share[i] = s
		x[i] = v - s
	}
	return p * w, w - p*w
}

// DeBias sets z = x/w, the push-sum estimate.
func DeBias(z, x []float32, w float64) {
	ScaleInto(z, x, float32(1/w))
}

// SquaredDistance returns ‖a − b‖².
func SquaredDistance(a, b []float32) float64 {
	sameLen(a, b)
	return compute.SquaredDistance4(a, b)
}

// Mean sets dst to the unweighted mean of xs.
func Mean(dst []float32, xs [][]float32) error {
	if len(xs) == 0 {
		return ErrEmpty
	}
	sameLen(dst, xs...)
	clear(dst)
	var acc = make([]float64, len(dst))
	for _, x := range xs {
		for i, v := range x {
			acc[i] += float64(v)
		}
	}
	inv := 1 / float64(len(xs))
	for i, s := range acc {
		dst[i] = float32(s * inv)
	}
	return nil
}

// ConsensusDistance returns (1/n)·Σ_i ‖x_i − x̄‖², the mean squared distance
// of the vectors from their average: 0 when all replicas agree.
func ConsensusDistance(xs [][]float32) float64 { return ConsensusDistanceN(xs, 1) }

// ConsensusChunk is how many coordinates ConsensusDistanceN takes at a
// time: the chunk's mean stays in the cache between its two passes.
const ConsensusChunk = 1024

// ConsensusOfChunks returns ConsensusDistanceN of k vectors, bit for bit,
// from their squared distances to the mean chunk by chunk: d[i·c + j] is
// vector i's over chunk j of ConsensusChunk values (c chunks), as
// compute.Rows's MeanRows and DistanceRows give them for vectors kept on
// a device.
func ConsensusOfChunks(d []float64, k, c int) float64 {
	if k == 0 {
		return 0
	}
	var s float64
	for j := range c {
		var part float64
		for i := range k {
			part += d[i*c+j]
		}
		s += part
	}
	return s * (1 / float64(k))
}

// ConsensusDistanceN is ConsensusDistance computed on up to workers
// goroutines, for a simulator's thousands of replicas. Coordinates are
// taken in fixed chunks whose sums are added in order, so the result does
// not depend on workers.
func ConsensusDistanceN(xs [][]float32, workers int) float64 {
	if len(xs) == 0 {
		return 0
	}
	sameLen(xs[0], xs...)
	n := len(xs[0])
	chunks := (n + ConsensusChunk - 1) / ConsensusChunk
	part := make([]float64, chunks)
	inv := 1 / float64(len(xs))
	run := func(first int) {
		acc := make([]float64, ConsensusChunk)
		mean := make([]float32, ConsensusChunk)
		for c := first; c < chunks; c += workers {
			lo, hi := c*ConsensusChunk, min(n, (c+1)*ConsensusChunk)
			acc, mean := acc[:hi-lo], mean[:hi-lo]
			clear(acc)
			for _, x := range xs {
				for i, v := range x[lo:hi] {
					acc[i] += float64(v)
				}
			}
			for i, s := range acc {
				mean[i] = float32(s * inv)
			}
			var s float64
			for _, x := range xs {
				s += SquaredDistance(x[lo:hi], mean)
			}
			part[c] = s
		}
	}
	workers = max(1, min(workers, chunks))
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { run(w) })
	}
	run(0)
	wg.Wait()
	var s float64
	for _, p := range part {
		s += p
	}
	return s * inv
}

// Finite reports whether every element of x is finite (neither NaN nor
// ±Inf: the exponent bits are not all ones).
//
// Eight values at a time, with one branch: a value's bits without the
// sign are at least 0x7f800000 exactly when it is not finite, and then
// adding 0x00800000 carries into bit 31 (at most 0x807fffff: no
// overflow), so bit 31 of the OR of the eight sums says whether any is.
func Finite(x []float32) bool {
	const abs, carry, top = 0x7fffffff, 0x00800000, 0x80000000
	f := func(v float32) uint32 { return math.Float32bits(v)&abs + carry }
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		if (f(v[0])|f(v[1])|f(v[2])|f(v[3])|f(v[4])|f(v[5])|f(v[6])|f(v[7]))&top != 0 {
			return false
		}
	}
	for _, v := range x[i:] {
		if f(v)&top != 0 {
			return false
		}
	}
	return true
}

// SumSquares returns Σ x² in float64 (NaN or +Inf when x holds a
// non-finite value).
func SumSquares(x []float32) float64 { return compute.SumSquares4(x) }
