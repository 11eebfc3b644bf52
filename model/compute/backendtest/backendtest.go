// Package backendtest checks a compute.Backend kernel by kernel against
// float64 reference code, and whole training steps of every model against
// the pure-Go CPU backend, within the tolerances below. Every CPU kernel
// set runs it (model/compute's and model's tests); a GPU backend is to run
// the same checks wherever a GPU is present (docs/explanation/gpu.md).
//
// Tolerances, for inputs in [−1, 1):
//   - GEMM (plain and gathered): |got − want| ≤ 1e-4·(k+1)·max(1, |α|),
//     float32 accumulation against float64.
//   - BroadcastRows, ReLU, ReLUBackward: exact.
//   - ColumnSums: ≤ 1e-5·(m+1).
//   - The fused kernels (compute.Fused), against the pairs they replace
//     on the same backend: ReLUInto bit for bit (NaN and −0 included),
//     ColumnSumsAxpby ≤ 1e-6 relative.
//   - SoftmaxCrossEntropy: probabilities and gradient ≤ 1e-6 (times the
//     scale for the gradient); loss ≤ 1e-5 relative; correct rows exact.
//   - HingeOneVsRest: gradient exact; loss ≤ 1e-5 relative; correct exact.
//   - Axpby: ≤ 1e-6 relative (to max(1, |want|), as below); SGDUpdate
//     (plain, weight decay, momentum) and AdamUpdate after three steps:
//     ≤ 1e-5 relative; SumSquares and RowSumSquares: ≤ 1e-6 relative;
//     ScaleRows: exact; Softmax: ≤ 1e-6, and the same in place.
//   - GemmStrided: each problem as GEMM; values between and beside the
//     C_i untouched. The Rows losses: probabilities, gradients and
//     correct rows equal to the summed kernels' on the same backend, each
//     row's loss ≤ 1e-5 relative, and their sum within 1e-9 relative of
//     the summed loss.
//   - LossSums: probabilities and gradients equal to the returning
//     kernels' on the same backend; the sum within 1e-9 relative of
//     their losses (and the weighted sums of squares) added up.
//   - Rows: InterpolateRows and CombineRows bit for bit against float32
//     code that rounds each product and sum on its own, on host and
//     device tensors; SumSquaresRows ≤ 1e-9 relative, NaN and +Inf for
//     rows holding them.
//   - A training step (TrainSteps): parameters within 1e-4 relative to the
//     largest parameter of the pure-Go CPU backend's after the same steps.
package backendtest

import (
	"math"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// T is the part of testing.TB the checks use.
type T interface {
	Helper()
	Errorf(format string, args ...any)
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(2*rng.Float64() - 1)
	}
	return s
}

func naiveGemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				var av, bv float32
				if tA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if tB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			c[i*ldc+j] = float32(float64(alpha)*s + float64(beta)*float64(c[i*ldc+j]))
		}
	}
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// Mismatch returns the first index where got differs from want by more
// than tol times want's largest magnitude (at least 1e-3), or −1 where
// they agree; a length mismatch is index 0.
func Mismatch(got, want []float32, tol float64) int {
	if len(got) != len(want) {
		return 0
	}
	var big float64
	for _, w := range want {
		big = max(big, math.Abs(float64(w)))
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > tol*max(big, 1e-3) {
			return i
		}
	}
	return -1
}

// logitsAndLabels draws an m×n matrix of logits in [−8, 8) and m labels
// in [0, n).
func logitsAndLabels(rng *rand.Rand, m, n int) ([]float32, []int32) {
	logits := randSlice(rng, m*n)
	for i := range logits {
		logits[i] *= 8
	}
	y := make([]int32, m)
	for i := range y {
		y[i] = int32(rng.IntN(n))
	}
	return logits, y
}

