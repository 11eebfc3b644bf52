package gossip_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
)

// runSFB runs P SFB peers with real training on synthetic data for the
// given clocks and returns every replica's parameters.
func runSFB(t *testing.T, mode string, peers, clocks int, tweak func(*gossip.Config)) [][]float32 {
	h := sfbHarness(t, mode, peers, tweak)
	h.run(time.Duration(clocks)*time.Second-time.Millisecond, time.Second)
	for _, nd := range h.nodes {
		if nd.Round() != uint64(clocks) {
			t.Fatalf("%s at clock %d, want %d", nd.ID(), nd.Round(), clocks)
		}
	}
	return h.params()
}

// sfbHarness builds P SFB peers with real training on synthetic data.
func sfbHarness(t *testing.T, mode string, peers int, tweak func(*gossip.Config)) *harness {
	spec := model.Spec{Kind: model.MLP, Inputs: 20, Hidden: []int{16}, Classes: 4}
	m, _ := model.New(spec, model.WithSeed(1))
	init := append([]float32(nil), m.Params()...)
	rng := rand.New(rand.NewPCG(9, 9))
	N := 400
	X := make([]float32, N*20)
	Y := make([]int32, N)
	for i := range Y {
		Y[i] = int32(rng.IntN(4))
		for j := 0; j < 20; j++ {
			X[i*20+j] = float32(rng.NormFloat64()) + float32(Y[i]%2)*float32(j%3)
		}
	}
	idxs := make([][]int, peers)
	cursor := make([]int, peers)
	h := newHarness(t, peers, func(i int, c *gossip.Config) {
		c.Protocol, c.Spec, c.Init, c.SFBMode, c.Batch, c.LR = gossip.SFB, spec, init, mode, 8, 0.2
		if tweak != nil {
			tweak(c)
		}
		for j := 0; j < peers; j++ {
			if j != i {
				c.Neighbors = append(c.Neighbors, gossip.Neighbor{ID: name(j), Weight: 1})
			}
		}
		for k := i; k < N; k += peers {
			idxs[i] = append(idxs[i], k)
		}
	})
	// Each request takes the peer's next minibatch of 8, cycling through
	// its examples (the core's requests are plain functions of the data).
	const batch = 8
	xb, yb := make([]float32, batch*20), make([]int32, batch)
	h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
		for r := 0; r < batch; r++ {
			k := idxs[i][cursor[i]%len(idxs[i])]
			cursor[i]++
			copy(xb[r*20:(r+1)*20], X[k*20:(k+1)*20])
			yb[r] = Y[k]
		}
		if err := m.SetParams(req.Params); err != nil {
			t.Fatal(err)
		}
		res := &gossip.TrainResult{ID: req.ID, Grad: make([]float32, m.NumParams()), Examples: batch}
		if req.Op == gossip.OpFactors {
			res.Factors, res.Loss = m.GradientWithFactors(res.Grad, xb, yb, batch, req.FactorLayers)
		} else {
			res.Loss = m.Gradient(res.Grad, xb, yb, batch)
		}
		if req.Op == gossip.OpUpdate { // one SGD step of 0.2, whatever req.Steps
			res.Params = slices.Clone(req.Params)
			merge.Axpy(res.Params, -0.2, res.Grad)
			res.Grad = nil
		}
		return res
	}
	return h
}

// TestSFBEqualsDense: under BSP every replica is identical, and broadcasting
// sufficient factors gives the same models (to float tolerance) as
// broadcasting the dense updates.
func TestSFBEqualsDense(t *testing.T) {
	fac := runSFB(t, "factors", 4, 15, nil)
	den := runSFB(t, "dense", 4, 15, nil)
	if d := merge.ConsensusDistance(fac); d != 0 {
		t.Fatalf("SFB replicas differ: consensus distance %v", d)
	}
	if d := merge.ConsensusDistance(den); d != 0 {
		t.Fatalf("dense replicas differ: consensus distance %v", d)
	}
	moved := false
	for k := range fac[0] {
		if math.Abs(float64(fac[0][k]-den[0][k])) > 1e-4 {
			t.Fatalf("parameter %d: %v with factors, %v dense", k, fac[0][k], den[0][k])
		}
		moved = moved || fac[0][k] != runInit(k)
	}
	if !moved {
		t.Fatal("training did not move the parameters")
	}
}

