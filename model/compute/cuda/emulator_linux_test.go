//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// The CUDA backend without a GPU: its Go code (Backend, every kernel
// call, the argument lists, the host copies, the row-major GEMM mapping)
// runs against an emulated driver and cuBLAS, and kernels.cu itself runs
// on the CPU, compiled with g++ against testdata/cudaemu.h (a fiber per
// CUDA thread, switched at __syncthreads) and with AddressSanitizer (a
// kernel that overruns a buffer stops it). So backendtest's checks,
// which a real GPU is to pass, run here on kernels.cu's code. What this
// does not check: NVRTC, the real driver, cuBLAS, and speed.
//
// The emulated device runs its stream late, as a GPU may: kernels, GEMMs,
// memsets, device copies and asynchronous uploads wait in a queue and run,
// in order, only when the host synchronises (a copy to the host, a copy
// from pageable memory, cuCtxSynchronize, cuMemFree). An asynchronous
// upload reads its host memory then, not when it was queued, so host
// memory reused before the device has read it gives wrong results here.

// argKind is a kernel parameter's type.
type argKind int

const (
	argPtr argKind = iota // float*, int* or double*
	argI32
	argI64
	argF32
	argF64
)

type kernelSig struct {
	name  string
	args  []argKind
	ctype []string
}

var kernelDecl = regexp.MustCompile(`extern "C" __global__ void (\w+)\(([^)]*)\)`)

// parseKernels lists kernels.cu's entry points and their parameters.
func parseKernels(t testing.TB, src string) map[string]kernelSig {
	out := map[string]kernelSig{}
	for _, m := range kernelDecl.FindAllStringSubmatch(src, -1) {
		sig := kernelSig{name: m[1]}
		for _, p := range strings.Split(m[2], ",") {
			p = strings.Join(strings.Fields(p), " ")
			typ := p[:strings.LastIndexAny(p, " *")+1]
			typ = strings.TrimSpace(typ)
			var k argKind
			switch strings.TrimPrefix(typ, "const ") {
			case "float *", "int *", "double *":
				k = argPtr
			case "int":
				k = argI32
			case "long":
				k = argI64
			case "float":
				k = argF32
			case "double":
				k = argF64
			default:
				t.Fatalf("kernel %s: parameter %q: type %q not emulated", sig.name, p, typ)
			}
			sig.args = append(sig.args, k)
			sig.ctype = append(sig.ctype, typ)
		}
		out[sig.name] = sig
	}
	return out
}

// helperSource is the C++ program that runs one launch per request of
// the kernels in the file kernels, with testdata/cudaemu.h (in dir).
func helperSource(dir, kernels string, sigs map[string]kernelSig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#include %q\n#include %q\n#include <cstdio>\n#include <string>\n#include <vector>\n", filepath.Join(dir, "cudaemu.h"), kernels)
	b.WriteString(`template <class T> static T rd() { T v; if (fread(&v, sizeof v, 1, stdin) != 1) exit(0); return v; }
int main() {
    for (;;) {
        unsigned len = rd<unsigned>();
        std::string name(len, 0);
        if (fread(&name[0], 1, len, stdin) != len) return 1;
        unsigned grid = rd<unsigned>(), block = rd<unsigned>(), nbuf = rd<unsigned>();
        std::vector<std::vector<char>> bufs(nbuf);
        for (auto &bu : bufs) { bu.resize(rd<unsigned long long>()); if (!bu.empty() && fread(bu.data(), 1, bu.size(), stdin) != bu.size()) return 1; }
        auto ptr = [&]() -> void * { unsigned i = rd<unsigned>(); unsigned long long off = rd<unsigned long long>(); return i == 0xffffffffu ? nullptr : bufs[i].data() + off; };
        (void)ptr;
`)
	for _, name := range slices.Sorted(maps.Keys(sigs)) {
		s := sigs[name]
		fmt.Fprintf(&b, "        if (name == %q) {\n", name)
		var call []string
		for i, k := range s.args {
			switch k {
			case argPtr:
				fmt.Fprintf(&b, "            auto a%d = (%s)ptr();\n", i, s.ctype[i])
			case argI32:
				fmt.Fprintf(&b, "            int a%d = rd<int>();\n", i)
			case argI64:
				fmt.Fprintf(&b, "            long a%d = rd<long long>();\n", i)
			case argF32:
				fmt.Fprintf(&b, "            float a%d = rd<float>();\n", i)
			case argF64:
				fmt.Fprintf(&b, "            double a%d = rd<double>();\n", i)
			}
			call = append(call, fmt.Sprintf("a%d", i))
		}
		fmt.Fprintf(&b, "            emu_launch(grid, block, [&] { %s(%s); });\n        }\n", name, strings.Join(call, ", "))
	}
	b.WriteString(`        for (auto &bu : bufs) fwrite(bu.data(), 1, bu.size(), stdout);
        fflush(stdout);
    }
}
`)
	return b.String()
}

