//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"slices"
	"testing"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// TestStageRing: small uploads go through the page-locked ring without
// waiting for the stream, and the ring is reused only after the stream
// has run: ten gathers of 40,000 rows each (160 KB of indices, 1.6 MB
// in all) queued without a synchronisation between them all come out
// right on the emulated device, whose stream runs only when the host
// waits, and the ring wrapped.
func TestStageRing(t *testing.T) {
	b := emulatedBackend(t)
	const rows, cols = 50_000, 1
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(i)
	}
	st := b.Load(src)
	const n = 40_000
	dsts := make([]compute.Tensor, 10)
	for k := range dsts {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = (7*i + 13*k) % rows
		}
		dsts[k] = b.Alloc(n * cols)
		b.GatherRows(dsts[k], st, idx, cols, cols)
	}
	if b.stage.wraps == 0 {
		t.Fatalf("1.6 MB through a %d-byte ring did not wrap", ringBytes)
	}
	for k, d := range dsts {
		got := make([]float32, n)
		b.Store(got, d)
		want := make([]float32, n)
		for i := range want {
			want[i] = float32((7*i + 13*k) % rows)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("gather %d: the rows came from indices overwritten before the device read them", k)
		}
	}
}

// TestStepWaitsOnce: a training step of every model waits for the GPU
// once, to read its loss (twice for the SVM, whose loss adds λ/2·‖W‖²): its
// minibatch's indices and labels go through the ring, in stream order (a
// copy from pageable memory would wait for the stream before each).
func TestStepWaitsOnce(t *testing.T) {
	b, e := emulated(t)
	const d, classes, n, batch = 20, 4, 64, 8
	x := make([]float32, n*d)
	y := make([]int32, n)
	for i := range x {
		x[i] = float32(i%11) * 0.1
	}
	for i := range y {
		y[i] = int32(i % classes)
	}
	xt := b.Load(x)
	for _, spec := range []model.Spec{{Kind: model.Softmax, Inputs: d, Classes: classes}, {Kind: model.SVM, Inputs: d, Classes: classes},
		{Kind: model.MLP, Inputs: d, Hidden: []int{16, 8}, Classes: classes}} {
		m, err := model.New(spec, model.WithBackend(b))
		if err != nil {
			t.Fatal(err)
		}
		rows := []int{3, 9, 27, 1, 0, 63, 40, 41}
		m.SGDStepRowsOn(xt, rows, y[:batch], 0.1) // sizes the buffers
		before := e.syncs
		m.SGDStepRowsOn(xt, rows, y[:batch], 0.1)
		want := 1
		if spec.Kind == model.SVM {
			want = 2
		}
		if waits := e.syncs - before; waits != want {
			t.Errorf("%v: a training step waited for the stream %d times, want %d (its loss)", spec, waits, want)
		}
		m.Close()
	}
}
