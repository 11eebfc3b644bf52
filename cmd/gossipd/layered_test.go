package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	onnxgo "github.com/owulveryck/onnx-go"
	"github.com/owulveryck/onnx-go/backend/x/gorgonnx"
	gtensor "gorgonia.org/tensor"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/model"
)

// TestDaemonLayeredModel: three real daemons train LeNet-5 by D-PSGD on
// Fashion-MNIST shards to 0.85; one, left alone and paused so that its
// model holds still, hands out its weights under PyTorch's names
// (GET /model) and as ONNX (GET /model?format=onnx), which ONNX's
// checker accepts and an independent runtime (onnx-go's gorgonnx) runs
// on raw test images to the probabilities its POST /predict gives.
func TestDaemonLayeredModel(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ds := startCluster(t, bin, t.TempDir(), 3, "100ms", "--protocol", "dpsgd", "--lr", "0.1", "--model", "lenet5",
		"--dataset", "fashion-mnist", "--eval-subset", "1000", "--eval-interval", "2s")
	for _, d := range ds {
		poll(t, d, "LeNet-5 learning Fashion-MNIST (≥ 0.85)", 300*time.Second, func(s status) bool { return s.Accuracy >= 0.85 })
	}
	for _, d := range ds[1:] {
		d.cmd.Process.Kill()
		d.cmd.Wait()
	}
	d := ds[0]
	get := func(method, path string, body []byte) []byte {
		t.Helper()
		c := http.Client{Timeout: 30 * time.Second}
		req, _ := http.NewRequest(method, "http://"+d.api+path, bytes.NewReader(body))
		if d.token != "" {
			req.Header.Set("Authorization", "Bearer "+d.token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s, %v", method, path, resp.StatusCode, b, err)
		}
		return b
	}
	get("POST", "/pause", nil)
	shapes, _, _, err := model.ReadSafetensors(get("GET", "/model", nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shapes["0.weight"].Shape, []int{6, 1, 5, 5}) || !slices.Equal(shapes["11.weight"].Shape, []int{10, 84}) {
		t.Fatalf("/model tensors %v, want PyTorch's names and layouts", shapes)
	}
	onnxFile := filepath.Join(t.TempDir(), "lenet5.onnx")
	ob := get("GET", "/model?format=onnx", nil)
	if err := os.WriteFile(onnxFile, ob, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)", onnxFile).CombinedOutput(); err != nil {
		t.Fatalf("onnx.checker: %v\n%s", err, out)
	}
	// Raw test images, as a client sends them.
	_, te, err := dataset.Open("fashion-mnist", dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = te.Row(i * 97)
	}
	body, _ := json.Marshal(map[string]any{"instances": rows})
	var pred struct {
		Predictions []struct {
			Probabilities []float32 `json:"probabilities"`
		} `json:"predictions"`
	}
	if err := json.Unmarshal(get("POST", "/predict", body), &pred); err != nil || len(pred.Predictions) != n {
		t.Fatalf("/predict: %d predictions, %v", len(pred.Predictions), err)
	}
	backend := gorgonnx.NewGraph()
	rt := onnxgo.NewModel(backend)
	if err := rt.UnmarshalBinary(ob); err != nil {
		t.Fatal(err)
	}
	x := slices.Concat(rows...)
	rt.SetInput(0, gtensor.New(gtensor.WithShape(n, 784), gtensor.Of(gtensor.Float32), gtensor.WithBacking(x)))
	if err := backend.Run(); err != nil {
		t.Fatal(err)
	}
	outs, err := rt.GetOutputTensors()
	if err != nil || len(outs) != 2 {
		t.Fatalf("%d outputs, %v", len(outs), err)
	}
	probs := outs[1].Data().([]float32)
	for i, p := range pred.Predictions {
		for c, want := range p.Probabilities {
			if got := probs[i*10+c]; math.Abs(float64(got-want)) > 1e-4 {
				t.Fatalf("image %d class %d: ONNX %v, /predict %v", i, c, got, want)
			}
		}
	}
}
