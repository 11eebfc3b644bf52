//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"context"
	"slices"
	"testing"
	"unsafe"

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

// waitData is n examples of d features and their labels (of classes) for
// the tests that count waits.
func waitData(n, d, classes int) ([]float32, []int32) {
	x := make([]float32, n*d)
	y := make([]int32, n)
	for i := range x {
		x[i] = float32(i%11) * 0.1
	}
	for i := range y {
		y[i] = int32(i % classes)
	}
	return x, y
}

// TestStepWaitsOnce: a training step of every model waits for the GPU
// once, to read its loss (twice for the SVM, whose loss adds λ/2·‖W‖²): its
// minibatch's indices and labels go through the ring, in stream order (a
// copy from pageable memory would wait for the stream before each).
func TestStepWaitsOnce(t *testing.T) {
	b, e := emulated(t)
	const d, classes, n, batch = 20, 4, 64, 8
	x, y := waitData(n, d, classes)
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

// TestEpochWaitsOnce: model.Train on the GPU waits for it once an epoch,
// to read the loss summed on the device: the steps (softmax, SVM, MLP;
// the fused step, and a gradient and optimizer step with momentum) only
// queue work. Two more epochs wait exactly twice more; the first run
// waits only to load the data and read its loss. The steps are queued
// call by call (NoGraphs): a replayed step (TestStepGraph) waits, by
// design, for the launch four steps before it, which the emulated GPU,
// running its stream only when the host waits, has always yet to run.
func TestEpochWaitsOnce(t *testing.T) {
	b, e := emulated(t)
	const d, classes, n = 20, 4, 40
	x, y := waitData(n, d, classes)
	for _, spec := range []model.Spec{{Kind: model.Softmax, Inputs: d, Classes: classes}, {Kind: model.SVM, Inputs: d, Classes: classes, Lambda: 0.01},
		{Kind: model.MLP, Inputs: d, Hidden: []int{16, 8}, Classes: classes}} {
		opts := []model.OptimizerConfig{{Name: "sgd", LR: 0.1}}
		if spec.Kind == model.MLP {
			opts = append(opts, model.OptimizerConfig{Name: "sgd", LR: 0.1, Momentum: 0.9})
		}
		for _, oc := range opts {
			waits := func(epochs int) (int, float64) {
				m, err := model.New(spec, model.WithBackend(b), model.WithSeed(3))
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				opt, err := model.NewOptimizer(oc)
				if err != nil {
					t.Fatal(err)
				}
				before := e.syncs
				res, err := model.Train(context.Background(), m, opt, x, y, n, model.TrainConfig{Epochs: epochs, Batch: 8, Seed: 1, NoGraphs: true}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return e.syncs - before, res.Loss
			}
			one, loss := waits(1)
			three, _ := waits(3)
			if three-one != 2 || one > 2 {
				t.Errorf("%v %s: training waited %d times for 1 epoch of 5 steps and %d for 3, want at most 2 (the data, the loss) and 2 more",
					spec.Kind, oc.Name, one, three)
			}
			if !(loss > 0) {
				t.Errorf("%v %s: loss %v", spec.Kind, oc.Name, loss)
			}
		}
	}
}

// TestStepGathersOnce: a training step through rows on the GPU gathers
// its minibatch once (compute.GathersOnce) and reads it in both GEMMs:
// one gather launch and two uploads (the indices, the labels), not a
// gather and an upload of the indices for each GEMM. The pairs of
// kernels that compute.Fused joins take one launch each (the hidden
// activations' copy and ReLU; each layer's bias sums and step), so the
// MLP's step is 15 calls: 8 kernels, 5 GEMMs and the 2 uploads.
func TestStepGathersOnce(t *testing.T) {
	e := newEmulator(t)
	a, bl := e.api(), e.blas()
	counts := map[string]int{}
	launch := a.launch
	a.launch = func(fn uintptr, gx, gy, gz, bx, by, bz, sh uint32, st uintptr, params, extra unsafe.Pointer) int32 {
		counts[e.fns[fn-1]]++
		return launch(fn, gx, gy, gz, bx, by, bz, sh, st, params, extra)
	}
	upload := a.htodAsync
	a.htodAsync = func(d uint64, s unsafe.Pointer, n uintptr, st uintptr) int32 {
		counts["upload"]++
		return upload(d, s, n, st)
	}
	dtod := a.dtod
	a.dtod = func(d, s uint64, n uintptr) int32 {
		counts["device copy"]++
		return dtod(d, s, n)
	}
	sgemm := bl.sgemm
	bl.sgemm = func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, pa uint64, lda int32, pb uint64, ldb int32, beta *float32, pc uint64, ldc int32) int32 {
		counts["sgemm"]++
		return sgemm(h, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
	}
	b, err := newBackend(Device{Name: "emulated GPU", Major: 9}, a, bl, []build{image("PTX emulated", "PTX")})
	if err != nil {
		t.Fatal(err)
	}
	const d, classes, n = 20, 4, 64
	x, y := waitData(n, d, classes)
	xt := b.Load(x)
	m, err := model.New(model.Spec{Kind: model.MLP, Inputs: d, Hidden: []int{16}, Classes: classes}, model.WithBackend(b))
	if err != nil {
		t.Fatal(err)
	}
	rows := []int{3, 9, 27, 1, 0, 63, 40, 41}
	m.SGDStepRowsOn(xt, rows, y[:8], 0.1) // sizes the buffers
	clear(counts)
	m.SGDStepRowsOn(xt, rows, y[:8], 0.1)
	if counts["gather_rows"] != 1 || counts["upload"] != 2 || counts["sgemm"] != 5 {
		t.Errorf("one step: %d gathers, %d uploads, %d GEMMs; want 1, 2 and 5 (%v)", counts["gather_rows"], counts["upload"], counts["sgemm"], counts)
	}
	calls := 0
	for _, c := range counts {
		calls += c
	}
	if calls != 15 || counts["relu_into"] != 1 || counts["column_sums_axpby"] != 2 {
		t.Errorf("one step: %d calls, want 15 (the fused kernels once for the activations, once per layer's bias: %v)", calls, counts)
	}
	t.Logf("one step of an MLP 20-16-4 queues %v", counts)
}

// TestStageRingGrows: an upload larger than a quarter of the ring (a
// batch's minibatch indices, hundreds of kilobytes) grows the ring instead
// of copying from pageable memory, which waits for the stream: ten gathers
// of 100,000 rows each (400 KB of indices apiece) queued one after the
// other wait for the stream only when the ring grows or wraps, and all
// come out right on the emulated device, whose stream runs only when the
// host waits.
func TestStageRingGrows(t *testing.T) {
	b, e := emulated(t)
	const rows, n = 120_000, 100_000
	src := make([]float32, rows)
	for i := range src {
		src[i] = float32(i)
	}
	st := b.Load(src)
	before, wraps := e.syncs, b.stage.wraps
	dsts := make([]compute.Tensor, 10)
	for k := range dsts {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = (7*i + 13*k) % rows
		}
		dsts[k] = b.Alloc(n)
		b.GatherRows(dsts[k], st, idx, 1, 1)
	}
	if b.stage.grows != 1 || b.stage.size != 2<<20 {
		t.Fatalf("400 KB uploads: the ring grew %d times to %d bytes, want once to 2 MiB", b.stage.grows, b.stage.size)
	}
	if waits, want := e.syncs-before, 1+b.stage.wraps-wraps; waits != want {
		t.Errorf("ten 400 KB uploads waited for the stream %d times, want %d (the growth and %d wraps)", waits, want, b.stage.wraps-wraps)
	}
	for k, d := range dsts {
		got := make([]float32, n)
		b.Store(got, d)
		for i := range got {
			if want := float32((7*i + 13*k) % rows); got[i] != want {
				t.Fatalf("gather %d, row %d: %v, want %v: indices overwritten before the device read them", k, i, got[i], want)
			}
		}
	}
}
