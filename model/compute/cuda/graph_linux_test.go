//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// graphRig is an MLP on the emulated GPU whose plain SGD steps a
// StepGraph runs, beside the same model stepped as usual.
type graphRig struct {
	b        *Backend
	e        *emulator
	rec, ref *model.Model
	x        compute.Tensor
	y        []int32
	rng      *rand.Rand
	sum      compute.LossSum
}

func newGraphRig(t *testing.T) *graphRig {
	b, e := emulated(t)
	spec := model.Spec{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 3}
	r := &graphRig{b: b, e: e, rng: rand.New(rand.NewPCG(1, 2))}
	var err error
	if r.rec, err = model.New(spec, model.WithSeed(4), model.WithBackend(b)); err != nil {
		t.Fatal(err)
	}
	if r.ref, err = model.New(spec, model.WithSeed(4), model.WithBackend(b)); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 40*12)
	for i := range x {
		x[i] = float32(r.rng.NormFloat64())
	}
	r.y = make([]int32, 40)
	for i := range r.y {
		r.y[i] = int32(r.rng.IntN(3))
	}
	r.x = b.Load(x)
	r.sum = b.NewLossSum()
	return r
}

// steps runs k steps of 5 random rows on both models, the recorded one's
// through g, at rate lr; summed says whether the losses go to a running
// sum on the device (else each step reads its loss, which a graph cannot
// hold).
func (r *graphRig) steps(g compute.StepGraph, k int, lr float32, summed bool) {
	if summed {
		r.rec.SumLosses(r.sum)
		r.ref.SumLosses(r.sum)
		defer func() { r.rec.SumLosses(nil); r.ref.SumLosses(nil) }()
	}
	rows, y := make([]int, 5), make([]int32, 5)
	for range k {
		for i := range rows {
			rows[i] = r.rng.IntN(40)
			y[i] = r.y[rows[i]]
		}
		g.Run(func() { r.rec.SGDStepRowsOn(r.x, rows, y, lr) })
		r.ref.SGDStepRowsOn(r.x, rows, y, lr)
	}
}

// same wants both models' parameters equal, bit for bit.
func (r *graphRig) same(t *testing.T) {
	t.Helper()
	if got, want := r.rec.CopyParams(), r.ref.CopyParams(); !slices.Equal(got, want) {
		t.Fatalf("the recorded model's parameters differ from those stepped as usual")
	}
}

// TestStepGraph: a step is run once as usual, captured graphDepth times
// and then replayed, each replay one graph launch and no kernel launched
// by itself, the model bit for bit as stepped as usual; and Close frees
// what the recordings held.
func TestStepGraph(t *testing.T) {
	r := newGraphRig(t)
	g := r.b.NewStepGraph()
	r.steps(g, 1, 0.1, true)
	pinned := len(r.e.pinned) // the upload ring's
	r.steps(g, graphDepth, 0.1, true)
	if n, off := g.Stats(); n != 0 || off != "" {
		t.Fatalf("after the captures: %d replayed (%q)", n, off)
	}
	if r.e.launches != graphDepth {
		t.Fatalf("%d graph launches after %d captures", r.e.launches, graphDepth)
	}
	r.rec.SumLosses(r.sum)
	calls, launches := r.e.kernelCalls, r.e.launches
	rows, y := []int{3, 1, 4, 1, 5}, []int32{r.y[3], r.y[1], r.y[4], r.y[1], r.y[5]}
	g.Run(func() { r.rec.SGDStepRowsOn(r.x, rows, y, 0.1) })
	if r.e.kernelCalls != calls || r.e.launches != launches+1 {
		t.Fatalf("a replay launched %d kernels and %d graphs, want 0 and 1", r.e.kernelCalls-calls, r.e.launches-launches)
	}
	r.rec.SumLosses(nil)
	r.ref.SGDStepRowsOn(r.x, rows, y, 0.1)
	r.steps(g, 3*graphDepth, 0.1, true)
	r.same(t)
	if n, off := g.Stats(); n != 1+3*graphDepth || off != "" {
		t.Fatalf("%d replayed (%q), want %d", n, off, 1+3*graphDepth)
	}
	g.Close()
	if len(r.e.pinned) != pinned || len(r.e.execs) != 0 || len(r.e.streams) != 0 || len(r.e.recorded) != 0 {
		t.Fatalf("after Close: %d page-locked buffers (%d before), %d graphs, %d streams, %d events",
			len(r.e.pinned), pinned, len(r.e.execs), len(r.e.streams), len(r.e.recorded))
	}
}

