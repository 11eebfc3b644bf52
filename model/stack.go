package model

import (
	"fmt"
	"slices"

	"github.com/gossipd/gossipd/model/compute"
)

// Stack holds up to Cap models of one spec, their parameter vectors
// stacked in one tensor of its backend (model i's at i·NumParams), and
// trains them side by side: StepRows takes one plain SGD step of each of
// the first k models on its own minibatch, the step Model.SGDStepRows
// takes of one model, in a few kernel calls for all k of them
// (compute.Batched: strided-batched GEMMs, one loss kernel over every
// row); GradRows computes their gradients as Model.GradientOn does (and
// GradRowsFactors their sufficient factors). A
// simulator trains the peers due at once this way, thousands in one call
// on a GPU.
//
// A Stack is not safe for concurrent use. Its results agree with
// SGDStepRows up to rounding (the bias is applied and summed by GEMMs,
// the learning rate scales the errors); on a backend whose batched
// kernels compute each problem alone (the CPU's), a model's step does not
// depend on k, on its slot or on the other models in the call.
type Stack struct {
	spec   Spec
	layers []layer
	size   int // parameters per model
	be     compute.Backend
	cap    int
	// params holds the n models allocated so far (n ≤ cap: memory grows
	// with the largest call, not with the capacity).
	params compute.Tensor
	n      int
	stage  []float32 // host staging of Load and Store (stack_stage.go)
	unpin  func()    // gives a page-locked stage back

	// The workspace, for wsModels models of batch rows each: every
	// layer's pre-activations, activations and errors, the gathered
	// minibatches and a column of ones (bias broadcast and sums).
	batch     int
	wsModels  int
	z, a, dz  []compute.Tensor
	xg, ones  compute.Tensor
	grad      compute.Tensor // GradRows' gradients, for the models held
	rowLoss   []float64
	sq        []float64
	rowScales []float32
	norms     []float64 // ClippedGradRows' squared norms
	iota      []int32   // 0, 1, 2, …: the rows of SumSquares

	net *netStack // a layered network's (stack_net.go), else nil
}

// NewStack returns a stack of up to capacity models of spec, computing on
// the backend WithBackend names (default compute.NewCPU()); their
// parameters start at zero (Load sets them). Its memory grows with the
// most models a call uses, up to capacity.
func NewStack(spec Spec, capacity int, opts ...Option) (*Stack, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if capacity <= 0 {
		return nil, fmt.Errorf("%w: a stack of %d models", ErrSpec, capacity)
	}
	o := resolve(opts)
	if spec.Kind == Net {
		n, err := newNetStack(spec, o.backend)
		if err != nil {
			return nil, err
		}
		s := &Stack{spec: spec, size: n.own.Len(), be: o.backend, cap: capacity, net: n}
		s.spec.Shape = append([]int(nil), spec.Shape...)
		return s, nil
	}
	layout, _ := LayoutOf(spec)
	s := &Stack{spec: spec, layers: layersOf(layout), size: layout.Size, be: o.backend, cap: capacity}
	s.spec.Hidden = append([]int(nil), spec.Hidden...)
	return s, nil
}

// Cap is how many models the stack holds; NumParams each one's size.
func (s *Stack) Cap() int       { return s.cap }
func (s *Stack) NumParams() int { return s.size }

// Spec returns the models' spec.
func (s *Stack) Spec() Spec { return s.spec }

// Backend returns the backend the stack computes on.
func (s *Stack) Backend() compute.Backend { return s.be }

// ParamRows returns the parameters of models 0 to k−1, NumParams values
// each, side by side in the backend's memory, for a caller that sets
// them there (compute.Rows) instead of through Load.
func (s *Stack) ParamRows(k int) compute.Tensor {
	if k > s.cap || k <= 0 {
		panic(fmt.Sprintf("model: ParamRows of %d models from a stack of %d", k, s.cap))
	}
	s.ensure(k)
	return s.params.Slice(0, k*s.size)
}

