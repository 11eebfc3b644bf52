package compute

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// The amd64 kernel sets, run by the interpreter of x86emu_test.go: the
// tests below check them on any CPU (and any GOARCH), AVX-512 included,
// the way TestGemmMatchesNaive and TestExpKernels check the sets this CPU
// can run.

var amd64Asm = sync.OnceValues(func() (*asmProgram, error) {
	return loadAsm("small_amd64.s", "exp_amd64.s", "kernel_amd64.s", "pool_amd64.s", "interp_amd64.s", "combine_amd64.s")
})

func ptrArg[T any](p *T) uint64 { return uint64(uintptr(unsafe.Pointer(p))) }

// emulatedKernels returns the AVX2 and AVX-512 sets on the interpreter.
func emulatedKernels(t testing.TB) []*kernels {
	p, err := amd64Asm()
	if err != nil {
		t.Fatal(err)
	}
	set := func(name, dot, axpy, exp string, rows int) *kernels {
		return &kernels{name: name + "-emulated", packed: emuPacked(p), dot: emuDot(p, dot, rows), dotRows: rows, dotCols: 5,
			axpy: emuAxpy(p, axpy), exp: emuExp(p, exp), pool2: emuPool2(p), pool2Back: emuPool2Back(p), interp: emuInterp(p), combine: emuCombine(p)}
	}
	return []*kernels{set("avx2", "dot2x5AVX2", "axpy2x4AVX2", "expAVX2", 2), set("avx512", "dot4x5AVX512", "axpy2x4AVX512", "expAVX512", 4)}
}

// The wrappers copy the kernels' small arguments to the heap, whose
// objects do not move while the interpreter holds their addresses, and
// lend it exactly the rows a kernel may touch.

func emuDot(p *asmProgram, fn string, rows int) dotKernel {
	return func(k int, a *[4]*float32, b *[5]*float32, out *[20]float32, pf *[4]*float32) {
		ha, hb, ho, hp := new([4]*float32), new([5]*float32), new([20]float32), new([4]*float32)
		*ha, *hb, *hp = *a, *b, *pf
		lent := [][]byte{bytesOf(ha, 32), bytesOf(hb, 40), bytesOf(ho, 80), bytesOf(hp, 32)}
		for r := range rows {
			lent = append(lent, bytesOf(ha[r], 4*k))
		}
		for c := range 5 {
			lent = append(lent, bytesOf(hb[c], 4*k))
		}
		p.call(fn, []uint64{uint64(k), ptrArg(ha), ptrArg(hb), ptrArg(ho), ptrArg(hp)}, lent...)
		*out = *ho
	}
}

func emuAxpy(p *asmProgram, fn string) axpyKernel {
	return func(n int, coef *[8]float32, b *[4]*float32, c *[2]*float32) {
		hc, hb, hr := new([8]float32), new([4]*float32), new([2]*float32)
		*hc, *hb, *hr = *coef, *b, *c
		lent := [][]byte{bytesOf(hc, 32), bytesOf(hb, 32), bytesOf(hr, 16)}
		for q := range 4 {
			lent = append(lent, bytesOf(hb[q], 4*n))
		}
		for r := range 2 {
			lent = append(lent, bytesOf(hr[r], 4*n))
		}
		p.call(fn, []uint64{uint64(n), ptrArg(hc), ptrArg(hb), ptrArg(hr)}, lent...)
	}
}

func emuExp(p *asmProgram, fn string) expKernel {
	return func(x []float32) {
		if len(x) > 0 {
			p.call(fn, []uint64{uint64(len(x)), ptrArg(&x[0])}, bytesOf(&x[0], 4*len(x)))
		}
	}
}

// emuPool2 and emuPool2Back are the pool2 kernels on the interpreter,
// lent exactly the rows' 2n values and the n outputs.
func emuPool2(p *asmProgram) pool2Kernel {
	return func(r0, r1, out []float32) {
		if n := len(out); n > 0 {
			p.call("maxPool2RowAVX2", []uint64{uint64(n), ptrArg(&r0[0]), ptrArg(&r1[0]), ptrArg(&out[0])},
				bytesOf(&r0[0], 8*n), bytesOf(&r1[0], 8*n), bytesOf(&out[0], 4*n))
		}
	}
}

func emuPool2Back(p *asmProgram) pool2BackKernel {
	return func(r0, r1, d, dx0, dx1 []float32) {
		if n := len(d); n > 0 {
			p.call("maxPool2BackRowAVX2", []uint64{uint64(n), ptrArg(&r0[0]), ptrArg(&r1[0]), ptrArg(&d[0]), ptrArg(&dx0[0]), ptrArg(&dx1[0])},
				bytesOf(&r0[0], 8*n), bytesOf(&r1[0], 8*n), bytesOf(&d[0], 4*n), bytesOf(&dx0[0], 8*n), bytesOf(&dx1[0], 8*n))
		}
	}
}