func runInit(k int) float32 {
	m, _ := model.New(model.Spec{Kind: model.MLP, Inputs: 20, Hidden: []int{16}, Classes: 4}, model.WithSeed(1))
	return m.Params()[k]
}

// TestSFBStaleAndPartial: SSP (staleness 1) and random partial broadcast
// (to 2 of 5 peers) keep every peer moving clock after clock, and replicas
// stay close though no longer identical.
func TestSFBStaleAndPartial(t *testing.T) {
	for name, tweak := range map[string]func(*gossip.Config){
		"ssp":     func(c *gossip.Config) { c.Staleness = 1 },
		"partial": func(c *gossip.Config) { c.Fanout = 2 },
	} {
		xs := runSFB(t, "factors", 6, 12, tweak)
		d := merge.ConsensusDistance(xs)
		if !(d < 0.05) {
			t.Errorf("%s: consensus distance %v", name, d)
		}
	}
}

// TestSFBRestart: a peer restarted from an old snapshot (as after kill -9)
// is clocks behind; the peers that hear its stale update send it their
// state, it adopts it, and the replicas are identical again. Updates go by
// broadcast.
func TestSFBRestart(t *testing.T) {
	h := sfbHarness(t, "factors", 4, func(c *gossip.Config) { c.Broadcast = true })
	h.run(10*time.Second-time.Millisecond, time.Second)
	snap := h.nodes[3].Snapshot()
	cfg := h.nodes[3].Config()
	h.dead[3] = true
	h.run(30*time.Second-time.Millisecond, time.Second)
	if r := h.nodes[0].Round(); r < snap.Round+3 {
		t.Fatalf("without peer 3 the others reached clock %d only (it stopped at %d)", r, snap.Round)
	}
	cfg.Resume = &snap
	nd, err := gossip.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.nodes[3], h.dead[3] = nd, false
	h.run(40*time.Second-time.Millisecond, time.Second)
	if a, b := h.nodes[3].Round(), h.nodes[0].Round(); a != b {
		t.Fatalf("restarted peer at clock %d, the others at %d", a, b)
	}
	if d := merge.ConsensusDistance(h.params()); d != 0 {
		t.Fatalf("replicas differ after the restart: consensus distance %v", d)
	}
	caught := false
	for _, e := range h.traces {
		caught = caught || (e.Event == "catch-up" && e.Value >= 3)
	}
	if !caught {
		t.Fatal("no catch-up traced")
	}
}

// TestSFBTopK: SFB with top-k sends a tenth of each update's dense values
// (the rest waits in the sender's error-feedback residual), applies to
// itself what the others get, so the replicas stay identical, and still
// trains; the residual is in the checkpointed state and comes back; a
// saved residual of the wrong size, or for a job without top-k, is
// refused; an uncompressed update to a top-k job is dropped.
func TestSFBTopK(t *testing.T) {
	top := compress.Spec{Kind: compress.TopK, Fraction: 0.1}
	h := sfbHarness(t, "dense", 4, func(c *gossip.Config) { c.Sparse = top })
	dense := len(h.nodes[0].Params())
	var packed, plain int
	h.drop = func(m *gossip.Message) bool {
		if m.Kind == gossip.KindFactors {
			if m.Packed != nil && m.Packed.Kind == compress.TopK && m.Packed.N == dense && len(m.Packed.Values) == top.Keep(dense) {
				packed++
			} else {
				plain++
			}
		}
		return false
	}
	h.run(40*time.Second-time.Millisecond, time.Second)
	if packed == 0 || plain != 0 {
		t.Fatalf("%d updates sent as top-k of %d values, %d otherwise", packed, top.Keep(dense), plain)
	}
	xs := h.params()
	if d := merge.ConsensusDistance(xs); d != 0 {
		t.Fatalf("replicas differ: consensus distance %v", d)
	}
	moved := 0
	for k := range xs[0] {
		if xs[0][k] != runInit(k) {
			moved++
		}
	}
	if moved < dense/2 {
		t.Fatalf("%d of %d parameters moved", moved, dense)
	}
	snap := h.nodes[1].Snapshot()
	if len(snap.Residual) != dense || merge.SumSquares(snap.Residual) == 0 {
		t.Fatalf("residual in the state: %d values, sum of squares %v", len(snap.Residual), merge.SumSquares(snap.Residual))
	}
	cfg := h.nodes[1].Config()
	cfg.Resume = &snap
	nd, err := gossip.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := nd.Snapshot().Residual; !slices.Equal(got, snap.Residual) {
		t.Fatal("the residual did not come back")
	}
	bad := snap
	bad.Residual = snap.Residual[:dense-1]
	cfg.Resume = &bad
	if _, err := gossip.New(cfg); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), "residual") {
		t.Errorf("a short residual: %v", err)
	}
	cfg.Resume, cfg.Sparse = &snap, compress.Spec{}
	if _, err := gossip.New(cfg); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), "residual") {
		t.Errorf("a residual for a job without top-k: %v", err)
	}
	h.traces = nil
	m := gossip.Message{Kind: gossip.KindFactors, From: name(0), To: name(1), Round: h.nodes[1].Round(), Params: make([]float32, dense)}
	h.nodes[1].Step(&m)
	h.drain(1)
	if len(h.traces) == 0 || h.traces[0].Event != "drop" || h.traces[0].Code != "compression" {
		t.Fatalf("an uncompressed update: traces %+v", h.traces)
	}
}

