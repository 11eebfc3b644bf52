package backendtest

import (
	"fmt"
	"sync"

	"github.com/gossipd/gossipd/model/compute"
)

// Device is a compute.Backend whose tensors are device tensors
// (compute.DeviceTensor) in a memory of its own, as a GPU's would be, and
// whose kernels run the CPU backend's on that memory. It checks, without a
// GPU, that code above the Backend seam never reads a device tensor on the
// host (compute.Tensor.HostSlice panics on one), that it frees what it
// allocates, and how many values cross between host and device: every
// host tensor a kernel takes counts as copied in, and Store as copied out.
// Same kernels, same order: its results equal the CPU backend's bit for
// bit.
type Device struct {
	cpu *compute.CPU

	mu   sync.Mutex
	bufs map[uintptr][]float32
	sums int // live LossSums
	pins int // live page-locked host buffers (AllocPinned)
	next uintptr
	st   DeviceStats
	// bytes held in tensors now, and the most at once
	inUse, peak int64
}

// DeviceStats counts a Device's traffic and memory.
type DeviceStats struct {
	// HostIn counts values of host tensors given to kernels and Load;
	// HostOut values copied to the host by Store.
	HostIn, HostOut int
	// Waits counts the calls whose result the host must wait for, as it
	// would for a GPU: Store, the losses, sums of squares and row sums
	// returned, and LossSum reads.
	Waits int
	// Live is the number of allocated buffers (LossSums and page-locked
	// host buffers included), Allocs how many tensors were ever
	// allocated.
	Live, Allocs int
	// Trimmed, Averaged and Clipped count the rows TrimmedRows,
	// AverageRows and ClipRows wrote, Pairs the distances
	// PairDistanceRows measured.
	Trimmed, Averaged, Clipped, Pairs int
	// Quantized counts the rows QuantizeRows wrote, Masked those
	// MaskRows wrote, TopK those TopKRows wrote.
	Quantized, Masked, TopK int
	// Moments counts the MomentsRows calls.
	Moments int
}

// NewDevice returns an emulated device over a CPU backend (one thread, the
// pure-Go kernels when opts say so).
func NewDevice(opts ...compute.CPUOption) *Device {
	return &Device{cpu: compute.NewCPU(opts...), bufs: map[uintptr][]float32{}, next: 1 << 20}
}

// Stats returns the counts so far.
func (d *Device) Stats() DeviceStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.st
	s.Live = len(d.bufs) + d.sums + d.pins
	return s
}

// AllocPinned implements compute.PinnedHost, with ordinary memory, each
// buffer live (Stats) until given back; a buffer given back twice panics.
func (d *Device) AllocPinned(n int) ([]float32, func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pins++
	freed := false
	return make([]float32, n), func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if freed {
			panic("backendtest: a page-locked buffer given back twice")
		}
		freed = true
		d.pins--
	}, nil
}

// Name implements compute.Backend.
func (d *Device) Name() string { return "emulated-device/" + d.cpu.Name() }

// at returns t as a host tensor over the device's memory (a device
// tensor) or t itself, counted as copied in (a host tensor).
func (d *Device) at(t compute.Tensor) compute.Tensor {
	if t.OnHost() {
		d.mu.Lock()
		d.st.HostIn += t.Len()
		d.mu.Unlock()
		return t
	}
	addr, off := t.Device()
	d.mu.Lock()
	buf, ok := d.bufs[addr]
	d.mu.Unlock()
	if !ok {
		panic(fmt.Sprintf("backendtest: device tensor at %#x used after Free (or never allocated)", addr))
	}
	return compute.Host(buf).Slice(off, off+t.Len())
}

// Alloc implements compute.Memory.
func (d *Device) Alloc(n int) compute.Tensor {
	d.mu.Lock()
	defer d.mu.Unlock()
	addr := d.next
	d.next += uintptr(4*n) + 256
	d.bufs[addr] = make([]float32, n)
	d.st.Allocs++
	d.inUse += int64(4 * n)
	d.peak = max(d.peak, d.inUse)
	return compute.DeviceTensor(addr, n)
}

// Load implements compute.Memory.
func (d *Device) Load(x []float32) compute.Tensor {
	t := d.Alloc(len(x))
	d.Copy(t, compute.Host(x))
	return t
}

// Store implements compute.Memory.
func (d *Device) Store(dst []float32, t compute.Tensor) {
	src := d.at(t)
	d.mu.Lock()
	d.st.HostOut += t.Len()
	d.st.Waits++
	d.mu.Unlock()
	d.cpu.Store(dst, src)
}

