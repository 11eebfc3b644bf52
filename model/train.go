package model

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/gossipd/gossipd/model/compute"
)

// TrainConfig configures Train. Zero values take the documented defaults.
type TrainConfig struct {
	// Epochs over the data (default 1).
	Epochs int
	// Batch is the minibatch size (default 32). The last batch of an epoch
	// may be smaller.
	Batch int
	// Seed drives the shuffling. Same seed, same order.
	Seed uint64
	// NoGraphs turns off the replay of recorded steps on a backend that
	// has it (compute.Graphs: CUDA graphs), which is on by default.
	NoGraphs bool
}

// Validate checks the config and fills defaults.
func (c *TrainConfig) Validate() error {
	if c.Epochs == 0 {
		c.Epochs = 1
	}
	if c.Batch == 0 {
		c.Batch = 32
	}
	if c.Epochs < 0 || c.Batch < 0 {
		return fmt.Errorf("model: epochs %d and batch %d must be positive", c.Epochs, c.Batch)
	}
	return nil
}

// Progress reports where training is.
type Progress struct {
	Epoch, Epochs int
	// Step counts minibatches within the epoch; Steps is their number.
	Step, Steps int
	// Loss is the mean training loss of the epoch so far, as of the last
	// read of the running sum: every step on the CPU, every ReadEvery
	// steps and the epoch's last on a device (a read waits for it).
	Loss float64
}

// ReadEvery is how many steps pass between reads of the loss on a device
// backend, for progress reports.
const ReadEvery = 32

// TrainResult summarises a Train call.
type TrainResult struct {
	Epochs, Steps, Samples int
	// Graphs says how many steps were replayed from recordings, on a
	// backend that records them (compute.Graphs); nil elsewhere.
	Graphs *GraphStats
	// Loss is the mean training loss of the last epoch.
	Loss float64
}

// GraphStats says how a Train call used recorded steps (compute.Graphs).
// Only plain SGD steps of a full minibatch are recorded: the first runs
// as usual, the next few are recorded, and the rest are replays.
type GraphStats struct {
	Replayed int `json:"replayed"`
	// Off says why steps were not replayed: "" when they were.
	Off string `json:"off,omitempty"`
}

// String says how many steps were replayed, or why none (more) were.
func (g *GraphStats) String() string {
	if g.Off != "" {
		return fmt.Sprintf("%d steps replayed from recordings (CUDA graphs); not (or no longer) replaying: %s", g.Replayed, g.Off)
	}
	return fmt.Sprintf("%d steps replayed from recordings (CUDA graphs)", g.Replayed)
}

// Train runs minibatch training of m with opt on n examples (x is n×Inputs,
// y the labels), reshuffling each epoch. progress, if not nil, is called
// after every step. It stops early with ctx's error when ctx is done.
//
// The steps add their losses to a running sum in the backend's memory
// (compute.LossSum), read at the end of each epoch (and for progress), so
// that on a GPU the host queues the steps' kernels without waiting for
// them.
func Train(ctx context.Context, m *Model, opt Optimizer, x []float32, y []int32, n int, cfg TrainConfig, progress func(Progress)) (TrainResult, error) {
	if err := cfg.Validate(); err != nil {
		return TrainResult{}, err
	}
	if n <= 0 {
		return TrainResult{}, fmt.Errorf("model: no training examples")
	}
	m.check(x, y, n)        // before the data is loaded: TrainOn checks again
	xt := m.backend.Load(x) // the data where the backend computes, once (the CPU: x itself)
	res, err := TrainOn(ctx, m, opt, xt, y, n, cfg, progress)
	if !xt.OnHost() {
		m.backend.Free(xt)
	}
	return res, err
}

