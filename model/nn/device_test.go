package nn_test

import (
	"testing"

	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
	"github.com/gossipd/gossipd/model/nn"
)

// TestAgainstPyTorchOnDevice runs the PyTorch vectors on the emulated
// device: the network's parameters, inputs, activations and gradients
// are device tensors (the host never reads one), every layer computes
// through the backend's kernels, and it frees what it allocates.
func TestAgainstPyTorchOnDevice(t *testing.T) {
	for _, kernel := range []string{compute.NewCPU().Kernel(), "go"} {
		d := backendtest.NewDevice(compute.WithKernel(kernel))
		t.Run(kernel, func(t *testing.T) { nn.CheckAgainstPyTorch(t, d) })
		if s := d.Stats(); s.Live != 0 {
			t.Errorf("%d device buffers left after the networks were freed", s.Live)
		}
	}
}
