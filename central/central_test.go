package central

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// failingSums fails as a GPU out of memory would, in every column sum (a
// training step's bias gradient).
type failingSums struct{ *backendtest.Device }

func (failingSums) ColumnSums(compute.Tensor, compute.Tensor, int, int) {
	panic("cuda: column_sums: CUDA_ERROR_OUT_OF_MEMORY (on cuda:0)")
}

// TestTrainDeviceFailure: `gossipd train` and `bench` on a device
// that fails end with an error naming the device and the failure, not a
// crash; on the CPU the same run trains.
func TestTrainDeviceFailure(t *testing.T) {
	c := Config{Dataset: "digits", Model: "softmax", Epochs: 1, Batch: 16, LR: 0.1, Optimizer: "sgd", Seed: 1, Device: "cuda"}
	testDevice = failingSums{backendtest.NewDevice()}
	defer func() { testDevice = nil }()
	rep, err := Train(context.Background(), c, nil)
	if err == nil || rep != nil || !strings.Contains(err.Error(), "training on emulated-device") || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
		t.Fatalf("report %v, err = %v", rep, err)
	}
	c.Device = "cpu"
	if rep, err := Train(context.Background(), c, nil); err != nil || rep.TestAccuracy < 0.5 {
		t.Fatalf("on the CPU: %+v, %v", rep, err)
	}
}

// TestTrainOnDevice: `gossipd train` on a device (backendtest's
// emulated one) gives the CPU's results bit for bit, its warm-up on a
// throwaway model changing nothing, frees every device buffer, and
// reports the device's memory peak.
func TestTrainOnDevice(t *testing.T) {
	for _, kind := range []string{"softmax", "mlp"} {
		c := Config{Dataset: "digits", Model: kind, Hidden: "16", Epochs: 2, Batch: 16, LR: 0.1, Optimizer: "sgd", Seed: 3, Device: "cpu"}
		want, err := Train(context.Background(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		dev := backendtest.NewDevice()
		testDevice = dev
		c.Device = "cuda"
		got, err := Train(context.Background(), c, nil)
		testDevice = nil
		if err != nil {
			t.Fatal(err)
		}
		if got.TrainLoss != want.TrainLoss || got.TestAccuracy != want.TestAccuracy || !slices.EqualFunc(got.Confusion, want.Confusion, slices.Equal) {
			t.Fatalf("%s on the device: loss %v, accuracy %v; on the CPU %v, %v", kind, got.TrainLoss, got.TestAccuracy, want.TrainLoss, want.TestAccuracy)
		}
		if !strings.HasPrefix(got.Device.Device, "emulated-device") || got.Graphs != nil {
			t.Fatalf("%s: device %+v, graphs %+v", kind, got.Device, got.Graphs)
		}
		if live := dev.Stats().Live; live > 0 {
			t.Fatalf("%s: %d device buffers live after training", kind, live)
		}
		if _, peak := dev.DeviceMemory(); got.DevicePeakBytes != peak || peak == 0 || want.DevicePeakBytes != 0 {
			t.Fatalf("%s: device memory peak %d bytes in the report, %d on the device; %d on the CPU", kind, got.DevicePeakBytes, peak, want.DevicePeakBytes)
		}
	}
}

// TestCheckOptions: every option of `gossipd train` that is
// scoped applies to some run and not to another, and one set for a run
// it does not apply to is refused naming it.
func TestCheckOptions(t *testing.T) {
	for name, s := range scopes {
		var yes, no bool
		for _, m := range []string{"softmax", "mlp", "svm", "lenet5"} {
			for _, opt := range []string{"", "sgd", "adam", "pegasos"} {
				for _, shard := range []string{"", "0/4"} {
					c := Config{Model: m, Optimizer: opt, Shard: shard}
					if s.applies(&c) {
						yes = true
					} else {
						no = true
					}
				}
			}
		}
		if !yes || !no {
			t.Errorf("--%s: applies to some run %v, to none %v; a scope must split the runs", name, yes, !no)
		}
	}
	c := Config{Model: "svm"}
	if err := c.CheckOptions([]string{"lambda", "epochs"}); err != nil {
		t.Errorf("svm with --lambda: %v", err)
	}
	err := c.CheckOptions([]string{"lr", "hidden", "momentum", "epochs"})
	for _, want := range []string{"--lr applies", "--hidden applies", "--momentum applies", "--optimizer pegasos"} {
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("svm with --lr --hidden --momentum: %v, want %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "--epochs") {
		t.Errorf("--epochs refused: %v", err)
	}
}