// wait counts a result the host waits for.
func (d *Device) wait() {
	d.mu.Lock()
	d.st.Waits++
	d.mu.Unlock()
}

// Copy implements compute.Memory.
func (d *Device) Copy(dst, src compute.Tensor) { d.cpu.Copy(d.at(dst), d.at(src)) }

// Free implements compute.Memory.
func (d *Device) Free(t compute.Tensor) {
	if t.OnHost() {
		panic("backendtest: Free of a host tensor on a device backend")
	}
	addr, _ := t.Device()
	d.mu.Lock()
	defer d.mu.Unlock()
	buf, ok := d.bufs[addr]
	if !ok {
		panic(fmt.Sprintf("backendtest: double Free of the device tensor at %#x", addr))
	}
	d.inUse -= int64(4 * len(buf))
	delete(d.bufs, addr)
}

// DeviceMemory implements compute.MemoryCounter: the bytes of the
// tensors allocated now, and the most at once.
func (d *Device) DeviceMemory() (inUse, peak int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inUse, d.peak
}

// Gemm implements compute.Backend.
func (d *Device) Gemm(tA, tB bool, m, n, k int, alpha float32, a compute.Tensor, lda int, b compute.Tensor, ldb int, beta float32, c compute.Tensor, ldc int) {
	d.cpu.Gemm(tA, tB, m, n, k, alpha, d.at(a), lda, d.at(b), ldb, beta, d.at(c), ldc)
}

// GemmGatherA implements compute.Gatherer.
func (d *Device) GemmGatherA(n, k int, alpha float32, a compute.Tensor, lda int, rows []int, b compute.Tensor, ldb int, beta float32, c compute.Tensor, ldc int) {
	d.cpu.GemmGatherA(n, k, alpha, d.at(a), lda, rows, d.at(b), ldb, beta, d.at(c), ldc)
}

// GemmGatherB implements compute.Gatherer.
func (d *Device) GemmGatherB(m, n int, alpha float32, a compute.Tensor, lda int, b compute.Tensor, ldb int, rows []int, beta float32, c compute.Tensor, ldc int) {
	d.cpu.GemmGatherB(m, n, alpha, d.at(a), lda, d.at(b), ldb, rows, beta, d.at(c), ldc)
}

// BroadcastRows implements compute.Backend.
func (d *Device) BroadcastRows(dst compute.Tensor, m, n int, v compute.Tensor) {
	d.cpu.BroadcastRows(d.at(dst), m, n, d.at(v))
}

// ReLU implements compute.Backend.
func (d *Device) ReLU(x compute.Tensor) { d.cpu.ReLU(d.at(x)) }

// ReLUBackward implements compute.Backend.
func (d *Device) ReLUBackward(g, z compute.Tensor) { d.cpu.ReLUBackward(d.at(g), d.at(z)) }

// ColumnSums implements compute.Backend.
func (d *Device) ColumnSums(dst, src compute.Tensor, m, n int) {
	d.cpu.ColumnSums(d.at(dst), d.at(src), m, n)
}

// SoftmaxCrossEntropy implements compute.Backend.
func (d *Device) SoftmaxCrossEntropy(probs, grad, logits compute.Tensor, y []int32, m, n int, scale float32) (float64, int) {
	d.wait()
	return d.cpu.SoftmaxCrossEntropy(d.at(probs), d.at(grad), d.at(logits), y, m, n, scale)
}

// HingeOneVsRest implements compute.Backend.
func (d *Device) HingeOneVsRest(grad, scores compute.Tensor, y []int32, m, n int, scale float32) (float64, int) {
	d.wait()
	return d.cpu.HingeOneVsRest(d.at(grad), d.at(scores), y, m, n, scale)
}

// Axpby implements compute.Updates.
func (d *Device) Axpby(y compute.Tensor, a float32, x compute.Tensor, b float32) {
	d.cpu.Axpby(d.at(y), a, d.at(x), b)
}

// SGDUpdate implements compute.Updates.
func (d *Device) SGDUpdate(w, g, v compute.Tensor, lr, mu, wd float32, first bool) {
	if v.Len() > 0 {
		v = d.at(v)
	}
	d.cpu.SGDUpdate(d.at(w), d.at(g), v, lr, mu, wd, first)
}

// AdamUpdate implements compute.Updates.
func (d *Device) AdamUpdate(w, g, m, v compute.Tensor, step, b1, b2, sc2, eps, wd float32) {
	d.cpu.AdamUpdate(d.at(w), d.at(g), d.at(m), d.at(v), step, b1, b2, sc2, eps, wd)
}