// TrainOn is Train on a dataset already in the backend's memory (Load):
// a benchmark that times training alone, as PyTorch's reference does with
// its data on the device before the clock starts, loads it first. It
// returns when the backend has finished the last step (it reads the
// epoch's loss).
func TrainOn(ctx context.Context, m *Model, opt Optimizer, xt compute.Tensor, y []int32, n int, cfg TrainConfig, progress func(Progress)) (TrainResult, error) {
	if err := cfg.Validate(); err != nil {
		return TrainResult{}, err
	}
	if n <= 0 {
		return TrainResult{}, fmt.Errorf("model: no training examples")
	}
	d := m.spec.Inputs
	m.checkT(xt, y, n)
	bs := min(cfg.Batch, n)
	yb := make([]int32, bs)
	// Plain SGD (no momentum, no weight decay) takes the fused step.
	sgd, plain := opt.(*SGD)
	plain = plain && sgd.Momentum == 0 && sgd.WeightDecay == 0
	// The gradient and the gathered minibatch are in the backend's memory,
	// beside the parameters.
	var grad, xb compute.Tensor
	if !plain {
		grad, xb = m.backend.Alloc(m.NumParams()), m.backend.Alloc(bs*d)
		defer func() { m.backend.Free(grad); m.backend.Free(xb) }()
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x747261696e))
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	steps := (n + bs - 1) / bs
	sum := m.backend.NewLossSum()
	m.SumLosses(sum)
	var graph compute.StepGraph // below: the recorded steps, if any
	defer func() {
		m.SumLosses(nil)
		if r := recover(); r != nil {
			// A device failure: freeing on the failed device would panic
			// in turn and hide it.
			panic(r)
		}
		if graph != nil {
			graph.Close() // before the sum its replays add to
		}
		sum.Free()
	}()
	every := ReadEvery
	if _, ok := sum.(*compute.HostSum); ok {
		every = 1
	}
	var res TrainResult
	// A plain SGD step of a full minibatch queues the same work each
	// time but for its rows and labels: a backend with graphs records it
	// and replays it.
	var lo, hi int
	step := func() { m.SGDStepRowsOn(xt, perm[lo:hi], yb[:hi-lo], sgd.LR) }
	if gr, ok := m.backend.(compute.Graphs); ok {
		res.Graphs = &GraphStats{}
		switch {
		case cfg.NoGraphs:
			res.Graphs.Off = "turned off"
		case !plain:
			res.Graphs.Off = "only plain SGD steps are recorded"
		case m.Stochastic():
			res.Graphs.Off = "a network with dropout draws new masks at every step: not recorded"
		default:
			graph = gr.NewStepGraph()
		}
	}
	for ep := 0; ep < cfg.Epochs; ep++ {
		rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		sum.Reset()
		var loss float64 // the mean loss as of the last read
		for s := 0; s < steps; s++ {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			lo, hi = s*bs, min(n, (s+1)*bs)
			k := hi - lo
			for r, i := range perm[lo:hi] {
				yb[r] = y[i]
			}
			switch {
			case graph != nil && k == bs:
				graph.Run(step)
				res.Graphs.Replayed, res.Graphs.Off = graph.Stats()
			case plain:
				step()
			default:
				m.backend.GatherRows(xb.Slice(0, k*d), xt, perm[lo:hi], d, d)
				m.GradientOn(grad, xb.Slice(0, k*d), yb[:k], k)
				opt.Step(m.backend, m.params, grad)
			}
			res.Steps++
			res.Samples += k
			if progress != nil {
				if (s+1)%every == 0 || s == steps-1 {
					loss = sum.Read() / float64(hi)
				}
				progress(Progress{Epoch: ep + 1, Epochs: cfg.Epochs, Step: s + 1, Steps: steps, Loss: loss})
			}
		}
		res.Epochs++
		res.Loss = sum.Read() / float64(n)
	}
	return res, nil
}

// Metrics are a model's results on labelled data.
type Metrics struct {
	N        int     `json:"n"`
	Accuracy float64 `json:"accuracy"`
	// Loss is the mean data loss (cross-entropy, or hinge for the SVM).
	Loss float64 `json:"loss"`
	// Confusion[t][p] counts examples of true class t predicted as p.
	Confusion [][]int `json:"confusion"`
}

// Evaluate measures m on n examples.
func (m *Model) Evaluate(x []float32, y []int32, n int) Metrics {
	var t Tally
	m.tally(&t, x, y, n)
	return t.Metrics(m.spec.Classes)
}

