package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
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
