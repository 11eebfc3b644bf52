//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDriver compiles testdata/fakecuda.c into dir/libcuda.so.1 with the
// given defines and points $GOSSIPD_CUDA_DIR at dir.
func fakeDriver(t *testing.T, defines ...string) string {
	t.Helper()
	return fakeDriverFrom(t, "testdata/fakecuda.c", defines...)
}

// fakeDriverFrom is fakeDriver from another C source.
func fakeDriverFrom(t *testing.T, src string, defines ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("the loader's tests build a stand-in driver with gcc: %v", err)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, Library)
	args := append([]string{"-shared", "-fPIC", "-o", lib, src}, defines...)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	t.Setenv(DirEnv, dir)
	return lib
}

func TestProbeFakeDriver(t *testing.T) {
	lib := fakeDriver(t)
	info, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if info.Library != lib || info.DriverVersion != 12040 || len(info.Devices) != 2 {
		t.Fatalf("info %+v", info)
	}
	want := []Device{{0, "Fake GPU A", 80 << 30, 9, 0}, {1, "Fake GPU B", 40 << 30, 9, 1}}
	for i, d := range info.Devices {
		if d != want[i] {
			t.Fatalf("device %d: %+v, want %+v", i, d, want[i])
		}
	}
	if s := info.Devices[0].String(); s != "cuda:0 Fake GPU A (compute capability 9.0, 80.0 GiB)" {
		t.Fatalf("String: %q", s)
	}
	// The stand-in has no graph API: the first of its functions, by name.
	if want := lib + " has no cuEventCreate"; info.NoGraphs != want {
		t.Fatalf("NoGraphs %q, want %q", info.NoGraphs, want)
	}
}

// TestProbeGraphs: a driver with the graph API (abicheck.c's stand-ins
// beside fakecuda.c's) is reported as able to record steps.
func TestProbeGraphs(t *testing.T) {
	fakeDriverFrom(t, "testdata/abicheck.c")
	info, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if info.NoGraphs != "" || len(info.Devices) != 2 {
		t.Fatalf("info %+v: want two devices and the graph API", info)
	}
}

func TestProbeNoDevice(t *testing.T) {
	lib := fakeDriver(t, "-DNO_DEVICE")
	_, err := Probe()
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "CUDA_ERROR_NO_DEVICE") || !strings.Contains(err.Error(), lib) {
		t.Fatalf("err = %v, want ErrNoDevice naming CUDA_ERROR_NO_DEVICE and %s", err, lib)
	}
}

func TestProbeMissingSymbol(t *testing.T) {
	lib := fakeDriver(t, "-DNO_NAME")
	_, err := Probe()
	if !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), "cuDeviceGetName") || !strings.Contains(err.Error(), lib) {
		t.Fatalf("err = %v, want ErrNoLibrary naming cuDeviceGetName and %s", err, lib)
	}
}

// TestProbeNoLibrary: where neither $GOSSIPD_CUDA_DIR nor the system has
// the driver (this machine has no GPU), the error names the library and
// where it was looked for.
func TestProbeNoLibrary(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Log("this machine has an NVIDIA driver: only the directory half of the search is checked")
	}
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	_, err := Probe()
	if err == nil {
		return // a real driver was found on the system's path
	}
	for _, want := range []string{Library, filepath.Join(dir, Library), "LD_LIBRARY_PATH", "ld.so cache", DirEnv} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v\nwant it to name %q", err, want)
		}
	}
	if !errors.Is(err, ErrNoLibrary) {
		t.Fatalf("err = %v, want ErrNoLibrary", err)
	}
}
