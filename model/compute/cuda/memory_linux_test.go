//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"testing"

	"github.com/gossipd/gossipd/model"
)

// TestDeviceMemoryCounted: the backend's count of device memory equals
// what the emulated driver holds allocated, through tensors, a loss sum,
// a model's training (whose scratch buffers grow and are replaced) and
// their frees; the peak is the most held at once and stays after.
func TestDeviceMemoryCounted(t *testing.T) {
	b, e := emulated(t)
	held := func() int64 {
		e.mu.Lock()
		defer e.mu.Unlock()
		var n int64
		for _, buf := range e.bufs {
			n += int64(len(buf))
		}
		return n
	}
	most := int64(0)
	check := func(when string) (int64, int64) {
		t.Helper()
		in, peak := b.DeviceMemory()
		most = max(most, held())
		if in != held() || peak != most {
			t.Fatalf("%s: counted %d bytes in use (peak %d); the driver holds %d (most %d)", when, in, peak, held(), most)
		}
		return in, peak
	}
	start, _ := check("opened")
	x, y := waitData(64, 20, 4)
	xt := b.Load(x)
	sum := b.NewLossSum()
	check("a tensor and a loss sum")
	m, err := model.New(model.Spec{Kind: model.MLP, Inputs: 20, Hidden: []int{16}, Classes: 4}, model.WithBackend(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{8, 32, 64} { // growing minibatches
		rows := make([]int, n)
		for i := range rows {
			rows[i] = (7 * i) % 64
		}
		m.SGDStepRowsOn(xt, rows, y[:n], 0.1)
		check("training")
	}
	m.Close()
	b.Free(xt)
	sum.Free()
	in, peak := check("freed")
	if in >= peak || peak <= start+4*64*20 {
		t.Fatalf("after the frees %d bytes in use, peak %d (at the start %d)", in, peak, start)
	}
}
