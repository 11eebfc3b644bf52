//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ebitengine/purego"
)

// TestOpenCompanions: a cuBLAS whose cuBLASLt lies beside it, and an
// NVRTC that opens its builtins by name, load from a directory the
// system's loader does not search (as PyTorch's NVIDIA wheels lay them
// out), because openAny opens the companions first. The stand-ins carry
// a version no real CUDA has, so a real library open in the process
// cannot answer for them.
func TestOpenCompanions(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("the loader's tests build stand-in libraries with gcc: %v", err)
	}
	dir := t.TempDir()
	cc := func(lib string, args ...string) {
		t.Helper()
		args = append([]string{"-shared", "-fPIC", "-o", filepath.Join(dir, lib), "-Wl,-soname," + lib, "testdata/fakecompanion.c"}, args...)
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", lib, err, out)
		}
	}
	cc("libcublasLt.so.99", "-DLT")
	cc("libcublas.so.99", "-DCUBLAS", "-L"+dir, "-l:libcublasLt.so.99")
	cc("libnvrtc-builtins.so.99.1", "-DBUILTINS")
	cc("libnvrtc.so.99", "-DNVRTC", `-DBUILTINS_NAME="libnvrtc-builtins.so.99.1"`, "-ldl")
	t.Setenv(DirEnv, dir)
	if _, err := purego.Dlopen(filepath.Join(dir, "libcublas.so.99"), purego.RTLD_NOW); err == nil {
		t.Fatal("the stand-in cuBLAS opened without its cuBLASLt: the test checks nothing")
	}

	call := func(what string, names []string, fn string) int32 {
		t.Helper()
		h, where, err := openAny(what, names)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(dir, names[0]); where != want {
			t.Fatalf("%s from %s, want %s", what, where, want)
		}
		var f func() int32
		purego.RegisterLibFunc(&f, h, fn)
		return f()
	}
	if v := call("cuBLAS", []string{"libcublas.so.99"}, "fakeCublasLt"); v != 99 {
		t.Fatalf("cuBLASLt answered %d, want 99", v)
	}
	if ok := call("NVRTC", []string{"libnvrtc.so.99"}, "fakeNvrtcBuiltins"); ok != 1 {
		t.Fatal("the stand-in NVRTC could not open its builtins by name")
	}
}
