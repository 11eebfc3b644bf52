package peer_test

import (
	"math"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/peer"
)

// FuzzReceive: whatever bytes arrive, for whatever protocol, the peer
// decodes and checks them, rejects what is wrong under a snake_case code
// and never panics; a model it merges leaves its parameters finite.
func FuzzReceive(f *testing.F) {
	for _, m := range []*gossip.Message{
		{Kind: gossip.KindModel, From: "a", Params: make([]float32, 8), Age: 1},
		{Kind: gossip.KindParams, From: "a", Params: []float32{1, 2, 3, 4, 5, 6, 7, 8}},
		{Kind: gossip.KindPushSum, From: "a", Params: make([]float32, 8), Weight: 0.5},
		{Kind: gossip.KindViewPush, From: "a", View: []gossip.Descriptor{{ID: "c", Age: 2}}},
		{Kind: gossip.KindHVJoin, From: "a"},
		{Kind: gossip.KindHVForwardJoin, From: "a", View: []gossip.Descriptor{{ID: "c", Age: 3}}},
		{Kind: gossip.KindHVShuffle, From: "a", View: []gossip.Descriptor{{ID: "c", Age: 1}, {ID: "d"}}},
	} {
		b, _ := peer.Encode(m)
		f.Add(b, uint8(m.Kind), uint8(0))
	}
	protocols := gossip.Protocols
	f.Fuzz(func(t *testing.T, b []byte, kind, proto uint8) {
		// proto picks the protocol and, for random walk, the sampling.
		c := gossip.Config{ID: "me", Protocol: protocols[int(proto)%len(protocols)],
			Neighbors: []gossip.Neighbor{{ID: "a", Weight: 0.5}}, SelfWeight: 0.5}
		if c.Protocol == gossip.RandomWalk {
			c.Sampling = []string{gossip.SamplingCyclon, gossip.SamplingHyParView}[int(proto)/len(protocols)%2]
		}
		p, w := newPeer(t, c, nil)
		p.Receive(peer.Envelope{From: "a", Job: [32]byte{7}, Kind: gossip.Kind(kind), Payload: b})
		for _, r := range w.rejects {
			if !snake.MatchString(r) {
				t.Fatalf("reject reason %q", r)
			}
		}
		for _, v := range p.Core().Params() {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("non-finite parameter after receiving %x", b)
			}
		}
	})
}
