//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	_ "embed"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/gossipd/gossipd/model/compute"
)

//go:embed kernels.cu
var kernelSource string

// kernelNames are kernels.cu's entry points.
var kernelNames = []string{"broadcast_rows", "relu", "relu_into", "relu_backward", "column_sums", "column_sums_axpby", "gather_rows", "softmax_xent", "hinge_ovr",
	"axpby", "sgd_update", "adam_update", "sum_squares", "row_sum_squares", "scale_rows", "softmax",
	"im2col", "col2im", "channel_bias", "channel_sums", "pool", "pool_backward", "activate", "activate_backward",
	"norm_forward", "norm_input_grad", "norm_param_grads", "mul", "zero",
	"interpolate_rows", "combine_rows", "sum_squares_rows", "mean_rows", "moments_rows", "distance_rows", "tally_rows", "trimmed_rows", "pair_distance_rows", "average_rows", "clip_rows", "quantize_rows", "mask_rows", "top_k_rows"}

const (
	threads    = 256 // block size of the element-wise kernels
	rowThreads = 128 // ROW_THREADS in kernels.cu
	colGroups  = 8   // COL_GROUPS in kernels.cu
)

// Backend is the CUDA compute backend: tensors in the GPU's memory, GEMM
// by cuBLAS, the other kernels compiled from kernels.cu by NVRTC when it
// opens. Host tensors given to a kernel are copied over (and back, where
// the kernel writes them). It serialises its calls: one goroutine at a
// time computes on it. A CUDA failure inside a kernel call panics, naming
// the call and the driver's error, as a bad shape does on the CPU.
type Backend struct {
	dev  Device
	a    *api
	blas *cublas
	mu   sync.Mutex
	ctx  uintptr
	mod  uintptr
	fn   map[string]uintptr
	bh   uintptr // cuBLAS handle
	// scratch buffers for host operands (by operand position), gathered
	// rows, convolutions, labels and indices, and reduced scalars.
	host   [8]devBuf
	gather devBuf
	conv   [3]devBuf // a convolution's unrolled inputs, weight gradients and input gradients
	ints   devBuf
	sums   devBuf
	rows   devBuf // row losses
	scales devBuf // ScaleRows' factors
	// workspace is the device memory cuBLAS works in (newWorkspace).
	workspace devBuf
	stage     stage
	libs      string
	image     string // the kernels' build: "cubin sm_90", "PTX compute_90"
	mem       memCount
	// rec is the step a StepGraph captures or replays, if any, and
	// stream the stream the kernels, GEMMs and uploads go to: 0 (the
	// context's), or the capture's.
	rec    *recording
	stream uintptr
	closed bool
	// prof, where set, times each call (Profile).
	prof *profile
}

// devBuf is a grow-only device buffer.
type devBuf struct {
	p     uint64
	bytes uintptr
}

var (
	_ compute.Fused       = (*Backend)(nil)
	_ compute.Gatherer    = (*Backend)(nil)
	_ compute.GathersOnce = (*Backend)(nil)
)

// GathersOnce implements compute.GathersOnce: a gathered GEMM uploads
// its indices and launches a gather, so a minibatch two GEMMs read is
// gathered once.
func (b *Backend) GathersOnce() bool { return true }

// Open loads the driver, NVRTC and cuBLAS, makes device ordinal's primary
// context current, compiles the kernels for its compute capability and
// returns the backend.
func Open(ordinal int) (*Backend, error) {
	info, err := Probe()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= len(info.Devices) {
		return nil, fmt.Errorf("%w: no device %d (the driver has %d)", ErrNoDevice, ordinal, len(info.Devices))
	}
	a, where, err := loadAPI()
	if err != nil {
		return nil, err
	}
	rt, rtWhere, err := loadNVRTC()
	if err != nil {
		return nil, err
	}
	blas, blasWhere, err := loadCuBLAS()
	if err != nil {
		return nil, err
	}
	dev := info.Devices[ordinal]
	if err := rt.checkArch(rtWhere, dev.Major, dev.Minor); err != nil {
		return nil, err
	}
	b, err := newBackend(dev, a, blas, rt.builds(kernelSource, "kernels.cu", dev.Major, dev.Minor))
	if err != nil {
		return nil, fmt.Errorf("%w (libraries: %s, %s, %s)", err, where, rtWhere, blasWhere)
	}
	b.libs = fmt.Sprintf("%s, %s, %s; kernels: %s", where, rtWhere, blasWhere, b.image)
	return b, nil
}

// newBackend makes the device's primary context current, loads the
// kernels (the first of builds that compiles and that the driver takes)
// and creates the cuBLAS handle, through the function tables a and blas
// (the libraries', or a test's emulation of them).
func newBackend(dev Device, a *api, blas *cublas, builds []build) (*Backend, error) {
	b := &Backend{dev: dev, a: a, blas: blas, fn: map[string]uintptr{}}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := a.check("cuInit", a.init(0)); err != nil {
		return nil, err
	}
	if err := a.check("cuDevicePrimaryCtxRetain", a.retain(&b.ctx, int32(dev.Index))); err != nil {
		return nil, err
	}
	if err := a.check("cuCtxSetCurrent", a.setCtx(b.ctx)); err != nil {
		return nil, err
	}
	if err := b.loadKernels(builds); err != nil {
		return nil, err
	}
	for _, k := range kernelNames {
		var f uintptr
		name := cstring(k)
		if err := a.check("cuModuleGetFunction "+k, a.function(&f, b.mod, &name[0])); err != nil {
			return nil, err
		}
		b.fn[k] = f
	}
	if r := blas.create(&b.bh); r != 0 {
		return nil, fmt.Errorf("cuda: cublasCreate: status %d", r)
	}
	if err := b.newWorkspace(); err != nil {
		return nil, err
	}
	return b, nil
}

