// Package trainer carries out the protocol core's training requests on a
// node's local data: local SGD passes, minibatch gradients and sufficient
// factors. The simulator and the daemon both use it, so neither
// re-implements training; it is not part of the pure core because it runs
// the compute backend (which may use several threads).
package trainer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/privacy"
)

// Data is a node's local training data: rows Idx of the shared matrix X
// (rows of D features) with labels Y. Sharing X lets a simulator hold
// thousands of nodes without copying their data.
type Data struct {
	X   []float32
	Y   []int32
	D   int
	Idx []int
}

// Len is the number of local examples.
func (d *Data) Len() int { return len(d.Idx) }

// Config configures a Trainer.
type Config struct {
	// Batch is the minibatch size (default 32; capped at the data size).
	Batch int
	// LR is the learning rate of local SGD updates (default 0.1). The SVM
	// ignores it and follows Pegasos' 1/(λ·t).
	LR float64
	// DP, when enabled, trains with DP-SGD: every step takes a Poisson
	// sample of the local data with rate Batch/N, clips each example's
	// gradient to DP.Clip, adds Gaussian noise of std DP.Noise·DP.Clip to
	// the sum and divides by Batch. Sufficient factors are refused (noise
	// is full rank).
	DP privacy.Config
	// DPSource draws the sampling and the noise (required with DP: the
	// daemon passes privacy.NewCryptoSource).
	DPSource privacy.Source
}

// Workspace is the model and the scratch buffers that trainers compute with.
// Trainers that share a workspace must run on one goroutine; a simulator
// shares one among thousands of nodes.
type Workspace struct {
	model *model.Model
	// xt is a minibatch gathered from the data, in the backend's memory.
	xt   compute.Tensor
	yb   []int32
	rows []int
	grad []float32
	pe   []float32 // a chunk's clipped gradient sum (DP)
	lot  []int     // a DP-SGD lot's rows and labels
	lotY []int32
	// sum adds up an update's losses in the backend's memory, so that its
	// steps do not wait for a device one by one.
	sum compute.LossSum
	// bound holds each data matrix the workspace trained on, in the
	// model's backend's memory, while the workspace lives.
	bound boundData
}

// on returns x in the backend's memory, loading it the first time.
func (w *Workspace) on(x []float32) compute.Tensor { return w.bound.on(w.model.Backend(), x) }

// Close frees what the workspace loaded into its model's backend (the
// data it bound, its minibatch buffer); the model is the caller's.
func (w *Workspace) Close() {
	be := w.model.Backend()
	w.bound.free(be)
	if w.sum != nil {
		w.sum.Free()
		w.sum = nil
	}
	if w.xt.Len() > 0 {
		be.Free(w.xt)
		w.xt = compute.Tensor{}
	}
}

// NewWorkspace returns a workspace computing with m (whose parameters every
// request overwrites).
func NewWorkspace(m *model.Model) *Workspace {
	return &Workspace{model: m, grad: make([]float32, m.NumParams())}
}

// Trainer runs requests for one node. It is not safe for concurrent use.
type Trainer struct {
	*Workspace
	cfg    Config
	data   *Data
	rng    *rand.Rand
	perm   []int
	cursor int
}

// New returns a trainer over data computing in ws. rng drives minibatch
// sampling.
func New(ws *Workspace, data *Data, rng *rand.Rand, cfg Config) (*Trainer, error) {
	m := ws.model
	if cfg.Batch == 0 {
		cfg.Batch = gossip.DefaultBatch
	}
	if cfg.LR == 0 {
		cfg.LR = gossip.DefaultLR
	}
	if cfg.Batch < 0 || cfg.LR < 0 {
		return nil, fmt.Errorf("trainer: batch %d and lr %v must be positive", cfg.Batch, cfg.LR)
	}
	if data.Len() == 0 {
		return nil, fmt.Errorf("trainer: no local data")
	}
	if data.D != m.Spec().Inputs {
		return nil, fmt.Errorf("trainer: data has %d features, model %d inputs", data.D, m.Spec().Inputs)
	}
	if err := cfg.DP.Validate(); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	if cfg.DP.Enabled() && cfg.DPSource == nil {
		return nil, fmt.Errorf("trainer: DP-SGD needs a noise source")
	}
	t := &Trainer{Workspace: ws, cfg: cfg, data: data, rng: rng, perm: slices.Clone(data.Idx)}
	t.cursor = len(t.perm) // shuffle before the first batch
	return t, nil
}

