package trainer

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
	"github.com/gossipd/gossipd/privacy"
)

// batchFleet builds trainers over shards of one dataset (sizes 10, 40,
// 40, 70 and 5 with batch 16: batch sizes 10, 16 and 5, and one to five
// steps a pass), each with its own rng, and update requests for them
// (the SVM's at different ages).
func batchFleet(t *testing.T, spec model.Spec, m *model.Model) ([]*Trainer, []*gossip.TrainRequest) {
	return batchFleetDP(t, spec, m, privacy.Config{})
}

// batchFleetDP is batchFleet under DP-SGD dp (if enabled), each trainer
// drawing its lots and noise from a source of its own (seeded as the
// simulator seeds them): lots of all 10 and all 5 examples (rate 1) and
// of about 16 out of 40 and 70 (rates 0.4 and 0.23), often over 16, so
// in two chunks.
func batchFleetDP(t *testing.T, spec model.Spec, m *model.Model, dp privacy.Config) ([]*Trainer, []*gossip.TrainRequest) {
	t.Helper()
	const d, n = 12, 200
	rng := rand.New(rand.NewPCG(7, 8))
	X := make([]float32, n*d)
	Y := make([]int32, n)
	for i := range Y {
		Y[i] = int32(rng.IntN(spec.Classes))
		for j := range d {
			X[i*d+j] = float32(rng.NormFloat64()) + float32(int(Y[i])%(j+1))
		}
	}
	var trainers []*Trainer
	var reqs []*gossip.TrainRequest
	lo := 0
	for i, size := range []int{10, 40, 40, 70, 5} {
		idx := make([]int, size)
		for k := range idx {
			idx[k] = lo + k
		}
		lo += size
		cfg := Config{Batch: 16, LR: 0.2}
		if dp.Enabled() {
			cfg.DP, cfg.DPSource = dp, privacy.NewSeededSourceForSimulation(uint64(100+i))
		}
		tr, err := New(NewWorkspace(m), &Data{X: X, Y: Y, D: d, Idx: idx}, rand.New(rand.NewPCG(uint64(i), 9)), cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := make([]float32, m.NumParams())
		for k := range p {
			p[k] = float32(rng.NormFloat64() * 0.1)
		}
		steps := 0 // a pass
		if i == 2 {
			steps = 2
		}
		trainers = append(trainers, tr)
		reqs = append(reqs, &gossip.TrainRequest{ID: uint64(10 + i), Op: gossip.OpUpdate, Params: p, Steps: steps, Age: float64(100 * i)})
	}
	return trainers, reqs
}

// batchVsAlone builds two like fleets (batchFleetDP under dp), lets edit
// change the requests, and carries them out in a batch (a stack of 3, so
// in chunks) on one fleet and each alone (Run) on the other. It returns
// the batch's results, the alone ones, the requests and the two fleets.
func batchVsAlone(t *testing.T, spec model.Spec, dp privacy.Config, edit func([]*gossip.TrainRequest)) (got, want []*gossip.TrainResult, reqs []*gossip.TrainRequest, together, alone []*Trainer) {
	t.Helper()
	m, err := model.New(spec, model.WithBackend(compute.NewCPU(compute.WithPureGo())))
	if err != nil {
		t.Fatal(err)
	}
	alone, reqs = batchFleetDP(t, spec, m, dp)
	together, _ = batchFleetDP(t, spec, m, dp)
	edit(reqs)
	st, err := model.NewStack(spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	batched, single := cloneReqs(reqs), cloneReqs(reqs)
	if got, err = RunBatch(NewBatchWorkspace(st), together, batched); err != nil {
		t.Fatal(err)
	}
	for i, tr := range alone {
		w, err := tr.Run(single[i])
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, w)
	}
	// A gradient's request only reads its Params, which D-PSGD shares
	// with its messages (TrainRequest.Params).
	for i, r := range reqs {
		if r.Op != gossip.OpUpdate && (!slices.Equal(batched[i].Params, r.Params) || !slices.Equal(single[i].Params, r.Params)) {
			t.Errorf("%v request %d (op %d) wrote its parameters", spec, i, r.Op)
		}
	}
	return got, want, reqs, together, alone
}

func cloneReqs(reqs []*gossip.TrainRequest) []*gossip.TrainRequest {
	out := make([]*gossip.TrainRequest, len(reqs))
	for i, r := range reqs {
		c := *r
		c.Params = slices.Clone(r.Params)
		out[i] = &c
	}
	return out
}

// TestRunBatchAsRun: trainers whose requests train side by side
// (RunBatch, a stack of 3 so that the five run in chunks; two of them
// gradients, D-PSGD's requests, and one sufficient factors, SFB's) draw
// the same minibatches and end with the parameters, gradients, factors,
// losses and example counts of the same trainers running each request
// alone (Run), for every model; the next minibatches they draw agree too.
func TestRunBatchAsRun(t *testing.T) {
	for _, spec := range []model.Spec{{Kind: model.Softmax, Inputs: 12, Classes: 4}, {Kind: model.SVM, Inputs: 12, Classes: 4, Lambda: 0.01},
		{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 4}} {
		got, wants, reqs, together, alone := batchVsAlone(t, spec, privacy.Config{}, func(reqs []*gossip.TrainRequest) {
			reqs[1].Op, reqs[3].Op = gossip.OpGradient, gossip.OpGradient
			reqs[4].Op, reqs[4].FactorLayers = gossip.OpFactors, []string{"fc1.weight"}
		})
		for i, tr := range alone {
			g, want := got[i], wants[i]
			if g.ID != want.ID || g.Examples != want.Examples || math.Abs(g.Loss-want.Loss) > 1e-5*max(1, math.Abs(want.Loss)) {
				t.Errorf("%v request %d: batched id %d, %d examples, loss %v; alone id %d, %d examples, loss %v", spec, i, g.ID, g.Examples, g.Loss, want.ID, want.Examples, want.Loss)
			}
			if k := backendtest.Mismatch(g.Params, want.Params, 1e-4); k >= 0 {
				t.Errorf("%v request %d: batched parameter %d of %d, alone %d", spec, i, k, len(g.Params), len(want.Params))
			}
			if len(g.Grad) != len(want.Grad) || (reqs[i].Op != gossip.OpUpdate) != (len(g.Grad) > 0) {
				t.Fatalf("%v request %d (op %d): batched gradient of %d values, alone %d", spec, i, reqs[i].Op, len(g.Grad), len(want.Grad))
			}
			if k := backendtest.Mismatch(g.Grad, want.Grad, 1e-4); k >= 0 {
				t.Errorf("%v request %d: batched gradient %d = %v, alone %v", spec, i, k, g.Grad[k], want.Grad[k])
			}
			if len(g.Factors) != len(want.Factors) || (reqs[i].Op == gossip.OpFactors) != (len(g.Factors) == 1) {
				t.Fatalf("%v request %d (op %d): batched %d factors, alone %d", spec, i, reqs[i].Op, len(g.Factors), len(want.Factors))
			}
			for l, f := range g.Factors {
				w := want.Factors[l]
				if f.Weight != w.Weight || f.K != w.K || f.J != w.J || f.D != w.D || backendtest.Mismatch(f.U, w.U, 1e-4) >= 0 || backendtest.Mismatch(f.V, w.V, 1e-4) >= 0 {
					t.Errorf("%v request %d: batched factors of %s (%d×%d×%d) differ from alone", spec, i, f.Weight, f.K, f.J, f.D)
				}
			}
			if !slices.Equal(g.Params, want.Params) && slices.Equal(g.Params, reqs[i].Params) {
				t.Errorf("%v request %d: the batch did not train", spec, i)
			}
			checkMeasured(t, "batched", g)
			checkMeasured(t, "alone", want)
			k1, k2 := together[i].nextRows(), tr.nextRows()
			if k1 != k2 || !slices.Equal(together[i].rows[:k1], tr.rows[:k2]) {
				t.Errorf("%v request %d: the next minibatch differs after the batch: %v, alone %v", spec, i, together[i].rows[:k1], tr.rows[:k2])
			}
		}
	}
}

// TestRunBatchChunksAgree: on the CPU a request's result does not depend
// on the batch it trains in: a stack of 1 and a stack of 8 give the same
// bits.
func TestRunBatchChunksAgree(t *testing.T) {
	spec := model.Spec{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 4}
	m, err := model.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	run := func(capacity int) []*gossip.TrainResult {
		trainers, reqs := batchFleet(t, spec, m)
		reqs[2].Op, reqs[4].Op = gossip.OpGradient, gossip.OpGradient
		st, err := model.NewStack(spec, capacity)
		if err != nil {
			t.Fatal(err)
		}
		out, err := RunBatch(NewBatchWorkspace(st), trainers, reqs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	one, eight := run(1), run(8)
	for i := range one {
		if !slices.Equal(one[i].Params, eight[i].Params) || !slices.Equal(one[i].Grad, eight[i].Grad) || one[i].Loss != eight[i].Loss {
			t.Errorf("request %d: a stack of 1 and a stack of 8 differ (loss %v, %v)", i, one[i].Loss, eight[i].Loss)
		}
	}
}

// TestRunBatchDPAsRun: DP-SGD updates (of one to five steps), gradients
// and factors without factor layers trained side by side (a stack of 3,
// so in chunks) draw the same lots and noise from their sources as Run,
// and end with Run's parameters, gradients and example counts up to
// rounding, for every model, with a clip that clips some examples; the
// next draws of each source agree too.
func TestRunBatchDPAsRun(t *testing.T) {
	dp := privacy.Config{Clip: 0.5, Noise: 0.8, Delta: 1e-5}
	for _, spec := range []model.Spec{{Kind: model.Softmax, Inputs: 12, Classes: 4}, {Kind: model.SVM, Inputs: 12, Classes: 4, Lambda: 0.01},
		{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 4}} {
		got, wants, reqs, together, alone := batchVsAlone(t, spec, dp, func(reqs []*gossip.TrainRequest) {
			reqs[1].Op, reqs[3].Op, reqs[4].Op = gossip.OpGradient, gossip.OpFactors, gossip.OpGradient
		})
		for i, tr := range alone {
			g, want := got[i], wants[i]
			if g.ID != want.ID || g.Examples != want.Examples || g.Loss != 0 || want.Loss != 0 || g.Examples == 0 {
				t.Errorf("%v request %d: batched id %d, %d examples, loss %v; alone id %d, %d examples, loss %v", spec, i, g.ID, g.Examples, g.Loss, want.ID, want.Examples, want.Loss)
			}
			if k := backendtest.Mismatch(g.Params, want.Params, 1e-4); k >= 0 {
				t.Errorf("%v request %d: batched parameter %d = %v, alone %v", spec, i, k, g.Params[k], want.Params[k])
			}
			if len(g.Grad) != len(want.Grad) || (reqs[i].Op != gossip.OpUpdate) != (len(g.Grad) > 0) {
				t.Fatalf("%v request %d (op %d): batched gradient of %d values, alone %d", spec, i, reqs[i].Op, len(g.Grad), len(want.Grad))
			}
			if k := backendtest.Mismatch(g.Grad, want.Grad, 1e-4); k >= 0 {
				t.Errorf("%v request %d: batched gradient %d = %v, alone %v", spec, i, k, g.Grad[k], want.Grad[k])
			}
			if reqs[i].Op == gossip.OpUpdate && slices.Equal(g.Params, reqs[i].Params) {
				t.Errorf("%v request %d: the batch did not train", spec, i)
			}
			checkMeasured(t, "batched", g)
			checkMeasured(t, "alone", want)
			if a, b := together[i].cfg.DPSource.Float64(), tr.cfg.DPSource.Float64(); a != b {
				t.Errorf("%v request %d: the sources' next draws differ after the batch: %v, alone %v", spec, i, a, b)
			}
		}
	}
}

// TestRunBatchRefuses: requests of an unknown op, sufficient factors
// under DP-SGD, and parameter vectors of the wrong size are errors, not
// silently run another way.
func TestRunBatchRefuses(t *testing.T) {
	spec := model.Spec{Kind: model.Softmax, Inputs: 12, Classes: 4}
	m, err := model.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	trainers, reqs := batchFleet(t, spec, m)
	st, err := model.NewStack(spec, 4)
	if err != nil {
		t.Fatal(err)
	}
	ws := NewBatchWorkspace(st)
	unknown := cloneReqs(reqs[:1])
	unknown[0].Op = 99
	if _, err := RunBatch(ws, trainers[:1], unknown); err == nil {
		t.Error("a request of an unknown op trained in a batch")
	}
	short := cloneReqs(reqs[:1])
	short[0].Params = short[0].Params[:5]
	if _, err := RunBatch(ws, trainers[:1], short); err == nil {
		t.Error("a 5-value parameter vector trained in a batch")
	}
	dp, err := New(NewWorkspace(m), trainers[0].data, rand.New(rand.NewPCG(1, 1)), Config{Batch: 4, DP: privacy.Config{Clip: 1, Noise: 1, Delta: 1e-5},
		DPSource: privacy.NewSeededSourceForSimulation(3)})
	if err != nil {
		t.Fatal(err)
	}
	factors := &gossip.TrainRequest{Op: gossip.OpFactors, Params: reqs[0].Params, FactorLayers: []string{"fc1.weight"}}
	if !dp.Batchable(reqs[0]) || !dp.Batchable(&gossip.TrainRequest{Op: gossip.OpGradient}) || dp.Batchable(factors) {
		t.Error("DP-SGD: updates and gradients not batchable, or sufficient factors batchable")
	}
	if _, err := RunBatch(ws, []*Trainer{dp}, []*gossip.TrainRequest{factors}); err == nil {
		t.Error("DP-SGD sufficient factors trained in a batch")
	}
}

// TestEachJob: eachJob runs every index once, split among goroutines
// where there are enough (the race detector watches the writes).
func TestEachJob(t *testing.T) {
	prev := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(prev)
	for _, k := range []int{0, 5, 16, 100, 1001} {
		runs := make([]int, k)
		var mu sync.Mutex
		calls := 0
		eachJob(k, func(i int) {
			runs[i]++
			mu.Lock()
			calls++
			mu.Unlock()
		})
		if calls != k {
			t.Fatalf("k=%d: %d calls", k, calls)
		}
		for i, n := range runs {
			if n != 1 {
				t.Fatalf("k=%d: job %d ran %d times", k, i, n)
			}
		}
	}
}

// checkMeasured fails t unless r carries the Σ x² of the vector it
// returns, measured where it trained (TrainResult.Measured), as the
// core would compute it.
func checkMeasured(t *testing.T, what string, r *gossip.TrainResult) {
	t.Helper()
	v := r.Params
	if v == nil {
		v = r.Grad
	}
	if want := compute.SumSquares4(v); !r.Measured || r.SumSquares != want {
		t.Errorf("%s result %d: measured %v, Σx² %v; want %v", what, r.ID, r.Measured, r.SumSquares, want)
	}
}

// TestRunBatchMeasuresOnDevice: a batch trained on a device measures its
// models there (model.Stack.SumSquares, one call for the batch), to the
// CPU's bits on the emulated device.
func TestRunBatchMeasuresOnDevice(t *testing.T) {
	spec := model.Spec{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 4}
	m, err := model.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	trainers, reqs := batchFleet(t, spec, m)
	dev := backendtest.NewDevice()
	st, err := model.NewStack(spec, 8, model.WithBackend(dev))
	if err != nil {
		t.Fatal(err)
	}
	out, err := RunBatch(NewBatchWorkspace(st), trainers, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out {
		checkMeasured(t, "on the device", r)
	}
	if dev.Stats().HostOut == 0 {
		t.Error("nothing ran on the device")
	}
}
