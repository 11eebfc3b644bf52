package compute

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// KernelEnv names the environment variable that forces a kernel set for
// every backend that does not choose one with WithKernel: "go", "avx2",
// "avx512" or, on arm64, "neon". Tests use it to run the whole suite on each path; a value this
// CPU or build cannot run is an error (see CheckKernelEnv), never a silent
// fallback.
const KernelEnv = "GOSSIPD_KERNEL"

// kernels is one set of micro-kernels: the packed GEMM's, the small
// path's, softmax's exponential, pooling's, the interpolation of two
// models (InterpolateInto) and a weighted sum of models (CombineInto).
type kernels struct {
	name             string
	packed           kernelFunc
	dot              dotKernel
	dotRows, dotCols int // the dot kernel's block
	axpy             axpyKernel
	exp              expKernel
	pool2            pool2Kernel
	pool2Back        pool2BackKernel
	interp           interpKernel
	combine          combineKernel
	// combineVec: combine is the vector kernel (combineVec), which
	// CombineInto calls directly.
	combineVec bool
}

var goKernels = &kernels{name: "go", packed: kernelGo, dot: dotGo, dotRows: 4, dotCols: 4, axpy: axpyGo, exp: expGo, pool2: maxPool2Go, pool2Back: maxPool2BackGo, interp: interpGo, combine: combineGo}

// kernelSets lists the sets this build and CPU can run, best first; the
// last is always the pure-Go set. Filled by the architecture files.
var kernelSets = func() []*kernels { return append(archKernels(), goKernels) }()

// Kernels names the kernel sets this build can run on this CPU, best first
// ("avx512", "avx2", "go" on an AVX-512 machine; "neon", "go" on arm64;
// "go" alone with the noasm tag or elsewhere).
func Kernels() []string {
	out := make([]string, len(kernelSets))
	for i, k := range kernelSets {
		out[i] = k.name
	}
	return out
}

// knownKernels are every set's name, whether or not it can run here.
var knownKernels = []string{"avx512", "avx2", "neon", "go"}

func findKernels(name string) (*kernels, error) {
	for _, k := range kernelSets {
		if k.name == name {
			return k, nil
		}
	}
	for _, k := range knownKernels {
		if k == name {
			return nil, fmt.Errorf("compute: kernel %q cannot run here (this build and CPU run %s)", name, strings.Join(Kernels(), ", "))
		}
	}
	return nil, fmt.Errorf("compute: unknown kernel %q (want one of %s)", name, strings.Join(knownKernels, ", "))
}

// CheckKernel reports whether the named kernel set can run here.
func CheckKernel(name string) error {
	_, err := findKernels(name)
	return err
}

// envKernels is the set $GOSSIPD_KERNEL forces, or the best one.
var envKernels = sync.OnceValues(func() (*kernels, error) {
	v, ok := os.LookupEnv(KernelEnv)
	if !ok || v == "" {
		return kernelSets[0], nil
	}
	k, err := findKernels(v)
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", KernelEnv, err)
	}
	return k, nil
})

// CheckKernelEnv reports a $GOSSIPD_KERNEL that names a kernel set this
// build or CPU cannot run. Programs call it at start to fail with a clear
// message; NewCPU panics with the same message otherwise.
func CheckKernelEnv() error {
	_, err := envKernels()
	return err
}
