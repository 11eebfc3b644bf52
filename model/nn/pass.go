package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/gossipd/gossipd/model/compute"
)

// grow makes the activation buffers hold m examples.
func (n *Net) grow(m int) {
	if m <= n.cap {
		return
	}
	n.acts, n.dacts = nil, nil
	for _, l := range n.layers {
		_, out := l.shapes()
		n.acts = append(n.acts, make([]float32, m*out.Size()))
		n.dacts = append(n.dacts, make([]float32, m*out.Size()))
	}
	n.cap = m
}

// Loss runs the network on m examples x (row-major, m×Input().Size())
// with labels y and returns the summed cross-entropy and how many it
// classifies right. With grad (NumParams values) it also sets grad to
// scale·∂loss/∂params. With rng, dropout layers drop (training);
// without, they pass values through (evaluation).
func (n *Net) Loss(grad, params, x []float32, y []int32, m int, scale float32, rng *rand.Rand) (float64, int) {
	if grad != nil && len(grad) != n.size {
		panic(fmt.Sprintf("nn: gradient of %d values for %d parameters", len(grad), n.size))
	}
	return n.run(&pass{be: n.be, params: params, grad: grad, size: n.size, m: m, rng: rng}, x, y, scale)
}

// PerExampleGradients sets grads (m×NumParams) to each example's loss
// gradient, for DP-SGD's per-example clipping (no dropout): one pass
// over the m examples, each layer writing each example's parameter
// gradient to its own row.
func (n *Net) PerExampleGradients(grads, params, x []float32, y []int32, m int) {
	if len(grads) < m*n.size {
		panic(fmt.Sprintf("nn: per-example gradients of %d values for %d×%d", len(grads), m, n.size))
	}
	n.run(&pass{be: n.be, params: params, grad: grads[:m*n.size], per: true, size: n.size, m: m}, x, y, 1)
}

// run is a forward pass and, where s has a gradient, a backward one.
func (n *Net) run(s *pass, x []float32, y []int32, scale float32) (float64, int) {
	n.check(s.params, x, s.m)
	if len(y) < s.m {
		panic(fmt.Sprintf("nn: %d labels for %d examples", len(y), s.m))
	}
	m := s.m
	n.forward(s, x)
	last := len(n.layers) - 1
	var dz []float32
	if s.grad != nil {
		dz = n.dacts[last][:m*n.classes]
	}
	loss, correct := softmaxCE(dz, n.acts[last][:m*n.classes], y, m, n.classes, scale)
	if s.grad != nil {
		clear(s.grad)
		for i := last; i >= 0; i-- {
			in, out := n.io(i, x, m)
			_, o := n.layers[i].shapes()
			var din []float32 // none for the first layer
			if i > 0 {
				din = n.dacts[i-1][:len(in)]
			}
			n.layers[i].backward(s, in, out, n.dacts[i][:m*o.Size()], din)
		}
	}
	return loss, correct
}

// io returns layer i's input and output for m examples of x.
func (n *Net) io(i int, x []float32, m int) (in, out []float32) {
	li, lo := n.layers[i].shapes()
	if i == 0 {
		in = x[:m*li.Size()]
	} else {
		in = n.acts[i-1][:m*li.Size()]
	}
	return in, n.acts[i][:m*lo.Size()]
}

func (n *Net) forward(s *pass, x []float32) {
	n.grow(s.m)
	for i, l := range n.layers {
		in, out := n.io(i, x, s.m)
		l.forward(s, in, out)
	}
}

// Predict writes the class probabilities of m examples to out
// (m×Classes()), in chunks of at most 256 examples.
func (n *Net) Predict(out, params, x []float32, m int) {
	d, c := n.in.Size(), n.classes
	for lo := 0; lo < m; lo += 256 {
		k := min(256, m-lo)
		n.check(params, x[lo*d:], k)
		n.forward(&pass{be: n.be, params: params, size: n.size, m: k}, x[lo*d:(lo+k)*d])
		z := n.acts[len(n.layers)-1][:k*c]
		softmaxCE(nil, z, nil, k, c, 0)
		copy(out[lo*c:(lo+k)*c], z)
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
// GOMAXPROCS workers.
func parallel(m int, f func(w, lo, hi int)) {
	k := min(runtime.GOMAXPROCS(0), m)
	if k <= 1 {
		f(0, 0, m)
		return
	}
	var wg sync.WaitGroup
	for w := range k {
		lo, hi := w*m/k, (w+1)*m/k
		wg.Go(func() { f(w, lo, hi) })
	}
	wg.Wait()
}
