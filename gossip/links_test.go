package gossip_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
)

// linksHarness is an AD-PSGD ring of n nodes with compressed links under
// spec, each starting from its own random model, with zero gradients.
func linksHarness(t *testing.T, n int, spec string) *harness {
	t.Helper()
	return compressedRing(t, gossip.ADPSGD, n, spec, nil)
}

// TestLinksConsensus: AD-PSGD over compressed links drives a ring to
// consensus on the average of the starting models (each pairwise average
// keeps the pair's sum), with a quarter of the coordinates in every
// message but each link's first.
func TestLinksConsensus(t *testing.T) {
	for _, spec := range []string{"topk:0.25:0.5", "randk:0.25:0.2"} {
		h := linksHarness(t, 8, spec)
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
		h.run(400*time.Second, time.Second)
		end := h.params()
		if d := merge.ConsensusDistance(end); !(d < d0*1e-4) {
			t.Errorf("%s: consensus distance %.3g → %.3g", spec, d0, d)
		}
		for k, v := range mean(end) {
			if math.Abs(v-m0[k]) > 1e-4 {
				t.Fatalf("%s: coordinate %d of the mean moved from %.6f to %.6f", spec, k, m0[k], v)
			}
		}
		// A ring of 8 has 16 directed links: at most 16 keyframes.
		if sent < 8*2*300 || sparse < sent-16 {
			t.Errorf("%s: %d messages, %d sparse", spec, sent, sparse)
		}
	}
}

// TestLinksLoss: a lost step leaves the receiver's copy behind; it sees
// the gap, leaves the copy out of its averages and resets the link, the
// other end answers with a keyframe, and the ring reaches consensus once
// the losses stop. A node restarted with no copies resets its links the
// same way. A stranger's exchange is dropped.
func TestLinksLoss(t *testing.T) {
	h := linksHarness(t, 6, "topk:0.25")
	rng := rand.New(rand.NewPCG(5, 5))
	lossy := true
	var keyframes int
	h.drop = func(m *gossip.Message) bool {
		if m.Packed == nil {
			keyframes++
		}
		return lossy && rng.Float64() < 0.3
	}
	d0 := merge.ConsensusDistance(h.params())
	h.run(60*time.Second, 250*time.Millisecond)
	gaps := 0
	for _, e := range h.traces {
		if e.Event == "choco-gap" {
			gaps++
		}
	}
	if gaps == 0 || keyframes <= 12 {
		t.Fatalf("%d gaps traced, %d keyframes under 30%% loss", gaps, keyframes)
	}
	lossy = false
	// A stranger's exchange is dropped: links are kept with neighbours.
	h.traces = nil
	sent := h.sent
	m := gossip.Message{Kind: gossip.KindAvgRequest, From: "stranger", To: name(0), Round: 1, Params: make([]float32, 64)}
	h.nodes[0].Step(&m)
	h.drain(0)
	if len(h.traces) != 1 || h.traces[0].Code != gossip.DropNotNeighbor || h.sent != sent {
		t.Fatalf("a stranger's request: traces %+v", h.traces)
	}
	// A restart: node 2 comes back from its start, with no copies.
	cfg := h.nodes[2].Config()
	nd, err := gossip.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.nodes[2] = nd
	h.run(800*time.Second, time.Second)
	if d := merge.ConsensusDistance(h.params()); !(d < d0*1e-3) {
		t.Fatalf("consensus distance %.3g → %.3g after the losses and the restart", d0, d)
	}
}

// pushHarness is push-sum on the directed exponential graph of n nodes
// under spec, from random models, with zero gradients.
func pushHarness(t *testing.T, n int, spec string, edit func(c *gossip.Config)) *harness {
	t.Helper()
	comp, err := gossip.ParseCompression(spec)
	if err != nil {
		t.Fatal(err)
	}
	g := gossip.Exponential(n)
	h := newHarness(t, n, func(i int, c *gossip.Config) {
		c.Protocol, c.Spec = gossip.PushSum, chocoSpec
		for _, j := range g.Out[i] {
			c.Neighbors = append(c.Neighbors, gossip.Neighbor{ID: name(j), Weight: 1})
		}
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

// TestPushSumCompressed: push-sum over compressed links keeps Σw exactly
// (and Σx: the sender takes away what the receiver adds), so every
// estimate converges to the average of the starting models, on a
// directed graph, while all but the links' keyframes carry a quarter of
// the coordinates.
func TestPushSumCompressed(t *testing.T) {
	for _, spec := range []string{"topk:0.25", "randk:0.25:0.2"} {
		h := pushHarness(t, 12, spec, nil)
		var shares, sparse int
		h.drop = func(m *gossip.Message) bool {
			if m.Weight > 0 {
				shares++
				if m.Packed != nil && len(m.Packed.Values) == 16 {
					sparse++
				}
			}
			return false
		}
		m0 := mean(h.params())
		for s := 1; s <= 1000; s++ {
			h.run(time.Duration(s)*time.Second, time.Second)
			if s%100 != 0 {
				continue
			}
			total := h.totalWeight()
			if math.Abs(total-12) > 1e-9 {
				t.Fatalf("%s after %d s: total weight %v, want 12", spec, s, total)
			}
		}
		for _, nd := range h.nodes {
			for k, v := range nd.Params() {
				if math.Abs(float64(v)-m0[k]) > 1e-3 {
					t.Fatalf("%s: %s coordinate %d: estimate %v, average %v", spec, nd.ID(), k, v, m0[k])
				}
			}
		}
		// Keyframes: each link's first share (12 nodes, 4 out-neighbours
		// each) and every 50th.
		if keys := shares - sparse; shares < 12*950 || keys > shares/50+12*4 {
			t.Errorf("%s: %d shares, %d keyframes", spec, shares, keys)
		}
	}
}

// TestPushSumCompressedLoss: lost shares leave a copy behind; the
// receiver takes the shares at its own estimate until the link's next
// keyframe, and the estimates reach consensus once the losses stop. (The
// weight of a link's lost first share is not credited, compressed or
// not: the running sums have no past for it.)
func TestPushSumCompressedLoss(t *testing.T) {
	h := pushHarness(t, 8, "topk:0.25", func(c *gossip.Config) { c.KeyframeEvery = 10 })
	rng := rand.New(rand.NewPCG(5, 5))
	lossy := true
	h.drop = func(m *gossip.Message) bool { return lossy && m.Weight > 0 && rng.Float64() < 0.2 }
	d0 := merge.ConsensusDistance(h.params())
	h.run(60*time.Second, time.Second)
	stale := 0
	for _, e := range h.traces {
		if e.Event == "stale-copy" {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("no share taken at the receiver's estimate under 20% loss")
	}
	lossy = false
	h.run(800*time.Second, time.Second)
	if d := merge.ConsensusDistance(h.params()); !(d < d0*1e-6) {
		t.Fatalf("consensus distance %.3g → %.3g after the losses", d0, d)
	}
}