// Run carries out one request.
func (t *Trainer) Run(req *gossip.TrainRequest) (*gossip.TrainResult, error) {
	if err := t.start(req); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	res := &gossip.TrainResult{ID: req.ID}
	if t.model.Stochastic() {
		// Dropout's masks from this peer's randomness, not from the
		// workspace model's, which serves peers in whatever order
		// they reach it.
		t.model.SeedDropout(t.rng.Uint64())
	}
	switch req.Op {
	case gossip.OpUpdate:
		steps := req.Steps
		if steps == 0 {
			steps = (t.data.Len() + t.batchSize() - 1) / t.batchSize()
		}
		dp := t.cfg.DP.Enabled() // DP-SGD's steps report no loss
		if !dp {
			if t.sum == nil {
				t.sum = t.model.Backend().NewLossSum()
			}
			t.sum.Reset()
			t.model.SumLosses(t.sum)
			defer t.model.SumLosses(nil)
		}
		for s := 0; s < steps; s++ {
			lr := t.rate(req, s)
			var k int
			if dp {
				k = t.dpGradient(t.grad)
				t.model.Backend().Axpby(t.model.ParamTensor(), -lr, compute.Host(t.grad), 1)
			} else {
				k = t.nextRows()
				t.model.SGDStepRowsOn(t.on(t.data.X), t.rows[:k], t.yb[:k], lr)
			}
			res.Examples += k
		}
		if !dp && res.Examples > 0 {
			res.Loss = t.sum.Read() / float64(res.Examples)
		}
		res.Params = req.Params // the request owns this copy; reuse it
		t.model.StoreParams(res.Params)
		measure(res, res.Params)
	case gossip.OpGradient, gossip.OpFactors:
		if t.cfg.DP.Enabled() {
			if req.Op == gossip.OpFactors && len(req.FactorLayers) > 0 {
				return nil, fmt.Errorf("trainer: DP-SGD noise is full rank: sufficient factors cannot carry it (send SFB updates dense)")
			}
			res.Grad = make([]float32, t.model.NumParams())
			res.Examples = t.dpGradient(res.Grad)
			measure(res, res.Grad)
			return res, nil
		}
		k := t.nextRows()
		x := t.batch(t.rows[:k])
		res.Grad = make([]float32, t.model.NumParams())
		if req.Op == gossip.OpFactors {
			res.Factors, res.Loss = t.model.GradientWithFactorsOn(compute.Host(res.Grad), x, t.yb[:k], k, req.FactorLayers)
		} else {
			res.Loss = t.model.GradientOn(compute.Host(res.Grad), x, t.yb[:k], k)
		}
		res.Examples = k
		measure(res, res.Grad)
	default:
		return nil, fmt.Errorf("trainer: unknown op %d", req.Op)
	}
	return res, nil
}

func (t *Trainer) batchSize() int { return min(t.cfg.Batch, t.data.Len()) }

// rate is the learning rate of step s of update req: Config.LR, or for
// the SVM Pegasos' η_t = 1/(λ·t), t counting minibatch steps, including
// those the model's age implies.
func (t *Trainer) rate(req *gossip.TrainRequest, s int) float32 {
	spec := t.model.Spec()
	if spec.Kind != model.SVM {
		return float32(t.cfg.LR)
	}
	t0 := 1 + math.Floor(req.Age/float64(t.batchSize()))
	return float32(1 / (spec.Lambda * (t0 + float64(s))))
}

// nextRows picks the next minibatch of a shuffled pass: its rows of the
// data into rows and their labels into yb. It returns the batch size;
// passes reshuffle.
func (t *Trainer) nextRows() int {
	bs := t.batchSize()
	if len(t.yb) < bs {
		t.yb = make([]int32, bs)
	}
	if len(t.rows) < bs {
		t.rows = make([]int, bs)
	}
	for r := 0; r < bs; r++ {
		if t.cursor == len(t.perm) {
			t.rng.Shuffle(len(t.perm), func(i, j int) { t.perm[i], t.perm[j] = t.perm[j], t.perm[i] })
			t.cursor = 0
		}
		i := t.perm[t.cursor]
		t.cursor++
		t.rows[r] = i
		t.yb[r] = t.data.Y[i]
	}
	return bs
}

// batch gathers the listed rows of the data into the workspace's
// minibatch tensor, where the backend computes (a device gathers from the
// data it holds), and returns the gathered rows.
func (t *Trainer) batch(rows []int) compute.Tensor {
	d, be := t.data.D, t.model.Backend()
	if n := max(len(rows), t.batchSize()) * d; t.xt.Len() < n {
		if t.xt.Len() > 0 {
			be.Free(t.xt)
		}
		t.xt = be.Alloc(n)
	}
	x := t.xt.Slice(0, len(rows)*d)
	be.GatherRows(x, t.on(t.data.X), rows, d, d)
	return x
}

// Move makes the trainer compute in ws from now on, its shuffling and
// sampling state kept: a daemon whose GPU failed trains on the CPU. The
// old workspace is the caller's (a failed device's is best left alone).
func (t *Trainer) Move(ws *Workspace) { t.Workspace = ws }

