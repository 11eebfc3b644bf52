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

// chocoSpec has 64 parameters, so that top-k keeps a few of them.
var chocoSpec = model.Spec{Kind: model.Softmax, Inputs: 31, Classes: 2}

// chocoHarness is a D-PSGD ring of n nodes with CHOCO gossip under spec,
// each starting from its own random model.
func chocoHarness(t *testing.T, n int, spec string, edit func(c *gossip.Config)) *harness {
	t.Helper()
	return compressedRing(t, gossip.DPSGD, n, spec, edit)
}

// compressedRing is a ring of n nodes of the protocol under the
// compression spec, each from its own random model, with zero gradients.
func compressedRing(t *testing.T, proto string, n int, spec string, edit func(c *gossip.Config)) *harness {
	t.Helper()
	comp, err := gossip.ParseCompression(spec)
	if err != nil {
		t.Fatal(err)
	}
	g := gossip.Ring(n)
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		c.Protocol, c.Spec = proto, chocoSpec
		c.Neighbors, c.SelfWeight = g.MHWeights(i, name)
		rng := rand.New(rand.NewPCG(uint64(i), 99))
		c.Init = make([]float32, 64)
		for k := range c.Init {
			c.Init[k] = float32(rng.NormFloat64())
		}
		comp.Apply(c)
		if edit != nil {
			edit(c)
		}
	})
	h.train = zeroGrad
	return h
}

func mean(xs [][]float32) []float64 {
	m := make([]float64, len(xs[0]))
	for _, x := range xs {
		for k, v := range x {
			m[k] += float64(v) / float64(len(xs))
		}
	}
	return m
}

// TestChocoConsensus: with zero gradients, CHOCO gossip over top-k and
// rand-k steps drives a ring to consensus on the average of the starting
// models (symmetric weights keep the sum), while each message carries a
// quarter of the coordinates.
func TestChocoConsensus(t *testing.T) {
	for _, spec := range []string{"topk:0.25", "randk:0.25"} {
		gamma := 0.5
		if spec == "randk:0.25" {
			gamma = 0.2 // rand-k's steps are noisier: a smaller step
		}
		h := chocoHarness(t, 8, spec, func(c *gossip.Config) { c.ConsensusStep, c.KeyframeEvery = gamma, -1 })
		var sent, sparse int
		h.drop = func(m *gossip.Message) bool {
			sent++
			if m.Packed != nil && len(m.Packed.Values) == 16 {
				sparse++
			}
			return false
		}
		start := h.params()
		m0 := mean(start)
		d0 := merge.ConsensusDistance(start)
		h.run(300*time.Second, time.Second)
		end := h.params()
		d := merge.ConsensusDistance(end)
		if !(d < d0*1e-4) {
			t.Errorf("%s: consensus distance %.3g → %.3g after 300 rounds", spec, d0, d)
		}
		for k, v := range mean(end) {
			if math.Abs(v-m0[k]) > 1e-4 {
				t.Fatalf("%s: coordinate %d of the mean moved from %.6f to %.6f", spec, k, m0[k], v)
			}
		}
		// Every message after the first round's keyframes is a step of 16
		// of the 64 coordinates.
		if sent < 8*2*250 || sparse != sent-8*2 {
			t.Errorf("%s: %d messages, %d sparse", spec, sent, sparse)
		}
	}
}

// TestChocoLoss: lost steps leave a neighbour's copy behind; the node sees
// the gap, leaves the copy out, and the next keyframe puts it right, so
// the ring still reaches consensus once the losses stop.
func TestChocoLoss(t *testing.T) {
	h := chocoHarness(t, 6, "topk:0.25", func(c *gossip.Config) {
		c.KeyframeEvery, c.RoundTimeout = 20, 500*time.Millisecond
	})
	rng := rand.New(rand.NewPCG(5, 5))
	lossy := true
	h.drop = func(m *gossip.Message) bool { return lossy && m.Packed != nil && rng.Float64() < 0.3 }
	d0 := merge.ConsensusDistance(h.params())
	h.run(40*time.Second, 250*time.Millisecond)
	gaps := 0
	for _, tr := range h.traces {
		if tr.Event == "choco-gap" {
			gaps++
		}
	}
	if gaps == 0 {
		t.Fatal("30% of the steps lost and no gap seen")
	}
	lossy = false
	h.run(400*time.Second, 250*time.Millisecond)
	if d := merge.ConsensusDistance(h.params()); !(d < d0*1e-3) {
		t.Fatalf("consensus distance %.3g → %.3g after the losses stopped", d0, d)
	}
}

