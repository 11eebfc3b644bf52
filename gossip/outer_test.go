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
	"github.com/gossipd/gossipd/merge"
)

// outerHarness is a D-PSGD ring of n nodes with the outer optimizer, each
// from its own random model, whose local steps change nothing (so the
// rounds are pure mixing).
func outerHarness(t *testing.T, n int, o gossip.OuterConfig) *harness {
	t.Helper()
	g := gossip.Ring(n)
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		c.Protocol = gossip.DPSGD
		c.Neighbors, c.SelfWeight = g.MHWeights(i, name)
		rng := rand.New(rand.NewPCG(uint64(i), 42))
		for k := range c.Init {
			c.Init[k] = float32(rng.NormFloat64())
		}
		c.Outer = o
	})
	h.train = zeroGrad
	return h
}

// TestOuterMixing: with local steps that change nothing the pseudo-
// gradient is the consensus gap, so both outer methods drive the ring to
// the average of the starting models and keep it (symmetric weights: the
// pseudo-gradients, and so the momenta, sum to zero), and each round
// asks for H local steps.
func TestOuterMixing(t *testing.T) {
	for _, o := range []gossip.OuterConfig{{Steps: 5, Method: gossip.OuterAverage}, {Steps: 5, Method: gossip.OuterNesterov}} {
		h := outerHarness(t, 8, o)
		var steps []int
		h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
			steps = append(steps, req.Steps)
			return zeroGrad(i, req)
		}
		start := h.params()
		m0 := mean(start)
		d0 := merge.ConsensusDistance(start)
		h.run(150*time.Second, time.Second)
		end := h.params()
		if d := merge.ConsensusDistance(end); !(d < d0*1e-6) {
			t.Errorf("%s: consensus distance %.3g → %.3g", o.Method, d0, d)
		}
		for k, v := range mean(end) {
			if math.Abs(v-m0[k]) > 1e-4 {
				t.Fatalf("%s: coordinate %d of the mean moved from %.6f to %.6f", o.Method, k, m0[k], v)
			}
		}
		for _, s := range steps {
			if s != 5 {
				t.Fatalf("%s: a round asked for %d local steps", o.Method, s)
			}
		}
	}
}

// TestOuterMomentumRestored: the outer momentum is in the node's state,
// comes back after a restart, and a saved momentum of the wrong size is
// refused.
func TestOuterMomentumRestored(t *testing.T) {
	h := outerHarness(t, 3, gossip.OuterConfig{Steps: 2})
	h.run(5*time.Second, time.Second)
	s := h.nodes[0].Snapshot()
	if len(s.Momentum) != 8 || merge.SumSquares(s.Momentum) == 0 {
		t.Fatalf("momentum in the state: %v", s.Momentum)
	}
	g := gossip.Ring(3)
	c := gossip.Config{ID: name(0), Spec: tinySpec, Rand: rand.New(rand.NewPCG(1, 1)), Delta: time.Second,
		Protocol: gossip.DPSGD, Outer: gossip.OuterConfig{Steps: 2}, Resume: &s}
	c.Neighbors, c.SelfWeight = g.MHWeights(0, name)
	nd, err := gossip.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := nd.Snapshot().Momentum; len(got) != 8 || got[3] != s.Momentum[3] {
		t.Fatalf("restored momentum %v, saved %v", got, s.Momentum)
	}
	bad := s
	bad.Momentum = s.Momentum[:5]
	c.Resume = &bad
	if _, err := gossip.New(c); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), "momentum") {
		t.Fatalf("a short momentum: %v", err)
	}
	for _, tc := range []struct {
		o    gossip.OuterConfig
		want string
	}{
		{gossip.OuterConfig{Method: "nesterov"}, "without local steps"},
		{gossip.OuterConfig{Steps: 2, Method: "adam"}, "want nesterov or average"},
		{gossip.OuterConfig{Steps: 2, Method: "average", LR: 0.5}, "no learning rate"},
		{gossip.OuterConfig{Steps: 2, Momentum: 1}, "momentum"},
	} {
		c.Resume, c.Outer = nil, tc.o
		c.Init = make([]float32, 8)
		if _, err := gossip.New(c); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %q", tc.o, err, tc.want)
		}
	}
	c.Outer, c.Protocol, c.Fanout = gossip.OuterConfig{Steps: 2}, gossip.SFB, 1
	if _, err := gossip.New(c); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), "needs BSP") {
		t.Errorf("outer optimizer with SFB's partial broadcast: %v", err)
	}
	c.Fanout = 0
	c.Neighbors, c.SelfWeight = nil, 0
	c.Protocol = gossip.RandomWalk
	tokens, _ := gossip.ParseTokens("1:3")
	for name, edit := range map[string]func(*gossip.Config){
		"subsample": func(c *gossip.Config) { c.Subsample = 0.5 },
		"tokens":    func(c *gossip.Config) { c.Tokens = tokens },
		"variant":   func(c *gossip.Config) { c.Variant = "rw" },
	} {
		bad := c
		edit(&bad)
		if _, err := gossip.New(bad); !errors.Is(err, gossip.ErrConfig) || !strings.Contains(err.Error(), "sends whole models") {
			t.Errorf("random walk's outer optimizer with %s: %v", name, err)
		}
	}
}

