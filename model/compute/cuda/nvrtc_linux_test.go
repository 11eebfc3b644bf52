//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestNVRTCCompilesKernels compiles kernels.cu with the NVRTC this
// machine has (it needs no GPU: Debian's libnvrtc11.2, PyTorch's NVIDIA
// wheels, a CUDA toolkit), as Open does, for the compute capabilities of
// the GPUs gossipd is measured on and the oldest it supports (6.0, for
// double atomicAdd, where this NVRTC still compiles for it; CUDA 13's
// starts at 7.5, and Open refuses older GPUs): each build Open would try, the cubin (an ELF image)
// and the PTX, must hold every kernel entry point. Where there is no
// NVRTC it says so and checks nothing.
func TestNVRTCCompilesKernels(t *testing.T) {
	rt, where, err := loadNVRTC()
	if errors.Is(err, ErrNoLibrary) {
		t.Logf("not run: no NVRTC here: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC: %s; architectures %v", where, rt.supported())
	if rt.cubin == nil {
		t.Errorf("%s has no nvrtcGetCUBIN (CUDA 11.1 and later have it)", where)
	}
	archs := rt.supported()
	for _, cc := range [][2]int{{6, 0}, {7, 5}, {8, 0}, {9, 0}} {
		err := rt.checkArch(where, cc[0], cc[1])
		if len(archs) > 0 && 10*cc[0]+cc[1] < archs[0] {
			// CUDA 13 compiles for 7.5 and newer: Open refuses an older
			// GPU, naming both and the way out.
			if err == nil || !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), fmt.Sprintf("is %d.%d, and %s compiles for %d.%d", cc[0], cc[1], where, archs[0]/10, archs[0]%10)) || !strings.Contains(err.Error(), DirEnv) {
				t.Errorf("checkArch(%d.%d) = %v, want a refusal naming both capabilities and $%s", cc[0], cc[1], err, DirEnv)
			}
			continue
		}
		if err != nil {
			t.Errorf("checkArch(%d.%d): %v", cc[0], cc[1], err)
		}
		builds := rt.builds(kernelSource, "kernels.cu", cc[0], cc[1])
		var whats []string
		for _, bd := range builds {
			whats = append(whats, bd.what)
			img, err := bd.run()
			if err != nil {
				t.Errorf("%s: %v", bd.what, err)
				continue
			}
			cubin := strings.HasPrefix(bd.what, "cubin")
			if cubin && !bytes.HasPrefix(img, []byte("\x7fELF")) {
				t.Errorf("%s: not an ELF image: % x", bd.what, img[:min(8, len(img))])
			}
			for _, k := range kernelNames {
				if want := ".entry " + k + "("; !cubin && !bytes.Contains(img, []byte(want)) {
					t.Errorf("%s: the PTX has no entry %s", bd.what, k)
				}
				if cubin && !bytes.Contains(img, []byte("\x00"+k+"\x00")) {
					t.Errorf("%s: the cubin has no symbol %s", bd.what, k)
				}
			}
		}
		want := fmt.Sprintf("[cubin sm_%d%d PTX compute_%d%d]", cc[0], cc[1], cc[0], cc[1])
		if got := fmt.Sprint(whats); got != want {
			t.Errorf("builds for %d.%d: %s, want %s", cc[0], cc[1], got, want)
		}
	}
}

// TestNVRTCNewerGPU: for a GPU newer than this NVRTC knows, the cubin
// fails with NVRTC's message naming the architecture, and the PTX is for
// the newest architecture NVRTC knows, which the driver compiles for the
// GPU.
func TestNVRTCNewerGPU(t *testing.T) {
	rt, _, err := loadNVRTC()
	if errors.Is(err, ErrNoLibrary) {
		t.Logf("not run: no NVRTC here: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	archs := rt.supported()
	if len(archs) == 0 {
		t.Fatal("NVRTC lists no architectures")
	}
	newest := archs[len(archs)-1]
	major := newest/10 + 1 // a compute capability NVRTC does not know
	builds := rt.builds(kernelSource, "kernels.cu", major, 0)
	if len(builds) != 2 || builds[1].what != fmt.Sprintf("PTX compute_%d", newest) {
		t.Fatalf("builds for %d.0: %v, want a cubin, then PTX for compute_%d", major, builds, newest)
	}
	if _, err := builds[0].run(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("sm_%d0", major)) {
		t.Fatalf("cubin for sm_%d0: err = %v, want NVRTC's refusal naming it", major, err)
	}
	if _, err := builds[1].run(); err != nil {
		t.Fatal(err)
	}
}
