package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/gossipd/gossipd/model/compute"
)

// workspace holds a pass's buffers for up to m examples.
type workspace struct {
	m     int
	acts  [][]float32 // each layer's output, m×out.Size()
	dacts [][]float32 // ∂loss/∂ each layer's output
	idx   [][]int32   // max pools' arg-max (index in the example's input)
	aux   [][]float32 // dropout masks; normalisations' mean and 1/σ per (example, group)
	// cols holds each convolution's unrolled inputs (m×(C·K·K)×(OH·OW))
	// from a training pass's forward, for its backward.
	cols [][]float32
	// work holds each worker's convolution scratch and private
	// gradient accumulators.
	work [][]float32
}

// grow makes the workspace hold m examples.
func (n *Net) grow(m int) {
	if m <= n.ws.m {
		return
	}
	ws := workspace{m: m}
	for _, p := range n.plans {
		ws.acts = append(ws.acts, make([]float32, m*p.out.Size()))
		ws.dacts = append(ws.dacts, make([]float32, m*p.out.Size()))
		var idx []int32
		var aux []float32
		switch p.Kind {
		case MaxPool:
			idx = make([]int32, m*p.out.Size())
		case Dropout:
			aux = make([]float32, m*p.out.Size())
		case LayerNorm:
			aux = make([]float32, 2*m)
		case GroupNorm:
			aux = make([]float32, 2*m*p.Groups)
		}
		ws.idx, ws.aux = append(ws.idx, idx), append(ws.aux, aux)
	}
	ws.cols = make([][]float32, len(n.plans))
	n.ws = ws
}

// Loss runs the network on m examples x (row-major, m×Input().Size())
// with labels y and returns the summed cross-entropy and how many it
// classifies right. With grad (NumParams values) it also sets grad to
// scale·∂loss/∂params. With rng, dropout layers drop (training);
// without, they pass values through (evaluation).
func (n *Net) Loss(grad, params, x []float32, y []int32, m int, scale float32, rng *rand.Rand) (float64, int) {
	n.check(params, x, m)
	if len(y) < m {
		panic(fmt.Sprintf("nn: %d labels for %d examples", len(y), m))
	}
	n.forward(params, x, m, rng, grad != nil)
	last := len(n.plans) - 1
	var dz []float32
	if grad != nil {
		dz = n.ws.dacts[last][:m*n.classes]
	}
	loss, correct := softmaxCE(dz, n.ws.acts[last][:m*n.classes], y, m, n.classes, scale)
	if grad != nil {
		if len(grad) != n.size {
			panic(fmt.Sprintf("nn: gradient of %d values for %d parameters", len(grad), n.size))
		}
		clear(grad)
		n.backward(grad, params, x, m)
	}
	return loss, correct
}

// Predict writes the class probabilities of m examples to out
// (m×Classes()), in chunks of at most 256 examples.
func (n *Net) Predict(out, params, x []float32, m int) {
	d, c := n.in.Size(), n.classes
	for lo := 0; lo < m; lo += 256 {
		k := min(256, m-lo)
		n.check(params, x[lo*d:], k)
		n.forward(params, x[lo*d:(lo+k)*d], k, nil, false)
		z := n.ws.acts[len(n.plans)-1][:k*c]
		softmaxCE(nil, z, nil, k, c, 0)
		copy(out[lo*c:(lo+k)*c], z)
	}
}

// PerExampleGradients sets grads (m×NumParams) to each example's loss
// gradient, for DP-SGD's per-example clipping (no dropout).
func (n *Net) PerExampleGradients(grads, params, x []float32, y []int32, m int) {
	d := n.in.Size()
	for e := range m {
		n.Loss(grads[e*n.size:(e+1)*n.size], params, x[e*d:(e+1)*d], y[e:e+1], 1, 1, nil)
	}
}

func (n *Net) check(params, x []float32, m int) {
	if len(params) != n.size {
		panic(fmt.Sprintf("nn: %d parameters, the network has %d", len(params), n.size))
	}
	if m < 1 || len(x) < m*n.in.Size() {
		panic(fmt.Sprintf("nn: %d input values for %d examples of %s", len(x), m, n.in))
	}
}

// forward runs the layers on m examples; keep holds on to what the
// backward pass reuses (the convolutions' unrolled inputs).
func (n *Net) forward(params, x []float32, m int, rng *rand.Rand, keep bool) {
	n.grow(m)
	in := x[:m*n.in.Size()]
	for i, p := range n.plans {
		out := n.ws.acts[i][:m*p.out.Size()]
		switch p.Kind {
		case Dense:
			n.be.Gemm(false, true, m, p.out.C, p.in.C, 1, host(in), p.in.C, host(params[p.w:p.w+p.wn]), p.in.C, 0, host(out), p.out.C)
			b := params[p.b : p.b+p.bn]
			for r := range m {
				row := out[r*p.bn : (r+1)*p.bn]
				for j := range row {
					row[j] += b[j]
				}
			}
		case Conv:
			var cols []float32
			if keep {
				size := m * p.in.C * p.Kernel * p.Kernel * p.out.H * p.out.W
				if len(n.ws.cols[i]) < size {
					n.ws.cols[i] = make([]float32, n.ws.m*size/m)
				}
				cols = n.ws.cols[i][:size]
			}
			n.convForward(p, params, in, out, cols, m)
		case MaxPool, AvgPool:
			pool(p, in, out, n.ws.idx[i], m)
		case Flatten:
			copy(out, in)
		case ReLU:
			for j, v := range in {
				out[j] = max(v, 0)
			}
		case Tanh:
			for j, v := range in {
				out[j] = float32(math.Tanh(float64(v)))
			}
		case GELU:
			for j, v := range in {
				out[j] = float32(0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2)))
			}
		case Dropout:
			mask := n.ws.aux[i][:len(in)]
			keep := float32(1 / (1 - p.P))
			for j, v := range in {
				mask[j] = 1
				if rng != nil {
					mask[j] = keep
					if rng.Float64() < p.P {
						mask[j] = 0
					}
				}
				out[j] = v * mask[j]
			}
		case LayerNorm:
			normForward(in, out, params[p.w:p.w+p.wn], params[p.b:p.b+p.bn], n.ws.aux[i], m, 1, p.in.Size(), 1)
		case GroupNorm:
			normForward(in, out, params[p.w:p.w+p.wn], params[p.b:p.b+p.bn], n.ws.aux[i], m, p.Groups, p.in.Size()/p.Groups, p.in.H*p.in.W)
		}
		in = out
	}
}