// loadKernels loads the first of builds that compiles and that the
// driver takes; the error says why each failed.
func (b *Backend) loadKernels(builds []build) error {
	var why []string
	for _, bd := range builds {
		img, err := bd.run()
		if err == nil {
			err = b.a.check("cuModuleLoadData", b.a.loadData(&b.mod, &img[0]))
		}
		if err == nil {
			b.image = bd.what
			return nil
		}
		why = append(why, fmt.Sprintf("%s: %v", bd.what, err))
	}
	return fmt.Errorf("cuda: the kernels did not load (%s); a cubin needs an NVRTC that knows the GPU, and a driver older than NVRTC refuses its PTX", strings.Join(why, "; "))
}

// check turns a driver result into an error naming the call.
func (a *api) check(call string, res int32) error {
	if res == 0 {
		return nil
	}
	return fmt.Errorf("cuda: %s: %s (%d)", call, a.errName(res), res)
}

// must panics on a failed driver call inside a kernel.
func (b *Backend) must(call string, res int32) {
	if err := b.a.check(call, res); err != nil {
		panic(fmt.Sprintf("%v (on %s)", err, b.dev))
	}
}

// enter serialises a call and makes the context current on its thread.
func (b *Backend) enter() func() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		panic(fmt.Sprintf("cuda: the backend on %s is used after Close", b.dev))
	}
	runtime.LockOSThread()
	b.must("cuCtxSetCurrent", b.a.setCtx(b.ctx))
	release := func() {
		runtime.UnlockOSThread()
		b.mu.Unlock()
	}
	if b.prof != nil && b.rec == nil { // not in a graph's capture or replay, which cannot wait
		return b.timed(release)
	}
	return release
}

// Name implements compute.Backend.
func (b *Backend) Name() string { return fmt.Sprintf("cuda:%d/%s", b.dev.Index, b.dev.Name) }

// Device describes the GPU; Libraries says where the libraries came from
// and how the kernels were built.
func (b *Backend) Device() Device    { return b.dev }
func (b *Backend) Libraries() string { return b.libs }

// grow makes buf hold at least bytes.
func (b *Backend) grow(buf *devBuf, bytes uintptr) uint64 {
	if buf.bytes >= bytes && buf.p != 0 {
		return buf.p
	}
	if buf.p != 0 {
		// Kernels queued before may still read it.
		b.must("cuCtxSynchronize", b.a.syncCtx())
		b.memFree(buf.p)
	}
	bytes = max(bytes, 2*buf.bytes, 256)
	buf.p = b.memAlloc(bytes)
	buf.bytes = bytes
	return buf.p
}

// ptr returns the device address of t's view. A host tensor goes to
// scratch slot i, copied over when the kernel reads or writes it (a
// kernel may write part of it, and the rest must come back as it was);
// the returned function copies it back when the kernel wrote it.
func (b *Backend) ptr(t compute.Tensor, slot int, read, written bool) (uint64, func()) {
	if t.Len() == 0 {
		return 0, func() {}
	}
	if !t.OnHost() {
		addr, off := t.Device()
		return uint64(addr) + 4*uint64(off), func() {}
	}
	x := t.HostSlice()
	bytes := uintptr(4 * len(x))
	p := b.grow(&b.host[slot], bytes)
	if read || written {
		b.must("cuMemcpyHtoD", b.a.htod(p, unsafe.Pointer(&x[0]), bytes))
	}
	if !written {
		return p, func() {}
	}
	return p, func() { b.must("cuMemcpyDtoH", b.a.dtoh(unsafe.Pointer(&x[0]), p, bytes)) }
}

// karg is a kernel argument: a pointer to its value, and its size.
type karg struct {
	p unsafe.Pointer
	n uintptr
}

// launch runs kernel name on grid×block threads with args.
func (b *Backend) launch(name string, grid, block int, args ...karg) {
	if grid == 0 {
		return
	}
	if r := b.rec; r != nil {
		sig := append(append(r.sig[:0], 'k'), name...)
		sig = appendU64(sig, uint64(grid), uint64(block))
		for _, a := range args {
			sig = append(sig, unsafe.Slice((*byte)(a.p), a.n)...)
		}
		if r.note(sig) {
			return
		}
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	ptrs := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		pin.Pin(a.p)
		ptrs[i] = a.p
	}
	pin.Pin(&ptrs[0])
	b.must("cuLaunchKernel "+name, b.a.launch(b.fn[name], uint32(grid), 1, 1, uint32(block), 1, 1, 0, b.stream, unsafe.Pointer(&ptrs[0]), nil))
}

// blocks is how many blocks of size cover n values.
func blocks(n, size int) int { return (n + size - 1) / size }
