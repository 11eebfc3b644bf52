package model_test

import (
	"testing"

	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestTrainStepsAgree: a few training steps of every model and optimizer
// give the pure-Go backend's parameters on every CPU kernel set
// (backendtest.TrainSteps, the check a GPU backend is to pass too).
func TestTrainStepsAgree(t *testing.T) {
	for _, k := range compute.Kernels() {
		backendtest.TrainSteps(t, compute.NewCPU(compute.WithKernel(k)))
	}
}
