package model_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestTrainStepsAgreeOnDevice runs the checks a GPU backend is to pass on
// the emulated device: every kernel through device tensors, and the train
// steps of every model and optimizer.
func TestTrainStepsAgreeOnDevice(t *testing.T) {
	backendtest.Kernels(t, backendtest.NewDevice())
	backendtest.Layers(t, backendtest.NewDevice())
	backendtest.TrainSteps(t, backendtest.NewDevice())
}

// TestDeviceResident trains every model with every optimizer on the
// emulated device and on the CPU backend it wraps, from the same start.
// The parameters agree bit for bit (same kernels, same order), so the
// model computes everything through the Backend seam; no value comes back
// to the host while it trains (the device would panic on a device tensor
// read on the host, and counts what Store copies out); evaluation copies
// out only its probabilities; and Close gives back every buffer the model
// allocated.
func TestDeviceResident(t *testing.T) {
	const d, classes, n = 64, 10, 200
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.Float64())
	}
	y := make([]int32, n)
	for i := range y {
		y[i] = int32(rng.IntN(classes))
	}
	specs := []model.Spec{{Kind: model.Softmax, Inputs: d, Classes: classes}, {Kind: model.SVM, Inputs: d, Classes: classes, Lambda: 0.01},
		{Kind: model.MLP, Inputs: d, Hidden: []int{24, 16}, Classes: classes}}
	for _, spec := range specs {
		opts := []model.OptimizerConfig{{Name: "sgd", LR: 0.1}, {Name: "sgd", LR: 0.05, Momentum: 0.9, WeightDecay: 1e-3}, {Name: "adam", LR: 0.01}}
		if spec.Kind == model.SVM {
			opts = append(opts, model.OptimizerConfig{Name: "pegasos", Lambda: spec.Lambda})
		}
		for _, oc := range opts {
			dev := backendtest.NewDevice(compute.WithThreads(1))
			cpu := compute.NewCPU(compute.WithThreads(1))
			var losses []float64
			run := func(be compute.Backend) (*model.Model, []float32, model.Metrics) {
				m, err := model.New(spec, model.WithSeed(9), model.WithBackend(be))
				if err != nil {
					t.Fatal(err)
				}
				opt, err := model.NewOptimizer(oc)
				if err != nil {
					t.Fatal(err)
				}
				before := dev.Stats()
				res, err := model.Train(context.Background(), m, opt, x, y, n, model.TrainConfig{Epochs: 2, Batch: 16, Seed: 1}, nil)
				if err != nil {
					t.Fatal(err)
				}
				losses = append(losses, res.Loss)
				// The host waits for the device once an epoch, to read the
				// loss summed there; the steps only queue work.
				if waits := dev.Stats().Waits - before.Waits; be == dev && waits != res.Epochs {
					t.Errorf("%s: training waited for the device %d times, want %d (once an epoch)", spec.Kind, waits, res.Epochs)
				}
				// Training loads the data once and sends nothing else in:
				// the minibatches are gathered on the device (the fused
				// step through rows, or GatherRows before a gradient).
				if in := dev.Stats().HostIn - before.HostIn; be == dev && in != n*d {
					t.Errorf("%s: %d values copied in to train, want the data's %d once", spec.Kind, in, n*d)
				}
				// DP-SGD's clipped sum and the fused step through rows.
				grad := make([]float32, m.NumParams())
				m.ClippedGradientSum(grad, x[:32*d], y[:32], 32, 0.5)
				m.SGDStepRows(x, []int{5, 7, 190, 3, 3}, []int32{y[5], y[7], y[190], y[3], y[3]}, 0.05)
				return m, m.CopyParams(), m.Evaluate(x, y, n)
			}
			before := dev.Stats()
			md, pd, metd := run(dev)
			mc, pc, metc := run(cpu)
			name := fmt.Sprintf("%s/%s(momentum %g)", spec.Kind, oc.Name, oc.Momentum)
			if !slices.Equal(pd, pc) {
				t.Errorf("%s: the device's parameters differ from the CPU's", name)
			}
			if losses[0] != losses[1] || losses[0] <= 0 {
				t.Errorf("%s: training loss %v on the device, %v on the CPU", name, losses[0], losses[1])
			}
			if metd.Loss != metc.Loss || metd.Accuracy != metc.Accuracy {
				t.Errorf("%s: device metrics %v/%v, CPU %v/%v", name, metd.Accuracy, metd.Loss, metc.Accuracy, metc.Loss)
			}
			// Out: the parameters once (CopyParams), the evaluation's n×C
			// probabilities (or scores), and nothing else.
			st := dev.Stats()
			if out, want := st.HostOut-before.HostOut, md.NumParams()+n*classes; out != want {
				t.Errorf("%s: %d values copied to the host, want %d (the parameters once, the evaluation's outputs)", name, out, want)
			}
			md.Close()
			state := map[string]int{"sgd": 0, "adam": 2, "pegasos": 0}[oc.Name]
			if oc.Momentum > 0 {
				state = 1
			}
			if live := dev.Stats().Live; live != state {
				t.Errorf("%s: %d device buffers left after Close, want the optimizer's %d", name, live, state)
			}
			_ = mc
		}
	}
}

