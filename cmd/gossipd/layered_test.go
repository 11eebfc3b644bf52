//go:build !cuda

// The onnx-go runtime this test runs pulls gorgonia, whose own "cuda"
// build tag wants its CUDA bindings: the CUDA build's checks leave it out.

package main

import (
	"encoding/json"
	"math"
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
// Fashion-MNIST shards to 0.75 (7.5 times chance; alone on 2 cores they
// first reach it in about 30 s, and then wander between 0.65 and 0.8 for
// the next 40 s, so a higher mark mostly times that noise); one stops,
// and `gossipd export` writes
// its model from its store as safetensors (PyTorch's names and layouts)
// and as ONNX, which ONNX's checker accepts and an independent runtime
// (onnx-go's gorgonnx) runs on raw test images to the probabilities
// gossipd computes from the exported weights, within 1e-5.
func TestDaemonLayeredModel(t *testing.T) {
	// Not parallel: three daemons training LeNet-5 take both cores, and
	// the other real-process tests (partial views' fill-in, say) time
	// what happens while they run.
	bin := buildBinary(t)
	dir := t.TempDir()
	ds := startCluster(t, bin, dir, 3, "100ms", "--protocol", "dpsgd", "--lr", "0.1", "--model", "lenet5",
		"--dataset", "fashion-mnist", "--eval-subset", "1000", "--eval-interval", "2s")
	for _, d := range ds {
		poll(t, d, "LeNet-5 learning Fashion-MNIST (≥ 0.75)", 300*time.Second, func(s status) bool { return s.Accuracy >= 0.75 })
	}
	// Daemon 0 stops (its store keeps its model); its model is exported
	// from the store as safetensors and as ONNX.
	ds[0].cmd.Process.Signal(os.Interrupt)
	ds[0].cmd.Wait()
	store := filepath.Join(dir, "n0")
	st, ox := filepath.Join(dir, "m.safetensors"), filepath.Join(dir, "m.onnx")
	for _, out := range []string{st, ox} {
		if b, err := exec.Command(bin, "export", "--store", store, "--out", out).CombinedOutput(); err != nil {
			t.Fatalf("export %s: %v\n%s", out, err, b)
		}
	}
	sb, _ := os.ReadFile(st)
	shapes, params, meta, err := model.ReadSafetensors(sb)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shapes["0.weight"].Shape, []int{6, 1, 5, 5}) || !slices.Equal(shapes["11.weight"].Shape, []int{10, 84}) {
		t.Fatalf("exported tensors %v, want PyTorch's names and layouts", shapes)
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)", ox).CombinedOutput(); err != nil {
		t.Fatalf("onnx.checker: %v\n%s", err, out)
	}
	// gossipd's own predictions from the exported weights, on raw test
	// images scaled as the job scales them.
	var job struct {
		Model model.Spec `json:"model"`
	}
	var sc dataset.Scaler
	if err := json.Unmarshal([]byte(meta["job"]), &job); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(meta["scaler"]), &sc); err != nil {
		t.Fatal(err)
	}
	m, err := model.New(job.Model)
	if err != nil {
		t.Fatal(err)
	}
	l := m.Layout()
	flat := make([]float32, l.Size)
	for _, tn := range l.Tensors {
		copy(flat[tn.Offset:], params[tn.Name])
	}
	if err := m.SetParams(flat); err != nil {
		t.Fatal(err)
	}
	_, te, err := dataset.Open("fashion-mnist", dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	x := make([]float32, 0, n*784)
	for i := range n {
		x = append(x, te.Row(i*97)...)
	}
	scaled := &dataset.Dataset{X: slices.Clone(x), N: n, D: 784}
	sc.Transform(scaled)
	want := make([]float32, n*10)
	m.Predict(want, scaled.X, n)
	ob, _ := os.ReadFile(ox)
	backend := gorgonnx.NewGraph()
	rt := onnxgo.NewModel(backend)
	if err := rt.UnmarshalBinary(ob); err != nil {
		t.Fatal(err)
	}
	rt.SetInput(0, gtensor.New(gtensor.WithShape(n, 784), gtensor.Of(gtensor.Float32), gtensor.WithBacking(x)))
	if err := backend.Run(); err != nil {
		t.Fatal(err)
	}
	outs, err := rt.GetOutputTensors()
	if err != nil || len(outs) != 2 {
		t.Fatalf("%d outputs, %v", len(outs), err)
	}
	probs := outs[1].Data().([]float32)
	for i, w := range want {
		if math.Abs(float64(probs[i]-w)) > 1e-5 {
			t.Fatalf("image %d class %d: ONNX %v, gossipd %v", i/10, i%10, probs[i], w)
		}
	}
}
