package nn

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/model/compute"
)

// vectors is testdata/torch_vectors.json, written by torch_vectors.py.
type vectors struct {
	Torch string `json:"torch"`
	Cases []struct {
		Name       string      `json:"name"`
		Spec       string      `json:"spec"`
		Input      [3]int      `json:"input"`
		Classes    int         `json:"classes"`
		Examples   int         `json:"examples"`
		Params     []string    `json:"params"`
		Sizes      []int       `json:"sizes"`
		Shapes     [][]int     `json:"shapes"`
		Logits     []float64   `json:"logits"`
		Loss       float64     `json:"loss"`
		Index      []int       `json:"index"`
		Grad       []float64   `json:"grad"`
		PerExample [][]float64 `json:"per_example"`
	} `json:"cases"`
}

// paramsFor fills the network's parameters as torch_vectors.py's params
// does: tensor k's value j is sin(1 + 0.7·j + 0.3·k)/√fan-in
// (normalisations: weights 1 + 0.1·sin, biases 0.1·sin).
func paramsFor(n *Net) []float32 {
	p := make([]float32, n.NumParams())
	for k, t := range n.Params() {
		for j := range t.Size() {
			s := math.Sin(1 + 0.7*float64(j) + 0.3*float64(k))
			switch {
			case t.FanIn > 0:
				p[t.Off+j] = float32(s / math.Sqrt(float64(t.FanIn)))
			case t.Name[len(t.Name)-6:] == "weight":
				p[t.Off+j] = float32(1 + 0.1*s)
			default:
				p[t.Off+j] = float32(0.1 * s)
			}
		}
	}
	return p
}

// inputsFor returns m examples as torch_vectors.py's inputs does, and
// their labels.
func inputsFor(n *Net, m int) ([]float32, []int32) {
	x := make([]float32, m*n.Input().Size())
	for j := range x {
		x[j] = float32(math.Cos(0.37*float64(j) + 0.1))
	}
	y := make([]int32, m)
	for e := range y {
		y[e] = int32((7*e + 3) % n.Classes())
	}
	return x, y
}

// Tolerances against PyTorch's float64 results: the Go code computes in
// float32 (sums of products in its GEMM kernels' order), so each value
// may differ by a few float32 roundings of the largest value it sums.
const (
	logitTol = 2e-5 // of max(1, |largest logit|)
	gradTol  = 1e-4 // of max(1e-3, the case's largest |gradient|)
)

// near reports the worst |got − want| relative to scale.
func worst(got []float32, want []float64, idx []int) (float64, int) {
	w, at := 0.0, -1
	for i, v := range want {
		j := i
		if idx != nil {
			j = idx[i]
		}
		if d := math.Abs(float64(got[j]) - v); d > w {
			w, at = d, j
		}
	}
	return w, at
}

func maxAbs(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	return m
}

// TestAgainstPyTorch checks every layer kind and the presets against
// PyTorch: logits, mean loss, its gradient and each example's gradient,
// on every kernel set this machine has (the GEMMs dispatch on CPU
// features) and the pure-Go one. device_test.go runs the same on the
// emulated device.
func TestAgainstPyTorch(t *testing.T) {
	for _, kernel := range kernels() {
		t.Run(kernel, func(t *testing.T) { CheckAgainstPyTorch(t, compute.NewCPU(compute.WithKernel(kernel))) })
	}
}

// CheckAgainstPyTorch runs the PyTorch vectors on a backend.
func CheckAgainstPyTorch(t *testing.T, be compute.Backend) {
	b, err := os.ReadFile("testdata/torch_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Cases) < 14 {
		t.Fatalf("%d cases, want every layer kind and both presets", len(v.Cases))
	}
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			spec, err := Parse(c.Spec)
			if err != nil {
				t.Fatal(err)
			}
			n, err := Build(spec, Shape{c.Input[0], c.Input[1], c.Input[2]}, c.Classes, be)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Free()
			var names []string
			var sizes []int
			for _, p := range n.Params() {
				names, sizes = append(names, p.Name), append(sizes, p.Size())
			}
			if !slices.Equal(names, c.Params) || !slices.Equal(sizes, c.Sizes) {
				t.Fatalf("parameters %v of %v, PyTorch's state_dict %v of %v", names, sizes, c.Params, c.Sizes)
			}
			for i, p := range n.Params() {
				if !slices.Equal(p.Shape, c.Shapes[i]) {
					t.Fatalf("%s has shape %v, PyTorch's %v", p.Name, p.Shape, c.Shapes[i])
				}
			}
			params := be.Load(paramsFor(n))
			defer be.Free(params)
			xs, y := inputsFor(n, c.Examples)
			x := be.Load(xs)
			defer be.Free(x)
			m := c.Examples
			probs := make([]float32, m*c.Classes)
			// Logits: the log of Predict's probabilities, up to a
			// constant per row; compare the centred rows.
			n.Predict(probs, params, x, m)
			for r := range m {
				got, want := make([]float64, c.Classes), c.Logits[r*c.Classes:(r+1)*c.Classes]
				for j := range got {
					got[j] = math.Log(float64(probs[r*c.Classes+j])) - math.Log(float64(probs[r*c.Classes]))
					if d := math.Abs(got[j] - (want[j] - want[0])); d > logitTol*max(1, maxAbs(want)) {
						t.Fatalf("example %d logit %d: got %.7g, PyTorch %.7g (relative to logit 0)", r, j, got[j], want[j]-want[0])
					}
				}
			}
			gt := be.Alloc(n.NumParams())
			defer be.Free(gt)
			loss, _ := n.Loss(gt, params, x, y, m, 1/float32(m), nil)
			if d := math.Abs(loss/float64(m) - c.Loss); d > logitTol*max(1, c.Loss) {
				t.Fatalf("mean loss %.7g, PyTorch %.7g", loss/float64(m), c.Loss)
			}
			grad := make([]float32, n.NumParams())
			be.Store(grad, gt)
			scale := max(1e-3, maxAbs(c.Grad))
			if w, at := worst(grad, c.Grad, c.Index); w > gradTol*scale {
				t.Fatalf("gradient off by %.3g at %d (%s), tolerance %.3g", w, at, paramAt(n, at), gradTol*scale)
			}
			pt := be.Alloc(m * n.NumParams())
			defer be.Free(pt)
			n.PerExampleGradients(pt, params, x, y, m)
			per := make([]float32, m*n.NumParams())
			be.Store(per, pt)
			for e := range m {
				scale := max(1e-3, maxAbs(c.PerExample[e]))
				if w, at := worst(per[e*n.NumParams():(e+1)*n.NumParams()], c.PerExample[e], c.Index); w > gradTol*scale {
					t.Fatalf("example %d's gradient off by %.3g at %d (%s)", e, w, at, paramAt(n, at))
				}
			}
		})
	}
}

// paramAt names the tensor holding flat index i.
func paramAt(n *Net, i int) string {
	for _, p := range n.Params() {
		if i >= p.Off && i < p.Off+p.Size() {
			return p.Name
		}
	}
	return "?"
}

// kernels lists the kernel sets to test: the one chosen for this
// machine and the pure-Go one.
func kernels() []string {
	k := compute.NewCPU().Kernel()
	if k == "go" {
		return []string{"go"}
	}
	return []string{k, "go"}
}
