package onnx

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	onnxgo "github.com/owulveryck/onnx-go"
	"github.com/owulveryck/onnx-go/backend/x/gorgonnx"
	gtensor "gorgonia.org/tensor"

	"github.com/gossipd/gossipd/model"
)

// TestRuntime runs the exported softmax (with its scaler), MLP, LeNet-5
// and LEAF CNN in an independent ONNX runtime, onnx-go's gorgonnx
// backend (pure Go; a test dependency only), and checks its logits and
// probabilities against gossipd's own predictions: probabilities within
// 1e-5, logits (as log-probabilities) within 1e-4. Its operators do not
// cover the rest of the every-layer model (AveragePool, Erf,
// ReduceMean): TestChecker checks that one with ONNX's checker and shape
// inference.
func TestRuntime(t *testing.T) {
	for _, name := range []string{"softmax", "mlp", "lenet5", "leaf-cnn"} {
		t.Run(name, func(t *testing.T) {
			const n = 3
			spec := models[name]
			m, file, raw, scaled := exported(t, name, n, rand.New(rand.NewPCG(7, 8)))
			backend := gorgonnx.NewGraph()
			rt := onnxgo.NewModel(backend)
			if err := rt.UnmarshalBinary(file); err != nil {
				t.Fatal(err)
			}
			rt.SetInput(0, gtensor.New(gtensor.WithShape(n, spec.Inputs), gtensor.Of(gtensor.Float32), gtensor.WithBacking(raw)))
			if err := backend.Run(); err != nil {
				t.Fatal(err)
			}
			outs, err := rt.GetOutputTensors()
			if err != nil || len(outs) != 2 {
				t.Fatalf("%d outputs, %v", len(outs), err)
			}
			// gorgonnx's Softmax writes over its input, which is also
			// the logits output: the logits are compared through the
			// probabilities, as log-probabilities (logits up to a
			// constant per example).
			probs := outs[1].Data().([]float32)
			if len(outs[0].Data().([]float32)) != n*spec.Classes {
				t.Fatalf("logits of shape %v", outs[0].Shape())
			}
			want := make([]float32, n*spec.Classes)
			m.Predict(want, scaled, n)
			C := spec.Classes
			for r := range n {
				for c := range C {
					i := r*C + c
					if d := math.Abs(float64(probs[i] - want[i])); d > 1e-5 {
						t.Fatalf("example %d class %d: probability %v, gossipd %v", r, c, probs[i], want[i])
					}
					got := math.Log(float64(probs[i])) - math.Log(float64(probs[r*C]))
					ref := math.Log(float64(want[i])) - math.Log(float64(want[r*C]))
					if math.Abs(got-ref) > 1e-4*max(1, math.Abs(ref)) {
						t.Fatalf("example %d class %d: logit %.6g, gossipd %.6g (relative to class 0)", r, c, got, ref)
					}
				}
			}
		})
	}
}

// exported returns the model name of models (seed 5) exported as ONNX,
// n rows of raw features in [0, 1) and the same rows as the model takes
// them: the softmax's export carries a random feature scaler, which the
// ONNX graph applies to raw features.
func exported(t *testing.T, name string, n int, rng *rand.Rand) (m *model.Model, file []byte, raw, scaled []float32) {
	t.Helper()
	spec := models[name]
	m, err := model.New(spec, model.WithSeed(5))
	if err != nil {
		t.Fatal(err)
	}
	raw = make([]float32, n*spec.Inputs)
	for i := range raw {
		raw[i] = float32(rng.Float64())
	}
	scaled = slices.Clone(raw)
	var o Options
	if name == "softmax" {
		for range spec.Inputs {
			o.Shift, o.Mul = append(o.Shift, float32(rng.Float64())), append(o.Mul, float32(0.5+rng.Float64()))
		}
		for i, v := range raw {
			j := i % spec.Inputs
			scaled[i] = (v - o.Shift[j]) * o.Mul[j]
		}
	}
	var b bytes.Buffer
	if err := Write(&b, m.Spec(), m.Params(), o); err != nil {
		t.Fatal(err)
	}
	return m, b.Bytes(), raw, scaled
}