// Load sets models 0 to len(params)−1 to params (each NumParams values),
// in one copy to the backend.
func (s *Stack) Load(params [][]float32) error {
	k := len(params)
	if k > s.cap {
		return fmt.Errorf("model: %d models for a stack of %d", k, s.cap)
	}
	if k == 0 {
		return nil
	}
	s.ensure(k)
	s.grownStage(k)
	for i, p := range params {
		if len(p) != s.size {
			return fmt.Errorf("model: parameter vector %d has %d values, want %d", i, len(p), s.size)
		}
	}
	compute.ForEachRow(k, s.size, func(i int) { copy(s.stage[i*s.size:], params[i]) })
	s.be.Copy(s.params.Slice(0, k*s.size), compute.Host(s.stage[:k*s.size]))
	return nil
}

// Store copies models 0 to len(dst)−1 into dst (each NumParams values),
// in one copy from the backend.
func (s *Stack) Store(dst [][]float32) {
	k := len(dst)
	if k > s.cap {
		panic(fmt.Sprintf("model: Store of %d models from a stack of %d", k, s.cap))
	}
	if k == 0 {
		return
	}
	s.ensure(k)
	s.grownStage(k)
	s.be.Store(s.stage[:k*s.size], s.params.Slice(0, k*s.size))
	compute.ForEachRow(k, s.size, func(i int) { copy(dst[i][:s.size], s.stage[i*s.size:(i+1)*s.size]) })
}

// SumSquares sets out[i] to Σ x² over the parameters of model i, for
// models 0 to len(out)−1, in float64 on the backend (compute.Rows): NaN
// or +Inf for a model holding a non-finite value. A batch of trained
// models is checked this way where it trained, in one call.
func (s *Stack) SumSquares(out []float64) {
	k := len(out)
	if k > s.n {
		panic(fmt.Sprintf("model: SumSquares of %d models from a stack holding %d", k, s.n))
	}
	s.be.SumSquaresRows(out, s.params.Slice(0, k*s.size), s.size, s.firstRows(k))
}

// GradSumSquares writes to out the Σ x² of the gradients of models 0 to
// len(out)−1 that the last GradRows or GradRowsFactors computed,
// measured where they were computed (on a device, one kernel for all
// instead of a pass over each host copy), with SumSquares' bits. Call it
// after the GradRows or GradRowsFactors of len(out) models.
func (s *Stack) GradSumSquares(out []float64) {
	k := len(out)
	if k*s.size > s.grad.Len() {
		panic(fmt.Sprintf("model: GradSumSquares of %d gradients from a stack that computed %d", k, s.grad.Len()/max(1, s.size)))
	}
	s.be.SumSquaresRows(out, s.grad.Slice(0, k*s.size), s.size, s.firstRows(k))
}

// firstRows is the row list 0, 1, …, k−1.
func (s *Stack) firstRows(k int) []int32 {
	for len(s.iota) < k {
		s.iota = append(s.iota, int32(len(s.iota)))
	}
	return s.iota[:k]
}

// ensure makes the stack hold k models, keeping those it holds.
func (s *Stack) ensure(k int) {
	if k <= s.n {
		return
	}
	n := min(s.cap, max(k, 2*s.n))
	p := s.be.Alloc(n * s.size)
	if s.n > 0 {
		s.be.Copy(p.Slice(0, s.n*s.size), s.params.Slice(0, s.n*s.size))
		s.be.Free(s.params)
	}
	s.params, s.n = p, n
}

// Close gives the stack's memory back to its backend.
func (s *Stack) Close() {
	s.freeWorkspace()
	s.dropStage()
	if s.net != nil {
		s.net.close()
		s.net = nil
	}
	if s.grad.Len() > 0 {
		s.be.Free(s.grad)
		s.grad = compute.Tensor{}
	}
	if s.n > 0 {
		s.be.Free(s.params)
		s.params, s.n = compute.Tensor{}, 0
	}
}