// emulator is the driver and cuBLAS a Backend under test calls: device
// memory is Go memory at made-up addresses, kernels run in the helper.
type emulator struct {
	t    testing.TB
	mu   sync.Mutex
	bufs map[uint64][]byte
	next uint64
	sigs map[string]kernelSig
	fns  []string
	in   *bufio.Writer
	out  *bufio.Reader
	errs []byte // a NUL-terminated error name for cuGetErrorName
	// queue holds the stream's operations not run yet; pinned the
	// page-locked host memory handed out.
	queue  []func() int32
	pinned [][]byte
	// Syncs counts the times the host waited for the stream with work
	// queued.
	syncs int
	graphEmu
}

// enqueue adds a stream-ordered operation.
func (e *emulator) enqueue(op func() int32) int32 {
	e.queue = append(e.queue, op)
	return 0
}

// sync runs the queued operations in order, as the host waiting for the
// stream; it returns the first failure.
func (e *emulator) sync() int32 {
	if e.capStream != 0 {
		e.t.Errorf("emulator: the host waits for the GPU while stream %#x captures (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)\n%s", e.capStream, debug.Stack())
		return 900
	}
	if len(e.queue) > 0 {
		e.syncs++
	}
	var res int32
	for len(e.queue) > 0 {
		op := e.queue[0]
		e.queue = e.queue[1:]
		if r := op(); r != 0 && res == 0 {
			res = r
		}
	}
	return res
}

func newEmulator(t testing.TB) *emulator {
	t.Helper()
	e := &emulator{t: t, bufs: map[uint64][]byte{}, next: 0x10000, errs: []byte("EMULATED_ERROR\x00")}
	var bin string
	bin, e.sigs = buildHelper(t, "kernels.cu")
	for _, k := range kernelNames {
		if _, ok := e.sigs[k]; !ok {
			t.Fatalf("kernels.cu has no %s", k)
		}
	}
	cmd := exec.Command(bin)
	w, _ := cmd.StdinPipe()
	r, _ := cmd.StdoutPipe()
	cmd.Stderr = &helperStderr{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); cmd.Wait() })
	e.in, e.out = bufio.NewWriter(w), bufio.NewReader(r)
	return e
}

// helpers are the helper programs built in this test process, by kernel
// file and extra flags: g++ takes about a second for one, and a dozen
// tests start an emulator. TestMain removes dir.
var helpers struct {
	sync.Mutex
	dir    string
	builds map[string]helperBuild
}

// helperBuild is a built helper program and its kernels' signatures
// (read only, shared by the emulators).
type helperBuild struct {
	bin  string
	sigs map[string]kernelSig
}

func TestMain(m *testing.M) {
	code := m.Run()
	if helpers.dir != "" {
		os.RemoveAll(helpers.dir)
	}
	os.Exit(code)
}

