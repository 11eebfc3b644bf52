package trainer

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
)

// BatchWorkspace trains the update requests of many trainers side by
// side (RunBatch): their models stacked in a model.Stack, each of its
// steps one batched call for all of them. A simulator's peers due at once
// train this way, thousands at a time on one GPU. Like a Workspace, it
// runs on one goroutine at a time.
type BatchWorkspace struct {
	stack *model.Stack
	// keepBuf holds the indices of a Mix's masks (mixCalls), reused.
	keepBuf []int32
	bound   boundData
	// per call: each slot's rows, labels and rate for one step, the
	// step's losses, and the slots' parameter vectors
	rows   []int
	labels []int32
	lr     []float32
	loss   []float64
	sums   []float64 // the trained models' Σ x² (TrainResult.SumSquares)
	params [][]float32
	grads  [][]float32
	counts []int       // DP-SGD: each share's rows of its lot
	chunk  [][]float32 // DP-SGD: a chunk's clipped gradient sums
	noisy  [][]float32 // DP-SGD: an update's noisy gradients
	// res keeps models on the device between calls (nil on the CPU),
	// with the lists of one call's Rows kernels.
	res                 *resident
	lazy, poison        bool // LeaveOnDevice
	leaveGrads          bool // LeaveGradients
	gradBlock           int  // LeaveGradients: gradients an allocation
	mixRows, mixA, mixB []int32
	mixW                []float32
	cpRows, cpSrc       []int32   // row copies (copySlots): to, from
	iota                []int32   // 0, 1, 2, …: one term a row
	ones                []float32 // its weights
	forget              [][]float32
}

// NewBatchWorkspace returns a workspace that trains up to st.Cap() models
// per call on st's backend. On a device (a backend whose tensors are not the host's memory) the
// models it trains and starts from stay there between calls (resident.go).
func NewBatchWorkspace(st *model.Stack) *BatchWorkspace {
	w := &BatchWorkspace{stack: st}
	if onDevice(st.Backend()) {
		w.res = newResident(st.Backend(), st.NumParams())
	}
	return w
}

// Close frees the stack, the models kept on its device and the data
// loaded for it.
func (w *BatchWorkspace) Close() {
	if w.res != nil {
		w.res.close()
	}
	w.bound.free(w.stack.Backend())
	w.stack.Close()
}

// ResidentStats says how the models a workspace kept on its device
// served its calls: Hits vectors found there, Uploads copied in, Full
// those copied in for want of room; Left trained models not copied back
// (LeaveOnDevice), Gradients the gradients (LeaveGradients), Mixed the
// sums Mix left there, Merged the robust merges that updates started
// from (gossip.TrainRequest.MixRule) computed there, Fetched those
// copied back later (Fetch); Consensus the consensus distances measured
// there (Consensus), Moments the per-coordinate moments taken there
// (Moments).
type ResidentStats struct {
	Hits      uint64 `json:"hits"`
	Uploads   uint64 `json:"uploads"`
	Full      uint64 `json:"full"`
	Left      uint64 `json:"left"`
	Gradients uint64 `json:"gradients,omitempty"`
	Mixed     uint64 `json:"mixed,omitempty"`
	Merged    uint64 `json:"merged,omitempty"`
	Fetched   uint64 `json:"fetched"`
	Consensus uint64 `json:"consensus,omitempty"`
	Moments   uint64 `json:"moments,omitempty"`
}

// Resident returns the counts so far, and false where the workspace
// keeps no models (on the CPU).
func (w *BatchWorkspace) Resident() (ResidentStats, bool) {
	if w.res == nil {
		return ResidentStats{}, false
	}
	r := w.res
	r.mu.Lock()
	defer r.mu.Unlock()
	return ResidentStats{r.hits, r.uploads, r.full, r.left, r.grads, r.mixed, r.merged, r.fetched, r.measured, r.moments}, true
}

// Cap is how many requests one batched call takes.
func (w *BatchWorkspace) Cap() int { return w.stack.Cap() }