// TestChocoBadInput: a sparse job refuses vectors packed another way or
// larger than the model, and the settings that do not go with it.
func TestChocoBadInput(t *testing.T) {
	h := chocoHarness(t, 3, "topk:0.25", nil)
	nd := h.nodes[0]
	nd.Tick(0)
	h.drain(0)
	pack := func(spec string, n int) *compress.Payload {
		s, err := compress.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		var p compress.Payload
		compress.Compress(&p, make([]float32, n), s, rand.New(rand.NewPCG(1, 1)))
		return &p
	}
	for _, tc := range []struct {
		p    *compress.Payload
		code string
	}{{pack("int8", 64), "compression"}, {pack("randk:0.25", 64), "compression"}, {pack("topk:0.25", 100), "shape"}} {
		h.traces = nil
		nd.Step(&gossip.Message{Kind: gossip.KindParams, From: name(1), Packed: tc.p})
		h.drain(0)
		if len(h.traces) != 1 || h.traces[0].Event != "drop" || h.traces[0].Code != tc.code {
			t.Errorf("%v payload of %d: traces %+v, want a %s drop", tc.p.Kind, tc.p.N, h.traces, tc.code)
		}
	}
	base := gossip.Config{ID: "a", Spec: chocoSpec, Init: make([]float32, 64), Rand: rand.New(rand.NewPCG(1, 1)), Delta: time.Second,
		Protocol: gossip.DPSGD, Neighbors: []gossip.Neighbor{{ID: "b", Weight: 0.5}}, SelfWeight: 0.5}
	topk, _ := compress.Parse("topk:0.1")
	for _, tc := range []struct {
		edit func(c *gossip.Config)
		want string
	}{
		{func(c *gossip.Config) {
			c.Protocol, c.Neighbors, c.SelfWeight, c.Sparse = gossip.RandomWalk, nil, 0, topk
		}, "randomwalk takes subsample:S, fp16 or int8"},
		{func(c *gossip.Config) { c.Protocol, c.Sparse, c.KeyframeEvery = gossip.ADPSGD, topk, 10 }, "only when a link resets"},
		{func(c *gossip.Config) {
			c.Protocol, c.Sparse, c.ConsensusStep = gossip.SFB, topk, 0.3
		}, "sfb sends its gradients with error feedback"},
		{func(c *gossip.Config) { c.ConsensusStep = 0.3 }, "need top-k or rand-k"},
		{func(c *gossip.Config) { c.Sparse, c.ConsensusStep = topk, 1.5 }, "consensus step"},
		{func(c *gossip.Config) { c.Sparse, c.Aggregator = topk, merge.Median{} }, "does not apply"},
		{func(c *gossip.Config) { c.Sparse, c.Quantize = topk, compress.Spec{Kind: compress.FP16} }, "together"},
	} {
		c := base
		tc.edit(&c)
		if _, err := gossip.New(c); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error about %q", err, tc.want)
		}
	}
}

// TestChocoRestart: a node restarted from an older checkpoint starts its
// public copy afresh with a keyframe that its neighbours take although
// its round is behind theirs, and the ring still reaches consensus.
func TestChocoRestart(t *testing.T) {
	h := chocoHarness(t, 4, "topk:0.25", func(c *gossip.Config) { c.KeyframeEvery = -1 })
	h.run(10*time.Second, time.Second)
	saved := h.nodes[1].Snapshot()
	h.run(30*time.Second, time.Second)
	c := gossip.Config{ID: name(1), Spec: chocoSpec, Rand: rand.New(rand.NewPCG(8, 8)), Delta: time.Second,
		Protocol: gossip.DPSGD, Resume: &saved}
	g := gossip.Ring(4)
	c.Neighbors, c.SelfWeight = g.MHWeights(1, name)
	comp, _ := gossip.ParseCompression("topk:0.25")
	comp.Apply(&c)
	c.KeyframeEvery = -1
	nd, err := gossip.New(c)
	if err != nil {
		t.Fatal(err)
	}
	h.nodes[1] = nd
	before := slices.Clone(nd.Params())
	d0 := merge.ConsensusDistance(h.params())
	h.traces = nil
	keyframes := 0
	h.drop = func(m *gossip.Message) bool {
		if m.Packed == nil && len(m.Params) > 0 {
			keyframes++
		}
		return false
	}
	h.run(400*time.Second, time.Second)
	// The restarted node's keyframes, its neighbours' answers, and no
	// more: keyframes are not answered back and forth.
	if keyframes == 0 || keyframes > 8 {
		t.Fatalf("%d keyframes in 400 rounds after the restart", keyframes)
	}
	if d := merge.ConsensusDistance(h.params()); !(d < d0*1e-4) || d0 == 0 {
		t.Fatalf("consensus distance %.3g → %.3g after the restart", d0, d)
	}
	// Both ways: the restarted node mixed too (its neighbours' keyframes
	// reached it), and no copy was left behind a gap.
	if merge.SquaredDistance(before, nd.Params()) == 0 {
		t.Fatal("the restarted node never moved: it holds no current copy of its neighbours")
	}
	for _, tr := range h.traces {
		if tr.Event == "choco-gap" {
			t.Fatalf("a gap after the restart: %+v", tr)
		}
	}
}