// buildHelper returns the helper program for the kernels in the file
// kernels (a path from the package's directory), compiled with g++ and
// the extra flags (-DEMU_UCONTEXT: cudaemu.h's other fiber switch) on
// first use, and the kernels' signatures.
func buildHelper(t testing.TB, kernels string, flags ...string) (string, map[string]kernelSig) {
	t.Helper()
	helpers.Lock()
	defer helpers.Unlock()
	key := strings.Join(append([]string{kernels}, flags...), " ")
	if h, ok := helpers.builds[key]; ok {
		return h.bin, h.sigs
	}
	src, err := os.ReadFile(kernels)
	if err != nil {
		t.Fatal(err)
	}
	sigs := parseKernels(t, string(src))
	if helpers.dir == "" {
		if helpers.dir, err = os.MkdirTemp("", "cudaemu"); err != nil {
			t.Fatal(err)
		}
		helpers.builds = map[string]helperBuild{}
	}
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Fatalf("the CUDA backend's emulated tests build %s with g++: %v", kernels, err)
	}
	dir, _ := filepath.Abs("testdata")
	path, _ := filepath.Abs(kernels)
	name := fmt.Sprintf("helper%d", len(helpers.builds))
	cpp, bin := filepath.Join(helpers.dir, name+".cpp"), filepath.Join(helpers.dir, name)
	if err := os.WriteFile(cpp, []byte(helperSource(dir, path, sigs)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-std=c++20", "-O1", "-Wall", "-Werror", "-Wno-unused-function",
		"-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"}
	if runtime.GOARCH == "amd64" {
		// cudaemu.h's fiber switch returns into another stack, which a
		// shadow stack (CET, where a compiler turns it on) would refuse.
		args = append(args, "-fcf-protection=none")
	}
	args = append(append(args, flags...), "-o", bin, cpp)
	if out, err := exec.Command(gxx, args...).CombinedOutput(); err != nil {
		t.Fatalf("g++ %s %s under the emulator: %v\n%s", strings.Join(flags, " "), kernels, err, out)
	}
	helpers.builds[key] = helperBuild{bin, sigs}
	return bin, sigs
}

// helperStderr passes the helper's standard error on to the test's, less
// AddressSanitizer's warning that it does not fully support swapcontext
// (cudaemu.h announces each switch of stacks to it).
type helperStderr struct{ buf []byte }