// Batchable reports whether RunBatch can carry out req: a local update, a
// gradient or sufficient factors, with DP-SGD or without; not factors
// under DP-SGD, which Run refuses.
func (t *Trainer) Batchable(req *gossip.TrainRequest) bool {
	switch req.Op {
	case gossip.OpUpdate, gossip.OpGradient:
		return true
	case gossip.OpFactors:
		return !t.cfg.DP.Enabled() || len(req.FactorLayers) == 0
	}
	return false
}

// batchJob is one request of a RunBatch call with its minibatches drawn.
type batchJob struct {
	i     int // index in the call
	group int // its data matrix, numbered in the call
	t     *Trainer
	req   *gossip.TrainRequest
	steps int
	bs    int
	into  []float32 // where a merging update goes (RunBatchInto), if not nil
	rows  []int     // steps×bs (none under DP-SGD)
	y     []int32   // steps×bs
	lr    []float32
	loss  float64 // Σ over steps of the step's mean loss
	// Under DP-SGD: the clip (0 without), the lot of the step being
	// taken and the examples of all the steps' lots.
	clip     float64
	lot      []int
	lotY     []int32
	examples int
}

// RunBatch carries out update, gradient and factor requests (Batchable) of
// distinct trainers, reqs[i] on trainers[i], side by side in ws: the same
// minibatches and learning rates as each trainer's Run, drawn in the same
// order, and the same result up to rounding (model.Stack). Requests of
// the same op on the same data matrix with the same batch size train
// together, Cap at a time, the longest first; an update's result reuses
// its request's Params, as Run does.
func RunBatch(ws *BatchWorkspace, trainers []*Trainer, reqs []*gossip.TrainRequest) ([]*gossip.TrainResult, error) {
	return RunBatchInto(ws, trainers, reqs, nil)
}

// RunBatchInto is RunBatch writing the update of a request that merges
// (MixWith or MixRule), or a gradient (OpGradient), into[i], where into[i] is not
// nil, instead of a new vector: a caller that hands the result over
// before the batch has run (a simulator's) names its vector beforehand.
// The update of a request without a merge is written to its own Params,
// as always; into[i] must be nil for it, and for sufficient factors.
func RunBatchInto(ws *BatchWorkspace, trainers []*Trainer, reqs []*gossip.TrainRequest, into [][]float32) ([]*gossip.TrainResult, error) {
	if len(trainers) != len(reqs) || (into != nil && len(into) != len(reqs)) {
		return nil, fmt.Errorf("trainer: %d trainers and %d vectors for %d requests", len(trainers), len(into), len(reqs))
	}
	st := ws.stack
	spec := st.Spec()
	dst := func(i int) []float32 {
		if into == nil {
			return nil
		}
		return into[i]
	}
	for i, req := range reqs {
		if v := dst(i); v != nil && (!(req.Op == gossip.OpUpdate && req.Mixes() || req.Op == gossip.OpGradient) || len(v) != st.NumParams()) {
			return nil, fmt.Errorf("trainer: request %d (op %d) given a vector of %d values to write to: only a merging update or a gradient of %d takes one", req.ID, req.Op, len(v), st.NumParams())
		}
		if err := req.CheckMix(st.NumParams()); err != nil {
			return nil, fmt.Errorf("trainer: request %d: %w", req.ID, err)
		}
	}
	// The merges, side by side, but for updates that start from models
	// kept on the device, which merge there (run).
	eachJob(len(reqs), func(i int) {
		if ws.res == nil || reqs[i].Op != gossip.OpUpdate || trainers[i].cfg.DP.Enabled() {
			resolveInto(reqs[i], dst(i))
		}
	})
	jobs := make([]*batchJob, len(reqs))
	for i, req := range reqs {
		t := trainers[i]
		if !t.Batchable(req) {
			return nil, fmt.Errorf("trainer: request %d (op %d) cannot train in a batch", req.ID, req.Op)
		}
		if len(req.Params) != st.NumParams() {
			return nil, fmt.Errorf("trainer: request %d: parameter vector has %d values, want %d", req.ID, len(req.Params), st.NumParams())
		}
		if t.data.D != spec.Inputs {
			return nil, fmt.Errorf("trainer: data has %d features, model %d inputs", t.data.D, spec.Inputs)
		}
		j := &batchJob{i: i, t: t, req: req, steps: t.Steps(req), bs: t.batchSize(), into: dst(i)}
		if t.cfg.DP.Enabled() {
			j.clip = t.cfg.DP.Clip // its lots are drawn as it trains
		}
		// The minibatches and rates Run would use, in its order.
		for s := 0; s < j.steps; s++ {
			if req.Op == gossip.OpUpdate {
				j.lr = append(j.lr, t.rate(req, s))
			}
			if j.clip == 0 {
				k := t.nextRows()
				j.rows, j.y = append(j.rows, t.rows[:k]...), append(j.y, t.yb[:k]...)
			}
		}
		jobs[i] = j
	}
	// Groups of one data matrix (numbered as they first come) and batch
	// size, longest first: at every step the requests still training are
	// a prefix of the group.
	group := map[boundKey]int{}
	for _, j := range jobs {
		k := keyOf(j.t.data.X)
		if _, ok := group[k]; !ok {
			group[k] = len(group)
		}
		j.group = group[k]
	}
	slices.SortStableFunc(jobs, func(a, b *batchJob) int {
		if c := groupOrder(a, b); c != 0 {
			return c
		}
		return cmp.Compare(b.steps, a.steps)
	})
	out := make([]*gossip.TrainResult, len(reqs))
	for lo := 0; lo < len(jobs); {
		hi := lo + 1
		for hi < len(jobs) && hi-lo < st.Cap() && groupOrder(jobs[hi], jobs[lo]) == 0 {
			hi++
		}
		if jobs[lo].clip > 0 {
			if err := ws.dp(jobs[lo:hi], out); err != nil {
				return nil, err
			}
			lo = hi
			continue
		}
		if jobs[lo].req.Op != gossip.OpUpdate {
			if err := ws.gradients(jobs[lo:hi], out); err != nil {
				return nil, err
			}
			lo = hi
			continue
		}
		if err := ws.run(jobs[lo:hi]); err != nil {
			return nil, err
		}
		for i, j := range jobs[lo:hi] {
			res := &gossip.TrainResult{ID: j.req.ID, Params: j.req.Params, Examples: j.steps * j.bs, Measured: true, SumSquares: ws.sums[i]}
			if j.steps > 0 {
				res.Loss = j.loss / float64(j.steps)
			}
			out[j.i] = res
		}
		lo = hi
	}
	return out, nil
}