// TestSFBQuantizedFeedback: with int8 the dense part goes with error
// feedback too (the rounding is not lost), and every replica applies the
// same rounded updates, so they stay identical.
func TestSFBQuantizedFeedback(t *testing.T) {
	h := sfbHarness(t, "dense", 4, func(c *gossip.Config) { c.Quantize = compress.Spec{Kind: compress.Int8} })
	h.run(20*time.Second-time.Millisecond, time.Second)
	if d := merge.ConsensusDistance(h.params()); d != 0 {
		t.Fatalf("int8 replicas differ: consensus distance %v", d)
	}
	if r := h.nodes[0].Snapshot().Residual; len(r) != len(h.nodes[0].Params()) || merge.SumSquares(r) == 0 {
		t.Fatalf("int8 residual: %d values", len(r))
	}
}

// TestSFBOuter: SFB with the outer optimizer is DiLoCo over broadcast.
// With one local step and the averaging method it is plain SFB (the mean
// of the replicas' local steps is the step on the mean gradient); with
// Nesterov the replicas take the same outer steps and stay identical, the
// momentum is in the state, and SSP is refused.
func TestSFBOuter(t *testing.T) {
	avg := runSFB(t, "dense", 4, 15, func(c *gossip.Config) { c.Outer = gossip.OuterConfig{Steps: 1, Method: gossip.OuterAverage} })
	plain := runSFB(t, "dense", 4, 15, nil)
	for k := range plain[0] {
		if math.Abs(float64(avg[0][k]-plain[0][k])) > 1e-4 {
			t.Fatalf("parameter %d: %v with the averaging outer step, %v plain", k, avg[0][k], plain[0][k])
		}
	}
	h := sfbHarness(t, "factors", 4, func(c *gossip.Config) { c.Outer = gossip.OuterConfig{Steps: 5} })
	var factors int
	h.drop = func(m *gossip.Message) bool {
		factors += len(m.Factors)
		return false
	}
	h.run(15*time.Second-time.Millisecond, time.Second)
	xs := h.params()
	if d := merge.ConsensusDistance(xs); d != 0 || factors != 0 {
		t.Fatalf("replicas at consensus distance %v; %d factors sent (pseudo-gradients go dense)", d, factors)
	}
	for k := range xs[0] {
		if math.Abs(float64(xs[0][k]-plain[0][k])) > 1e-3 {
			break
		}
		if k == len(xs[0])-1 {
			t.Fatal("Nesterov's outer steps gave plain SFB's parameters")
		}
	}
	if m := h.nodes[2].Snapshot().Momentum; len(m) != len(xs[0]) || merge.SumSquares(m) == 0 {
		t.Fatalf("momentum in the state: %d values", len(m))
	}
	cfg := h.nodes[0].Config()
	cfg.Staleness = 1
	if _, err := gossip.New(cfg); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), "needs BSP") {
		t.Fatalf("the outer optimizer under SSP: %v", err)
	}
}