// rwOuterHarness is n random-walk nodes with the outer optimizer, each
// from its own random model and knowing every other, whose local steps
// change nothing.
func rwOuterHarness(t *testing.T, n int, o gossip.OuterConfig) *harness {
	t.Helper()
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		c.Sampling, c.Outer = "oracle", o
		rng := rand.New(rand.NewPCG(uint64(i), 42))
		for k := range c.Init {
			c.Init[k] = float32(rng.NormFloat64())
		}
	})
	h.train = zeroGrad
	h.connectAll()
	return h
}

// TestRandomWalkOuterStep: two random-walk nodes with the outer optimizer,
// checked by hand, with local steps that add 1 to every coordinate. The
// first Δ trains H steps and sends the result to the other node, one
// model each; at the second, ȳ is the mean of the two results, the own
// pseudo-gradient is Δ = −1, the momentum starts at Δ, and
// x_0 ← ȳ − (η·(1 + μ)·Δ − Δ).
func TestRandomWalkOuterStep(t *testing.T) {
	h := rwOuterHarness(t, 2, gossip.OuterConfig{Steps: 4, LR: 0.5, Momentum: 0.8})
	var steps []int
	h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
		steps = append(steps, req.Steps)
		y := slices.Clone(req.Params)
		for k := range y {
			y[k]++
		}
		return &gossip.TrainResult{ID: req.ID, Params: y, Examples: 1}
	}
	x0, x1 := h.nodes[0].Params()[2], h.nodes[1].Params()[2]
	h.run(999*time.Millisecond, time.Millisecond) // both first wake in [0, Δ)
	if h.sent != 2 || h.nodes[0].Params()[2] != x0 {
		t.Fatalf("first Δ: %d messages sent (want 2), x_0 %v → %v", h.sent, x0, h.nodes[0].Params()[2])
	}
	h.run(1999*time.Millisecond, time.Millisecond)
	delta := float32(-1)
	ybar := (x0 + x1 + 2) / 2
	want := ybar - (0.5*(1+0.8)*delta - delta)
	if got := h.nodes[0].Params()[2]; math.Abs(float64(got-want)) > 1e-5 {
		t.Fatalf("after one outer step x_0 = %v, want %v", got, want)
	}
	if m := h.nodes[0].Snapshot().Momentum[2]; math.Abs(float64(m-delta)) > 1e-5 {
		t.Fatalf("momentum %v, want %v", m, delta)
	}
	if h.nodes[0].Round() != 1 || len(steps) != 4 || steps[0] != 4 {
		// Two Δs at two nodes: four requests of H steps.
		t.Fatalf("round %d, local steps asked %v", h.nodes[0].Round(), steps)
	}
}

// TestRandomWalkOuterMixing: with local steps that change nothing, eight
// nodes that send their results to random peers come to agree, with
// either method. (Momentum over the consensus gap, D-PSGD's rule, went
// from 4.8 to 1.3e5 here.)
func TestRandomWalkOuterMixing(t *testing.T) {
	for _, o := range []gossip.OuterConfig{{Steps: 2, Method: gossip.OuterAverage}, {Steps: 2, Method: gossip.OuterNesterov}} {
		h := rwOuterHarness(t, 8, o)
		start := h.params()
		d0 := merge.ConsensusDistance(start)
		h.run(200*time.Second, time.Second)
		if d := merge.ConsensusDistance(h.params()); !(d < d0*1e-4) {
			t.Errorf("%s: consensus distance %.3g → %.3g", o.Method, d0, d)
		}
	}
}

