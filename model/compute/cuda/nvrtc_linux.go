//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/ebitengine/purego"
)

// nvrtc is the part of NVRTC the backend calls. The CUBIN and
// supported-architecture calls came with CUDA 11.1 and 11.2; an NVRTC
// without them leaves them nil, and the kernels go to the driver as PTX.
type nvrtc struct {
	create     func(prog *uintptr, src *byte, name *byte, nHeaders int32, headers, includes unsafe.Pointer) int32
	compile    func(prog uintptr, nOpts int32, opts unsafe.Pointer) int32
	ptxSize    func(prog uintptr, n *uintptr) int32
	ptx        func(prog uintptr, out *byte) int32
	logSize    func(prog uintptr, n *uintptr) int32
	log        func(prog uintptr, out *byte) int32
	destroy    func(prog *uintptr) int32
	errorText  func(res int32) *byte
	versionFor func(major, minor *int32) int32
	cubinSize  func(prog uintptr, n *uintptr) int32
	cubin      func(prog uintptr, out *byte) int32
	numArchs   func(n *int32) int32
	archs      func(out *int32) int32
}

func loadNVRTC() (*nvrtc, string, error) {
	h, where, err := openAny("NVRTC", nvrtcNames)
	if err != nil {
		return nil, "", err
	}
	var n nvrtc
	if err := bind(h, where, map[string]any{
		"nvrtcCreateProgram": &n.create, "nvrtcCompileProgram": &n.compile, "nvrtcGetPTXSize": &n.ptxSize,
		"nvrtcGetPTX": &n.ptx, "nvrtcGetProgramLogSize": &n.logSize, "nvrtcGetProgramLog": &n.log,
		"nvrtcDestroyProgram": &n.destroy, "nvrtcGetErrorString": &n.errorText, "nvrtcVersion": &n.versionFor,
	}); err != nil {
		return nil, "", err
	}
	if has(h, "nvrtcGetCUBINSize", "nvrtcGetCUBIN") {
		purego.RegisterLibFunc(&n.cubinSize, h, "nvrtcGetCUBINSize")
		purego.RegisterLibFunc(&n.cubin, h, "nvrtcGetCUBIN")
	}
	if has(h, "nvrtcGetNumSupportedArchs", "nvrtcGetSupportedArchs") {
		purego.RegisterLibFunc(&n.numArchs, h, "nvrtcGetNumSupportedArchs")
		purego.RegisterLibFunc(&n.archs, h, "nvrtcGetSupportedArchs")
	}
	return &n, where, nil
}

// has reports whether library h has every named symbol.
func has(h uintptr, names ...string) bool {
	for _, s := range names {
		if _, err := purego.Dlsym(h, s); err != nil {
			return false
		}
	}
	return true
}

// A build is one way to compile the kernels for the device: it returns
// the image for cuModuleLoadData and says what it is.
type build struct {
	what string
	run  func() ([]byte, error)
}

// builds are the ways to compile src for compute capability major.minor,
// best first.
//
//  1. A cubin for sm_XY: machine code, which the driver loads as it is.
//     NVRTC may be newer than the driver (PyTorch's wheels bring their own
//     CUDA 12.x): CUDA's minor-version compatibility covers a cubin, but a
//     driver refuses PTX of a newer ISA version
//     (CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
//  2. PTX for compute_XY, or for the newest architecture this NVRTC knows
//     below it (a GPU newer than NVRTC): the driver compiles it.
func (n *nvrtc) builds(src, name string, major, minor int) []build {
	cc := 10*major + minor
	var out []build
	if n.cubin != nil {
		arch := fmt.Sprintf("sm_%d", cc)
		out = append(out, build{"cubin " + arch, func() ([]byte, error) { return n.compileTo(src, name, arch, true) }})
	}
	arch := fmt.Sprintf("compute_%d", n.ptxArch(cc))
	return append(out, build{"PTX " + arch, func() ([]byte, error) { return n.compileTo(src, name, arch, false) }})
}