// groupOrder orders jobs by what must be alike to train in one call: op,
// DP-SGD's clip, factor layers, data matrix and batch size; 0 means one
// group.
func groupOrder(a, b *batchJob) int {
	if c := cmp.Compare(a.req.Op, b.req.Op); c != 0 {
		return c
	}
	if c := cmp.Compare(a.clip, b.clip); c != 0 {
		return c
	}
	if c := slices.Compare(a.req.FactorLayers, b.req.FactorLayers); c != 0 {
		return c
	}
	if c := cmp.Compare(a.group, b.group); c != 0 {
		return c
	}
	return cmp.Compare(a.bs, b.bs)
}

// run trains a group (one data matrix and batch size, longest first) in
// the stack and stores the parameters in the requests' Params.
func (w *BatchWorkspace) run(jobs []*batchJob) error {
	w.params = w.params[:0]
	if w.res != nil {
		w.loadResident(jobs)
	} else {
		for _, j := range jobs {
			w.params = append(w.params, j.req.Params)
		}
		if err := w.stack.Load(w.params); err != nil {
			return fmt.Errorf("trainer: %w", err)
		}
	}
	x := w.bound.on(w.stack.Backend(), jobs[0].t.data.X)
	bs := jobs[0].bs
	for s := 0; s < jobs[0].steps; s++ {
		k := 0
		for k < len(jobs) && jobs[k].steps > s {
			k++
		}
		w.rows, w.labels, w.lr = w.rows[:0], w.labels[:0], w.lr[:0]
		for _, j := range jobs[:k] {
			w.rows = append(w.rows, j.rows[s*bs:(s+1)*bs]...)
			w.labels = append(w.labels, j.y[s*bs:(s+1)*bs]...)
			w.lr = append(w.lr, j.lr[s])
		}
		if len(w.loss) < k {
			w.loss = make([]float64, k)
		}
		w.stack.StepRows(x, w.rows, w.labels, bs, w.lr, w.loss[:k])
		for i, j := range jobs[:k] {
			j.loss += w.loss[i]
		}
	}
	// Measured on the device, before the models come back (TrainResult.Measured).
	w.sums = slices.Grow(w.sums[:0], len(jobs))[:len(jobs)]
	w.stack.SumSquares(w.sums)
	if w.res != nil && w.keepResults(len(jobs)) {
		if w.poison {
			poisonStale(w.params)
		}
		return nil // left on the device (LeaveOnDevice)
	}
	w.stack.Store(w.params)
	return nil
}

