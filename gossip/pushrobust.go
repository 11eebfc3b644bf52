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
func (p *pushSum) keep(m *Message, c float64) {
	z := make([]float32, len(m.Params))
	merge.DeBias(z, m.Params, m.Weight)
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
func (p *pushSum) robustMerge(n *Core) {
	z := make([]float32, len(n.params))
	if c, ok := p.cfg.Aggregator.(merge.ClippedGossip); ok {
		p.clippedMerge(n, c.Tau, z)
	} else {
		n.aggregateEqual(z, append([][]float32{p.estimate(n)}, p.window...))
	}
	p.fresh, p.freshW = p.fresh[:0], p.freshW[:0]
	p.w = max(p.w+p.inW, minWeight)
	p.inW = 0
	p.account(n)
	for j := range n.params {
		n.params[j] = z[j] * float32(p.w)
	}
}

// clippedMerge sets z to the node's estimate plus the fresh models'
// clipped pulls, weighted by push-sum's weights, each capped at the
// node's own (the estimate itself where nothing arrived, or where no
// window sets an adaptive τ).
func (p *pushSum) clippedMerge(n *Core, tau float64, z []float32) {
	own := p.estimate(n)
	copy(z, own)
	if len(p.fresh) == 0 {
		return
	}
	if tau == 0 {
		if len(p.window) == 0 {
			return
		}
		if tau = merge.MedianDistance(own, p.window); tau == 0 {
			return
		}
	}
	// Each model's weight as its share claims, but at most the node's
	// own: a sender claiming a huge weight does not drown the others.
	ws := []float64{p.w}
	for _, w := range p.freshW {
		ws = append(ws, min(max(w, 0), p.w))
	}
	xs := append([][]float32{own}, p.fresh...)
	if err := (merge.ClippedGossip{Tau: tau}).Aggregate(z, xs, ws, 0); err != nil {
		n.drop(DropAggregation, "", "robust merge: "+err.Error())
		copy(z, own)
	}
}
