package merge

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

func TestAgeWeighted(t *testing.T) {
	local := []float32{0, 10}
	remote := []float32{4, 2}
	dst := make([]float32, 2)
	age := AgeWeighted(dst, local, 30, remote, 10) // ω = 10/40
	if age != 30 || dst[0] != 1 || dst[1] != 8 {
		t.Fatalf("got %v age %v, want [1 8] age 30", dst, age)
	}
	age = AgeWeighted(dst, local, 0, remote, 0) // both 0: keep local
	if age != 0 || dst[0] != 0 || dst[1] != 10 {
		t.Fatalf("ages 0: got %v", dst)
	}
	AgeWeighted(local, local, 1, remote, 3) // aliasing: ω = 0.75
	if local[0] != 3 || local[1] != 4 {
		t.Fatalf("aliased: %v", local)
	}
}

func TestWeighted(t *testing.T) {
	dst := make([]float32, 2)
	if err := Weighted(dst, [][]float32{{1, 1}, {3, 5}}, []float64{1, 3}); err != nil || dst[0] != 2.5 || dst[1] != 4 {
		t.Fatalf("%v %v", dst, err)
	}
	// Renormalised: weights 0.2 and 0.2 average like 1 and 1.
	if err := Weighted(dst, [][]float32{{0, 2}, {2, 4}}, []float64{0.2, 0.2}); err != nil || math.Abs(float64(dst[0])-1) > 1e-6 {
		t.Fatalf("%v %v", dst, err)
	}
	for _, ws := range [][]float64{{1}, {-1, 2}, {0, 0}, {math.NaN(), 1}} {
		if err := Weighted(dst, [][]float32{{1, 1}, {2, 2}}, ws); !errors.Is(err, ErrWeights) {
			t.Errorf("weights %v: %v", ws, err)
		}
	}
	if err := Weighted(dst, nil, nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v", err)
	}
}

func TestPushSumShareConserves(t *testing.T) {
	x := []float32{3, -6}
	share := make([]float32, 2)
	sw, kw := PushSumShare(share, x, 2, 0.25)
	if sw+kw != 2 || share[0]+x[0] != 3 || share[1]+x[1] != -6 || sw != 0.5 {
		t.Fatalf("share %v (w %v), kept %v (w %v)", share, sw, x, kw)
	}
	z := make([]float32, 2)
	DeBias(z, x, kw)
	if z[0] != 1.5 {
		t.Fatalf("de-biased %v", z)
	}
}

func TestMetropolisHastingsRing(t *testing.T) {
	if w := MetropolisHastings(2, 2); w != 1.0/3 {
		t.Fatalf("ring weight %v, want 1/3", w)
	}
}

func TestApplyFactorsMatchesDense(t *testing.T) {
	f := model.Factors{Weight: "w", K: 2, J: 2, D: 3, U: []float32{1, 2, 3, 4}, V: []float32{1, 0, 1, 0, 1, 1}}
	w := make([]float32, 6)
	if err := ApplyFactors(compute.NewCPU(), w, &f, -0.5); err != nil {
		t.Fatal(err)
	}
	// Uᵀ·V = [[1,3],[2,4]]·[[1,0,1],[0,1,1]] = [[1,3,4],[2,4,6]].
	want := []float32{-0.5, -1.5, -2, -1, -2, -3}
	for i := range w {
		if w[i] != want[i] {
			t.Fatalf("W = %v, want %v", w, want)
		}
	}
	if err := ApplyFactors(compute.NewCPU(), make([]float32, 5), &f, 1); !errors.Is(err, ErrWeights) {
		t.Fatalf("bad shape: %v", err)
	}
	if !SFBCheaper(32, 128, 784) || SFBCheaper(32, 10, 784) {
		t.Fatal("SFBCheaper")
	}
}

func TestConsensusDistance(t *testing.T) {
	if d := ConsensusDistance([][]float32{{1, 0}, {3, 0}}); d != 1 {
		t.Fatalf("distance %v, want 1", d)
	}
	if !Finite([]float32{1, 2}) || Finite([]float32{float32(math.Inf(1))}) {
		t.Fatal("Finite")
	}
	// Several chunks and a ragged last one: against float64 arithmetic,
	// and the same bits whatever the number of workers.
	xs := make([][]float32, 37)
	for i := range xs {
		xs[i] = make([]float32, 2*ConsensusChunk+77)
		for j := range xs[i] {
			xs[i][j] = float32(math.Sin(float64(i*7919+j*31))) * float32(1+j%5)
		}
	}
	var want float64
	for j := range xs[0] {
		var m float64
		for _, x := range xs {
			m += float64(x[j])
		}
		m /= float64(len(xs))
		for _, x := range xs {
			d := float64(x[j]) - m
			want += d * d
		}
	}
	want /= float64(len(xs))
	one := ConsensusDistance(xs)
	if math.Abs(one-want) > 1e-6*want {
		t.Fatalf("distance %v, want %v", one, want)
	}
	for _, w := range []int{2, 3, 8, 100} {
		if got := ConsensusDistanceN(xs, w); got != one {
			t.Fatalf("%d workers: %v, one worker: %v", w, got, one)
		}
	}
	// The same bits from the vectors as rows of one matrix (a device's):
	// their mean and chunked distances by compute.Rows, then
	// ConsensusOfChunks.
	n := len(xs[0])
	mat := make([]float32, 0, len(xs)*n)
	rows := make([]int32, len(xs))
	for i, x := range xs {
		mat = append(mat, x...)
		rows[i] = int32(i)
	}
	be := compute.NewCPU(compute.WithThreads(3))
	mean := make([]float32, n)
	be.MeanRows(compute.Host(mean), compute.Host(mat), n, rows)
	c := (n + ConsensusChunk - 1) / ConsensusChunk
	d := make([]float64, len(xs)*c)
	be.DistanceRows(d, compute.Host(mat), n, rows, compute.Host(mean), ConsensusChunk)
	if got := ConsensusOfChunks(d, len(xs), c); math.Float64bits(got) != math.Float64bits(one) {
		t.Fatalf("from the rows' chunked distances: %v, from the vectors: %v", got, one)
	}
	if ConsensusOfChunks(nil, 0, c) != 0 {
		t.Fatal("the consensus of no vectors is not 0")
	}
}

