package gossip

import "github.com/gossipd/gossipd/merge"

// Push-sum's and GoSGD's changes of a model, made in place, or handed to
// the Mixer (Config.HandsMixes) as new vectors that are never written
// again: the same arithmetic either way (merge.Combine's).

// mixes reports whether the core hands its mixes to the Mixer: the model
// is then never written in place, each change a new vector.
func (p *pushSum) mixes() bool { return p.cfg.HandsMixes() }

// setScaled sets the model to a·v (merge.ScaleInto).
func (p *pushSum) setScaled(n *Core, v []float32, a float32) {
	if p.mixes() {
		n.params = n.mixed([][]float32{v}, []float32{a}, nil, 0)
		return
	}
	merge.ScaleInto(n.params, v, a)
}

// scaled returns a new vector a·v, read only once sent (merge.ScaleInto).
func (p *pushSum) scaled(n *Core, v []float32, a float32) []float32 {
	if p.mixes() {
		return n.mixed([][]float32{v}, []float32{a}, nil, 0)
	}
	x := make([]float32, len(v))
	merge.ScaleInto(x, v, a)
	return x
}

// keepShare makes the node's model its share x, which went out in the
// messages too: x itself where the core hands its mixes (neither is
// written again), else a copy.
func (p *pushSum) keepShare(n *Core, x []float32) {
	if p.mixes() {
		n.params = x
		return
	}
	copy(n.params, x)
}
