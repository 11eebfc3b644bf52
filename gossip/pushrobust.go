package gossip

import (
	"github.com/gossipd/gossipd/merge"
)

// Push-sum with a robust aggregator: received models are kept de-biased
// (the window of the last CacheSize, and those since the last merge),
// and once per round the node's estimate is replaced by the rule's
// combination (robustMerge).

// keep takes a received share in under a robust aggregator: its
// de-biased model into the window (and the fresh list for clipped
// gossip), its weight, with the link's correction c, into what the next
// merge takes in.
func (p *pushSum) keep(n *Core, m *Message, c float64) {
	var z []float32
	if p.mixes() {
		z = n.mixed([][]float32{m.Params}, []float32{float32(1 / m.Weight)}, nil, 0) // merge.DeBias
		n.keep()                                                                     // the mix reads the share later
	} else {
		z = make([]float32, len(m.Params))
		merge.DeBias(z, m.Params, m.Weight)
	}
	if len(p.window) < p.cfg.CacheSize {
		p.window = append(p.window, z)
	} else {
		p.window[p.windowAt] = z
		p.windowAt = (p.windowAt + 1) % p.cfg.CacheSize
	}
	p.inW += m.Weight + c
	if _, ok := p.cfg.Aggregator.(merge.ClippedGossip); ok {
		// The latest models, a bounded number: a flood pushes out its own
		// earlier models, not the ones that came after.
		if len(p.fresh) == 4*p.cfg.CacheSize {
			p.fresh, p.freshW = p.fresh[1:], p.freshW[1:]
		}
		p.fresh, p.freshW = append(p.fresh, z), append(p.freshW, m.Weight)
	}
}

// robustMerge replaces the node's estimate by the robust aggregate of it
// and the window, and takes in the weight received since the last merge
// (x = z*·w, so the estimate x/w is z*): the weights keep flowing as in
// push-sum, while no single sender can move the estimate far. Until the
// window holds enough models the node keeps its own estimate.
//
// Clipped gossip is push-sum's weighted average of the node's estimate
// and the models received since the last merge, each one's pull clipped
// to τ (the median distance of the window's models from the estimate,
// or clipped:TAU): the estimate keeps its progress, which a CNN needs
// (a robust combination of the window's stale models undoes it).
// merge.ClippedWindow is that rule.
func (p *pushSum) robustMerge(n *Core) {
	xs := [][]float32{p.estimate(n)} // read before estimate is called again
	var ws []float64
	window := 1.0 // the window's weights: equal, or nothing under clipped gossip
	agg := p.cfg.Aggregator
	if c, ok := agg.(merge.ClippedGossip); ok {
		// Each model's weight as its share claims, but at most the
		// node's own: a sender claiming a huge weight does not drown the
		// others.
		ws = []float64{p.w}
		for _, w := range p.freshW {
			ws = append(ws, min(max(w, 0), p.w))
		}
		xs = append(xs, p.fresh...)
		agg, window = merge.ClippedWindow{Tau: c.Tau, Pulls: len(p.fresh)}, 0
	}
	xs = append(xs, p.window...)
	for len(ws) < len(xs) {
		ws = append(ws, window)
	}
	z := n.robustMix(xs, ws, agg)
	p.fresh, p.freshW = p.fresh[:0], p.freshW[:0]
	p.w = max(p.w+p.inW, minWeight)
	p.inW = 0
	p.account(n)
	p.setScaled(n, z, float32(p.w))
}
