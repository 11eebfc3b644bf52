//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"errors"
	"strings"
	"testing"
)

// TestNVRTCCompilesKernels compiles kernels.cu with the NVRTC this
// machine has (it needs no GPU: Debian's libnvrtc11.2, PyTorch's NVIDIA
// wheels, a CUDA toolkit), as Open does, for the compute capabilities of
// the GPUs gossipd is measured on and the oldest it supports (6.0, for
// double atomicAdd), and wants every kernel entry point in the PTX.
// Where there is no NVRTC it says so and checks nothing.
func TestNVRTCCompilesKernels(t *testing.T) {
	rt, where, err := loadNVRTC()
	if errors.Is(err, ErrNoLibrary) {
		t.Logf("not run: no NVRTC here: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC: %s", where)
	for _, cc := range [][2]int{{6, 0}, {8, 0}, {9, 0}} {
		ptx, err := rt.compilePTX(kernelSource, "kernels.cu", cc[0], cc[1])
		if err != nil {
			t.Errorf("compute_%d%d: %v", cc[0], cc[1], err)
			continue
		}
		text := string(ptx)
		for _, k := range kernelNames {
			if !strings.Contains(text, ".entry "+k+"(") {
				t.Errorf("compute_%d%d: the PTX has no entry %s", cc[0], cc[1], k)
			}
		}
	}
}