// Tally adds up a model's results over several calls (chunks of a test
// set, say), so that one pass over the data can serve many models.
type Tally struct {
	N, Correct int
	// Loss is the summed data loss.
	Loss float64
	// Confusion[t][p] counts examples of true class t predicted as p.
	Confusion [][]int
}

// Metrics turns the tally into Metrics (for C classes).
func (t *Tally) Metrics(classes int) Metrics {
	out := Metrics{N: t.N, Confusion: t.Confusion}
	if out.Confusion == nil {
		out.Confusion = make([][]int, classes)
		for i := range out.Confusion {
			out.Confusion[i] = make([]int, classes)
		}
	}
	if t.N > 0 {
		out.Accuracy = float64(t.Correct) / float64(t.N)
		out.Loss = t.Loss / float64(t.N)
	}
	return out
}

// TallyWith measures the parameter vector params (of m's layout, read in
// place, not copied; m's own parameters are untouched) on n examples and
// adds the results to t.
func (m *Model) TallyWith(t *Tally, params []float32, x []float32, y []int32, n int) {
	if len(params) != m.params.Len() {
		panic(fmt.Sprintf("model: %d parameters, want %d", len(params), m.params.Len()))
	}
	own := m.params
	m.params = m.backend.Load(params) // the CPU reads params in place
	defer func() {
		if !m.params.OnHost() {
			m.backend.Free(m.params)
		}
		m.params = own
	}()
	m.tally(t, x, y, n)
}

// tally measures the model's parameters on n examples (checked here, for
// TallyWith and Evaluate) and adds the results to t; only the loss, the
// count and the predicted classes come to the host.
func (m *Model) tally(t *Tally, x []float32, y []int32, n int) {
	m.check(x, y, n)
	C := m.spec.Classes
	if t.Confusion == nil {
		t.Confusion = make([][]int, C)
		for i := range t.Confusion {
			t.Confusion[i] = make([]int, C)
		}
	}
	if n == 0 {
		return
	}
	if m.net != nil {
		m.netTally(t, x, y, n)
		return
	}
	const chunk = 512
	for lo := 0; lo < n; lo += chunk {
		k := min(chunk, n-lo)
		m.forward(host(x[lo*m.spec.Inputs:]), k)
		z := m.ws.z[len(m.layers)-1].Slice(0, k*C)
		var l float64
		var c int
		if m.spec.Kind == SVM {
			l, c = m.backend.HingeOneVsRest(host(nil), z, y[lo:lo+k], k, C, 0)
		} else {
			p := m.ws.probs.Slice(0, k*C)
			l, c = m.backend.SoftmaxCrossEntropy(p, host(nil), z, y[lo:lo+k], k, C, 0)
			z = p
		}
		probs := m.toHost(z, &m.ws.out)
		t.Loss += l
		t.Correct += c
		for r := 0; r < k; r++ {
			t.Confusion[y[lo+r]][argmax(probs[r*C:(r+1)*C])]++
		}
	}
	t.N += n
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// Vote predicts by majority vote of several parameter vectors of m's layout
// (the cache of models a gossip node received): each votes for its arg-max
// class; ties go to the lowest class. It writes n predicted classes to out
// and leaves m holding the last vector.
func (m *Model) Vote(out []int32, sets [][]float32, x []float32, n int) error {
	m.check(x, nil, n)
	C := m.spec.Classes
	votes := make([]int32, n*C)
	probs := make([]float32, n*C)
	for _, p := range sets {
		if err := m.SetParams(p); err != nil {
			return err
		}
		m.Predict(probs, x, n)
		for i := 0; i < n; i++ {
			votes[i*C+argmax(probs[i*C:(i+1)*C])]++
		}
	}
	for i := 0; i < n; i++ {
		best := 0
		for c := 1; c < C; c++ {
			if votes[i*C+c] > votes[i*C+best] {
				best = c
			}
		}
		out[i] = int32(best)
	}
	return nil
}