// gradients computes a group's gradients (one op, data matrix, batch size
// and list of factor layers) in the stack, each into a new vector of its
// result in out, with the sufficient factors asked for, as Run returns
// them.
func (w *BatchWorkspace) gradients(jobs []*batchJob, out []*gossip.TrainResult) error {
	w.params, w.grads = w.params[:0], w.grads[:0]
	w.rows, w.labels = w.rows[:0], w.labels[:0]
	for _, j := range jobs {
		w.params = append(w.params, j.req.Params)
		w.rows, w.labels = append(w.rows, j.rows...), append(w.labels, j.y...)
	}
	if err := w.load(w.params); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	// The results' vectors, not cleared: copied back in full, or left on
	// the device until fetched in full. Gradients left there share
	// allocations, w.gradBlock each (LeaveGradients).
	kept := w.leaveGrads && jobs[0].req.Op != gossip.OpFactors && w.res.room(len(jobs))
	w.grads = slices.Grow(w.grads, len(jobs))[:len(jobs)]
	switch {
	case jobs[0].into != nil: // named by the caller (RunBatchInto)
		for i, j := range jobs {
			if w.grads[i] = j.into; j.into == nil {
				w.grads[i] = compute.Unzeroed(w.stack.NumParams())
			}
		}
	case kept:
		for i := 0; i < len(jobs); i += w.gradBlock {
			copy(w.grads[i:], compute.UnzeroedRows(min(w.gradBlock, len(jobs)-i), w.stack.NumParams()))
		}
	default:
		for i := range w.grads {
			w.grads[i] = compute.Unzeroed(w.stack.NumParams())
		}
	}
	if len(w.loss) < len(jobs) {
		w.loss = make([]float64, len(jobs))
	}
	x := w.bound.on(w.stack.Backend(), jobs[0].t.data.X)
	var factors [][]model.Factors
	switch {
	case jobs[0].req.Op == gossip.OpFactors:
		factors = w.stack.GradRowsFactors(x, w.rows, w.labels, jobs[0].bs, w.grads, w.loss[:len(jobs)], jobs[0].req.FactorLayers)
	case kept:
		if w.stack.GradRowsKept(x, w.rows, w.labels, jobs[0].bs, len(jobs), w.loss[:len(jobs)]) {
			w.keepGradients(len(jobs))
		}
	default:
		w.stack.GradRows(x, w.rows, w.labels, jobs[0].bs, w.grads, w.loss[:len(jobs)])
	}
	for i, j := range jobs {
		out[j.i] = &gossip.TrainResult{ID: j.req.ID, Grad: w.grads[i], Loss: w.loss[i], Examples: j.bs}
		if factors != nil {
			out[j.i].Factors = factors[i]
		}
	}
	// Measured where they were computed (on a device, before they came
	// back: TrainResult.Measured).
	w.sums = slices.Grow(w.sums[:0], len(jobs))[:len(jobs)]
	w.stack.GradSumSquares(w.sums)
	for i, j := range jobs {
		out[j.i].SumSquares, out[j.i].Measured = w.sums[i], true
	}
	return nil
}

// resolveInto is req.Resolve, its merge written to into where into is
// not nil.
func resolveInto(req *gossip.TrainRequest, into []float32) {
	var err error
	if into == nil || !req.Mixes() {
		err = req.Resolve()
	} else {
		err = req.ResolveInto(into)
	}
	if err != nil {
		panic(fmt.Sprintf("trainer: %v (RunBatchInto checked the lengths)", err))
	}
}
