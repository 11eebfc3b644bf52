//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"testing"

	"github.com/gossipd/gossipd/model/compute"
)

// TestProfile: a profiled backend names each call as its user made it,
// counts it, and waits for its work before the next (its time is its
// own); without Profile the work stays queued and nothing is counted.
func TestProfile(t *testing.T) {
	b, e := emulated(t)
	defer b.Close()
	const n = 5
	src := b.Load([]float32{1, 2, 3, 4, 5, 10, 20, 30, 40, 50})
	dst := b.Alloc(2 * n)
	combine := func() {
		b.CombineRows(dst, src, n, []int32{0, 1}, []int32{0, 2, 3}, []int32{0, 1, 1}, []float32{1, 1, 0.5})
	}
	combine()
	if len(e.queue) == 0 {
		t.Fatal("unprofiled: CombineRows's kernel is not queued, so the profile's waits cannot be told apart")
	}
	if p := b.Profiled(); p != nil {
		t.Fatalf("before Profile: %+v", p)
	}
	b.Profile()
	combine()
	if len(e.queue) != 0 {
		t.Fatalf("profiled: %d operations still queued after the call", len(e.queue))
	}
	combine()
	sums := make([]float64, 2)
	b.SumSquaresRows(sums, dst, n, []int32{0, 1})
	got := map[string]compute.CallTime{}
	for _, c := range b.Profiled() {
		got[c.Name] = c
		if c.Seconds < c.HostSeconds || c.HostSeconds < 0 {
			t.Errorf("%s: %v s in all, %v on the host", c.Name, c.Seconds, c.HostSeconds)
		}
	}
	if got["CombineRows"].Calls != 2 || got["SumSquaresRows"].Calls != 1 || len(got) != 2 {
		t.Fatalf("profile %+v, want CombineRows twice and SumSquaresRows once", got)
	}
	out := make([]float32, 2*n)
	b.Store(out, dst)
	if want := []float32{11, 22, 33, 44, 55}; out[0] != want[0] || out[4] != want[4] || out[5] != 5 || out[9] != 25 {
		t.Fatalf("the profiled calls computed %v", out)
	}
	if sums[0] != 11*11+22*22+33*33+44*44+55*55 {
		t.Fatalf("Σx² of row 0: %v", sums[0])
	}
}
