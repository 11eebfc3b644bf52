package gossip

import (
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
)

// A Mixer carries out a core's weighted mixes of models, where the shell
// keeps the models: a simulator defers each mix until something reads
// it, so that mixes run beside its event loop, many at a time, instead
// of on it. The core hands a Mixer the mixes of plain D-PSGD (the
// weighted mean, merge.WeightedMean, or a robust rule that merge.Check
// answers for), of plain push-sum and GoSGD (the
// step, the shares, the sums of shares received, the de-biased estimate)
// and of plain AD-PSGD (the pairwise average, a Blend, and the step),
// all with no secure aggregation or outer optimizer, and of D-PSGD's and
// push-sum's robust rules and the CHOCO steps of D-PSGD, push-sum and
// AD-PSGD under rand-k and top-k (the steps of the public copies, their
// compression, a Mask or a Top, and the steps towards the copies:
// HandsMixes).
// Without one
// (Config.Mixer nil) the core mixes on the spot.
//
// A vector given to Mix as dst is pending until the mixer resolves it;
// the core reads such a vector only after Resolve, and a pending vector
// that leaves the core (a message's or a training request's Params, or
// Params) must be resolved by the shell before it is read. The vectors
// Mix reads may themselves be pending: the mixer resolves them first.
type Mixer interface {
	// Mix arranges for dst to become Σ_j w[j]·xs[j] + a·g (no a·g
	// where g is nil), each product rounded apart from its sum, the terms
	// added in this order (merge.Combine; compute.Rows.CombineRows),
	// before anything reads dst. Mix owns xs and w from then on; the
	// vectors themselves are read only.
	Mix(dst []float32, xs [][]float32, w []float32, g []float32, a float32)
	// Blend arranges for dst to become a + t·(b − a), rounded as
	// merge.Interpolate rounds it (compute.Rows.InterpolateRows), before
	// anything reads dst. a and b are read only.
	Blend(dst, a, b []float32, t float32)
	// Aggregate arranges for dst to become agg's combination of xs with
	// weights ws, the node's own vector first (agg.Aggregate(dst, xs, ws,
	// 0)), plus a·g added as merge.Axpy adds it (none where g is nil),
	// before anything reads dst: D-PSGD's robust mix, or push-sum's
	// (merge.ClippedWindow for its clipped gossip). agg is a rule
	// merge.Check answers for, and Check found nothing wrong with the
	// inputs. Aggregate owns xs and ws.
	Aggregate(dst []float32, xs [][]float32, ws []float64, agg merge.Aggregator, g []float32, a float32)
	// Quantize arranges for dst to become src compressed under kind
	// (compress.FP16 or compress.Int8) and decompressed, as the receiver
	// of a message whose vector was sent compressed holds it, before
	// anything reads dst: a compressed vector sent by a core that hands
	// its mixes (compress.Payload.Deferred). src is read only.
	Quantize(dst, src []float32, kind compress.Kind)
	// Mask arranges for dst to become src at the indices keep (ascending)
	// and 0 elsewhere, before anything reads dst: CHOCO's rand-k step as
	// its receivers decompress it (compress.Compress and Decompress of
	// the indices compress.RandIndices draws). src is read only; Mask
	// owns keep.
	Mask(dst, src []float32, keep []uint32)
	// Top arranges for dst to become src at its k largest magnitudes and
	// 0 elsewhere (compute.TopKInto), before anything reads dst: CHOCO's
	// top-k step as its receivers decompress it. It returns a function
	// that gives the bytes of the kept indices' encoding and true once
	// dst is made, or, with wait, after making it
	// (compress.Payload.IndexBytes). src is read only.
	Top(dst, src []float32, k int) func(wait bool) (int, bool)
	// Resolve makes v hold its values, if it is pending.
	Resolve(v []float32)
	// SumLater returns a function that gives Σ v² (merge.SumSquares)
	// when called, resolving v then if it is pending.
	SumLater(v []float32) func() float64
	// Vector returns a new vector of n values for a mix's result (Mix's
	// dst), whatever it holds: made beside the core where the mixer can,
	// since clearing a fresh vector is most of what making it costs.
	Vector(n int) []float32
}

// HandsMixes reports whether a core of this config hands its mixes to
// its Mixer: D-PSGD or push-sum with their own mixes or a robust rule
// (merge.Checked), GoSGD, or AD-PSGD, under any compression (CHOCO's
// steps for rand-k and top-k), with no secure aggregation and no outer
// optimizer. Its gradients then go nowhere
// but to the Mixer, which may keep them where it mixes, and it never
// writes a model in place: each mix makes a new vector (Vector).
func (c *Config) HandsMixes() bool {
	if c.Mixer == nil || !MixesOf(c.Protocol) || c.Secure.Enabled || c.Outer.Enabled() {
		return false
	}
	switch c.Protocol {
	case DPSGD:
		_, mean := c.Aggregator.(merge.WeightedMean)
		return mean || merge.Checked(c.Aggregator)
	case PushSum, GoSGD:
		return !c.robust() || merge.Checked(c.Aggregator)
	}
	return true
}

// MixesOf reports whether a protocol's cores may hand their mixes to a
// Mixer (HandsMixes, for the plain configurations): a shell gives them
// one only then.
func MixesOf(protocol string) bool {
	switch protocol {
	case DPSGD, PushSum, GoSGD, ADPSGD:
		return true
	}
	return false
}

// mixed returns a new vector that the Mixer makes Σ_j w[j]·xs[j] + a·g
// (Mixer.Mix), of the length of the node's model.
func (n *Core) mixed(xs [][]float32, w []float32, g []float32, a float32) []float32 {
	x := n.cfg.Mixer.Vector(len(n.params))
	n.cfg.Mixer.Mix(x, xs, w, g, a)
	return x
}

// add sets the model to x + a·v (merge.Axpy): in a new vector the Mixer
// makes where the core hands its mixes, else in place.
func (n *Core) add(a float32, v []float32) {
	if n.cfg.HandsMixes() {
		n.params = n.mixed([][]float32{n.params}, []float32{1}, v, a)
		return
	}
	merge.Axpy(n.params, a, v)
}

// blended returns a new vector that the Mixer makes a + t·(b − a)
// (Mixer.Blend).
func (n *Core) blended(a, b []float32, t float32) []float32 {
	x := n.cfg.Mixer.Vector(len(n.params))
	n.cfg.Mixer.Blend(x, a, b, t)
	return x
}

// laterSum is the known sum of a vector the Mixer makes (or of the
// shared initial model), for the receivers of the messages that carry it.
func (n *Core) laterSum(v []float32) knownSum {
	if k, ok := n.cfg.initSum(v); ok {
		return k
	}
	k := sumOf(v, 0)
	k.later = n.cfg.Mixer.SumLater(v)
	return k
}

// mixes reports whether the core hands its mixes to a Mixer.
func (d *dpsgd) mixes() bool { return d.cfg.HandsMixes() }

// resolved returns n's parameters with their values: resolved by the
// mixer where they may be pending.
func (n *Core) resolved(v []float32) []float32 {
	if n.cfg.Mixer != nil && len(v) > 0 {
		n.cfg.Mixer.Resolve(v)
	}
	return v
}

// sumOf is the known sum of a vector this node sends: measured now, or
// by the mixer when it resolves the vector.
func (d *dpsgd) sumOf(n *Core, v []float32) knownSum {
	if d.mixes() {
		return n.laterSum(v)
	}
	if k, ok := d.cfg.initSum(v); ok {
		return k
	}
	return sumOf(v, merge.SumSquares(v))
}
