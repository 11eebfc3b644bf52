package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/dataset"
)

// TestInitFromPyTorch: weights PyTorch initialised and saved
// (testdata/torch_init.py) load onto the same layered model, which then
// computes PyTorch's logits; a file of another shape, with a tensor
// missing or extra, or damaged, is refused naming what is wrong.
func TestInitFromPyTorch(t *testing.T) {
	b, err := os.ReadFile("testdata/torch_init.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Spec   string    `json:"spec"`
		Logits []float64 `json:"logits"`
	}
	j, _ := os.ReadFile("testdata/torch_init.json")
	if err := json.Unmarshal(j, &want); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Kind: Net, Inputs: 64, Classes: 10, Shape: []int{1, 8, 8}, Layers: want.Spec}
	l, err := LayoutOf(spec)
	if err != nil {
		t.Fatal(err)
	}
	params, err := InitFrom(b, l)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := New(spec)
	if err := m.SetParams(params); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 4*64)
	for i := range x {
		x[i] = float32(math.Cos(0.37*float64(i) + 0.1))
	}
	probs := make([]float32, 4*10)
	m.Predict(probs, x, 4)
	for r := range 4 {
		for c := range 10 {
			got := math.Log(float64(probs[r*10+c])) - math.Log(float64(probs[r*10]))
			if w := want.Logits[r*10+c] - want.Logits[r*10]; math.Abs(got-w) > 1e-5 {
				t.Fatalf("example %d class %d: logit %.7g (relative to class 0), PyTorch %.7g", r, c, got, w)
			}
		}
	}
	h := ParamsHash(params)
	params[7] += 1e-6
	if len(h) != 64 || ParamsHash(params) == h {
		t.Fatalf("hash %q does not identify the weights", h)
	}

	other := spec
	other.Layers = strings.Replace(want.Spec, "dense:32", "dense:16", 1)
	lo, _ := LayoutOf(other)
	if _, err := InitFrom(b, lo); !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "tensor 4.weight is [32 128] in the file, the model needs [16 128]") {
		t.Errorf("another shape: %v", err)
	}
	shifted := spec // one more layer: the dense layers' indices move
	shifted.Layers = strings.Replace(want.Spec, "flatten,", "flatten,relu,", 1)
	ls, _ := LayoutOf(shifted)
	if _, err := InitFrom(b, ls); !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "lacks 5.weight[32 128], 5.bias[32], 7.weight[10 32], 7.bias[10] and has 4.bias, 4.weight, 6.bias, 6.weight the model does not") {
		t.Errorf("other names: %v", err)
	}
	if _, err := InitFrom(b[:len(b)-4], l); !errors.Is(err, ErrSafetensors) {
		t.Errorf("a truncated file: %v", err)
	}
	if _, err := InitFrom(bytes.Repeat([]byte{0xff}, 64), l); !errors.Is(err, ErrSafetensors) {
		t.Errorf("garbage: %v", err)
	}
}

// TestInitFromPyTorchLeNet5: LeNet-5 trained by PyTorch
// (testdata/torch_lenet5.py) loads by --init-from's mapping, and gossipd's
// first evaluation of it on the Fashion-MNIST test split, scaled as the
// daemon scales it ("global": ·1/255), equals PyTorch's: the same
// accuracy and the same class for every image.
func TestInitFromPyTorchLeNet5(t *testing.T) {
	var want struct {
		Correct     int     `json:"correct"`
		Accuracy    float64 `json:"accuracy"`
		Predictions []int32 `json:"predictions"`
	}
	b, _ := os.ReadFile("testdata/torch_lenet5.json")
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	tr, te, err := dataset.Open("fashion-mnist", dataset.OpenOptions{})
	if err != nil {
		t.Fatalf("%v (apt-get install dataset-fashion-mnist)", err)
	}
	sc, err := dataset.FitScaler("global", tr)
	if err != nil {
		t.Fatal(err)
	}
	sc.Transform(te)
	spec := Spec{Kind: Net, Inputs: 784, Classes: 10, Shape: []int{1, 28, 28}, Layers: "lenet5"}
	p, err := InitFromFile("testdata/torch_lenet5.safetensors", spec)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := New(spec)
	if err := m.SetParams(p); err != nil {
		t.Fatal(err)
	}
	got := m.Evaluate(te.X, te.Y, te.N)
	if got.Accuracy != want.Accuracy {
		t.Errorf("accuracy %.4f, PyTorch's %.4f", got.Accuracy, want.Accuracy)
	}
	probs := make([]float32, te.N*10)
	m.Predict(probs, te.X, te.N)
	differ := 0
	for i := range te.N {
		if int32(argmax(probs[i*10:(i+1)*10])) != want.Predictions[i] {
			differ++
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d images classed otherwise than by PyTorch", differ, te.N)
	}
}
