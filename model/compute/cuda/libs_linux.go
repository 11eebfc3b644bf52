//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The CUDA libraries the compute backend loads besides the driver: NVRTC
// compiles kernels.cu, cuBLAS multiplies matrices. Each is looked for
// under the names of the CUDA major versions gossipd knows, newest first.
var (
	nvrtcNames  = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"}
	cublasNames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}
)

// libraryDirs are searched, after $GOSSIPD_CUDA_DIR and before the
// system's search path: the CUDA toolkit's usual place and the NVIDIA
// wheels that PyTorch installs (site-packages/nvidia/*/lib).
func libraryDirs() []string {
	var dirs []string
	if d := os.Getenv(DirEnv); d != "" {
		dirs = append(dirs, d)
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/targets/sbsa-linux/lib")
	pats := []string{"/usr/local/lib/python3*/dist-packages/nvidia/*/lib", "/usr/lib/python3*/dist-packages/nvidia/*/lib",
		"/usr/local/lib/python3*/site-packages/nvidia/*/lib", "/opt/conda/lib/python3*/site-packages/nvidia/*/lib", "/opt/conda/lib"}
	// A virtual environment's wheels, and a user's (pip install --user):
	// the active one, and any whose bin directory is on $PATH (a python3
	// that holds PyTorch without the environment being activated).
	roots := []string{os.Getenv("VIRTUAL_ENV"), os.Getenv("CONDA_PREFIX")}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if root := filepath.Dir(d); filepath.Base(d) == "bin" && root != "/" {
			if _, err := os.Stat(filepath.Join(root, "pyvenv.cfg")); err == nil {
				roots = append(roots, root)
			}
		}
	}
	for _, root := range roots {
		if root != "" {
			pats = append(pats, filepath.Join(root, "lib/python3*/site-packages/nvidia/*/lib"), filepath.Join(root, "lib"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		pats = append(pats, filepath.Join(home, ".local/lib/python3*/site-packages/nvidia/*/lib"))
	}
	for _, pat := range pats {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	return dirs
}

// companions are the libraries that the CUDA library lib needs from its
// own directory, where the system's loader may not look: cuBLAS links
// cuBLASLt, and NVRTC opens its builtins by name when it compiles.
// PyTorch's NVIDIA wheels put each beside its library, with no search
// path to it. Opened first, they are found by name (the loader matches a
// library already open by its soname).
func companions(dir, lib string) []string {
	var pat string
	switch {
	case strings.HasPrefix(lib, "libcublas.so."):
		pat = "libcublasLt.so." + strings.TrimPrefix(lib, "libcublas.so.")
	case strings.HasPrefix(lib, "libnvrtc.so."):
		major, _, _ := strings.Cut(strings.TrimPrefix(lib, "libnvrtc.so."), ".")
		pat = "libnvrtc-builtins.so." + major + ".*"
	default:
		return nil
	}
	m, _ := filepath.Glob(filepath.Join(dir, pat))
	return m
}

// openAny opens the first of names found in libraryDirs (with its
// companions), then on the system's search path; the error names every
// library and place tried.
func openAny(what string, names []string) (uintptr, string, error) {
	var tried []string
	for _, dir := range libraryDirs() {
		for _, n := range names {
			p := filepath.Join(dir, n)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			for _, c := range companions(dir, n) {
				if _, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_LOCAL); err != nil {
					tried = append(tried, fmt.Sprintf("%s (%v)", c, err))
				}
			}
			h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err == nil {
				return h, p, nil
			}
			tried = append(tried, fmt.Sprintf("%s (%v)", p, err))
		}
	}
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, n, nil
		}
		tried = append(tried, fmt.Sprintf("%s on the system's search path (%v)", n, err))
	}
	return 0, "", fmt.Errorf("%w: %s (%s): tried %s; install the CUDA toolkit's library, or name its directory in $%s",
		ErrNoLibrary, what, strings.Join(names, ", "), strings.Join(tried, "; "), DirEnv)
}

// bind registers each named symbol of h into its function pointer.
func bind(h uintptr, where string, syms map[string]any) error {
	if name := missing(h, syms); name != "" {
		return fmt.Errorf("%w: %s has no %s", ErrNoLibrary, where, name)
	}
	for name, fn := range syms {
		purego.RegisterLibFunc(fn, h, name)
	}
	return nil
}

// missing is the first, by name, of syms that h lacks ("" if none): the
// same one is named each time.
func missing(h uintptr, syms map[string]any) string {
	for _, name := range slices.Sorted(maps.Keys(syms)) {
		if _, err := purego.Dlsym(h, name); err != nil {
			return name
		}
	}
	return ""
}

// cstring returns s as a NUL-terminated byte slice.
func cstring(s string) []byte { return append([]byte(s), 0) }

// gostring reads a NUL-terminated C string (at most max bytes).
func gostring(p *byte, max int) string {
	if p == nil {
		return ""
	}
	var out []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0 && len(out) < max; q = unsafe.Add(q, 1) {
		out = append(out, *(*byte)(q))
	}
	return string(out)
}

// cublas is the part of cuBLAS the backend calls.
type cublas struct {
	create  func(h *uintptr) int32
	destroy func(h uintptr) int32
	sgemm   func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uint64, lda int32, b uint64, ldb int32, beta *float32, c uint64, ldc int32) int32
	// sgemmStrided is cublasSgemmStridedBatched: count GEMMs, operand i
	// at i·stride elements from each base.
	sgemmStrided func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uint64, lda int32, sa int64, b uint64, ldb int32, sb int64, beta *float32, c uint64, ldc int32, sc int64, count int32) int32
	// setStream is cublasSetStream: the stream the GEMMs go to (0, or
	// the stream a step is captured on).
	setStream func(h uintptr, stream uintptr) int32
	// setWorkspace is cublasSetWorkspace: the device memory the GEMMs
	// work in (newWorkspace); nil where an old cuBLAS lacks it, which
	// then works in its own.
	setWorkspace func(h uintptr, ws uint64, bytes uintptr) int32
}