func (h *helperStderr) Write(p []byte) (int, error) {
	h.buf = append(h.buf, p...)
	for {
		i := bytes.IndexByte(h.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if line := h.buf[:i+1]; !bytes.Contains(line, []byte("ASan doesn't fully support makecontext/swapcontext")) {
			os.Stderr.Write(line)
		}
		h.buf = h.buf[i+1:]
	}
}

// find returns the buffer holding address a and a's offset in it.
func (e *emulator) find(a uint64) (uint64, uint64, bool) {
	for base, b := range e.bufs {
		if a >= base && a < base+uint64(len(b)) {
			return base, a - base, true
		}
	}
	return 0, 0, false
}

func (e *emulator) bytes(a uint64, n uintptr) []byte {
	base, off, ok := e.find(a)
	if !ok || off+uint64(n) > uint64(len(e.bufs[base])) {
		var list []string
		for b, v := range e.bufs {
			list = append(list, fmt.Sprintf("%#x+%d", b, len(v)))
		}
		e.t.Fatalf("emulator: %d bytes at %#x outside device memory (buffers %v)\n%s", n, a, list, debug.Stack())
		return make([]byte, n)
	}
	return e.bufs[base][off : off+uint64(n)]
}

func host(p unsafe.Pointer, n uintptr) []byte { return unsafe.Slice((*byte)(p), n) }

// api returns the emulated driver.
func (e *emulator) api() *api {
	a := &api{}
	a.init = func(uint32) int32 { return 0 }
	a.errorName = func(_ int32, s **byte) int32 { *s = &e.errs[0]; return 0 }
	a.retain = func(ctx *uintptr, _ int32) int32 { *ctx = 1; return 0 }
	a.release = func(int32) int32 { return 0 }
	a.setCtx = func(uintptr) int32 { return 0 }
	a.alloc = func(p *uint64, n uintptr) int32 {
		e.mu.Lock()
		defer e.mu.Unlock()
		*p = e.next
		e.bufs[e.next] = make([]byte, n)
		e.next += uint64(n) + 256
		return 0
	}
	a.free = func(p uint64) int32 {
		if r := e.sync(); r != 0 {
			return r
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if _, ok := e.bufs[p]; !ok {
			e.t.Errorf("emulator: cuMemFree of %#x, not an allocation", p)
			return 1
		}
		delete(e.bufs, p)
		return 0
	}
	a.htod = func(d uint64, s unsafe.Pointer, n uintptr) int32 {
		r := e.sync() // from pageable memory: the stream first
		copy(e.bytes(d, n), host(s, n))
		return r
	}
	a.htodAsync = func(d uint64, s unsafe.Pointer, n uintptr, stream uintptr) int32 {
		if !e.isPinned(s, n) {
			e.t.Errorf("emulator: cuMemcpyHtoDAsync from %p, not page-locked memory", s)
			return 1
		}
		return e.submit(stream, func() int32 { copy(e.bytes(d, n), host(s, n)); return 0 })
	}
	a.allocHost = func(p *unsafe.Pointer, n uintptr) int32 {
		buf := make([]byte, n)
		e.pinned = append(e.pinned, buf)
		*p = unsafe.Pointer(&buf[0])
		return 0
	}
	a.dtoh = func(d unsafe.Pointer, s uint64, n uintptr) int32 {
		r := e.sync()
		copy(host(d, n), e.bytes(s, n))
		return r
	}
	a.dtod = func(d, s uint64, n uintptr) int32 {
		return e.submit(0, func() int32 { copy(e.bytes(d, n), e.bytes(s, n)); return 0 })
	}
	a.memset32 = func(d uint64, v uint32, n uintptr) int32 {
		return e.submit(0, func() int32 {
			b := e.bytes(d, 4*n)
			for i := uintptr(0); i < n; i++ {
				binary.LittleEndian.PutUint32(b[4*i:], v)
			}
			return 0
		})
	}
	a.loadData = func(mod *uintptr, img *byte) int32 {
		if gostring(img, 8) == "BAD" {
			return 222 // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
		}
		*mod = 1
		return 0
	}
	a.function = func(fn *uintptr, _ uintptr, name *byte) int32 {
		n := gostring(name, 64)
		if _, ok := e.sigs[n]; !ok {
			return 500 // CUDA_ERROR_NOT_FOUND
		}
		e.fns = append(e.fns, n)
		*fn = uintptr(len(e.fns))
		return 0
	}
	a.launch = e.launch
	a.syncCtx = e.sync
	a.graph = e.graphAPI()
	a.unloadMod = func(uintptr) int32 { return 0 }
	return a
}

// isPinned reports whether n bytes at p lie in page-locked memory.
func (e *emulator) isPinned(p unsafe.Pointer, n uintptr) bool {
	for _, b := range e.pinned {
		lo := uintptr(unsafe.Pointer(&b[0]))
		if a := uintptr(p); a >= lo && a+n <= lo+uintptr(len(b)) {
			return true
		}
	}
	return false
}

// launch takes the kernel's arguments as they are now and queues the
// run: it sends the kernel, its buffers and arguments to the helper and
// takes the buffers back.
func (e *emulator) launch(fn uintptr, gx, gy, gz, bx, by, bz, _ uint32, stream uintptr, params, _ unsafe.Pointer) int32 {
	if gy != 1 || gz != 1 || by != 1 || bz != 1 {
		e.t.Errorf("emulator: a %d×%d×%d grid of %d×%d×%d blocks: only 1-D launches are emulated", gx, gy, gz, bx, by, bz)
		return 1
	}
	if gx == 0 || gx > math.MaxInt32 || bx == 0 || bx > 1024 {
		e.t.Errorf("emulator: a grid of %d blocks of %d threads: a GPU refuses it (CUDA_ERROR_INVALID_VALUE)", gx, bx)
		return 1
	}
	e.kernelCalls++
	sig := e.sigs[e.fns[fn-1]]
	args := unsafe.Slice((*unsafe.Pointer)(params), len(sig.args))
	var bases []uint64
	index := map[uint64]uint32{}
	var argBytes []byte
	for i, k := range sig.args {
		switch k {
		case argPtr:
			a := *(*uint64)(args[i])
			if a == 0 {
				argBytes = binary.LittleEndian.AppendUint32(argBytes, 0xffffffff)
				argBytes = binary.LittleEndian.AppendUint64(argBytes, 0)
				continue
			}
			base, off, ok := e.find(a)
			if !ok {
				e.t.Errorf("emulator: %s argument %d: %#x is not device memory", sig.name, i, a)
				return 1
			}
			j, seen := index[base]
			if !seen {
				j = uint32(len(bases))
				index[base] = j
				bases = append(bases, base)
			}
			argBytes = binary.LittleEndian.AppendUint32(argBytes, j)
			argBytes = binary.LittleEndian.AppendUint64(argBytes, off)
		case argI32:
			argBytes = binary.LittleEndian.AppendUint32(argBytes, uint32(*(*int32)(args[i])))
		case argI64:
			argBytes = binary.LittleEndian.AppendUint64(argBytes, uint64(*(*int64)(args[i])))
		case argF32:
			argBytes = binary.LittleEndian.AppendUint32(argBytes, math.Float32bits(*(*float32)(args[i])))
		case argF64:
			argBytes = binary.LittleEndian.AppendUint64(argBytes, math.Float64bits(*(*float64)(args[i])))
		}
	}
	return e.submit(stream, func() int32 { return e.run(sig, gx, bx, bases, argBytes) })
}

// run runs a queued launch in the helper.
func (e *emulator) run(sig kernelSig, gx, bx uint32, bases []uint64, argBytes []byte) int32 {
	for _, base := range bases {
		if _, ok := e.bufs[base]; !ok {
			e.t.Errorf("emulator: %s ran on device memory at %#x freed since it was launched", sig.name, base)
			return 1
		}
	}
	bufs := make([][]byte, len(bases))
	for i, base := range bases {
		bufs[i] = e.bufs[base]
	}
	writeLaunch(e.in, sig.name, gx, bx, bufs, argBytes)
	if err := e.in.Flush(); err != nil {
		e.t.Errorf("emulator: %v", err)
		return 1
	}
	for _, base := range bases {
		if _, err := io.ReadFull(e.out, e.bufs[base]); err != nil {
			e.t.Errorf("emulator: %s: reading back: %v (the helper stopped: its report, if any, is above)", sig.name, err)
			return 1
		}
	}
	return 0
}

// writeLaunch writes a request to the helper: launch the kernel name as
// gx blocks of bx threads on the buffers bufs, with the arguments
// argBytes (a buffer's index and an offset in it for a pointer). The
// helper then writes the buffers back.
func writeLaunch(w *bufio.Writer, name string, gx, bx uint32, bufs [][]byte, argBytes []byte) {
	binary.Write(w, binary.LittleEndian, uint32(len(name)))
	w.WriteString(name)
	binary.Write(w, binary.LittleEndian, [3]uint32{gx, bx, uint32(len(bufs))})
	for _, b := range bufs {
		binary.Write(w, binary.LittleEndian, uint64(len(b)))
		w.Write(b)
	}
	w.Write(argBytes)
}

// blas returns an emulated cuBLAS: a column-major SGEMM in float64.
func (e *emulator) blas() *cublas {
	c := &cublas{}
	c.create = func(h *uintptr) int32 { *h = 1; return 0 }
	c.destroy = func(uintptr) int32 { return 0 }
	c.setStream = func(_ uintptr, s uintptr) int32 { e.blasStream, e.blasWorkspace = s, 0; return 0 }
	if !e.noWorkspaceAPI {
		c.setWorkspace = func(_ uintptr, ws uint64, n uintptr) int32 {
			if buf, ok := e.bufs[ws]; !ok || uintptr(len(buf)) < n || n < 4<<20 {
				e.t.Errorf("emulator: cublasSetWorkspace of %d bytes at %#x: not a device buffer of at least 4 MiB that size", n, ws)
				return 7
			}
			e.blasWorkspace = ws
			return 0
		}
	}
	c.sgemm = func(_ uintptr, ta, tb int32, m, n, k int32, alphaP *float32, a uint64, lda int32, b uint64, ldb int32, betaP *float32, cc uint64, ldc int32) int32 {
		// cuBLAS refuses leading dimensions shorter than the column-major
		// operands' rows, as here.
		rowsA, rowsB := m, k
		if ta == 1 {
			rowsA = k
		}
		if tb == 1 {
			rowsB = n
		}
		if m < 0 || n < 0 || k < 0 || lda < max(1, rowsA) || ldb < max(1, rowsB) || ldc < max(1, m) {
			e.t.Errorf("emulator: cublasSgemm op %d,%d m %d n %d k %d lda %d ldb %d ldc %d: CUBLAS_STATUS_INVALID_VALUE", ta, tb, m, n, k, lda, ldb, ldc)
			return 7 // CUBLAS_STATUS_INVALID_VALUE
		}
		// A captured GEMM without a workspace of the caller's would make
		// cuBLAS allocate one in the graph; NVIDIA's advice is to give it
		// one (cublasSetWorkspace).
		if e.capStream != 0 && e.blasWorkspace == 0 && !e.noWorkspaceAPI {
			e.t.Errorf("emulator: a GEMM captured with no cuBLAS workspace given: cuBLAS would allocate its own in the graph")
		}
		// α and β are read at the call (host pointer mode); the GEMM
		// runs in stream order.
		alpha, beta := *alphaP, *betaP
		return e.submit(e.blasStream, func() int32 { return e.sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc) })
	}
	c.sgemmStrided = func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uint64, lda int32, sa int64, b uint64, ldb int32, sb int64, beta *float32, cc uint64, ldc int32, sc int64, count int32) int32 {
		if count < 0 {
			e.t.Errorf("emulator: cublasSgemmStridedBatched of %d: CUBLAS_STATUS_INVALID_VALUE", count)
			return 7
		}
		for i := range uint64(count) {
			if r := c.sgemm(h, ta, tb, m, n, k, alpha, a+4*i*uint64(sa), lda, b+4*i*uint64(sb), ldb, beta, cc+4*i*uint64(sc), ldc); r != 0 {
				return r
			}
		}
		return 0
	}
	return c
}

