package compute

// LossSums is the part of a Backend that keeps a running sum of training
// losses where the backend computes. A loss kernel that returns its loss
// makes the host wait for the device at every step; one that adds it to
// a LossSum does not, so a training loop on a GPU reads its loss once an
// epoch and otherwise only queues work (model.Train).
type LossSums interface {
	// NewLossSum returns a zeroed sum in the backend's memory.
	NewLossSum() LossSum
	// SoftmaxCrossEntropySum is SoftmaxCrossEntropy adding the summed
	// loss to s instead of returning it.
	SoftmaxCrossEntropySum(s LossSum, probs, grad, logits Tensor, y []int32, m, n int, scale float32)
	// HingeOneVsRestSum is HingeOneVsRest adding the summed loss to s.
	HingeOneVsRestSum(s LossSum, grad, scores Tensor, y []int32, m, n int, scale float32)
	// AddSumSquares adds w·Σx² to s (the SVM's λ/2·‖W‖², once per
	// example).
	AddSumSquares(s LossSum, w float64, x Tensor)
}

// LossSum is a float64 running sum in a backend's memory; the backend
// that made it is the one to add to it.
type LossSum interface {
	// Read returns the sum, once the work queued before it is done.
	Read() float64
	// Reset zeroes the sum, in order with the backend's work.
	Reset()
	// Free releases it; it is not used after.
	Free()
}

// HostSum is a LossSum in host memory: the CPU's, and that of a backend
// whose losses are on the host anyway.
type HostSum struct{ V float64 }

// Read implements LossSum.
func (s *HostSum) Read() float64 { return s.V }

// Reset implements LossSum.
func (s *HostSum) Reset() { s.V = 0 }

// Free implements LossSum.
func (s *HostSum) Free() {}

// NewLossSum implements LossSums.
func (c *CPU) NewLossSum() LossSum { return &HostSum{} }

// SoftmaxCrossEntropySum implements LossSums.
func (c *CPU) SoftmaxCrossEntropySum(s LossSum, probs, grad, logits Tensor, y []int32, m, n int, scale float32) {
	l, _ := c.SoftmaxCrossEntropy(probs, grad, logits, y, m, n, scale)
	s.(*HostSum).V += l
}

// HingeOneVsRestSum implements LossSums.
func (c *CPU) HingeOneVsRestSum(s LossSum, grad, scores Tensor, y []int32, m, n int, scale float32) {
	l, _ := c.HingeOneVsRest(grad, scores, y, m, n, scale)
	s.(*HostSum).V += l
}

// AddSumSquares implements LossSums.
func (c *CPU) AddSumSquares(s LossSum, w float64, x Tensor) { s.(*HostSum).V += w * c.SumSquares(x) }
