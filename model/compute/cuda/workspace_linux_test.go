//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"context"
	"testing"

	"github.com/gossipd/gossipd/model"
)

// TestWorkspace: the backend gives cuBLAS a workspace of its own, of the
// size NVIDIA recommends for the GPU, counted with its device memory. It
// gives it again after every cublasSetStream, which takes it back to
// cuBLAS's pool: the emulated cuBLAS fails a test on a GEMM captured
// without one, and cuBLAS works in it after training whose steps were
// captured and replayed. Close frees it. A cuBLAS without
// cublasSetWorkspace works in its own, and steps are recorded all the
// same.
func TestWorkspace(t *testing.T) {
	for major, want := range map[int]uintptr{7: 4 << 20, 8: 4 << 20, 9: 32 << 20, 12: 32 << 20} {
		if got := workspaceBytes(major); got != want {
			t.Errorf("compute capability %d.x: a workspace of %d bytes, want %d", major, got, want)
		}
	}
	for _, noAPI := range []bool{false, true} {
		e := newEmulator(t)
		e.noWorkspaceAPI = noAPI
		b, err := newBackend(Device{Name: "emulated GPU", Major: 8}, e.api(), e.blas(), []build{image("PTX emulated", "PTX")})
		if err != nil {
			t.Fatal(err)
		}
		ws, bytes := b.workspace.p, int64(4<<20)
		if noAPI {
			bytes = 0
		}
		if inUse, _ := b.DeviceMemory(); (ws == 0) != noAPI || inUse != bytes || e.blasWorkspace != ws {
			t.Fatalf("no cublasSetWorkspace %v: workspace at %#x, %d bytes counted (want %d); cuBLAS works in %#x",
				noAPI, ws, inUse, bytes, e.blasWorkspace)
		}
		x, y := waitData(40, 12, 3)
		m, err := model.New(model.Spec{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 3}, model.WithBackend(b))
		if err != nil {
			t.Fatal(err)
		}
		opt, _ := model.NewOptimizer(model.OptimizerConfig{Name: "sgd", LR: 0.1})
		res, err := model.Train(context.Background(), m, opt, x, y, 40, model.TrainConfig{Epochs: 1, Batch: 4}, nil) // 10 steps: 1 plain, 4 captured, 5 replayed
		if err != nil || res.Graphs == nil || res.Graphs.Replayed == 0 {
			t.Fatalf("no cublasSetWorkspace %v: training: %v, graphs %+v", noAPI, err, res.Graphs)
		}
		if e.blasStream != 0 || e.blasWorkspace != ws {
			t.Fatalf("no cublasSetWorkspace %v: after training cuBLAS queues on stream %#x in workspace %#x, want 0 and %#x",
				noAPI, e.blasStream, e.blasWorkspace, ws)
		}
		m.Close()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if len(e.bufs) != 0 {
			t.Fatalf("no cublasSetWorkspace %v: %d device buffers after Close", noAPI, len(e.bufs))
		}
	}
}