// TestStepGraphSetAside: where a step cannot be recorded or replayed, it
// runs as usual, the graph is set aside with the reason, and the model
// is stepped as if there had been none.
func TestStepGraphSetAside(t *testing.T) {
	for _, c := range []struct {
		name, want string
		run        func(r *graphRig, g compute.StepGraph)
	}{
		{"the driver invalidates the capture", "cuStreamEndCapture", func(r *graphRig, g compute.StepGraph) {
			r.e.failCapture = 901
			r.steps(g, 4+graphDepth, 0.1, true)
		}},
		{"a step reads its loss", "cuMemsetD32", func(r *graphRig, g compute.StepGraph) {
			r.steps(g, 4, 0.1, false)
		}},
		{"a replayed step differs", "differs from its recording", func(r *graphRig, g compute.StepGraph) {
			r.steps(g, 1+graphDepth+2, 0.1, true)
			r.steps(g, 3, 0.05, true)
		}},
		{"the driver has no graph API", "has no cuGraphLaunch", func(r *graphRig, g compute.StepGraph) {
			r.steps(g, 6, 0.1, true)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newGraphRig(t)
			if c.want == "has no cuGraphLaunch" {
				r.b.a.noGraph = "cuda: libcuda.so.1 has no cuGraphLaunch"
			}
			g := r.b.NewStepGraph()
			c.run(r, g)
			r.same(t)
			if _, off := g.Stats(); !strings.Contains(off, c.want) {
				t.Fatalf("the graph is set aside with %q, want it to name %q", off, c.want)
			}
			g.Close()
			if len(r.e.execs) != 0 || len(r.e.streams) != 0 {
				t.Fatalf("after Close: %d graphs, %d streams", len(r.e.execs), len(r.e.streams))
			}
		})
	}
}

// TestStepGraphDeviceFailure: a device that fails while a replay waits
// for its recording's last launch panics, naming the call and the
// error, as every kernel call does (the caller's device-failure
// handling takes it), and leaves the backend released.
func TestStepGraphDeviceFailure(t *testing.T) {
	r := newGraphRig(t)
	g := r.b.NewStepGraph()
	r.steps(g, 1+graphDepth, 0.1, true)
	r.e.failWait = 999 // CUDA_ERROR_UNKNOWN
	func() {
		defer func() {
			msg := fmt.Sprint(recover())
			if !strings.Contains(msg, "cuEventSynchronize") || !strings.Contains(msg, "(999)") {
				t.Fatalf("a failed wait panicked with %q, want the call and the error", msg)
			}
		}()
		r.steps(g, 1, 0.1, true)
	}()
	if _, peak := r.b.DeviceMemory(); peak == 0 { // it takes the backend: not held by the failed replay
		t.Fatal("no device memory counted")
	}
}

// TestBackendClose: after a model trained (its steps recorded and
// replayed) and freed, Close leaves nothing in device or page-locked
// memory, a second Close does nothing, and a call after it panics naming
// the misuse.
func TestBackendClose(t *testing.T) {
	b, e := emulated(t)
	const d, classes, n = 12, 3, 40
	x, y := waitData(n, d, classes)
	m, err := model.New(model.Spec{Kind: model.MLP, Inputs: d, Hidden: []int{8}, Classes: classes}, model.WithBackend(b))
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := model.NewOptimizer(model.OptimizerConfig{Name: "sgd", LR: 0.1})
	res, err := model.Train(context.Background(), m, opt, x, y, n, model.TrainConfig{Epochs: 2, Batch: 4}, nil)
	if err != nil || res.Graphs == nil || res.Graphs.Replayed == 0 {
		t.Fatalf("training: %v, graphs %+v", err, res.Graphs)
	}
	m.Close()
	if len(e.bufs) == 0 || len(e.pinned) == 0 {
		t.Fatal("nothing held before Close: the test checks nothing")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if inUse, _ := b.DeviceMemory(); len(e.bufs) != 0 || len(e.pinned) != 0 || inUse != 0 {
		t.Fatalf("after Close: %d device buffers (%d bytes counted), %d page-locked", len(e.bufs), inUse, len(e.pinned))
	}
	if err := b.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	defer func() {
		if msg := fmt.Sprint(recover()); !strings.Contains(msg, "used after Close") {
			t.Fatalf("a call after Close panicked with %q", msg)
		}
	}()
	b.Alloc(4)
}
