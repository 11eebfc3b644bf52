package compute

import (
	"fmt"
	"math"
	"runtime"
)

// CPU is the CPU backend. Large GEMMs run on up to Threads goroutines;
// small ones (the small path, small.go) and the element-wise kernels run on
// the caller's goroutine, so a caller that trains many small models can run
// one per core without nested threading.
type CPU struct {
	threads int
	ks      *kernels
	kernel  string // requested by WithKernel
	path    gemmPath
	im2col  bool // convolutions by im2col even where the direct path could run (tests)
	// splitSmall: small-path products split C's rows among the threads
	// (WithSplitSmall).
	splitSmall bool
}

// CPUOption configures NewCPU.
type CPUOption func(*CPU)

// WithThreads sets how many goroutines a GEMM may use. n ≤ 0 means
// runtime.GOMAXPROCS(0), the default.
func WithThreads(n int) CPUOption { return func(c *CPU) { c.threads = n } }

// WithSplitSmall lets a large product on the small path (C += op(A)·B,
// whose every row of C is summed on its own) split C's rows among the
// threads, as the packed path splits its tiles: the same values bit for
// bit. A training step's products are too small to gain from it (starting
// the goroutines costs more), so it is off by default; merging sufficient
// factors (a rank-32 update of a 784×128 layer from each of a hundred
// peers, on a simulation's event loop) gains.
func WithSplitSmall() CPUOption { return func(c *CPU) { c.splitSmall = true } }

// WithPureGo forces the portable Go kernels even where assembly ones could
// run (for tests and comparisons). It is WithKernel("go").
func WithPureGo() CPUOption { return WithKernel("go") }

// WithKernel forces a kernel set: "go", "avx2", "avx512" or "neon". NewCPU panics
// if this build or CPU cannot run it; check with CheckKernel first.
func WithKernel(name string) CPUOption { return func(c *CPU) { c.kernel = name } }

// NewCPU returns a CPU backend with the best kernels this CPU and build can
// run (AVX-512, then AVX2/FMA, then pure Go), or those $GOSSIPD_KERNEL or
// WithKernel force.
func NewCPU(opts ...CPUOption) *CPU {
	c := &CPU{}
	for _, o := range opts {
		o(c)
	}
	var err error
	if c.kernel != "" {
		c.ks, err = findKernels(c.kernel)
	} else {
		c.ks, err = envKernels()
	}
	if err != nil {
		panic(err)
	}
	if c.threads <= 0 {
		c.threads = runtime.GOMAXPROCS(0)
	}
	return c
}

// Name implements Backend.
func (c *CPU) Name() string { return fmt.Sprintf("cpu/%s×%d", c.ks.name, c.threads) }

// Kernel names the kernel set in use: "avx512", "avx2" or "go".
func (c *CPU) Kernel() string { return c.ks.name }

// Threads reports how many goroutines a GEMM may use.
func (c *CPU) Threads() int { return c.threads }

// host returns t's host memory; the CPU computes on host tensors only.
func host(t Tensor) []float32 {
	if !t.OnHost() {
		panic("compute: the CPU backend got a device tensor")
	}
	return t.HostSlice()
}

// Alloc implements Memory.
func (c *CPU) Alloc(n int) Tensor { return Host(make([]float32, n)) }

// Load implements Memory: the CPU computes on x where it is.
func (c *CPU) Load(x []float32) Tensor { return Host(x) }

// Store implements Memory.
func (c *CPU) Store(dst []float32, t Tensor) { copy(dst[:t.Len()], host(t)) }

// Copy implements Memory.
func (c *CPU) Copy(dst, src Tensor) {
	d, s := host(dst), host(src)
	sameLen("Copy", d, s)
	copy(d, s)
}

// Free implements Memory: host memory is the garbage collector's.
func (c *CPU) Free(Tensor) {}

// Gemm implements Backend.
func (c *CPU) Gemm(transA, transB bool, m, n, k int, alpha float32, a Tensor, lda int, b Tensor, ldb int, beta float32, cc Tensor, ldc int) {
	if c.splitSmall && !transB && c.threads > 1 && m >= 4 && m*n*k >= gemmMinParallel && smallPath(c.path, m, n, k) {
		gemmRowsApart(c.ks, c.threads, transA, m, n, k, alpha, host(a), lda, host(b), ldb, beta, host(cc), ldc)
		return
	}
	gemm(c.ks, c.threads, c.path, transA, transB, m, n, k, alpha, host(a), lda, host(b), ldb, beta, host(cc), ldc)
}

// gemmRowsApart is a small-path C = α·op(A)·B + β·C with C's rows split
// among up to threads goroutines, on even rows: smallAxpy sums each row
// on its own (two at a time, the second a spare row when m is odd), so
// every value is the one a single call gives.
func gemmRowsApart(ks *kernels, threads int, transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, false, m, n, k, a, lda, b, ldb, c, ldc)
	pairs := (m + 1) / 2
	t := min(threads, pairs)
	ForEach(t, t, func(w int) {
		lo, hi := 2*(w*pairs/t), min(m, 2*((w+1)*pairs/t))
		if lo >= hi {
			return
		}
		sub := lo * lda // op(A)'s rows lo…: A's rows, or with transA its columns
		if transA {
			sub = lo
		}
		gemm(ks, 1, pathSmall, transA, false, hi-lo, n, k, alpha, a[sub:], lda, b, ldb, beta, c[lo*ldc:], ldc)
	})
}

