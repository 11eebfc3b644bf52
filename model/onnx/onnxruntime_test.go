package onnx

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/model"
)

// onnxruntimePython is a Python that imports onnxruntime: python3 on
// $PATH (a virtual environment's, where one is active), else Debian's;
// "" where neither has it (PyPI, its only source, is out of reach of the
// CI machines; the lent GPU machines have it).
func onnxruntimePython() string {
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import onnxruntime").Run() == nil {
			return p
		}
	}
	return ""
}

// TestONNXRuntime runs every exported model kind (the softmax with its
// scaler; the SVM's scores; the MLP; LeNet-5, the LEAF CNN and the
// network of every layer kind) in onnxruntime, where it is installed,
// and wants its logits within 1e-4 of gossipd's (to max(1, |logit|);
// log-probabilities for the models with probabilities, centred per
// example) and its probabilities within 1e-5. Where onnxruntime is not
// installed it says so and checks nothing; TestRuntime checks with a pure-Go
// runtime everywhere.
func TestONNXRuntime(t *testing.T) {
	py := onnxruntimePython()
	if py == "" {
		t.Log("not run: onnxruntime is not installed here (TestRuntime checks the models with onnx-go's runtime)")
		return
	}
	dir := t.TempDir()
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range models {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			const n = 4
			spec := models[name]
			m, onnxFile, raw, scaled := exported(t, name, n, rand.New(rand.NewPCG(9, 10)))
			file, in, out := filepath.Join(dir, name+".onnx"), filepath.Join(dir, name+".in"), filepath.Join(dir, name+".out")
			var xb bytes.Buffer
			binary.Write(&xb, binary.LittleEndian, raw)
			if err := os.WriteFile(file, onnxFile, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(in, xb.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			script := `import sys, numpy as np, onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
x = np.fromfile(sys.argv[2], dtype="<f4").reshape(int(sys.argv[4]), -1)
outs = s.run(None, {"input": x})
np.concatenate([o.astype("<f4").ravel() for o in outs]).tofile(sys.argv[3])
print(ort.__version__, [o.name for o in s.get_outputs()])`
			res, err := exec.Command(py, "-c", script, file, in, out, "4").CombinedOutput()
			if err != nil {
				t.Fatalf("onnxruntime: %v\n%s", err, res)
			}
			t.Logf("onnxruntime %s", bytes.TrimSpace(res))
			ob, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(ob)/4)
			binary.Read(bytes.NewReader(ob), binary.LittleEndian, got)
			C := spec.Classes
			want := make([]float32, n*C)
			m.Predict(want, scaled, n)
			if spec.Kind == model.SVM {
				if len(got) != n*C {
					t.Fatalf("%d outputs, want the %d scores", len(got), n*C)
				}
				for i := range want {
					if math.Abs(float64(got[i]-want[i])) > 1e-4*max(1, math.Abs(float64(want[i]))) {
						t.Fatalf("score %d: %v, gossipd %v", i, got[i], want[i])
					}
				}
				return
			}
			if len(got) != 2*n*C {
				t.Fatalf("%d outputs, want logits and probabilities (%d each)", len(got), n*C)
			}
			logits, probs := got[:n*C], got[n*C:]
			for r := range n {
				for c := range C {
					i := r*C + c
					if d := math.Abs(float64(probs[i] - want[i])); d > 1e-5 {
						t.Fatalf("example %d class %d: probability %v, gossipd %v", r, c, probs[i], want[i])
					}
					g := float64(logits[i] - logits[r*C])
					ref := math.Log(float64(want[i])) - math.Log(float64(want[r*C]))
					if math.Abs(g-ref) > 1e-4*max(1, math.Abs(ref)) {
						t.Fatalf("example %d class %d: logit %.6g, gossipd %.6g (relative to class 0)", r, c, g, ref)
					}
				}
			}
		})
	}
}