// emuInterp is the interp kernel on the interpreter, lent exactly the n
// values of each row (d may be a or b itself).
func emuInterp(p *asmProgram) interpKernel {
	return func(d, a, b []float32, w float32) {
		if n := len(a); n > 0 {
			d, b = d[:n], b[:n]
			p.call("interpRowAVX2", []uint64{uint64(n), ptrArg(&d[0]), ptrArg(&a[0]), ptrArg(&b[0]), uint64(math.Float32bits(w))},
				bytesOf(&d[0], 4*n), bytesOf(&a[0], 4*n), bytesOf(&b[0], 4*n))
		}
	}
}

// emuCombine is the combine kernel on the interpreter, lent exactly the
// n values of d and of each model (d may be one of them), the models'
// addresses and their weights.
func emuCombine(p *asmProgram) combineKernel {
	return func(d []float32, xs [][]float32, w []float32) {
		n := len(d)
		if n == 0 {
			return
		}
		ptrs, hw := make([]*float32, len(xs)), slices.Clone(w[:len(xs)])
		lent := [][]byte{bytesOf(&d[0], 4*n), bytesOf(&ptrs[0], 8*len(ptrs)), bytesOf(&hw[0], 4*len(hw))}
		for k, x := range xs {
			ptrs[k] = &x[:n][0]
			lent = append(lent, bytesOf(ptrs[k], 4*n))
		}
		p.call("combineRowAVX2", []uint64{uint64(n), ptrArg(&d[0]), ptrArg(&ptrs[0]), ptrArg(&hw[0]), uint64(len(xs))}, lent...)
	}
}

func emuPacked(p *asmProgram) kernelFunc {
	return func(kc int, a, b, c []float32, ldc int) {
		a, b, c = a[:kc*mr], b[:kc*nr], c[:(mr-1)*ldc+nr]
		p.call("kernel6x16AVX2", []uint64{uint64(kc), ptrArg(&a[0]), ptrArg(&b[0]), ptrArg(&c[0]), uint64(ldc)},
			bytesOf(&a[0], 4*len(a)), bytesOf(&b[0], 4*len(b)), bytesOf(&c[0], 4*len(c)))
	}
}

// TestEmulatedGemm runs the emulated sets through the small and packed
// paths against the float64 triple loop, with gathered rows too; a read or
// write outside the rows fails the test.
func TestEmulatedGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := [][3]int{{1, 1, 1}, {7, 17, 3}, {5, 15, 37}, {13, 11, 33}, {32, 10, 64}, {10, 23, 32}, {6, 16, 5}, {9, 33, 19}}
	for _, ks := range emulatedKernels(t) {
		for _, path := range []gemmPath{pathSmall, pathPacked} {
			be := &CPU{threads: 1, ks: ks, path: path}
			for _, sz := range sizes {
				m, n, k := sz[0], sz[1], sz[2]
				for _, tA := range []bool{false, true} {
					for _, tB := range []bool{false, true} {
						lda, ldb, ldc := k+3, n+1, n+2
						rowsA, rowsB := m, k
						if tA {
							lda, rowsA = m+3, k
						}
						if tB {
							ldb, rowsB = k+1, n
						}
						a, b := randSlice(rng, rowsA*lda), randSlice(rng, rowsB*ldb)
						c := randSlice(rng, m*ldc)
						want := slices.Clone(c)
						naiveGemm(tA, tB, m, n, k, 0.5, a, lda, b, ldb, 1, want, ldc)
						be.Gemm(tA, tB, m, n, k, 0.5, Host(a), lda, Host(b), ldb, 1, Host(c), ldc)
						for i := range c {
							if math.Abs(float64(c[i]-want[i])) > 1e-4*float64(k+1) {
								t.Fatalf("%s path %d %v tA=%v tB=%v: C[%d]=%v want %v", ks.name, path, sz, tA, tB, i, c[i], want[i])
							}
						}
					}
				}
			}
		}
		// Gathered rows, as a minibatch reads them (with prefetching).
		be := &CPU{threads: 1, ks: ks, path: pathSmall}
		x := randSlice(rng, 50*37)
		rows := []int{4, 49, 0, 17, 17, 3, 30, 8, 22}
		w := randSlice(rng, 10*37)
		got := make([]float32, len(rows)*10)
		be.GemmGatherA(10, 37, 1, Host(x), 37, rows, Host(w), 37, 0, Host(got), 10)
		for i, r := range rows {
			for j := range 10 {
				var s float64
				for p := range 37 {
					s += float64(x[r*37+p]) * float64(w[j*37+p])
				}
				if math.Abs(float64(got[i*10+j])-s) > 1e-4 {
					t.Fatalf("%s gathered row %d col %d: %v want %v", ks.name, i, j, got[i*10+j], s)
				}
			}
		}
	}
}