// GemmGatherA implements Gatherer, on the small path.
func (c *CPU) GemmGatherA(n, k int, alpha float32, at Tensor, lda int, rows []int, bt Tensor, ldb int, beta float32, ct Tensor, ldc int) {
	a, b, cc := host(at), host(bt), host(ct)
	m := len(rows)
	checkRows("A", rows, a, lda, k)
	checkGemm(false, true, m, n, k, nil, 0, b, ldb, cc, ldc)
	if scaleC(m, n, beta, cc, ldc) && k > 0 && alpha != 0 {
		smallDot(c.ks, false, m, n, k, alpha, a, lda, rows, b, ldb, nil, cc, ldc)
	}
}

// GemmGatherB implements Gatherer, on the small path.
func (c *CPU) GemmGatherB(m, n int, alpha float32, at Tensor, lda int, bt Tensor, ldb int, rows []int, beta float32, ct Tensor, ldc int) {
	a, b, cc := host(at), host(bt), host(ct)
	k := len(rows)
	checkRows("B", rows, b, ldb, n)
	checkGemm(true, false, m, n, k, a, lda, nil, 0, cc, ldc)
	if scaleC(m, n, beta, cc, ldc) && k > 0 && alpha != 0 {
		smallAxpy(c.ks.axpy, true, m, n, k, alpha, a, lda, b, ldb, rows, cc, ldc)
	}
}

// checkRows panics if a listed row of cols values at stride ld lies
// outside s.
func checkRows(name string, rows []int, s []float32, ld, cols int) {
	for _, r := range rows {
		if r < 0 || r*ld+cols > len(s) {
			panic(fmt.Sprintf("compute: GEMM %s: row %d outside %d values (stride %d)", name, r, len(s), ld))
		}
	}
}

// BroadcastRows implements Backend.
func (c *CPU) BroadcastRows(dt Tensor, m, n int, vt Tensor) {
	dst, v := host(dt), host(vt)[:n]
	for i := 0; i < m; i++ {
		copy(dst[i*n:i*n+n], v)
	}
}

// ReLU implements Backend.
func (c *CPU) ReLU(xt Tensor) {
	x := host(xt)
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

// ReLUBackward implements Backend.
func (c *CPU) ReLUBackward(gt, zt Tensor) {
	grad := host(gt)
	z := host(zt)[:len(grad)]
	for i, v := range z {
		if v <= 0 {
			grad[i] = 0
		}
	}
}

// ColumnSums implements Backend.
func (c *CPU) ColumnSums(dt, st Tensor, m, n int) {
	dst, src := host(dt), host(st)
	dst = dst[:n]
	clear(dst)
	for i := 0; i < m; i++ {
		row := src[i*n : i*n+n]
		for j, v := range row {
			dst[j] += v
		}
	}
}

// SoftmaxCrossEntropy implements Backend. It subtracts the row maximum
// before exponentiating and computes the loss as logsumexp − z_y, so it
// neither overflows nor takes the log of 0.
func (c *CPU) SoftmaxCrossEntropy(pt, gt, lt Tensor, y []int32, m, n int, scale float32) (float64, int) {
	return c.softmaxXent(host(pt), host(gt), host(lt), y, m, n, scale, nil)
}

// softmaxXent is SoftmaxCrossEntropy on host memory; when rows is not nil
// it also writes each row's loss to rows[i].
func (c *CPU) softmaxXent(probs, grad, logits []float32, y []int32, m, n int, scale float32, rows []float64) (float64, int) {
	// First pass, row by row (probs may alias logits): the arg-max, the
	// label's shifted logit and the shifted logits z − max. Then e^· over
	// the whole block at once, in the kernel set's vector exp, and a last
	// pass to normalize.
	var loss float64
	correct := 0
	for i := 0; i < m; i++ {
		z := logits[i*n : i*n+n]
		label := int(y[i])
		mx, arg := z[0], 0
		for j, v := range z {
			if v > mx {
				mx, arg = v, j
			}
		}
		if arg == label {
			correct++
		}
		loss -= float64(z[label] - mx)
		if rows != nil {
			rows[i] = -float64(z[label] - mx)
		}
		p := probs[i*n : i*n+n]
		for j, v := range z {
			p[j] = v - mx
		}
	}
	c.ks.exp(probs[:m*n])
	for i := 0; i < m; i++ {
		p := probs[i*n : i*n+n]
		var sum float32
		for _, e := range p {
			sum += e
		}
		loss += math.Log(float64(sum))
		if rows != nil {
			rows[i] += math.Log(float64(sum))
		}
		inv := 1 / sum
		for j := range p {
			p[j] *= inv
		}
		if grad != nil {
			g := grad[i*n : i*n+n]
			for j, v := range p {
				g[j] = scale * v
			}
			g[int(y[i])] -= scale
		}
	}
	return loss, correct
}

// HingeOneVsRest implements Backend.
func (c *CPU) HingeOneVsRest(gt, st Tensor, y []int32, m, n int, scale float32) (float64, int) {
	return hingeOVR(host(gt), host(st), y, m, n, scale, nil)
}

// hingeOVR is HingeOneVsRest on host memory; when rows is not nil it also
// writes each row's loss to rows[i].
func hingeOVR(grad, scores []float32, y []int32, m, n int, scale float32, rows []float64) (float64, int) {
	var loss float64
	correct := 0
	for i := 0; i < m; i++ {
		if rows != nil {
			rows[i] = 0
		}
		s := scores[i*n : i*n+n]
		label := int(y[i])
		arg := 0
		for j, v := range s {
			if v > s[arg] {
				arg = j
			}
			t := float32(-1)
			if j == label {
				t = 1
			}
			margin := t * v
			if margin < 1 {
				loss += float64(1 - margin)
				if rows != nil {
					rows[i] += float64(1 - margin)
				}
			}
			if grad != nil {
				g := float32(0)
				if margin < 1 {
					g = -t * scale
				}
				grad[i*n+j] = g
			}
		}
		if arg == label {
			correct++
		}
	}
	return loss, correct
}