// TestOuterNesterovStep: one round of two nodes with weights ½, checked
// by hand: ȳ is the midpoint, Δ_0 = (x_0 − x_1)/2, the momentum starts at
// Δ_0, and x_0 ← x_0 − η·(1 + μ)·Δ_0.
func TestOuterNesterovStep(t *testing.T) {
	h := newHarness(t, 2, func(i int, c *gossip.Config) {
		c.Protocol, c.SelfWeight = gossip.DPSGD, 0.5
		c.Neighbors = []gossip.Neighbor{{ID: name(1 - i), Weight: 0.5}}
		for k := range c.Init {
			c.Init[k] = float32(i*10 + k)
		}
		c.Outer = gossip.OuterConfig{Steps: 3, LR: 0.5, Momentum: 0.8}
	})
	h.train = zeroGrad
	x0, x1 := h.nodes[0].Params()[2], h.nodes[1].Params()[2]
	h.run(0, time.Second) // round 0 at both
	delta := (x0 - x1) / 2
	want := x0 - 0.5*(1+0.8)*delta
	if got := h.nodes[0].Params()[2]; math.Abs(float64(got-want)) > 1e-5 {
		t.Fatalf("after one round x_0 = %v, want %v", got, want)
	}
	if m := h.nodes[0].Snapshot().Momentum[2]; math.Abs(float64(m-delta)) > 1e-5 {
		t.Fatalf("momentum %v, want %v", m, delta)
	}
}

// TestOuterOwnProgress: AD-PSGD and push-sum with the outer optimizer
// train H local steps where they took a gradient step, and add that
// progress through the outer step; checked by hand with every message
// lost (no mixing) and local steps that add 1 to every coordinate:
// Δ = −1 each Δ, so the first moves the model by η·(1 + μ), the second
// by η·(1 + μ·(1 + μ)). Push-sum's estimate moves so, whatever its
// weight (its shares halve it).
func TestOuterOwnProgress(t *testing.T) {
	for _, proto := range []string{gossip.ADPSGD, gossip.PushSum} {
		h := newHarness(t, 2, func(i int, c *gossip.Config) {
			c.Protocol = proto
			c.Neighbors = []gossip.Neighbor{{ID: name(1 - i), Weight: 0.5}}
			c.Outer = gossip.OuterConfig{Steps: 3, LR: 0.5, Momentum: 0.8}
		})
		h.drop = func(*gossip.Message) bool { return true }
		var steps []int
		h.train = func(i int, req *gossip.TrainRequest) *gossip.TrainResult {
			if req.Op != gossip.OpUpdate {
				t.Fatalf("%s: a request of op %v", proto, req.Op)
			}
			steps = append(steps, req.Steps)
			y := slices.Clone(req.Params)
			for k := range y {
				y[k]++
			}
			return &gossip.TrainResult{ID: req.ID, Params: y, Examples: 1}
		}
		h.run(999*time.Millisecond, time.Millisecond)
		want := float32(0.5 * 1.8)
		if got := h.nodes[0].Params()[5]; math.Abs(float64(got-want)) > 1e-5 {
			t.Fatalf("%s: after one Δ %v, want %v", proto, got, want)
		}
		h.run(1999*time.Millisecond, time.Millisecond)
		want += 0.5 * (1 + 0.8*1.8)
		if got := h.nodes[0].Params()[5]; math.Abs(float64(got-want)) > 1e-5 || len(steps) != 4 || steps[0] != 3 {
			t.Fatalf("%s: after two Δs %v, want %v; local steps asked %v", proto, got, want, steps)
		}
		if m := h.nodes[0].Snapshot().Momentum; len(m) != 8 || math.Abs(float64(m[5]+1.8)) > 1e-5 {
			t.Fatalf("%s: momentum %v, want −1.8 each", proto, m)
		}
	}
}
