//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// TestBindingsABI calls every driver API and cuBLAS function the backend
// binds, through the same bindings (bindAPI, bindCuBLAS), into C
// stand-ins (testdata/abicheck.c, built with gcc) that check each
// argument as C receives it: 64-bit addresses and sizes whole, negative
// ints, floats behind pointers, a kernel's argument list, and the
// arguments past the registers (cuLaunchKernel's 11, the strided GEMM's
// 18). The emulated GPU replaces these functions with Go ones, so
// without this test a binding whose types do not match C's would first
// show on a GPU.
func TestBindingsABI(t *testing.T) {
	lib := os.Getenv("GOSSIPD_ABICHECK_LIB") // built for another architecture (make qemu)
	if lib == "" {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			t.Fatalf("the ABI test builds its stand-ins with gcc: %v", err)
		}
		lib = filepath.Join(t.TempDir(), "libabicheck.so")
		if out, err := exec.Command(gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", lib, "testdata/abicheck.c").CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	a, err := bindAPI(h, lib)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := bindCuBLAS(h, lib)
	if err != nil {
		t.Fatal(err)
	}
	const (
		dptr   = uint64(0x1122334455667788)
		size   = uintptr(0x0000000987654321)
		stream = uintptr(0x0123456789abcdef)
		handle = uintptr(0x00007f0011223344)
	)
	check := func(name string, r int32) {
		t.Helper()
		if r != 0 {
			t.Errorf("%s: C received argument %d other than passed", name, r)
		}
	}
	var ctx uintptr
	check("cuDevicePrimaryCtxRetain", a.retain(&ctx, -3))
	if ctx != handle {
		t.Errorf("cuDevicePrimaryCtxRetain wrote %#x, want %#x", ctx, handle)
	}
	check("cuDevicePrimaryCtxRelease", a.release(-3))
	check("cuCtxSetCurrent", a.setCtx(handle))
	var p uint64
	check("cuMemAlloc", a.alloc(&p, size))
	if p != dptr {
		t.Errorf("cuMemAlloc wrote %#x, want %#x", p, dptr)
	}
	check("cuMemFree", a.free(dptr))
	word := uint32(0xcafef00d)
	check("cuMemcpyHtoD", a.htod(dptr, unsafe.Pointer(&word), size))
	check("cuMemcpyHtoDAsync", a.htodAsync(dptr, unsafe.Pointer(&word), size, stream))
	var pinned unsafe.Pointer
	check("cuMemAllocHost", a.allocHost(&pinned, size))
	if pinned == nil || *(*byte)(pinned) != 'p' {
		t.Errorf("cuMemAllocHost wrote %v", pinned)
	}
	var got uint32
	check("cuMemcpyDtoH", a.dtoh(unsafe.Pointer(&got), dptr, size))
	if got != 0xbeefcafe {
		t.Errorf("cuMemcpyDtoH wrote %#x", got)
	}
	check("cuMemcpyDtoD", a.dtod(dptr, ^dptr, size))
	check("cuMemsetD32", a.memset32(dptr, 0xfedcba98, size))
	var mod, fn uintptr
	check("cuModuleLoadData", a.loadData(&mod, &cstring("IMAGE")[0]))
	check("cuModuleGetFunction", a.function(&fn, mod, &cstring("softmax_xent")[0]))
	if mod != handle || fn != stream {
		t.Errorf("cuModuleLoadData and cuModuleGetFunction wrote %#x and %#x", mod, fn)
	}
	x, alpha, n := dptr, float32(-2.5), int64(-5000000000)
	params := []unsafe.Pointer{unsafe.Pointer(&x), unsafe.Pointer(&alpha), unsafe.Pointer(&n)}
	check("cuLaunchKernel", a.launch(stream, 0x80000001, 2, 3, 1024, 5, 6, 0x7fff0000, handle, unsafe.Pointer(&params[0]), nil))
	check("cuCtxSynchronize", a.syncCtx())
	check("cuModuleUnload", a.unloadMod(handle))

	var bh uintptr
	check("cublasCreate", bl.create(&bh))
	if bh != handle {
		t.Errorf("cublasCreate wrote %#x", bh)
	}
	one5, quarter := float32(1.5), float32(-0.25)
	check("cublasSgemm", bl.sgemm(handle, 1, 0, 7, -8, 9, &one5, dptr, 11, ^dptr, 12, &quarter, dptr^0xffff, 13))
	check("cublasSgemmStridedBatched", bl.sgemmStrided(handle, 0, 1, 7, 8, -9, &one5, dptr, 11, -0x123456789, ^dptr, 12, 0x7edcba987, &quarter, dptr^0xffff, 13, 0x100000000, 4097))
	check("cublasSetStream", bl.setStream(handle, stream))
	if bl.setWorkspace == nil {
		t.Fatal("cublasSetWorkspace is not bound from the stand-in cuBLAS, which has it")
	}
	check("cublasSetWorkspace", bl.setWorkspace(handle, dptr, size))
	check("cublasDestroy", bl.destroy(handle))

	if a.noGraph != "" {
		t.Fatalf("the stand-in driver has the graph API, yet: %s", a.noGraph)
	}
	g := &a.graph
	var s, graph, exec, ev uintptr
	check("cuStreamCreate", g.streamCreate(&s, streamNonBlocking))
	check("cuStreamBeginCapture", g.beginCapture(stream, captureThreadLocal))
	check("cuStreamEndCapture", g.endCapture(stream, &graph))
	check("cuGraphInstantiateWithFlags", g.instantiate(&exec, handle, 0x8000000000000001))
	check("cuEventCreate", g.eventCreate(&ev, eventNoTiming))
	if s != stream || graph != handle || exec != stream || ev != handle {
		t.Errorf("the graph API wrote stream %#x, graph %#x, exec %#x, event %#x", s, graph, exec, ev)
	}
	check("cuGraphLaunch", g.launch(stream, handle))
	check("cuEventRecord", g.eventRecord(handle, stream))
	check("cuEventSynchronize", g.eventSync(handle))
	check("cuEventDestroy", g.eventDestroy(handle))
	check("cuGraphDestroy", g.destroy(handle))
	check("cuGraphExecDestroy", g.execDestroy(stream))
	check("cuStreamDestroy", g.streamDestroy(stream))
	check("cuMemFreeHost", g.freeHost(pinned))
}
