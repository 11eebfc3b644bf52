package compute

import "testing"

// TestTensorViews: slices of host and device tensors select the right
// values and offsets, and a device tensor's host memory is refused.
func TestTensorViews(t *testing.T) {
	x := []float32{0, 1, 2, 3, 4, 5}
	v := Host(x).Slice(1, 5).Slice(2, 4)
	if !v.OnHost() || v.Len() != 2 || v.HostSlice()[0] != 3 || v.HostSlice()[1] != 4 {
		t.Fatalf("host view %v", v.HostSlice())
	}
	d := DeviceTensor(0x1000, 100).Slice(10, 60).Slice(5, 20)
	if addr, off := d.Device(); d.OnHost() || addr != 0x1000 || off != 15 || d.Len() != 15 {
		t.Fatalf("device view at %#x+%d, %d values", addr, off, d.Len())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("HostSlice of a device tensor did not panic")
		}
	}()
	d.HostSlice()
}