// SumSquares implements compute.Updates.
func (d *Device) SumSquares(x compute.Tensor) float64 {
	d.wait()
	return d.cpu.SumSquares(d.at(x))
}

// RowSumSquares implements compute.Updates.
func (d *Device) RowSumSquares(dst []float64, x compute.Tensor, m, n int) {
	d.wait()
	d.cpu.RowSumSquares(dst, d.at(x), m, n)
}

// ScaleRows implements compute.Updates.
func (d *Device) ScaleRows(x compute.Tensor, m, n int, s []float32) {
	d.cpu.ScaleRows(d.at(x), m, n, s)
}

// Softmax implements compute.Updates.
func (d *Device) Softmax(dst, logits compute.Tensor, m, n int) {
	d.cpu.Softmax(d.at(dst), d.at(logits), m, n)
}

// GatherRows implements compute.Updates.
func (d *Device) GatherRows(dst, src compute.Tensor, rows []int, cols, ld int) {
	d.cpu.GatherRows(d.at(dst), d.at(src), rows, cols, ld)
}

// GemmStrided implements compute.Batched.
func (d *Device) GemmStrided(tA, tB bool, m, n, k int, alpha float32, a compute.Tensor, lda, strideA int, b compute.Tensor, ldb, strideB int, beta float32, c compute.Tensor, ldc, strideC int, count int) {
	d.cpu.GemmStrided(tA, tB, m, n, k, alpha, d.at(a), lda, strideA, d.at(b), ldb, strideB, beta, d.at(c), ldc, strideC, count)
}

// SoftmaxCrossEntropyRows implements compute.Batched.
func (d *Device) SoftmaxCrossEntropyRows(probs, grad, logits compute.Tensor, y []int32, m, n int, scale float32, loss []float64) int {
	d.wait()
	return d.cpu.SoftmaxCrossEntropyRows(d.at(probs), d.at(grad), d.at(logits), y, m, n, scale, loss)
}

// TallyRows implements compute.Batched.
func (d *Device) TallyRows(logits compute.Tensor, y []int32, k, m, n int, hinge bool, loss []float64, correct []int) {
	d.wait()
	d.cpu.TallyRows(d.at(logits), y, k, m, n, hinge, loss, correct)
}

// HingeOneVsRestRows implements compute.Batched.
func (d *Device) HingeOneVsRestRows(grad, scores compute.Tensor, y []int32, m, n int, scale float32, loss []float64) int {
	d.wait()
	return d.cpu.HingeOneVsRestRows(d.at(grad), d.at(scores), y, m, n, scale, loss)
}

// deviceSum is a LossSum in the emulated device's memory: reading it is a
// wait, adding to it is not.
type deviceSum struct {
	d     *Device
	v     float64
	freed bool
}

func (s *deviceSum) Read() float64 {
	s.live()
	s.d.wait()
	return s.v
}

func (s *deviceSum) Reset() { s.live(); s.v = 0 }

func (s *deviceSum) Free() {
	s.live()
	s.freed = true
	s.d.mu.Lock()
	s.d.sums--
	s.d.mu.Unlock()
}

func (s *deviceSum) live() {
	if s.freed {
		panic("backendtest: LossSum used after Free")
	}
}

// sum is s as this device's sum.
func (d *Device) sum(s compute.LossSum) *deviceSum {
	ds, ok := s.(*deviceSum)
	if !ok || ds.d != d {
		panic(fmt.Sprintf("backendtest: a LossSum (%T) not made by this device", s))
	}
	ds.live()
	return ds
}

// NewLossSum implements compute.LossSums.
func (d *Device) NewLossSum() compute.LossSum {
	d.mu.Lock()
	d.sums++
	d.mu.Unlock()
	return &deviceSum{d: d}
}

// SoftmaxCrossEntropySum implements compute.LossSums.
func (d *Device) SoftmaxCrossEntropySum(s compute.LossSum, probs, grad, logits compute.Tensor, y []int32, m, n int, scale float32) {
	l, _ := d.cpu.SoftmaxCrossEntropy(d.at(probs), d.at(grad), d.at(logits), y, m, n, scale)
	d.sum(s).v += l
}

// HingeOneVsRestSum implements compute.LossSums.
func (d *Device) HingeOneVsRestSum(s compute.LossSum, grad, scores compute.Tensor, y []int32, m, n int, scale float32) {
	l, _ := d.cpu.HingeOneVsRest(d.at(grad), d.at(scores), y, m, n, scale)
	d.sum(s).v += l
}