// Kernels checks every kernel of be (and its Gatherer, if it has one).
func Kernels(t T, be compute.Backend) {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	name := be.Name()
	for _, sz := range [][3]int{{1, 1, 1}, {7, 10, 33}, {32, 10, 784}, {32, 128, 784}, {10, 784, 32}, {65, 17, 129}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, ab := range [][2]float32{{1, 0}, {-0.5, 1}} {
					lda, ldb, ldc := k+1, n+2, n+3
					ra, rb := m, k
					if tA {
						lda, ra = m+1, k
					}
					if tB {
						ldb, rb = k+2, n
					}
					a, b, c := randSlice(rng, ra*lda), randSlice(rng, rb*ldb), randSlice(rng, m*ldc)
					want := append([]float32(nil), c...)
					naiveGemm(tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], want, ldc)
					be.Gemm(tA, tB, m, n, k, ab[0], compute.Host(a), lda, compute.Host(b), ldb, ab[1], compute.Host(c), ldc)
					tol := 1e-4 * float64(k+1) * max(1, math.Abs(float64(ab[0])))
					for i := range m {
						for j := range ldc {
							g, w := c[i*ldc+j], want[i*ldc+j]
							if (j >= n && g != w) || (j < n && !near(float64(g), float64(w), tol)) {
								t.Errorf("%s: Gemm %v tA=%v tB=%v α,β=%v: C[%d,%d] = %v, want %v", name, sz, tA, tB, ab, i, j, g, w)
								return
							}
						}
					}
				}
			}
		}
	}
	gather(t, be, rng)
	elementwise(t, be, rng)
	losses(t, be, rng)
	updates(t, be, rng)
	batched(t, be, rng)
	lossSums(t, be, rng)
	rows(t, be, rng)
	trimmedRows(t, be, rng)
	robustRows(t, be, rng)
	quantizeRows(t, be, rng)
	maskRows(t, be, rng)
	topKRows(t, be, rng)
	momentsRows(t, be, rng)
}

func gather(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	g, ok := be.(compute.Gatherer)
	if !ok {
		return
	}
	const rowsN, k, n = 40, 37, 10
	x := randSlice(rng, rowsN*k)
	rows := []int{3, 39, 0, 17, 17, 5, 22, 8, 31}
	w := randSlice(rng, n*k)
	xs := make([]float32, len(rows)*k)
	for i, r := range rows {
		copy(xs[i*k:], x[r*k:(r+1)*k])
	}
	got, want := make([]float32, len(rows)*n), make([]float32, len(rows)*n)
	g.GemmGatherA(n, k, 1, compute.Host(x), k, rows, compute.Host(w), k, 0, compute.Host(got), n)
	naiveGemm(false, true, len(rows), n, k, 1, xs, k, w, k, 0, want, n)
	for i := range got {
		if !near(float64(got[i]), float64(want[i]), 1e-4*(k+1)) {
			t.Errorf("%s: GemmGatherA [%d] = %v, want %v", be.Name(), i, got[i], want[i])
			return
		}
	}
	dz := randSlice(rng, len(rows)*n)
	gotB, wantB := make([]float32, n*k), make([]float32, n*k)
	g.GemmGatherB(n, k, 1, compute.Host(dz), n, compute.Host(x), k, rows, 0, compute.Host(gotB), k)
	naiveGemm(true, false, n, k, len(rows), 1, dz, n, xs, k, 0, wantB, k)
	for i := range gotB {
		if !near(float64(gotB[i]), float64(wantB[i]), 1e-4*float64(len(rows)+1)) {
			t.Errorf("%s: GemmGatherB [%d] = %v, want %v", be.Name(), i, gotB[i], wantB[i])
			return
		}
	}
}

