package compute_test

import (
	"testing"

	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestBackendConformance runs the backend checks that a GPU backend is to
// pass (backendtest) on every CPU kernel set this CPU runs, on one thread
// and on three.
func TestBackendConformance(t *testing.T) {
	for _, k := range compute.Kernels() {
		for _, th := range []int{1, 3} {
			backendtest.Kernels(t, compute.NewCPU(compute.WithKernel(k), compute.WithThreads(th)))
			backendtest.Layers(t, compute.NewCPU(compute.WithKernel(k), compute.WithThreads(th)))
		}
	}
}