// StepRows takes one plain SGD step of each of models 0 to len(lr)−1:
// model i on the batch rows of x (a matrix of Inputs columns, in the
// backend's memory) that rows[i·batch:(i+1)·batch] lists, with labels
// y[i·batch:(i+1)·batch], at learning rate lr[i]. It writes each model's
// loss before the step, as SGDStepRows returns it, to loss[i].
func (s *Stack) StepRows(x compute.Tensor, rows []int, y []int32, batch int, lr []float32, loss []float64) {
	k := len(lr)
	if s.net != nil {
		s.checkCall("StepRows", rows, y, batch, k, loss)
		for i, v := range lr {
			l := s.netAt(i).SGDStepRowsOn(x, rows[i*batch:(i+1)*batch], y[i*batch:(i+1)*batch], v)
			if loss != nil {
				loss[i] = l
			}
		}
		return
	}
	if !s.pass("StepRows", x, rows, y, batch, k, 1/float32(batch), loss) {
		return
	}
	be, P, n := s.be, s.size, k*batch
	ones := s.ones.Slice(0, batch)
	w := func(ly layer) compute.Tensor { return s.params.Slice(ly.wOff, k*P) }
	b := func(ly layer) compute.Tensor { return s.params.Slice(ly.bOff, k*P) }

	// The update, w ← (1 − lr·λ)·w − lr·∇ (λ = 0 but for the SVM): each
	// model's rows of errors scaled by its own −lr, then summed into its
	// weights and biases by GEMMs. Always so, whatever the rates, so that
	// a model's step does not depend on the others in the call.
	if s.spec.Kind == SVM {
		for i, v := range lr {
			s.rowScales[i] = 1 - v*float32(s.spec.Lambda)
		}
		be.ScaleRows(s.params, k, P, s.rowScales[:k])
	}
	for i := range n {
		s.rowScales[i] = -lr[i/batch]
	}
	for l, ly := range s.layers {
		dz := s.dz[l].Slice(0, n*ly.out)
		be.ScaleRows(dz, n, ly.out, s.rowScales[:n])
		be.GemmStrided(true, false, ly.out, ly.in, batch, 1, dz, ly.out, batch*ly.out, s.input(l, n), ly.in, batch*ly.in, 1, w(ly), ly.in, P, k)
		be.GemmStrided(true, false, 1, ly.out, batch, 1, ones, 1, 0, dz, ly.out, batch*ly.out, 1, b(ly), ly.out, P, k)
	}
}

// GradRows writes to grads[i] (each NumParams values, on the host) the
// gradient of model i's mean loss over the batch rows of x that
// rows[i·batch:(i+1)·batch] lists, with labels y[i·batch:(i+1)·batch], for
// models 0 to len(grads)−1, as Model.GradientOn computes it for one (the
// SVM's includes λ·W); loss[i] gets the loss it returns. The models are
// unchanged. D-PSGD's and push-sum's peers due at once compute their
// gradients this way.
func (s *Stack) GradRows(x compute.Tensor, rows []int, y []int32, batch int, grads [][]float32, loss []float64) {
	for i, g := range grads {
		if len(g) != s.size {
			panic(fmt.Sprintf("model: GradRows gradient %d has %d values, want %d", i, len(g), s.size))
		}
	}
	if s.GradRowsKept(x, rows, y, batch, len(grads), loss) {
		s.storeGrads(grads)
	}
}

// GradRowsKept is GradRows of k models that leaves their gradients in
// the stack (GradTensor) instead of copying them out: a simulator keeps
// them on its device. It reports whether it computed any.
func (s *Stack) GradRowsKept(x compute.Tensor, rows []int, y []int32, batch, k int, loss []float64) bool {
	if s.net != nil {
		s.checkCall("GradRows", rows, y, batch, k, loss)
		s.netGradRows(x, rows, y, batch, k, loss, nil)
		return true
	}
	if !s.pass("GradRows", x, rows, y, batch, k, 1/float32(batch), loss) {
		return false
	}
	g := s.weightGrads(k, batch)
	if s.spec.Kind == SVM {
		s.be.Axpby(g, float32(s.spec.Lambda), s.params.Slice(0, k*s.size), 1)
	}
	return true
}

// GradTensor is the gradients of models 0 to k−1 that the last
// GradRowsKept (or GradRows) computed, side by side on the backend.
func (s *Stack) GradTensor(k int) compute.Tensor {
	if k*s.size > s.grad.Len() {
		panic(fmt.Sprintf("model: GradTensor of %d gradients from a stack that computed %d", k, s.grad.Len()/max(1, s.size)))
	}
	return s.grad.Slice(0, k*s.size)
}

