//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestLibraryDirsVenvOnPath: the NVIDIA wheels of a virtual environment
// whose bin directory is on $PATH are searched though the environment
// is not activated (as where a plain python3 is a venv's, holding
// PyTorch); a bin directory that is not a venv's adds nothing.
func TestLibraryDirsVenvOnPath(t *testing.T) {
	root := t.TempDir()
	venv, plain := filepath.Join(root, "venv"), filepath.Join(root, "plain")
	lib := filepath.Join(venv, "lib/python3.12/site-packages/nvidia/cu13/lib")
	other := filepath.Join(plain, "lib/python3.12/site-packages/nvidia/cu13/lib")
	for _, d := range []string{lib, other, filepath.Join(venv, "bin"), filepath.Join(plain, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("CONDA_PREFIX", "")
	has := func(dirs []string, d string) bool { return slices.Contains(dirs, d) }
	t.Setenv("PATH", filepath.Join(plain, "bin")+":/usr/bin")
	if dirs := libraryDirs(); has(dirs, lib) || has(dirs, other) {
		t.Fatalf("no venv on $PATH, yet libraryDirs has its wheels: %q", dirs)
	}
	t.Setenv("PATH", filepath.Join(plain, "bin")+":"+filepath.Join(venv, "bin")+":/usr/bin")
	if dirs := libraryDirs(); !has(dirs, lib) || has(dirs, other) {
		t.Fatalf("libraryDirs %q: want %s (the venv on $PATH) and not %s (no pyvenv.cfg)", dirs, lib, other)
	}
}