// TestDeviceTallyFrees: TallyWith loads the vector it measures to the
// device and frees it after, so evaluating many models leaks nothing.
func TestDeviceTallyFrees(t *testing.T) {
	dev := backendtest.NewDevice()
	spec := model.Spec{Kind: model.MLP, Inputs: 8, Hidden: []int{4}, Classes: 3}
	m, err := model.New(spec, model.WithBackend(dev))
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 5*8)
	y := []int32{0, 1, 2, 1, 0}
	var tl model.Tally
	m.TallyWith(&tl, m.CopyParams(), x, y, 5)
	live := dev.Stats().Live
	for range 10 {
		m.TallyWith(&tl, m.CopyParams(), x, y, 5)
	}
	if got := dev.Stats().Live; got != live {
		t.Fatalf("%d device buffers after 10 more TallyWith, %d after the first", got, live)
	}
	if tl.N != 55 {
		t.Fatalf("tally of %d examples, want 55", tl.N)
	}
}

// TestPerExampleGradientsOnDevice: per-example gradients computed on the
// emulated device equal the CPU's bit for bit, for every model; once the
// workspace is sized, nothing crosses between host and device; Close
// frees every buffer.
func TestPerExampleGradientsOnDevice(t *testing.T) {
	const d, classes, n = 12, 4, 9
	x, y := stackData(n, d, classes)
	for _, spec := range []model.Spec{{Kind: model.Softmax, Inputs: d, Classes: classes}, {Kind: model.SVM, Inputs: d, Classes: classes, Lambda: 0.05},
		{Kind: model.MLP, Inputs: d, Hidden: []int{6, 5}, Classes: classes}} {
		cpu, err := model.New(spec, model.WithSeed(4), model.WithBackend(compute.NewCPU()))
		if err != nil {
			t.Fatal(err)
		}
		if spec.Kind == model.SVM {
			p := cpu.CopyParams()
			for i := range p {
				p[i] = float32(i%5) * 0.1
			}
			if err := cpu.SetParams(p); err != nil {
				t.Fatal(err)
			}
		}
		P := cpu.NumParams()
		want := make([]float32, n*P)
		cpu.PerExampleGradients(want, x, y, n)

		dev := backendtest.NewDevice()
		m, err := model.New(spec, model.WithBackend(dev))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetParams(cpu.CopyParams()); err != nil {
			t.Fatal(err)
		}
		xt, grads := dev.Load(x), dev.Alloc(n*P)
		m.PerExampleGradientsOn(grads, xt, y, n) // sizes the workspace
		before := dev.Stats()
		m.PerExampleGradientsOn(grads, xt, y, n)
		after := dev.Stats()
		if after.HostIn != before.HostIn || after.HostOut != before.HostOut {
			t.Errorf("%v: per-example gradients moved %d values in and %d out", spec, after.HostIn-before.HostIn, after.HostOut-before.HostOut)
		}
		got := make([]float32, n*P)
		dev.Store(got, grads)
		if !slices.Equal(got, want) {
			t.Errorf("%v: per-example gradients on the device differ from the CPU's", spec)
		}
		dev.Free(xt)
		dev.Free(grads)
		m.Close()
		if live := dev.Stats().Live; live != 0 {
			t.Errorf("%v: %d buffers live after Close", spec, live)
		}
	}
}

// lostDevice fails as a GPU that fell off the bus: its loss kernel
// panics, and so does freeing anything on it after.
type lostDevice struct{ *backendtest.Device }

type lostSum struct{ compute.LossSum }

func (lostSum) Free() { panic("cuda: cuMemFree: CUDA_ERROR_LAUNCH_FAILED") }

func (d lostDevice) NewLossSum() compute.LossSum { return lostSum{d.Device.NewLossSum()} }

func (lostDevice) SoftmaxCrossEntropySum(compute.LossSum, compute.Tensor, compute.Tensor, compute.Tensor, []int32, int, int, float32) {
	panic("cuda: cuLaunchKernel softmax_xent: CUDA_ERROR_ILLEGAL_ADDRESS")
}

// TestTrainDeviceFailure: a device failure inside Train comes out as that
// failure, not as the failure of freeing the loss sum after it.
func TestTrainDeviceFailure(t *testing.T) {
	be := lostDevice{backendtest.NewDevice()}
	m, err := model.New(model.Spec{Kind: model.Softmax, Inputs: 4, Classes: 3}, model.WithBackend(be))
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := model.NewOptimizer(model.OptimizerConfig{Name: "sgd", LR: 0.1})
	defer func() {
		if r := fmt.Sprint(recover()); !strings.Contains(r, "CUDA_ERROR_ILLEGAL_ADDRESS") {
			t.Fatalf("Train panicked with %q, want the kernel's failure", r)
		}
	}()
	model.Train(context.Background(), m, opt, make([]float32, 8), []int32{0, 1}, 2, model.TrainConfig{}, nil)
}
