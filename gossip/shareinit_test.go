package gossip_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
)

// inPlaceTrain answers an update by writing its request's Params in
// place, as a trainer does (the request owns them), and a gradient with
// a fixed vector of the node's.
func inPlaceTrain(i int, req *gossip.TrainRequest) *gossip.TrainResult {
	if req.Op == gossip.OpUpdate {
		for k := range req.Params {
			req.Params[k] += 0.125 * float32(i+1)
		}
		return &gossip.TrainResult{ID: req.ID, Params: req.Params, Examples: 3}
	}
	g := make([]float32, len(req.Params))
	for k := range g {
		g[k] = float32(k%3) - float32(i%2)
	}
	return &gossip.TrainResult{ID: req.ID, Grad: g, Examples: 3}
}

// TestShareInit: nodes given one initial vector with ShareInit (and its
// sum) never write it, under every protocol and the options that change how a
// random walk or D-PSGD builds its next model, and end where nodes with
// copies of their own end.
func TestShareInit(t *testing.T) {
	tokens, err := gossip.ParseTokens("1:3")
	if err != nil {
		t.Fatal(err)
	}
	topk, err := compress.Parse("topk:0.1")
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	ring := gossip.Ring(n)
	walk := func(edit func(c *gossip.Config)) func(i int, c *gossip.Config) {
		return func(i int, c *gossip.Config) { c.Sampling = "oracle"; edit(c) }
	}
	mixing := func(proto string, edit func(c *gossip.Config)) func(i int, c *gossip.Config) {
		return func(i int, c *gossip.Config) {
			c.Protocol, c.RoundTimeout = proto, 500*time.Millisecond
			c.Neighbors, c.SelfWeight = ring.MHWeights(i, name)
			edit(c)
		}
	}
	none := func(*gossip.Config) {}
	cases := []struct {
		name string
		mk   func(i int, c *gossip.Config)
	}{
		{"randomwalk", walk(none)},
		{"randomwalk rw", walk(func(c *gossip.Config) { c.Variant = "rw" })},
		{"randomwalk um", walk(func(c *gossip.Config) { c.Variant = "um" })},
		{"randomwalk subsample", walk(func(c *gossip.Config) { c.Subsample = 0.5 })},
		{"randomwalk partitions", walk(func(c *gossip.Config) { c.Partitions = 2 })},
		{"randomwalk tokens", walk(func(c *gossip.Config) { c.Tokens = tokens })},
		{"randomwalk median", walk(func(c *gossip.Config) { c.Aggregator = merge.Median{} })},
		{"randomwalk outer", walk(func(c *gossip.Config) { c.Outer = gossip.OuterConfig{Steps: 2, LR: 0.5, Momentum: 0.8} })},
		{"dpsgd", mixing(gossip.DPSGD, none)},
		{"dpsgd median", mixing(gossip.DPSGD, func(c *gossip.Config) { c.Aggregator = merge.Median{} })},
		{"dpsgd outer", mixing(gossip.DPSGD, func(c *gossip.Config) { c.Outer = gossip.OuterConfig{Steps: 2, LR: 0.5, Momentum: 0.8} })},
		{"dpsgd choco", mixing(gossip.DPSGD, func(c *gossip.Config) { c.Spec, c.Sparse, c.ConsensusStep = chocoSpec, topk, 0.3 })},
		{"dpsgd secure", func(i int, c *gossip.Config) { secureConfig(n, true, false, time.Second)(i, c) }},
		{"adpsgd", mixing(gossip.ADPSGD, none)},
		{"pushsum", mixing(gossip.PushSum, none)},
		{"gosgd", walk(func(c *gossip.Config) { c.Protocol = gossip.GoSGD })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var init, want []float32
			for _, share := range []bool{false, true} {
				h := newHarness(t, n, func(i int, c *gossip.Config) {
					tc.mk(i, c)
					if init == nil {
						l, err := model.LayoutOf(c.Spec)
						if err != nil {
							t.Fatal(err)
						}
						init = make([]float32, l.Size)
						for k := range init {
							init[k] = 1 + float32(k)/8
						}
					}
					c.Init = init
					if !share {
						c.Init = slices.Clone(init)
					}
					c.ShareInit = share
					if share {
						c.InitSum = func() float64 { return merge.SumSquares(init) }
					}
				})
				h.train = inPlaceTrain
				h.connectAll()
				h.run(20*time.Second, 250*time.Millisecond)
				got := slices.Concat(h.params()...)
				if !share {
					want = got
					if slices.Equal(got[:len(init)], init) {
						t.Fatalf("node 0 still holds its initial model: the run tests nothing")
					}
					continue
				}
				for k, v := range init {
					if v != 1+float32(k)/8 {
						t.Fatalf("the shared initial vector was written: [%d] = %v", k, v)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("with a shared initial vector the nodes end elsewhere than with copies")
				}
			}
		})
	}
}

// TestInitSum: nodes that share Init hand on the sum InitSum gives with
// the sends of Init, and receivers check the model by it: a wrong sum
// (+Inf) makes them drop those models, the exact one changes nothing,
// and a node with a copy of its own never asks for it.
func TestInitSum(t *testing.T) {
	const n = 4
	ring := gossip.Ring(n)
	for _, proto := range []string{gossip.RandomWalk, gossip.DPSGD} {
		for _, tc := range []struct {
			name  string
			share bool
			sum   func(init []float32) float64
			drops bool
			calls bool
		}{
			{"exact", true, func(v []float32) float64 { return merge.SumSquares(v) }, false, true},
			{"wrong", true, func([]float32) float64 { return math.Inf(1) }, true, true},
			{"copied", false, func([]float32) float64 { return math.Inf(1) }, false, false},
		} {
			init := []float32{1, 2, 3, 4, 5, 6, 7, 8}
			calls := 0
			h := newHarness(t, n, func(i int, c *gossip.Config) {
				c.Protocol, c.Sampling, c.RoundTimeout = proto, "oracle", 500*time.Millisecond
				if proto == gossip.DPSGD {
					c.Neighbors, c.SelfWeight = ring.MHWeights(i, name)
				}
				c.Init, c.ShareInit = init, tc.share
				c.InitSum = func() float64 { calls++; return tc.sum(init) }
			})
			h.train = inPlaceTrain
			for i, nd := range h.nodes {
				nd.SetPeers([]gossip.PeerID{name((i + 1) % n)})
			}
			h.run(5*time.Second, 250*time.Millisecond)
			drops := 0
			for _, tr := range h.traces {
				if tr.Event == "drop" {
					drops++
				}
			}
			if (drops > 0) != tc.drops || (calls > 0) != tc.calls {
				t.Errorf("%s %s: %d drops, InitSum called %d times", proto, tc.name, drops, calls)
			}
		}
	}
}
