package daemon_test

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// failingGPU is the emulated device of backendtest that fails, as a GPU
// out of memory or lost would, from its 30th column sum on (every
// training step takes one or more), and from then on at every call.
type failingGPU struct {
	*backendtest.Device
	sums atomic.Int64
}

func (f *failingGPU) ColumnSums(dst, src compute.Tensor, m, n int) {
	if f.sums.Add(1) >= 30 {
		panic("cuda: cublasSgemm_v2: CUBLAS_STATUS_EXECUTION_FAILED (on cuda:0)")
	}
	f.Device.ColumnSums(dst, src, m, n)
}

// TestDeviceFailureMovesToCPU: a daemon whose GPU fails mid-run keeps
// running: training moves to the CPU (/status's device says so and why),
// it goes on updating, and it learns as its two CPU peers do;
// gossipd_device_failed is 1 on it and 0 on the others.
func TestDeviceFailureMovesToCPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gpu := &failingGPU{Device: backendtest.NewDevice()}
		r := start(t, memnet.New(), 3, func(i int, c *daemon.Config) {
			if i == 0 {
				c.Backend = gpu
			}
		})
		nd := r.nodes[0]
		if d := nd.Status().Device; d.Device == "cpu" {
			t.Fatalf("the daemon starts on %+v, want the emulated device", d)
		}
		waitFor(t, "training to move to the CPU", 30*time.Second, func() bool { return nd.Status().Device.Device == "cpu" })
		d := nd.Status().Device
		if !strings.Contains(d.Note, "CUBLAS_STATUS_EXECUTION_FAILED") || !strings.Contains(d.Note, "training moved to the CPU") || !strings.HasPrefix(d.Backend, "cpu") {
			t.Fatalf("status device after the failure: %+v", d)
		}
		after := nd.Status().Updates
		waitFor(t, "updates on the CPU and ≥ 0.9 accuracy", 60*time.Second, func() bool {
			s := nd.Status()
			return s.Updates > after+20 && s.Accuracy >= 0.9
		})
		if gpu.sums.Load() < 30 {
			t.Fatalf("the device failed after %d column sums, want 30", gpu.sums.Load())
		}
		rec := httptest.NewRecorder()
		nd.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if !strings.Contains(rec.Body.String(), "\ngossipd_device_failed 1\n") {
			t.Fatalf("/metrics does not say the device failed:\n%s", rec.Body.String())
		}
		rec = httptest.NewRecorder()
		r.nodes[1].Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if !strings.Contains(rec.Body.String(), "\ngossipd_device_failed 0\n") {
			t.Fatal("a CPU daemon's /metrics does not say gossipd_device_failed 0")
		}
	})
}