func elementwise(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	const m, n = 13, 7
	v := randSlice(rng, n)
	dst := randSlice(rng, m*n)
	be.BroadcastRows(compute.Host(dst), m, n, compute.Host(v))
	for i, d := range dst {
		if d != v[i%n] {
			t.Errorf("%s: BroadcastRows [%d] = %v, want %v", name, i, d, v[i%n])
			return
		}
	}
	x := randSlice(rng, 101)
	x[0], x[1] = 0, float32(math.Copysign(0, -1))
	r := append([]float32(nil), x...)
	be.ReLU(compute.Host(r))
	for i, v := range x {
		if want := max(v, 0); r[i] != want && !(v == 0 && r[i] == 0) {
			t.Errorf("%s: ReLU(%v) = %v", name, v, r[i])
			return
		}
	}
	grad := randSlice(rng, len(x))
	g := append([]float32(nil), grad...)
	be.ReLUBackward(compute.Host(g), compute.Host(x))
	for i := range g {
		want := grad[i]
		if !(x[i] > 0) {
			want = 0
		}
		if g[i] != want {
			t.Errorf("%s: ReLUBackward [%d] (z=%v) = %v, want %v", name, i, x[i], g[i], want)
			return
		}
	}
	// The same on tensors in the backend's memory, allocated at exactly
	// their length (101, no multiple of a GPU block): a kernel that runs
	// past the end shows where bounds are checked (the CUDA emulator).
	xd, gd := be.Load(x), be.Load(grad)
	be.ReLUBackward(gd, xd)
	be.ReLU(xd)
	rd, gdh := make([]float32, len(x)), make([]float32, len(x))
	be.Store(rd, xd)
	be.Store(gdh, gd)
	be.Free(xd)
	be.Free(gd)
	for i := range x {
		if math.Float32bits(rd[i]) != math.Float32bits(r[i]) || gdh[i] != g[i] {
			t.Errorf("%s: ReLU, ReLUBackward [%d] in the backend's memory: %v %v, on the host %v %v", name, i, rd[i], gdh[i], r[i], g[i])
			return
		}
	}
	// Column sums, the second with columns over several GPU blocks of 32.
	for _, sz := range [][2]int{{m, n}, {40, 100}} {
		m, n := sz[0], sz[1]
		src := randSlice(rng, m*n)
		sums := make([]float32, n)
		be.ColumnSums(compute.Host(sums), compute.Host(src), m, n)
		for j := range n {
			var s float64
			for i := range m {
				s += float64(src[i*n+j])
			}
			if !near(float64(sums[j]), s, 1e-5*float64(m+1)) {
				t.Errorf("%s: ColumnSums %d×%d [%d] = %v, want %v", name, m, n, j, sums[j], s)
				return
			}
		}
	}
	fused(t, be, rng)
}

// fused checks a backend's fused kernels (compute.Fused), if it has
// them, against the pairs they replace on the same backend.
func fused(t T, be compute.Backend, rng *rand.Rand) {
	f, ok := be.(compute.Fused)
	if !ok {
		return
	}
	name := be.Name()
	x := randSlice(rng, 300)
	x[0], x[1], x[2] = 0, float32(math.Copysign(0, -1)), float32(math.NaN())
	want := make([]float32, len(x))
	be.Copy(compute.Host(want), compute.Host(x))
	be.ReLU(compute.Host(want))
	got := randSlice(rng, len(x))
	f.ReLUInto(compute.Host(got), compute.Host(x))
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("%s: ReLUInto [%d] (x=%v) = %v, Copy and ReLU %v", name, i, x[i], got[i], want[i])
			return
		}
	}
	for _, sz := range [][2]int{{1, 1}, {32, 10}, {512, 128}, {7, 33}} {
		m, n := sz[0], sz[1]
		src := randSlice(rng, m*n)
		for _, ab := range [][2]float32{{-0.1, 1}, {0.5, 0.99}} {
			y := randSlice(rng, n)
			w := append([]float32(nil), y...)
			sums := make([]float32, n)
			be.ColumnSums(compute.Host(sums), compute.Host(src), m, n)
			be.Axpby(compute.Host(w), ab[0], compute.Host(sums), ab[1])
			f.ColumnSumsAxpby(compute.Host(y), ab[0], compute.Host(src), m, n, ab[1])
			if j := Mismatch(y, w, 1e-6); j >= 0 {
				t.Errorf("%s: ColumnSumsAxpby %d×%d a,b=%v [%d] = %v, ColumnSums and Axpby %v", name, m, n, ab, j, y[j], w[j])
				return
			}
		}
	}
}