func TestSubsetAndStrided(t *testing.T) {
	x := []float32{0, 10, 20, 30, 40}
	InterpolateAt(x, []uint32{1, 4}, []float32{20, 0}, 0.5)
	if x[1] != 15 || x[4] != 20 || x[0] != 0 {
		t.Fatalf("InterpolateAt: %v", x)
	}
	y := []float32{0, 0, 0, 0, 0}
	InterpolateStrided(y, 1, 2, []float32{4, 8}, 0.25)
	if y[1] != 1 || y[3] != 2 || y[0] != 0 || y[2] != 0 {
		t.Fatalf("InterpolateStrided: %v", y)
	}
	if s := Strided(nil, []float32{0, 1, 2, 3, 4}, 1, 2); len(s) != 2 || s[0] != 1 || s[1] != 3 {
		t.Fatalf("Strided: %v", s)
	}
}

// TestFiniteEveryPlace: Finite against the plain per-value test, for
// every boundary bit pattern (the largest finite values, ±Inf, NaNs with
// the least and most payload, ±0, the smallest subnormal) at every
// place of vectors of 0 to 19 values (both the blocks of eight and the
// tail).
func TestFiniteEveryPlace(t *testing.T) {
	ref := func(x []float32) bool {
		for _, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return false
			}
		}
		return true
	}
	bits := []uint32{0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7f800001, 0x7fc00000, 0x7fffffff, 0xffffffff, 0x80000000, 0x00000000, 0x00000001, 0x3f800000}
	for n := range 20 {
		for at := range n {
			for _, b := range bits {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(i) - 7.5
				}
				x[at] = math.Float32frombits(b)
				if got, want := Finite(x), ref(x); got != want {
					t.Fatalf("Finite with %#08x at %d of %d = %v, want %v", b, at, n, got, want)
				}
			}
		}
	}
}

// TestNoAllocations: the merges of a model shorter than parallelFrom
// (every message of a daemon's or a simulated softmax peer) allocate
// nothing, as the package promises, whichever kernel set sums them.
func TestNoAllocations(t *testing.T) {
	const n = 7850
	x, y, z, d := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	xs, w := [][]float32{x, y, z}, []float32{0.5, 0.25, 0.25}
	for name, f := range map[string]func(){
		"Axpy":      func() { Axpy(d, 0.5, x) },
		"Axpy self": func() { Axpy(d, 0.5, d) },
		"Scale":     func() { Scale(d, 0.5) },
		"ScaleInto": func() { ScaleInto(d, x, 0.5) },
		"DeBias":    func() { DeBias(d, x, 2) },
		"Weighted": func() {
			if err := Weighted(d, xs, []float64{2, 1, 1}); err != nil {
				t.Fatal(err)
			}
		},
		"Combine": func() { Combine(d, xs, w, z, -0.1) },
	} {
		if a := testing.AllocsPerRun(20, f); a != 0 {
			t.Errorf("%s of %d values: %v allocations a call, want none", name, n, a)
		}
	}
}

// TestOnePassSameBits: Axpy (of another vector and of dst itself),
// Scale, ScaleInto and DeBias, now sums of one or two terms in one pass,
// give the values of the loops they replaced bit for bit, on vectors
// short and long.
func TestOnePassSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 33, 7850, 101770} {
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(r.NormFloat64()), float32(r.NormFloat64()*1e3)
		}
		same := func(name string, got []float32, want func(i int) float32) {
			t.Helper()
			for i, v := range got {
				if w := want(i); math.Float32bits(v) != math.Float32bits(w) {
					t.Fatalf("%s n=%d: [%d] = %v, want %v", name, n, i, v, w)
				}
			}
		}
		d := slices.Clone(y)
		Axpy(d, -0.37, x)
		same("Axpy", d, func(i int) float32 { return y[i] + float32(-0.37*x[i]) })
		d = slices.Clone(y)
		Axpy(d, -0.37, d)
		same("Axpy of itself", d, func(i int) float32 { return y[i] + float32(-0.37*y[i]) })
		d = slices.Clone(y)
		Scale(d, 0.3)
		same("Scale", d, func(i int) float32 { return y[i] * 0.3 })
		ScaleInto(d, x, 0.3)
		same("ScaleInto", d, func(i int) float32 { return x[i] * 0.3 })
		DeBias(d, y, 0.7)
		same("DeBias", d, func(i int) float32 { return y[i] * float32(1/0.7) })
	}
}
