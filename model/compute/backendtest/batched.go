package backendtest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/model/compute"
)

// batched checks the compute.Batched kernels: GemmStrided against the
// float64 GEMM of each problem (with the GEMM tolerance, every transpose,
// strides of 0 for a shared operand and padding between problems that
// must stay untouched), and the per-row losses against float64 code and
// against the summed kernels' outputs.
func batched(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	type problem struct {
		m, n, k, count int
		shareA, shareB bool
	}
	for _, p := range []problem{{6, 10, 784, 5, false, false}, {1, 10, 6, 7, true, false}, {6, 10, 1, 4, true, false}, {32, 128, 33, 3, false, true}, {3, 2, 4, 1, false, false}} {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, ab := range [][2]float32{{1, 0}, {-0.25, 1}} {
					m, n, k, count := p.m, p.n, p.k, p.count
					lda, ldb, ldc := k+1, n, n+2
					ra, rb := m, k
					if tA {
						lda, ra = m, k
					}
					if tB {
						ldb, rb = k+3, n
					}
					sA, sB, sC := ra*lda+5, rb*ldb+1, m*ldc+3
					if p.shareA {
						sA = 0
					}
					if p.shareB {
						sB = 0
					}
					a := randSlice(rng, (count-1)*sA+ra*lda)
					b := randSlice(rng, (count-1)*sB+rb*ldb)
					c := randSlice(rng, count*sC)
					want := slices.Clone(c)
					for i := range count {
						naiveGemm(tA, tB, m, n, k, ab[0], a[i*sA:], lda, b[i*sB:], ldb, ab[1], want[i*sC:], ldc)
					}
					be.GemmStrided(tA, tB, m, n, k, ab[0], compute.Host(a), lda, sA, compute.Host(b), ldb, sB, ab[1], compute.Host(c), ldc, sC, count)
					tol := 1e-4 * float64(k+1) * max(1, math.Abs(float64(ab[0])))
					for i, g := range c {
						w := want[i]
						in := i%sC < m*ldc && i%sC%ldc < n
						if (!in && g != w) || (in && !near(float64(g), float64(w), tol)) {
							t.Errorf("%s: GemmStrided %+v tA=%v tB=%v α,β=%v: C value %d (problem %d) = %v, want %v", name, p, tA, tB, ab, i, i/sC, g, w)
							return
						}
					}
				}
			}
		}
	}
	for _, sz := range [][2]int{{1, 2}, {30, 10}, {7, 3}} {
		m, n := sz[0], sz[1]
		logits, y := logitsAndLabels(rng, m, n)
		const scale = 0.5
		probs, grad := make([]float32, m*n), make([]float32, m*n)
		sumLoss, sumCorrect := be.SoftmaxCrossEntropy(compute.Host(probs), compute.Host(grad), compute.Host(slices.Clone(logits)), y, m, n, scale)
		rp, rg, rl := make([]float32, m*n), make([]float32, m*n), make([]float64, m)
		correct := be.SoftmaxCrossEntropyRows(compute.Host(rp), compute.Host(rg), compute.Host(slices.Clone(logits)), y, m, n, scale, rl)
		hg, hl := make([]float32, m*n), make([]float64, m)
		hSum, hSumCorrect := be.HingeOneVsRest(compute.Host(make([]float32, m*n)), compute.Host(logits), y, m, n, scale)
		hCorrect := be.HingeOneVsRestRows(compute.Host(hg), compute.Host(logits), y, m, n, scale, hl)
		if !slices.Equal(rp, probs) || !slices.Equal(rg, grad) || correct != sumCorrect || hCorrect != hSumCorrect {
			t.Errorf("%s: the Rows losses %v differ from the summed ones in probabilities, gradients or correct rows (%d/%d, %d/%d)", name, sz, correct, sumCorrect, hCorrect, hSumCorrect)
			return
		}
		var total, hTotal float64
		for i := range m {
			z := logits[i*n : (i+1)*n]
			mx := slices.Max(z)
			var s, h float64
			for j, v := range z {
				s += math.Exp(float64(v - mx))
				tv := -1.0
				if j == int(y[i]) {
					tv = 1
				}
				h += max(0, 1-tv*float64(v))
			}
			ce := math.Log(s) - float64(z[y[i]]-mx)
			if !near(rl[i], ce, 1e-5*max(1, ce)) || !near(hl[i], h, 1e-5*max(1, h)) {
				t.Errorf("%s: Rows losses %v row %d: cross-entropy %v hinge %v, want %v %v", name, sz, i, rl[i], hl[i], ce, h)
				return
			}
			total += rl[i]
			hTotal += hl[i]
		}
		if !near(total, sumLoss, 1e-9*max(1, sumLoss)) || !near(hTotal, hSum, 1e-9*max(1, hSum)) {
			t.Errorf("%s: Rows losses %v sum to %v and %v, the summed kernels say %v and %v", name, sz, total, hTotal, sumLoss, hSum)
		}
	}
	tally(t, be, rng)
}

// tally checks TallyRows, on host and device logits, against float64
// sums of every model's rows: the losses and correct rows added to what
// loss and correct held.
func tally(t T, be compute.Backend, rng *rand.Rand) {
	t.Helper()
	name := be.Name()
	for _, sz := range [][3]int{{1, 1, 2}, {3, 30, 10}, {4, 7, 3}} {
		k, m, n := sz[0], sz[1], sz[2]
		logits, _ := logitsAndLabels(rng, k*m, n)
		_, y := logitsAndLabels(rng, m, n)
		for _, hinge := range []bool{false, true} {
			for _, onDevice := range []bool{false, true} {
				z := compute.Host(slices.Clone(logits))
				if onDevice {
					z = be.Load(slices.Clone(logits)) // the CPU reads it in place
				}
				loss, correct := make([]float64, k+1), make([]int, k+1)
				for i := range loss {
					loss[i], correct[i] = 1.5, 2
				}
				be.TallyRows(z, y, k, m, n, hinge, loss, correct)
				if onDevice {
					be.Free(z)
				}
				for i := range k {
					var want float64
					right := 0
					for r := range m {
						row := logits[(i*m+r)*n : (i*m+r+1)*n]
						mx := slices.Max(row)
						if slices.Index(row, mx) == int(y[r]) {
							right++
						}
						if hinge {
							for j, v := range row {
								tv := -1.0
								if j == int(y[r]) {
									tv = 1
								}
								want += max(0, 1-tv*float64(v))
							}
							continue
						}
						var s float64
						for _, v := range row {
							s += math.Exp(float64(v - mx))
						}
						want += math.Log(s) - float64(row[y[r]]-mx)
					}
					if got := loss[i] - 1.5; !near(got, want, 1e-5*max(1, want)) || correct[i]-2 != right {
						t.Errorf("%s: TallyRows %v (hinge %v, device %v): model %d loss %v, %d correct; want %v, %d", name, sz, hinge, onDevice, i, got, correct[i]-2, want, right)
						return
					}
				}
				if loss[k] != 1.5 || correct[k] != 2 {
					t.Errorf("%s: TallyRows %v wrote past its %d models", name, sz, k)
					return
				}
			}
		}
	}
}