// start sets the model to req's starting point. An update that asks for
// a mix, on a model whose parameters live on the host, is merged straight
// into them (the same values as Resolve's), and req.Params becomes a new
// vector that the result is stored to: the merge reads the two models
// once and writes the parameters, already in the cache, instead of
// writing a new vector and copying it in. The request's vectors are
// never written: they may be shared (gossip.Message.Params).
func (t *Trainer) start(req *gossip.TrainRequest) error {
	if req.Op == gossip.OpUpdate && req.MixWith != nil && t.model.ParamTensor().OnHost() {
		p := t.model.Params()
		if len(req.Params) != len(p) || len(req.MixWith) != len(p) {
			return fmt.Errorf("%w: a mix of %d and %d parameters, model has %d", model.ErrShape, len(req.Params), len(req.MixWith), len(p))
		}
		compute.InterpolateInto(p, req.Params, req.MixWith, req.MixWeight)
		req.Params, req.MixWith, req.MixWeight = make([]float32, len(p)), nil, 0
		return nil
	}
	if err := req.Resolve(); err != nil {
		return fmt.Errorf("%w: %v", model.ErrShape, err)
	}
	return t.model.SetParams(req.Params)
}

// RunIn is Run computing in ws instead of the trainer's own workspace, so
// that trainers which share one workspace can run requests on several
// goroutines at once, each goroutine with its own workspace. The trainer
// itself (its shuffling state) must still run one request at a time.
func (t *Trainer) RunIn(ws *Workspace, req *gossip.TrainRequest) (*gossip.TrainResult, error) {
	own := t.Workspace
	t.Workspace = ws
	defer func() { t.Workspace = own }()
	return t.Run(req)
}

// Work is how many examples req plans to process: its steps times the
// batch (for DP-SGD the expected lot; the lots drawn vary). A simulator
// charges compute time for it before the work is done.
func (t *Trainer) Work(req *gossip.TrainRequest) int { return t.Steps(req) * t.batchSize() }

// Steps is how many minibatch steps req takes: what a DP-SGD budget is
// charged for it.
func (t *Trainer) Steps(req *gossip.TrainRequest) int {
	if req.Op != gossip.OpUpdate {
		return 1
	}
	if req.Steps > 0 {
		return req.Steps
	}
	return (t.data.Len() + t.batchSize() - 1) / t.batchSize()
}

// SamplingRate is DP-SGD's Poisson sampling rate: Batch / N.
func (t *Trainer) SamplingRate() float64 {
	return float64(t.batchSize()) / float64(t.data.Len())
}

// dpGradient writes one DP-SGD step's noisy gradient into dst and returns
// the lot size: a Poisson sample of the local data (drawLot), per-example
// gradients clipped to C and summed in chunks of Batch, N(0, (σC)²) added
// per coordinate, divided by the expected lot size Batch.
func (t *Trainer) dpGradient(dst []float32) int {
	bs := t.batchSize()
	P := t.model.NumParams()
	if len(t.pe) < P {
		t.pe = make([]float32, P)
	}
	t.lot, t.lotY = t.drawLot(t.lot[:0], t.lotY[:0])
	clear(dst)
	for lo := 0; lo < len(t.lot); lo += bs {
		k := min(bs, len(t.lot)-lo)
		// One backward pass clips and sums the chunk's per-example
		// gradients (model.ClippedGradientSum).
		t.model.ClippedGradientSumOn(compute.Host(t.pe[:P]), t.batch(t.lot[lo:lo+k]), t.lotY[lo:lo+k], k, t.cfg.DP.Clip)
		for j, v := range t.pe[:P] {
			dst[j] += v
		}
	}
	privacy.AddNoise(dst, t.cfg.DP.Clip, t.cfg.DP.AddedNoise(), float64(bs), t.cfg.DPSource)
	t.model.AddRegGradient(dst) // data-independent: neither clipped nor noised
	return len(t.lot)
}

// drawLot appends a DP-SGD lot to rows and its labels to y: each local
// example with probability SamplingRate, drawn from DPSource in the
// data's order.
func (t *Trainer) drawLot(rows []int, y []int32) ([]int, []int32) {
	q := t.SamplingRate()
	for _, i := range t.data.Idx {
		if t.cfg.DPSource.Float64() < q {
			rows, y = append(rows, i), append(y, t.data.Y[i])
		}
	}
	return rows, y
}

// measure records v's Σ x² in r (gossip.TrainResult.Measured), here,
// where v was computed, rather than on the goroutine of the peer's core.
func measure(r *gossip.TrainResult, v []float32) {
	r.SumSquares, r.Measured = compute.SumSquares4(v), true
}