// AddSumSquares implements compute.LossSums.
func (d *Device) AddSumSquares(s compute.LossSum, w float64, x compute.Tensor) {
	d.sum(s).v += w * d.cpu.SumSquares(d.at(x))
}

// InterpolateRows implements compute.Rows.
func (d *Device) InterpolateRows(dst, src compute.Tensor, n int, rows, a, b []int32, w []float32) {
	d.cpu.InterpolateRows(d.at(dst), d.at(src), n, rows, a, b, w)
}

// CombineRows implements compute.Rows.
func (d *Device) CombineRows(dst, src compute.Tensor, n int, rows, start, from []int32, w []float32) {
	d.cpu.CombineRows(d.at(dst), d.at(src), n, rows, start, from, w)
}

// TrimmedRows implements compute.Rows.
func (d *Device) TrimmedRows(dst, src compute.Tensor, n int, rows, start, from, trim []int32) {
	d.mu.Lock()
	d.st.Trimmed += len(rows)
	d.mu.Unlock()
	d.cpu.TrimmedRows(d.at(dst), d.at(src), n, rows, start, from, trim)
}

// PairDistanceRows implements compute.Rows.
func (d *Device) PairDistanceRows(out []float64, x compute.Tensor, n int, a, b []int32) {
	d.mu.Lock()
	d.st.Pairs += len(a)
	d.mu.Unlock()
	d.wait()
	d.cpu.PairDistanceRows(out, d.at(x), n, a, b)
}

// AverageRows implements compute.Rows.
func (d *Device) AverageRows(dst, src compute.Tensor, n int, rows, start, from []int32) {
	d.mu.Lock()
	d.st.Averaged += len(rows)
	d.mu.Unlock()
	d.cpu.AverageRows(d.at(dst), d.at(src), n, rows, start, from)
}

// ClipRows implements compute.Rows.
func (d *Device) ClipRows(dst, src compute.Tensor, n int, rows, start, from []int32, scale []float64) {
	d.mu.Lock()
	d.st.Clipped += len(rows)
	d.mu.Unlock()
	d.cpu.ClipRows(d.at(dst), d.at(src), n, rows, start, from, scale)
}

// QuantizeRows implements compute.Rows.
func (d *Device) QuantizeRows(dst, src compute.Tensor, n int, rows, from []int32, q compute.Quantization, chunk int) {
	d.mu.Lock()
	d.st.Quantized += len(rows)
	d.mu.Unlock()
	d.cpu.QuantizeRows(d.at(dst), d.at(src), n, rows, from, q, chunk)
}

// MaskRows implements compute.Rows.
func (d *Device) MaskRows(dst, src compute.Tensor, n int, rows, start, from, keep []int32) {
	d.mu.Lock()
	d.st.Masked += len(rows)
	d.mu.Unlock()
	d.cpu.MaskRows(d.at(dst), d.at(src), n, rows, start, from, keep)
}

// TopKRows implements compute.Rows.
func (d *Device) TopKRows(dst, src compute.Tensor, n int, rows, from []int32, k int, bytes []int32) {
	d.mu.Lock()
	d.st.TopK += len(rows)
	d.mu.Unlock()
	d.cpu.TopKRows(d.at(dst), d.at(src), n, rows, from, k, bytes)
}

// SumSquaresRows implements compute.Rows.
func (d *Device) SumSquaresRows(out []float64, x compute.Tensor, n int, rows []int32) {
	d.wait()
	d.cpu.SumSquaresRows(out, d.at(x), n, rows)
}

// MeanRows implements compute.Rows.
func (d *Device) MeanRows(dst, src compute.Tensor, n int, rows []int32) {
	d.cpu.MeanRows(d.at(dst), d.at(src), n, rows)
}

// MomentsRows implements compute.Rows.
func (d *Device) MomentsRows(out []float64, src compute.Tensor, n int, rows []int32) {
	d.wait()
	d.mu.Lock()
	d.st.Moments++
	d.mu.Unlock()
	d.cpu.MomentsRows(out, d.at(src), n, rows)
}

// DistanceRows implements compute.Rows.
func (d *Device) DistanceRows(out []float64, x compute.Tensor, n int, rows []int32, ref compute.Tensor, chunk int) {
	d.wait()
	d.cpu.DistanceRows(out, d.at(x), n, rows, d.at(ref), chunk)
}
