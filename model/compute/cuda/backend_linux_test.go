//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestBindingsRegister registers every function type the backend binds
// against a libc symbol: purego checks a signature when it registers it,
// so a type it cannot call (on this architecture) fails here, without a
// GPU. The functions are never called.
func TestBindingsRegister(t *testing.T) {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatalf("libc: %v", err)
	}
	n := 0
	for _, s := range []any{&api{}, &nvrtc{}, &cublas{}} {
		var walk func(v reflect.Value)
		walk = func(v reflect.Value) {
			for i := range v.NumField() {
				f := v.Field(i)
				switch f.Kind() {
				case reflect.Struct:
					walk(f)
				case reflect.Func:
					func() {
						defer func() {
							if r := recover(); r != nil {
								t.Errorf("%s.%s (%s): purego refuses it: %v", v.Type(), v.Type().Field(i).Name, f.Type(), r)
							}
						}()
						purego.RegisterLibFunc(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Interface(), h, "getpid")
						n++
					}()
				}
			}
		}
		walk(reflect.ValueOf(s).Elem())
	}
	if n < 30 {
		t.Fatalf("registered %d functions, want every binding", n)
	}
}

// TestOpenFakeDriver: the stand-in driver has no context or memory
// functions, so Open names the first it lacks (or, on a machine without
// NVRTC, the library and every place it looked).
func TestOpenFakeDriver(t *testing.T) {
	fakeDriver(t)
	_, err := Open(0)
	if !errors.Is(err, ErrNoLibrary) {
		t.Fatalf("err = %v, want ErrNoLibrary", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "has no cu") && !strings.Contains(msg, "NVRTC") {
		t.Fatalf("err = %v, want the missing driver symbol or library named", err)
	}
	if _, err := Open(5); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Open(5) = %v, want ErrNoDevice", err)
	}
}

// emulatedBackend is the Backend over the emulated driver and cuBLAS.
func emulatedBackend(t *testing.T) *Backend {
	t.Helper()
	b, _ := emulated(t)
	return b
}

// emulated is emulatedBackend with its emulator.
func emulated(t testing.TB) (*Backend, *emulator) {
	t.Helper()
	e := newEmulator(t)
	b, err := newBackend(Device{Name: "emulated GPU", Major: 9}, e.api(), e.blas(), []build{image("PTX emulated", "PTX")})
	if err != nil {
		t.Fatal(err)
	}
	return b, e
}

// image is a build that gives img (the emulated driver refuses one that
// starts with "BAD", as a driver refuses PTX newer than it).
func image(what, img string) build {
	return build{what, func() ([]byte, error) { return []byte(img + "\x00"), nil }}
}

// TestLoadKernelsFallsBack: the backend loads the first build that
// compiles and that the driver takes, says which, and names why each
// failed when none does.
func TestLoadKernelsFallsBack(t *testing.T) {
	e := newEmulator(t)
	broken := build{"cubin sm_120", func() ([]byte, error) { return nil, errors.New("NVRTC could not compile kernels.cu for sm_120") }}
	b, err := newBackend(Device{Name: "emulated GPU", Major: 9}, e.api(), e.blas(),
		[]build{broken, image("PTX compute_120", "BAD"), image("PTX compute_90", "PTX")})
	if err != nil {
		t.Fatal(err)
	}
	if b.image != "PTX compute_90" {
		t.Fatalf("loaded %q, want the third build", b.image)
	}
	_, err = newBackend(Device{Name: "emulated GPU", Major: 9}, e.api(), e.blas(), []build{broken, image("PTX compute_120", "BAD")})
	if err == nil {
		t.Fatal("no build loads, yet the backend opened")
	}
	for _, want := range []string{"cubin sm_120: ", "for sm_120", "PTX compute_120: cuda: cuModuleLoadData", "(222)"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v\nwant it to name %q", err, want)
		}
	}
}

// TestEmulatedKernels runs the checks a GPU is to pass on the backend's
// Go code and kernels.cu, both emulated on the CPU: every kernel (through
// host and device tensors), the training steps of every model and
// optimizer against the pure-Go CPU backend, and models stacked side by
// side against each alone.
func TestEmulatedKernels(t *testing.T) {
	b := emulatedBackend(t)
	backendtest.Kernels(t, b)
	backendtest.Layers(t, b)
	backendtest.TrainSteps(t, b)
	backendtest.StackSteps(t, b)
	backendtest.Graphs(t, b)
	if err := b.SelfCheck(); err != nil {
		t.Fatal(err)
	}
}

// TestCUDAConformance runs the checks on the real GPU, where there is one:
// every kernel, the training steps of every model and optimizer against
// the pure-Go CPU backend, and stacked models (model.Stack) against each
// alone. Where the driver, NVRTC or cuBLAS is
// missing, or the driver sees no device, it says so and checks nothing
// (TestEmulatedKernels checks the same code without a GPU).
func TestCUDAConformance(t *testing.T) {
	b, err := Open(0)
	if errors.Is(err, ErrNoLibrary) || errors.Is(err, ErrNoDevice) || errors.Is(err, ErrNotBuilt) {
		t.Logf("not run: no usable GPU here: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("a GPU is here, but the backend did not open: %v", err)
	}
	t.Logf("running on %s (libraries %s)", b.Name(), b.Libraries())
	if err := b.SelfCheck(); err != nil {
		t.Fatal(err)
	}
	backendtest.Kernels(t, b)
	backendtest.Layers(t, b)
	backendtest.TrainSteps(t, b)
	backendtest.StackSteps(t, b)
	backendtest.Graphs(t, b)
}
