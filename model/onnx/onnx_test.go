package onnx

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/model"
)

// models are one of each kind, and a network of every layer kind.
var models = map[string]model.Spec{
	"softmax":  {Kind: model.Softmax, Inputs: 784, Classes: 10},
	"svm":      {Kind: model.SVM, Inputs: 64, Classes: 10},
	"mlp":      {Kind: model.MLP, Inputs: 784, Hidden: []int{128, 64}, Classes: 10},
	"lenet5":   {Kind: model.Net, Inputs: 784, Classes: 10, Shape: []int{1, 28, 28}, Layers: "lenet5"},
	"leaf-cnn": {Kind: model.Net, Inputs: 784, Classes: 10, Shape: []int{1, 28, 28}, Layers: "leaf-cnn"},
	"every-layer": {Kind: model.Net, Inputs: 2 * 9 * 9, Classes: 5, Shape: []int{2, 9, 9},
		Layers: "conv:4:3:2:1,groupnorm:2,gelu,avgpool:2,conv:6:1,layernorm,tanh,maxpool:2:1,flatten,dense:7,dropout:0.5,relu,dense"},
}

// write exports each model with random parameters (and a scaler on the
// softmax) into dir and returns the files by name.
func write(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for name, spec := range models {
		m, err := model.New(spec, model.WithSeed(3))
		if err != nil {
			t.Fatal(err)
		}
		var o Options
		if name == "softmax" {
			rng := rand.New(rand.NewPCG(1, 1))
			for range spec.Inputs {
				o.Shift, o.Mul = append(o.Shift, float32(rng.Float64())), append(o.Mul, float32(1+rng.Float64()))
			}
		}
		var b bytes.Buffer
		if err := Write(&b, m.Spec(), m.Params(), o); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		files[name] = filepath.Join(dir, name+".onnx")
		if err := os.WriteFile(files[name], b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestChecker: every model kind exports as a model that ONNX's own
// checker accepts, with full shape inference, and whose inferred output
// is [N, classes] (Debian's python3-onnx, installed by .ci/run).
func TestChecker(t *testing.T) {
	files := write(t, t.TempDir())
	var script strings.Builder
	script.WriteString("import onnx, sys\nfrom onnx import shape_inference\n")
	for name, f := range files {
		fmt.Fprintf(&script, "m = onnx.load(%q)\nonnx.checker.check_model(m, full_check=True)\n", f)
		fmt.Fprintf(&script, "i = shape_inference.infer_shapes(m, strict_mode=True)\n")
		fmt.Fprintf(&script, "d = [x.dim_value or x.dim_param for x in i.graph.output[0].type.tensor_type.shape.dim]\n")
		fmt.Fprintf(&script, "print(%q, m.opset_import[0].version, d)\n", name)
	}
	out, err := exec.Command("/usr/bin/python3", "-c", script.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("onnx.checker (apt install python3-onnx): %v\n%s", err, out)
	}
	for name, spec := range models {
		want := fmt.Sprintf("%s %d ['N', %d]", name, Opset, spec.Classes)
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("checker output lacks %q:\n%s", want, out)
		}
	}
}
