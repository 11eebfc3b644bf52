package compute

import (
	"fmt"
	"math"
	"runtime"
)

// CPU is the CPU backend. Its GEMM runs on up to Threads goroutines; the
// element-wise kernels run on the caller's goroutine (they are memory-bound
// and small next to the GEMMs around them).
type CPU struct {
	threads int
	kernel  kernelFunc
	name    string
}

// CPUOption configures NewCPU.
type CPUOption func(*CPU)

// WithThreads sets how many goroutines a GEMM may use. n ≤ 0 means
// runtime.GOMAXPROCS(0), the default.
func WithThreads(n int) CPUOption { return func(c *CPU) { c.threads = n } }

// WithPureGo forces the portable Go micro-kernel even where the assembly one
// could run (for tests and comparisons).
func WithPureGo() CPUOption {
	return func(c *CPU) { c.kernel, c.name = kernelGo, "cpu/go" }
}

// NewCPU returns a CPU backend: the AVX2/FMA kernel where the CPU has it and
// the build allows it, else the pure-Go kernel.
func NewCPU(opts ...CPUOption) *CPU {
	c := &CPU{kernel: kernelGo, name: "cpu/go"}
	if haveAsm {
		c.kernel, c.name = kernelAsm, "cpu/"+asmName
	}
	for _, o := range opts {
		o(c)
	}
	if c.threads <= 0 {
		c.threads = runtime.GOMAXPROCS(0)
	}
	return c
}

// Name implements Backend.
func (c *CPU) Name() string { return fmt.Sprintf("%s×%d", c.name, c.threads) }

// Threads reports how many goroutines a GEMM may use.
func (c *CPU) Threads() int { return c.threads }

// Gemm implements Backend.
func (c *CPU) Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cc []float32, ldc int) {
	gemm(c.kernel, c.threads, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc)
}

// BroadcastRows implements Backend.
func (c *CPU) BroadcastRows(dst []float32, m, n int, v []float32) {
	v = v[:n]
	for i := 0; i < m; i++ {
		copy(dst[i*n:i*n+n], v)
	}
}

// ReLU implements Backend.
func (c *CPU) ReLU(x []float32) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

// ReLUBackward implements Backend.
func (c *CPU) ReLUBackward(grad, z []float32) {
	z = z[:len(grad)]
	for i, v := range z {
		if v <= 0 {
			grad[i] = 0
		}
	}
}

// ColumnSums implements Backend.
func (c *CPU) ColumnSums(dst, src []float32, m, n int) {
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
func (c *CPU) SoftmaxCrossEntropy(probs, grad, logits []float32, y []int32, m, n int, scale float32) (float64, int) {
	var loss float64
	correct := 0
	for i := 0; i < m; i++ {
		z := logits[i*n : i*n+n]
		p := probs[i*n : i*n+n]
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
		zy := z[label]
		var sum float32
		for j, v := range z {
			e := float32(math.Exp(float64(v - mx)))
			p[j] = e
			sum += e
		}
		loss += math.Log(float64(sum)) - float64(zy-mx)
		inv := 1 / sum
		for j := range p {
			p[j] *= inv
		}
		if grad != nil {
			g := grad[i*n : i*n+n]
			for j, v := range p {
				g[j] = scale * v
			}
			g[label] -= scale
		}
	}
	return loss, correct
}

// HingeOneVsRest implements Backend.
func (c *CPU) HingeOneVsRest(grad, scores []float32, y []int32, m, n int, scale float32) (float64, int) {
	var loss float64
	correct := 0
	for i := 0; i < m; i++ {
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