func losses(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	// The last case has rows longer than a GPU block of threads, and
	// shifts each row's logits by ±(300 + 7i), far past where exp
	// overflows or underflows in float32: only a row's own maximum,
	// subtracted first, keeps its loss and probabilities finite (a
	// reduction that mixes rows or misses a value goes wrong).
	for _, c := range []struct {
		m, n    int
		shifted bool
	}{{1, 2, false}, {32, 10, false}, {7, 3, false}, {64, 10, false}, {33, 200, true}} {
		m, n := c.m, c.n
		sz := [2]int{m, n}
		logits, y := logitsAndLabels(rng, m, n)
		if c.shifted {
			for i := range m {
				shift := float32(300 + 7*i)
				if i%2 == 1 {
					shift = -shift
				}
				for j := range n {
					logits[i*n+j] += shift
				}
			}
		} else if n > 1 {
			// Scores on the hinge's margin, t·s = 1 exactly: no loss,
			// no gradient.
			for i := 0; i < m; i += 2 {
				logits[i*n+int(y[i])] = 1
				logits[i*n+(int(y[i])+1)%n] = -1
			}
		}
		const scale = 0.25
		probs, grad := make([]float32, m*n), make([]float32, m*n)
		loss, correct := be.SoftmaxCrossEntropy(compute.Host(probs), compute.Host(grad), compute.Host(logits), y, m, n, scale)
		var wantLoss float64
		wantCorrect := 0
		for i := range m {
			z := logits[i*n : (i+1)*n]
			mx, arg := z[0], 0
			for j, v := range z {
				if v > mx {
					mx, arg = v, j
				}
			}
			if arg == int(y[i]) {
				wantCorrect++
			}
			var s float64
			for _, v := range z {
				s += math.Exp(float64(v - mx))
			}
			wantLoss += math.Log(s) - float64(z[y[i]]-mx)
			for j, v := range z {
				p := math.Exp(float64(v-mx)) / s
				gw := scale * p
				if j == int(y[i]) {
					gw -= scale
				}
				if !near(float64(probs[i*n+j]), p, 1e-6) || !near(float64(grad[i*n+j]), gw, 1e-6*scale) {
					t.Errorf("%s: SoftmaxCrossEntropy %v row %d col %d: p %v g %v, want %v %v", name, sz, i, j, probs[i*n+j], grad[i*n+j], p, gw)
					return
				}
			}
		}
		if correct != wantCorrect || !near(loss, wantLoss, 1e-5*max(1, wantLoss)) {
			t.Errorf("%s: SoftmaxCrossEntropy %v: loss %v correct %d, want %v %d", name, sz, loss, correct, wantLoss, wantCorrect)
		}
		hg := make([]float32, m*n)
		hl, hc := be.HingeOneVsRest(compute.Host(hg), compute.Host(logits), y, m, n, scale)
		var wantHL float64
		wantHC := 0
		for i := range m {
			arg := 0
			for j := range n {
				s := logits[i*n+j]
				if s > logits[i*n+arg] {
					arg = j
				}
				tv := float32(-1)
				if j == int(y[i]) {
					tv = 1
				}
				var gw float32
				if tv*s < 1 {
					wantHL += float64(1 - tv*s)
					gw = -tv * scale
				}
				if hg[i*n+j] != gw {
					t.Errorf("%s: HingeOneVsRest %v row %d col %d: g %v, want %v", name, sz, i, j, hg[i*n+j], gw)
					return
				}
			}
			if arg == int(y[i]) {
				wantHC++
			}
		}
		if hc != wantHC || !near(hl, wantHL, 1e-5*max(1, wantHL)) {
			t.Errorf("%s: HingeOneVsRest %v: loss %v correct %d, want %v %d", name, sz, hl, hc, wantHL, wantHC)
		}
	}
}
