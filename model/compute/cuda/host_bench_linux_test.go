//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"testing"
	"unsafe"

	"github.com/gossipd/gossipd/model"
)

// BenchmarkStepHost measures what a training step costs the host on the
// GPU path, the GPU's own time left out: the backend is opened on the
// emulated driver (its self-check runs), then every call that would
// queue work on the GPU (launches, GEMMs, copies, memsets) returns at
// once. What remains is the Go side of a step of an MLP 784-128-10 at
// batch 32 (model.Train's loop body with the loss summed on the device):
// argument lists, locks, staging, bookkeeping. A real driver adds its
// own launch cost (microseconds a call) and purego's call into C.
//
// queued runs the step as it is queued call by call (15 calls to the
// driver and cuBLAS); replayed runs it through a StepGraph (CUDA graphs)
// after its captures: the step's Go code then only stages its indices
// and labels and checks each call against the recording, and the driver
// gets three calls (wait for the recording's last launch, launch it,
// record its event), here the emulated ones on an empty graph.
func BenchmarkStepHost(b *testing.B) {
	for _, replayed := range []bool{false, true} {
		name := "queued"
		if replayed {
			name = "replayed"
		}
		b.Run(name, func(b *testing.B) { benchStepHost(b, replayed) })
	}
}

func benchStepHost(b *testing.B, replayed bool) {
	bk, _ := emulated(b)
	a, bl := bk.a, bk.blas
	a.launch = func(uintptr, uint32, uint32, uint32, uint32, uint32, uint32, uint32, uintptr, unsafe.Pointer, unsafe.Pointer) int32 {
		return 0
	}
	a.htodAsync = func(uint64, unsafe.Pointer, uintptr, uintptr) int32 { return 0 }
	a.dtod = func(uint64, uint64, uintptr) int32 { return 0 }
	a.memset32 = func(uint64, uint32, uintptr) int32 { return 0 }
	a.syncCtx = func() int32 { return 0 }
	bl.sgemm = func(uintptr, int32, int32, int32, int32, int32, *float32, uint64, int32, uint64, int32, *float32, uint64, int32) int32 {
		return 0
	}
	const d, classes, n, batch = 784, 10, 4096, 32
	x, y := waitData(n, d, classes)
	xt := bk.Load(x)
	m, err := model.New(model.Spec{Kind: model.MLP, Inputs: d, Hidden: []int{128}, Classes: classes}, model.WithBackend(bk))
	if err != nil {
		b.Fatal(err)
	}
	sum := bk.NewLossSum()
	m.SumLosses(sum)
	rows := make([]int, batch)
	for i := range rows {
		rows[i] = (97 * i) % n
	}
	step := func() { m.SGDStepRowsOn(xt, rows, y[:batch], 0.1) }
	run := step
	if replayed {
		g := bk.NewStepGraph()
		defer g.Close()
		run = func() { g.Run(step) }
		for range 1 + graphDepth { // the first as usual, then the captures
			run()
		}
		defer func() {
			if n, off := g.Stats(); n != b.N || off != "" {
				b.Fatalf("%d of %d steps replayed (%q)", n, b.N, off)
			}
		}()
	}
	step() // sizes the buffers
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run()
	}
}