// TestEmulatedExp checks the emulated exp kernels as TestExpKernels checks
// the native ones.
func TestEmulatedExp(t *testing.T) {
	for _, ks := range emulatedKernels(t) {
		for n := 0; n <= 35; n++ {
			x := make([]float32, n)
			for i := range x {
				x[i] = -90 + 180*float32(i*7919%97)/97
			}
			if n > 3 {
				x[0], x[1], x[2], x[3] = float32(math.NaN()), float32(math.Inf(-1)), float32(math.Inf(1)), 0
			}
			in := slices.Clone(x)
			ks.exp(x)
			for i, v := range in {
				want := expf(v)
				if math.IsNaN(float64(want)) != math.IsNaN(float64(x[i])) {
					t.Fatalf("%s: exp(%v) = %v, want %v", ks.name, v, x[i], want)
				}
				ulp := float64(math.Nextafter32(want, float32(math.Inf(1))) - want)
				if !math.IsNaN(float64(want)) && want != x[i] && (math.IsInf(float64(want), 0) || math.Abs(float64(x[i]-want)) > ulp) {
					t.Fatalf("%s: exp(%v) = %v, want %v", ks.name, v, x[i], want)
				}
			}
		}
	}
}

// TestEmulatorMatchesHardware runs each kernel natively and on the
// interpreter, where this CPU has the instructions, and wants the same
// results (within a relative 1e-6: the emulated fused multiply-add rounds
// twice in rare cases). It is what makes the emulated tests above stand
// for the hardware on a CPU that lacks it.
func TestEmulatorMatchesHardware(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	checked := 0
	for _, emu := range emulatedKernels(t) {
		name := strings.TrimSuffix(emu.name, "-emulated")
		hw, err := findKernels(name)
		if err != nil {
			t.Logf("%s: not run natively here (%v); emulated only", name, err)
			continue
		}
		checked++
		for _, sz := range [][3]int{{13, 11, 45}, {32, 10, 784}, {3, 40, 9}} {
			m, n, k := sz[0], sz[1], sz[2]
			a, b := randSlice(rng, m*k), randSlice(rng, n*k)
			for _, path := range []gemmPath{pathSmall, pathPacked} {
				for _, tB := range []bool{true, false} {
					ldb := n
					if tB {
						ldb = k
					}
					c1, c2 := make([]float32, m*n), make([]float32, m*n)
					(&CPU{threads: 1, ks: hw, path: path}).Gemm(false, tB, m, n, k, 1, Host(a), k, Host(b), ldb, 0, Host(c1), n)
					(&CPU{threads: 1, ks: emu, path: path}).Gemm(false, tB, m, n, k, 1, Host(a), k, Host(b), ldb, 0, Host(c2), n)
					for i := range c1 {
						if d := math.Abs(float64(c1[i] - c2[i])); d > 1e-6*max(1, math.Abs(float64(c1[i]))) {
							t.Fatalf("%s %v path %d tB=%v: native %v, emulated %v", name, sz, path, tB, c1[i], c2[i])
						}
					}
				}
			}
		}
		x := randSlice(rng, 1000)
		for i := range x {
			x[i] *= 90
		}
		y1, y2 := slices.Clone(x), slices.Clone(x)
		hw.exp(y1)
		emu.exp(y2)
		for i := range y1 {
			if y1[i] != y2[i] && math.Abs(float64(y1[i]-y2[i])) > 1e-6*math.Abs(float64(y1[i])) {
				t.Fatalf("%s exp(%v): native %v, emulated %v", name, x[i], y1[i], y2[i])
			}
		}
		r0, r1 := randSlice(rng, 81), randSlice(rng, 81)
		p1, p2 := make([]float32, 40), make([]float32, 40)
		hw.pool2(r0, r1, p1)
		emu.pool2(r0, r1, p2)
		if !slices.Equal(p1, p2) {
			t.Fatalf("%s pool2: native %v, emulated %v", name, p1, p2)
		}
		b1 := [2][]float32{make([]float32, 80), make([]float32, 80)}
		b2 := [2][]float32{make([]float32, 80), make([]float32, 80)}
		hw.pool2Back(r0, r1, p1, b1[0], b1[1])
		emu.pool2Back(r0, r1, p1, b2[0], b2[1])
		if !slices.Equal(b1[0], b2[0]) || !slices.Equal(b1[1], b2[1]) {
			t.Fatalf("%s pool2Back: native %v, emulated %v", name, b1, b2)
		}
		a, b := randSlice(rng, 77), randSlice(rng, 77)
		i1, i2 := make([]float32, 77), make([]float32, 77)
		hw.interp(i1, a, b, 0.3)
		emu.interp(i2, a, b, 0.3)
		if !slices.Equal(i1, i2) {
			t.Fatalf("%s interp: native %v, emulated %v", name, i1, i2)
		}
	}
	t.Logf("%d of 2 amd64 kernel sets checked against this CPU", checked)
}

// TestEmulatorCatchesOutOfBounds: a kernel that reads past the rows it
// was lent fails under the interpreter.
func TestEmulatorCatchesOutOfBounds(t *testing.T) {
	x := make([]float32, 9)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "outside the memory lent") {
			t.Fatalf("recovered %v, want an out-of-bounds report", r)
		}
	}()
	// Lend 8 floats and pass 9: the kernel's tail touches the 9th.
	p, err := amd64Asm()
	if err != nil {
		t.Fatal(err)
	}
	p.call("expAVX2", []uint64{9, ptrArg(&x[0])}, bytesOf(&x[0], 32))
}