// sgemm is the emulated column-major SGEMM, in float64.
func (e *emulator) sgemm(ta, tb int32, m, n, k int32, alpha float32, a uint64, lda int32, b uint64, ldb int32, beta float32, cc uint64, ldc int32) int32 {
	// The operands as float32 views of their buffers, from their
	// start addresses to the buffers' ends.
	view := func(addr uint64) []float32 {
		base, off, ok := e.find(addr)
		if !ok {
			e.t.Fatalf("emulator: cublasSgemm operand %#x is not device memory", addr)
		}
		buf := e.bufs[base][off:]
		return unsafe.Slice((*float32)(unsafe.Pointer(&buf[0])), len(buf)/4)
	}
	A, B, C := view(a), view(b), view(cc)
	for j := int64(0); j < int64(n); j++ {
		for i := int64(0); i < int64(m); i++ {
			var s float64
			for p := int64(0); p < int64(k); p++ {
				var av, bv float32
				if ta == 1 { // op(A) = Aᵀ, A stored k×m
					av = A[p+i*int64(lda)]
				} else { // A stored m×k
					av = A[i+p*int64(lda)]
				}
				if tb == 1 {
					bv = B[j+p*int64(ldb)]
				} else {
					bv = B[p+j*int64(ldb)]
				}
				s += float64(av) * float64(bv)
			}
			v := float64(alpha) * s
			if beta != 0 {
				v += float64(beta) * float64(C[i+j*int64(ldc)])
			}
			C[i+j*int64(ldc)] = float32(v)
		}
	}
	return 0
}