// weightGrads writes the weight and bias gradients of models 0 to k−1,
// from the errors of their batch rows each that the last pass left, to
// the stack's gradient tensor, and returns its first k·NumParams values.
func (s *Stack) weightGrads(k, batch int) compute.Tensor {
	be, P, n := s.be, s.size, k*batch
	g := s.gradTensor(k)
	ones := s.ones.Slice(0, batch)
	for l, ly := range s.layers {
		dz := s.dz[l].Slice(0, n*ly.out)
		be.GemmStrided(true, false, ly.out, ly.in, batch, 1, dz, ly.out, batch*ly.out, s.input(l, n), ly.in, batch*ly.in, 0, s.grad.Slice(ly.wOff, k*P), ly.in, P, k)
		be.GemmStrided(true, false, 1, ly.out, batch, 1, ones, 1, 0, dz, ly.out, batch*ly.out, 0, s.grad.Slice(ly.bOff, k*P), ly.out, P, k)
	}
	return g
}

// gradTensor returns the first k·NumParams values of the stack's
// gradient tensor, which holds a gradient for every model allocated.
func (s *Stack) gradTensor(k int) compute.Tensor {
	if s.grad.Len() < k*s.size {
		if s.grad.Len() > 0 {
			s.be.Free(s.grad)
		}
		s.grad = s.be.Alloc(s.n * s.size)
	}
	return s.grad.Slice(0, k*s.size)
}

// storeGrads copies the gradients of models 0 to len(grads)−1 from the
// stack's gradient tensor to grads, in one copy from the backend.
func (s *Stack) storeGrads(grads [][]float32) {
	k, P := len(grads), s.size
	s.grownStage(k)
	s.be.Store(s.stage[:k*P], s.grad.Slice(0, k*P))
	compute.ForEachRow(k, P, func(i int) { copy(grads[i], s.stage[i*P:(i+1)*P]) })
}

// GradRowsFactors is GradRows that also returns, for each model, the
// sufficient factors of the weight tensors that layers names, from the
// same pass, as Model.GradientWithFactorsOn returns them for one (in the
// model's layer order; U already scaled by 1/batch). The factors are
// copies on the host.
func (s *Stack) GradRowsFactors(x compute.Tensor, rows []int, y []int32, batch int, grads [][]float32, loss []float64, layers []string) [][]Factors {
	if s.net != nil {
		k := len(grads)
		s.checkCall("GradRowsFactors", rows, y, batch, k, loss)
		out := s.netGradRows(x, rows, y, batch, k, loss, append([]string{}, layers...))
		s.storeGrads(grads)
		return out
	}
	s.GradRows(x, rows, y, batch, grads, loss)
	k := len(grads)
	out := make([][]Factors, k)
	if k == 0 {
		return out
	}
	n := k * batch
	for l, ly := range s.layers {
		if !slices.Contains(layers, ly.wName) {
			continue
		}
		u, v := make([]float32, n*ly.out), make([]float32, n*ly.in)
		s.be.Store(u, s.dz[l].Slice(0, n*ly.out))
		s.be.Store(v, s.input(l, n))
		for i := range out {
			out[i] = append(out[i], Factors{Weight: ly.wName, K: batch, J: ly.out, D: ly.in,
				U: u[i*batch*ly.out : (i+1)*batch*ly.out : (i+1)*batch*ly.out], V: v[i*batch*ly.in : (i+1)*batch*ly.in : (i+1)*batch*ly.in]})
		}
	}
	return out
}

// input is layer l's input for n rows in the workspace: the gathered
// minibatches, or the previous layer's activations.
func (s *Stack) input(l, n int) compute.Tensor {
	if l == 0 {
		return s.xg.Slice(0, n*s.spec.Inputs)
	}
	return s.a[l-1].Slice(0, n*s.layers[l-1].out)
}

