package gossip_test

import (
	"math"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
)

// TestMeasuredSums: a sum the trainer measured (TrainResult.Measured)
// decides whether its result is finite without the core reading it, and
// travels with the model it was measured on to a receiver in the same
// process, which checks the norm bound by it; the same values in other
// memory (a message that crossed a network, or whose Params were
// replaced) are measured afresh.
func TestMeasuredSums(t *testing.T) {
	h := newHarness(t, 2, func(i int, c *gossip.Config) { c.Sampling = "oracle" })
	for i, nd := range h.nodes {
		nd.SetPeers([]gossip.PeerID{name(1 - i)})
	}
	measured := math.NaN()
	h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
		for k := range req.Params {
			req.Params[k] = 0.5 // finite, Σ x² = 2
		}
		return &gossip.TrainResult{ID: req.ID, Params: req.Params, Examples: 1, Measured: true, SumSquares: measured}
	}
	model := func(age float64) *gossip.Message {
		return &gossip.Message{Kind: gossip.KindModel, From: name(1), To: name(0), Params: make([]float32, 8), Age: age}
	}
	nd := h.nodes[0]
	nd.Tick(0)
	h.drain(0)
	h.queue = nil

	// A measured NaN: the update is dropped though its values are finite.
	h.traces = nil
	nd.Step(model(3))
	h.drain(0)
	if nd.Updates() != 0 || !slices.ContainsFunc(h.traces, func(e gossip.TraceEvent) bool { return e.Code == gossip.DropBadTraining }) {
		t.Fatalf("a result measured NaN: %d updates, traces %+v; want it dropped as bad training", nd.Updates(), h.traces)
	}

	// A measured sum far above the norm bound (finite): the update
	// counts, and the model goes out carrying the sum.
	measured = 1e30
	nd.Step(model(3))
	h.drain(0)
	if nd.Updates() != 1 {
		t.Fatalf("a result measured finite: %d updates, want 1", nd.Updates())
	}
	h.queue = nil
	nd.Tick(2 * h.nodes[0].NextWake())
	h.drain(0)
	i := slices.IndexFunc(h.queue, func(m gossip.Message) bool { return m.Kind == gossip.KindModel })
	if i < 0 {
		t.Fatalf("node 0 sent no model: %+v", h.queue)
	}
	sent := h.queue[i]

	// The receiver trusts the sender's measure: refused by the norm bound.
	rcv := h.nodes[1]
	rcv.Tick(nd.NextWake())
	h.drain(1)
	h.traces = nil
	m := sent
	rcv.Step(&m)
	h.drain(1)
	if rcv.Updates() != 0 || !slices.ContainsFunc(h.traces, func(e gossip.TraceEvent) bool { return e.Code == "norm" }) {
		t.Fatalf("a model measured at Σx² = 1e30: %d updates, traces %+v; want a norm drop", rcv.Updates(), h.traces)
	}

	// The same values in fresh memory are measured afresh (Σ x² = 2).
	h.traces = nil
	m = sent
	m.Params = slices.Clone(sent.Params)
	rcv.Step(&m)
	h.drain(1)
	if rcv.Updates() != 1 {
		t.Fatalf("the model in other memory: %d updates, traces %+v; want it merged", rcv.Updates(), h.traces)
	}
}

// TestTrainedModelsUnread: only a random walk that merges by age or a
// robust rule leaves the models its training returns unread on its
// goroutine; another variant, compression, local steps or another
// protocol reads them.
func TestTrainedModelsUnread(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(*gossip.Config)
		want bool
	}{
		"random walk": {func(c *gossip.Config) {}, true},
		"variant rw":  {func(c *gossip.Config) { c.Variant = "rw" }, false},
		"median":      {func(c *gossip.Config) { c.Aggregator = merge.Median{} }, true},
		"clipped":     {func(c *gossip.Config) { c.Aggregator = merge.ClippedGossip{} }, true},
		"fp16":        {func(c *gossip.Config) { c.Quantize = compress.Spec{Kind: compress.FP16} }, false},
		"subsample":   {func(c *gossip.Config) { c.Subsample = 0.5 }, false},
		"local steps": {func(c *gossip.Config) { c.Outer = gossip.OuterConfig{Steps: 2} }, false},
		"dpsgd": {func(c *gossip.Config) {
			c.Protocol, c.Neighbors = gossip.DPSGD, []gossip.Neighbor{{ID: name(1), Weight: 0.5}}
		}, false},
	} {
		h := newHarness(t, 1, func(i int, cfg *gossip.Config) { cfg.Sampling = "oracle"; c.edit(cfg) })
		if got := h.nodes[0].TrainedModelsUnread(); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}