// checkArch refuses a GPU older than the oldest architecture this NVRTC
// compiles for (CUDA 13 dropped everything before 7.5): neither a cubin
// nor PTX it builds would load there, so Open says so up front, rather
// than failing with the driver's "no kernel image" after a build. where
// names the library.
func (n *nvrtc) checkArch(where string, major, minor int) error {
	archs := n.supported()
	if len(archs) == 0 || 10*major+minor >= archs[0] {
		return nil
	}
	return fmt.Errorf("%w: the GPU's compute capability is %d.%d, and %s compiles for %d.%d and newer: point $%s at an older CUDA toolkit's libraries (CUDA 12 compiles for 5.0 and newer; gossipd needs 6.0)",
		ErrNoDevice, major, minor, where, archs[0]/10, archs[0]%10, DirEnv)
}

// ptxArch is cc if NVRTC knows it (or cannot say), else the newest
// architecture it knows below cc (else its oldest).
func (n *nvrtc) ptxArch(cc int) int {
	archs := n.supported()
	if len(archs) == 0 || slices.Contains(archs, cc) {
		return cc
	}
	best := archs[0]
	for _, a := range archs {
		if a <= cc {
			best = max(best, a)
		}
	}
	return best
}

// supported lists the architectures this NVRTC compiles for (as 10·major
// + minor), sorted; nil where it cannot say.
func (n *nvrtc) supported() []int {
	if n.numArchs == nil {
		return nil
	}
	var k int32
	if n.numArchs(&k) != 0 || k <= 0 {
		return nil
	}
	buf := make([]int32, k)
	if n.archs(&buf[0]) != 0 {
		return nil
	}
	out := make([]int, k)
	for i, a := range buf {
		out[i] = int(a)
	}
	slices.Sort(out)
	return out
}

// compileTo compiles src for arch (compute_XY or sm_XY) and returns the
// PTX, or the cubin when cubin is set; a failure carries NVRTC's log.
func (n *nvrtc) compileTo(src, name, arch string, cubin bool) ([]byte, error) {
	var prog uintptr
	s, nm := cstring(src), cstring(name)
	if r := n.create(&prog, &s[0], &nm[0], 0, nil, nil); r != 0 {
		return nil, fmt.Errorf("cuda: nvrtcCreateProgram: %s", gostring(n.errorText(r), 200))
	}
	defer n.destroy(&prog)
	// No --std: the kernels are plain CUDA C, and each NVRTC's default
	// dialect (C++14 in 11.x, C++17 since 12) is one it has.
	opts := [][]byte{cstring("--gpu-architecture=" + arch)}
	ptrs := make([]*byte, len(opts))
	for i, o := range opts {
		ptrs[i] = &o[0]
	}
	if r := n.compile(prog, int32(len(ptrs)), unsafe.Pointer(&ptrs[0])); r != 0 {
		var size uintptr
		msg := ""
		if n.logSize(prog, &size) == 0 && size > 1 {
			buf := make([]byte, size)
			n.log(prog, &buf[0])
			msg = string(buf[:size-1])
		}
		return nil, fmt.Errorf("cuda: NVRTC could not compile %s for %s: %s\n%s", name, arch, gostring(n.errorText(r), 200), msg)
	}
	get, getSize, what := n.ptx, n.ptxSize, "PTX"
	if cubin {
		get, getSize, what = n.cubin, n.cubinSize, "CUBIN"
	}
	var size uintptr
	if r := getSize(prog, &size); r != 0 {
		return nil, fmt.Errorf("cuda: nvrtcGet%sSize (%s): %s", what, arch, gostring(n.errorText(r), 200))
	}
	if size == 0 {
		return nil, fmt.Errorf("cuda: NVRTC made no %s for %s", what, arch)
	}
	img := make([]byte, size)
	if r := get(prog, &img[0]); r != 0 {
		return nil, fmt.Errorf("cuda: nvrtcGet%s (%s): %s", what, arch, gostring(n.errorText(r), 200))
	}
	return img, nil
}