// pass checks a call of op on k models of batch rows each, gathers their
// minibatches, runs them forward and back, leaving each layer's errors
// (scaled by scale: 1/batch for a mean) in the workspace, and writes each
// model's mean loss to loss[i] unless loss is nil. It reports whether
// there was anything to do.
func (s *Stack) pass(op string, x compute.Tensor, rows []int, y []int32, batch, k int, scale float32, loss []float64) bool {
	d := s.spec.Inputs
	n := k * batch
	s.checkCall(op, rows, y, batch, k, loss)
	for i, r := range rows[:n] {
		if r < 0 || (r+1)*d > x.Len() {
			panic(fmt.Sprintf("model: %s row %d outside x of %d values", op, r, x.Len()))
		}
		if y[i] < 0 || int(y[i]) >= s.spec.Classes {
			panic(fmt.Sprintf("model: label %d out of range [0,%d)", y[i], s.spec.Classes))
		}
	}
	if k == 0 {
		return false
	}
	s.ensure(k)
	s.grow(batch, true)
	be, P, L := s.be, s.size, len(s.layers)
	be.GatherRows(s.xg.Slice(0, n*d), x, rows[:n], d, d)
	w := func(ly layer) compute.Tensor { return s.params.Slice(ly.wOff, k*P) }
	s.forward(s.xg.Slice(0, n*d), batch*d, k, batch)
	// The loss of every row at once, its errors scaled by 1/batch.
	last := s.layers[L-1]
	logits, dzL := s.z[L-1].Slice(0, n*last.out), s.dz[L-1].Slice(0, n*last.out)
	if s.spec.Kind == SVM {
		be.HingeOneVsRestRows(dzL, logits, y[:n], n, last.out, scale, s.rowLoss[:n])
	} else {
		be.SoftmaxCrossEntropyRows(logits, dzL, logits, y[:n], n, last.out, scale, s.rowLoss[:n])
	}
	for l := L - 1; l > 0; l-- {
		ly, prev := s.layers[l], s.layers[l-1]
		dprev := s.dz[l-1].Slice(0, n*prev.out)
		be.GemmStrided(false, false, batch, prev.out, ly.out, 1, s.dz[l], ly.out, batch*ly.out, w(ly), ly.in, P, 0, dprev, prev.out, batch*prev.out, k)
		be.ReLUBackward(dprev, s.z[l-1].Slice(0, n*prev.out))
	}
	if loss == nil {
		return true
	}
	for i := range k {
		var sum float64
		for _, v := range s.rowLoss[i*batch : (i+1)*batch] {
			sum += v
		}
		loss[i] = sum / float64(batch)
	}
	if s.spec.Kind == SVM {
		be.RowSumSquares(s.sq[:k], s.params, k, P)
		for i := range k {
			loss[i] += s.spec.Lambda / 2 * s.sq[i]
		}
	}
	return true
}

// checkCall panics unless a call of op on k models of batch rows each
// fits the stack and its arguments, and makes the stack hold k models.
func (s *Stack) checkCall(op string, rows []int, y []int32, batch, k int, loss []float64) {
	n := k * batch
	if k > s.cap || batch <= 0 || len(rows) < n || len(y) < n || (loss != nil && len(loss) < k) {
		panic(fmt.Sprintf("model: %s of %d models (stack of %d) × %d rows with %d rows, %d labels, %d losses", op, k, s.cap, batch, len(rows), len(y), len(loss)))
	}
	s.ensure(k)
}

// grow makes the workspace hold the stack's models with batch rows each,
// for training: with gathered inputs and errors, which a stack that only
// measures (TallyRows: 100 MB for 128 MLPs) goes without (train false).
func (s *Stack) grow(batch int, train bool) {
	if batch <= s.batch && s.n <= s.wsModels && (!train || s.xg.Len() > 0) {
		return
	}
	batch = max(batch, s.batch)
	s.freeWorkspace()
	be, L, n := s.be, len(s.layers), s.n*batch
	s.batch, s.wsModels = batch, s.n
	s.z, s.a, s.dz = make([]compute.Tensor, L), make([]compute.Tensor, L), make([]compute.Tensor, L)
	for l, ly := range s.layers {
		s.z[l] = be.Alloc(n * ly.out)
		if train {
			s.dz[l] = be.Alloc(n * ly.out)
		}
		if l < L-1 {
			s.a[l] = be.Alloc(n * ly.out)
		}
	}
	s.xg = compute.Tensor{}
	if train {
		s.xg = be.Alloc(n * s.spec.Inputs)
	}
	ones := make([]float32, batch)
	for i := range ones {
		ones[i] = 1
	}
	s.ones = be.Load(ones)
	s.rowLoss, s.sq = make([]float64, n), make([]float64, s.n)
	s.rowScales = make([]float32, max(n, s.n))
}

func (s *Stack) freeWorkspace() {
	if s.batch == 0 {
		return
	}
	for _, ts := range [][]compute.Tensor{s.z, s.a, s.dz} {
		for _, t := range ts {
			if t.Len() > 0 {
				s.be.Free(t)
			}
		}
	}
	if s.xg.Len() > 0 {
		s.be.Free(s.xg)
	}
	s.be.Free(s.ones)
	s.batch, s.wsModels = 0, 0
}