// backward adds ∂loss/∂params to grad, from the output's errors in
// dacts[last], back through every layer.
func (n *Net) backward(grad, params, x []float32, m int) {
	for i := len(n.plans) - 1; i >= 0; i-- {
		p := n.plans[i]
		var in []float32
		if i == 0 {
			in = x[:m*p.in.Size()]
		} else {
			in = n.ws.acts[i-1][:m*p.in.Size()]
		}
		out := n.ws.acts[i][:m*p.out.Size()]
		dout := n.ws.dacts[i][:m*p.out.Size()]
		var din []float32 // nil for the first layer: no input gradient
		if i > 0 {
			din = n.ws.dacts[i-1][:m*p.in.Size()]
		}
		switch p.Kind {
		case Dense:
			n.be.Gemm(true, false, p.out.C, p.in.C, m, 1, host(dout), p.out.C, host(in), p.in.C, 1, host(grad[p.w:p.w+p.wn]), p.in.C)
			db := grad[p.b : p.b+p.bn]
			for r := range m {
				for j, v := range dout[r*p.bn : (r+1)*p.bn] {
					db[j] += v
				}
			}
			if din != nil {
				n.be.Gemm(false, false, m, p.in.C, p.out.C, 1, host(dout), p.out.C, host(params[p.w:p.w+p.wn]), p.in.C, 0, host(din), p.in.C)
			}
		case Conv:
			n.convBackward(p, params, grad, n.ws.cols[i], dout, din, m)
		case MaxPool, AvgPool:
			if din != nil {
				poolBackward(p, dout, din, n.ws.idx[i], m)
			}
		case Flatten:
			if din != nil {
				copy(din, dout)
			}
		case ReLU:
			if din != nil {
				for j, v := range out {
					din[j] = 0
					if v > 0 {
						din[j] = dout[j]
					}
				}
			}
		case Tanh:
			if din != nil {
				for j, v := range out {
					din[j] = dout[j] * (1 - v*v)
				}
			}
		case GELU:
			if din != nil {
				for j, v := range in {
					z := float64(v)
					d := 0.5*(1+math.Erf(z/math.Sqrt2)) + z*math.Exp(-z*z/2)/math.Sqrt(2*math.Pi)
					din[j] = dout[j] * float32(d)
				}
			}
		case Dropout:
			if din != nil {
				for j, k := range n.ws.aux[i][:len(dout)] {
					din[j] = dout[j] * k
				}
			}
		case LayerNorm:
			normBackward(in, dout, din, params[p.w:p.w+p.wn], grad[p.w:p.w+p.wn], grad[p.b:p.b+p.bn], n.ws.aux[i], m, 1, p.in.Size(), 1)
		case GroupNorm:
			normBackward(in, dout, din, params[p.w:p.w+p.wn], grad[p.w:p.w+p.wn], grad[p.b:p.b+p.bn], n.ws.aux[i], m, p.Groups, p.in.Size()/p.Groups, p.in.H*p.in.W)
		}
	}
}

// softmaxCE turns m×c logits z into probabilities in place and returns
// the summed cross-entropy against y and the rows whose arg-max is y;
// with dz it writes scale·(p − onehot(y)). Without y it only normalises.
func softmaxCE(dz, z []float32, y []int32, m, c int, scale float32) (float64, int) {
	loss, correct := 0.0, 0
	for r := range m {
		row := z[r*c : (r+1)*c]
		best := 0
		mx := row[0]
		for j, v := range row {
			if v > mx {
				mx, best = v, j
			}
		}
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(float64(v - mx))
		}
		if y != nil {
			loss += math.Log(sum) - float64(row[y[r]]-mx)
			if int32(best) == y[r] {
				correct++
			}
		}
		for j, v := range row {
			row[j] = float32(math.Exp(float64(v-mx)) / sum)
		}
		if dz != nil {
			d := dz[r*c : (r+1)*c]
			for j, v := range row {
				d[j] = scale * v
			}
			d[y[r]] -= scale
		}
	}
	return loss, correct
}

func host(x []float32) compute.Tensor { return compute.Host(x) }

// parallel runs f(worker, lo, hi) over m examples split between up to
// GOMAXPROCS workers, and returns how many ran.
func parallel(m int, f func(w, lo, hi int)) int {
	k := min(runtime.GOMAXPROCS(0), m)
	if k <= 1 {
		f(0, 0, m)
		return 1
	}
	var wg sync.WaitGroup
	for w := range k {
		lo, hi := w*m/k, (w+1)*m/k
		wg.Go(func() { f(w, lo, hi) })
	}
	wg.Wait()
	return k
}
