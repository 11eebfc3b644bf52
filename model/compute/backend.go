// Package compute holds gossipd's numeric backends: the float32 matrix
// multiply and the fused element-wise kernels that training needs, behind a
// small Backend interface of tensors in the backend's own memory, so that
// a GPU backend keeps parameters and activations on its device.
//
// The CPU backend has two GEMM paths: a packed, blocked one for large
// products (BLIS-style, threaded) and a small-GEMM path for the shapes of
// training steps (small.go: operands read in place, rows optionally
// through an index, one goroutine). Each path runs a kernel set chosen at
// run time: AVX-512 or AVX2/FMA (amd64 assembly), NEON (arm64 assembly,
// small path only) or pure Go (every platform, and the noasm build tag). $GOSSIPD_KERNEL or WithKernel
// forces one. Matrices are row-major float32 with explicit leading
// dimensions, in the style of BLAS and gonum: functions are
// destination-first and panic only on programmer error (bad shapes).
package compute

// Backend computes the numeric kernels of training and inference on
// tensors in its memory (Tensor, Memory). A Backend is safe for concurrent
// use by several goroutines unless it says otherwise.
type Backend interface {
	// Name says which backend and kernel run, e.g. "cpu/avx2×2".
	Name() string
	Memory
	Updates
	Batched
	LossSums
	Rows

	// Gemm computes C = alpha·op(A)·op(B) + beta·C where op(A) is m×k,
	// op(B) is k×n and C is m×n, all row-major; op(X) is Xᵀ when the
	// corresponding trans flag is set. lda, ldb, ldc are the row strides of
	// A, B and C as stored.
	Gemm(transA, transB bool, m, n, k int, alpha float32, a Tensor, lda int, b Tensor, ldb int, beta float32, c Tensor, ldc int)

	// BroadcastRows sets every row of the m×n matrix dst to v.
	BroadcastRows(dst Tensor, m, n int, v Tensor)
	// ReLU applies max(x, 0) in place.
	ReLU(x Tensor)
	// ReLUBackward zeroes grad where the pre-activation z is not positive.
	ReLUBackward(grad, z Tensor)
	// ColumnSums sets dst[j] = Σ_i src[i·n+j] over m rows.
	ColumnSums(dst, src Tensor, m, n int)

	// SoftmaxCrossEntropy takes m×n logits and labels y. It writes the
	// softmax probabilities to probs (may alias logits) and, when grad is
	// not empty (Len 0), scale·(probs − onehot(y)) to grad. It returns the
	// summed cross-entropy loss and the number of rows whose arg-max
	// equals y.
	SoftmaxCrossEntropy(probs, grad, logits Tensor, y []int32, m, n int, scale float32) (loss float64, correct int)
	// HingeOneVsRest takes m×n scores and labels y and, for each class c,
	// the binary label t = +1 if y = c else −1. It returns the summed hinge
	// loss Σ max(0, 1 − t·s) and the number of rows whose arg-max equals y;
	// when grad is not empty it writes scale·(−t·[t·s < 1]) to grad.
	HingeOneVsRest(grad, scores Tensor, y []int32, m, n int, scale float32) (loss float64, correct int)
}

// Fused is implemented by backends on which one kernel doing the work of
// two saves a launch (a GPU's, where a small training step is bound by
// launches). Each method computes what the pair it replaces computes.
type Fused interface {
	// ColumnSumsAxpby sets y ← b·y + a·s, where s[j] = Σ_i x[i·n+j]
	// over m rows: ColumnSums then Axpby (a layer's bias step).
	ColumnSumsAxpby(y Tensor, a float32, x Tensor, m, n int, b float32)
	// ReLUInto sets dst = max(src, 0): Copy then ReLU.
	ReLUInto(dst, src Tensor)
}

// MemoryCounter is implemented by device backends that count the device
// memory they allocate: what they hold now and the most they have held
// at once since they opened, in bytes. A simulation on a GPU reports the
// peak beside the process's peak RSS.
type MemoryCounter interface {
	DeviceMemory() (inUse, peak int64)
}

// MemorySizer is implemented by device backends that know how much
// memory their device has, in bytes: what is kept there between calls
// (a simulator's resident models) takes a share of it.
type MemorySizer interface {
	TotalMemory() int64
}

// PinnedHost is implemented by device backends with host memory that
// the device copies to and from at the bus's full speed (page-locked):
// a stack stages its batches of models there. AllocPinned returns n
// values of it and the function that gives them back, or an error where
// there is none to have (the caller then uses ordinary memory).
type PinnedHost interface {
	AllocPinned(n int) ([]float32, func(), error)
}

// GathersOnce is implemented by gathering backends (Gatherer) on which a
// minibatch gathered once into a tensor of its own (GatherRows) costs less
// than gathering it in each GEMM that reads it: on a GPU each gathered
// GEMM uploads the indices and launches a gather before the GEMM, where
// the CPU reads the rows in place at no cost.
type GathersOnce interface {
	GathersOnce() bool
}

// Gatherer is implemented by backends that read one operand of a GEMM
// through a list of row indices, so that a minibatch is used where it lies
// in its dataset instead of being copied out first.
type Gatherer interface {
	// GemmGatherA computes C = alpha·A[rows]·Bᵀ + beta·C, where A[rows] is
	// the len(rows)×k matrix of the listed rows of A (stride lda), B is
	// n×k (stride ldb) and C is len(rows)×n.
	GemmGatherA(n, k int, alpha float32, a Tensor, lda int, rows []int, b Tensor, ldb int, beta float32, c Tensor, ldc int)
	// GemmGatherB computes C = alpha·Aᵀ·B[rows] + beta·C, where A is
	// len(rows)×m (stride lda), B[rows] the len(rows)×n matrix of the
	// listed rows of B (stride ldb) and C is m×n.
	GemmGatherB(m, n int, alpha float32, a Tensor, lda int, b Tensor, ldb int, rows []int, beta float32, c Tensor, ldc int)
}