func loadCuBLAS() (*cublas, string, error) {
	h, where, err := openAny("cuBLAS", cublasNames)
	if err != nil {
		return nil, "", err
	}
	c, err := bindCuBLAS(h, where)
	return c, where, err
}

// bindCuBLAS binds cuBLAS's functions from the library h (where names it).
func bindCuBLAS(h uintptr, where string) (*cublas, error) {
	var c cublas
	bind(h, where, map[string]any{"cublasSetWorkspace_v2": &c.setWorkspace}) // optional: left nil where missing
	return &c, bind(h, where, map[string]any{"cublasCreate_v2": &c.create, "cublasDestroy_v2": &c.destroy, "cublasSgemm_v2": &c.sgemm,
		"cublasSgemmStridedBatched": &c.sgemmStrided, "cublasSetStream_v2": &c.setStream})
}

// api is the part of the driver API the compute backend calls.
type api struct {
	driver
	retain  func(ctx *uintptr, dev int32) int32
	release func(dev int32) int32
	setCtx  func(ctx uintptr) int32
	alloc   func(p *uint64, bytes uintptr) int32
	free    func(p uint64) int32
	htod    func(dst uint64, src unsafe.Pointer, bytes uintptr) int32
	// htodAsync copies from page-locked memory (allocHost) in stream
	// order, without waiting for the stream first.
	htodAsync func(dst uint64, src unsafe.Pointer, bytes uintptr, stream uintptr) int32
	allocHost func(p *unsafe.Pointer, bytes uintptr) int32
	dtoh      func(dst unsafe.Pointer, src uint64, bytes uintptr) int32
	dtod      func(dst, src uint64, bytes uintptr) int32
	memset32  func(dst uint64, v uint32, n uintptr) int32
	loadData  func(mod *uintptr, image *byte) int32
	function  func(fn *uintptr, mod uintptr, name *byte) int32
	launch    func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params, extra unsafe.Pointer) int32
	syncCtx   func() int32
	unloadMod func(mod uintptr) int32
	// graph is the driver's graph API, where it has it (noGraph says why
	// not otherwise): a training step captured once and replayed.
	graph   graphAPI
	noGraph string
}

func loadAPI() (*api, string, error) {
	h, where, err := open()
	if err != nil {
		return nil, "", err
	}
	a, err := bindAPI(h, where)
	return a, where, err
}

// bindAPI binds the driver API's functions from the library h (where
// names it).
func bindAPI(h uintptr, where string) (*api, error) {
	var a api
	if err := bind(h, where, a.graph.symbols()); err != nil {
		a.noGraph = err.Error()
	}
	return &a, bind(h, where, map[string]any{
		"cuInit": &a.init, "cuDriverGetVersion": &a.driverVersion, "cuDeviceGetCount": &a.count, "cuDeviceGet": &a.get,
		"cuDeviceGetName": &a.name, "cuDeviceTotalMem_v2": &a.totalMem, "cuDeviceGetAttribute": &a.attribute,
		"cuGetErrorName": &a.errorName, "cuDevicePrimaryCtxRetain": &a.retain, "cuDevicePrimaryCtxRelease_v2": &a.release,
		"cuCtxSetCurrent": &a.setCtx, "cuMemAlloc_v2": &a.alloc, "cuMemFree_v2": &a.free, "cuMemcpyHtoD_v2": &a.htod,
		"cuMemcpyHtoDAsync_v2": &a.htodAsync, "cuMemAllocHost_v2": &a.allocHost,
		"cuMemcpyDtoH_v2": &a.dtoh, "cuMemcpyDtoD_v2": &a.dtod, "cuMemsetD32_v2": &a.memset32, "cuModuleLoadData": &a.loadData,
		"cuModuleGetFunction": &a.function, "cuLaunchKernel": &a.launch, "cuCtxSynchronize": &a.syncCtx, "cuModuleUnload": &a.unloadMod,
	})
}
