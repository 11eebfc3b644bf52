package gossip

import (
	"slices"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
)

// CHOCO gossip for D-PSGD (Koloskova, Stich and Jaggi 2019): with a
// sparsifying compression (Config.Sparse: top-k or rand-k) a node does not
// send its model each round but a compressed step towards it. Every node
// i keeps x̂_i, the public copy of its model that its neighbours hold too,
// and x̂_j for each neighbour j. Round r:
//
//	x' = x − γ_lr·∇F_i(x)                      (the local step)
//	q  = Q(x' − x̂_i);  x̂_i ← x̂_i + q          send q to every neighbour
//	x̂_j ← x̂_j + q_j                            for each q_j received
//	x  = x' + γ·Σ_j W_ij·(x̂_j − x̂_i)           (ConsensusStep γ)
//
// What Q leaves out of a round stays in x' − x̂_i and goes out later:
// nothing is lost (error feedback against a reference both ends share).
// A neighbour's x̂_j is only right if every q_j was applied, in order: q
// carries its round, out-of-order ones wait (up to futureRounds), and a
// gap makes the copy stale, left out of the sum until a keyframe (a dense
// x̂_j) replaces it. Keyframes go out in a node's first round (after a
// start, a restart or a join), when it has a new neighbour or jumped
// rounds to catch up, in answer to a neighbour's unscheduled keyframe,
// and every KeyframeEvery rounds.

// choco is a D-PSGD node's CHOCO state.
type choco struct {
	spec  compress.Spec
	gamma float64
	every uint64
	self  []float32          // x̂_i
	hats  map[PeerID]*copyOf // x̂_j
	half  []float32          // x' of the round in progress
	key   bool               // the next round sends a keyframe
	// lastKey is 1 + the round of the last keyframe sent (0: none).
	lastKey uint64
}

// copyOf is a neighbour's public copy as this node holds it.
type copyOf struct {
	x     []float32
	round uint64 // the copy has the neighbour's steps up to round-1
	stale bool
	early map[uint64][]float32 // steps that came before the previous ones
}

func newChoco(cfg *Config) *choco {
	c := &choco{spec: cfg.Sparse, gamma: cfg.ConsensusStep, hats: map[PeerID]*copyOf{}}
	if cfg.KeyframeEvery > 0 {
		c.every = uint64(cfg.KeyframeEvery)
	}
	return c
}

// Where the core hands its mixes (HandsMixes: rand-k), every vector here
// is a new one the Mixer makes, never written again, and so are the
// messages' (a rand-k step goes as the dense step itself, deferred,
// with the indices that say its size: compress.Payload.Deferred): the
// same arithmetic, step by step, as merge.Axpy's in place.

// init starts the public copies: each node sends its own as a keyframe
// in its first round (the nodes need not start from the same model, and
// a restarted or joining node's copies are not what its neighbours hold),
// and a neighbour's copy counts once its keyframe is in.
func (c *choco) init(n *Core, order []PeerID) {
	c.self, c.key = n.params, true
	if !n.cfg.HandsMixes() {
		c.self = slices.Clone(n.params)
	}
	clear(c.hats)
	for _, p := range order {
		c.hats[p] = &copyOf{stale: true}
	}
}

// rewire keeps the copies of the neighbours that stay; new neighbours'
// are unknown, and they do not know this node's: a keyframe goes out.
func (c *choco) rewire(n *Core, order []PeerID) {
	for p := range c.hats {
		if !slices.Contains(order, p) {
			delete(c.hats, p)
		}
	}
	for _, p := range order {
		if c.hats[p] == nil {
			c.hats[p] = &copyOf{stale: true}
			c.key = true
		}
	}
}

// step takes the local step x' = x − lr·g and sends the round's message:
// a compressed step of the public copy, or a keyframe.
func (c *choco) step(n *Core, d *dpsgd, g []float32) {
	if d.mixes() {
		c.stepMixed(n, d, g)
		return
	}
	c.half = slices.Clone(n.params)
	merge.Axpy(c.half, -float32(d.cfg.LR), g)
	if c.keyframe(n) {
		copy(c.self, c.half)
		for _, p := range d.order {
			n.send(Message{Kind: KindParams, To: p, Round: n.round, Params: c.self, Weight: d.degree()})
		}
		c.self = slices.Clone(c.self) // the messages share the sent copy
		return
	}
	diff := slices.Clone(c.half)
	merge.Axpy(diff, -1, c.self)
	p := new(compress.Payload)
	compress.Compress(p, diff, c.spec, n.rng)
	compress.Decompress(diff, p)
	merge.Axpy(c.self, 1, diff)
	for _, to := range d.order {
		n.send(Message{Kind: KindParams, To: to, Round: n.round, Packed: p, Weight: d.degree()})
	}
}

// keyframe reports whether this round's message is a keyframe, and
// records that it goes out.
func (c *choco) keyframe(n *Core) bool {
	if c.key || (c.every > 0 && n.round > 0 && n.round%c.every == 0) {
		c.key, c.lastKey = false, n.round+1
		return true
	}
	return false
}

// stepMixed is step where the core hands its mixes: the local step, the
// public copy's step and its compression (rand-k's indices drawn as
// compress.Compress draws them, the values masked by the Mixer; top-k's
// kept by the Mixer), each a new vector.
func (c *choco) stepMixed(n *Core, d *dpsgd, g []float32) {
	c.half = n.mixed([][]float32{n.params}, []float32{1}, g, -float32(d.cfg.LR))
	if c.keyframe(n) {
		c.self = c.half // the messages share it; nobody writes it
		for _, p := range d.order {
			n.send(Message{Kind: KindParams, To: p, Round: n.round, Params: c.self, Weight: d.degree(), sum: n.laterSum(c.self)})
		}
		return
	}
	q, p := n.sparseStep(c.half, c.self, c.spec)
	c.self = n.mixed([][]float32{c.self, q}, []float32{1, 1}, nil, 0)
	for _, to := range d.order {
		n.send(Message{Kind: KindParams, To: to, Round: n.round, Packed: p, Weight: d.degree()})
	}
}

// receive applies a neighbour's message to its copy: a step in order (or
// kept until the ones before it come), a keyframe whatever came before.
// The copy keeps the message's vector (a keyframe's, an early step's) or
// a new one the Mixer makes from it, where the core hands its mixes.
func (c *choco) receive(n *Core, m *Message) {
	h := c.hats[m.From]
	if h == nil {
		return
	}
	if m.keyframe {
		// A newer keyframe, or one far older than the copy (the sender
		// restarted from an earlier checkpoint), replaces it.
		if m.Round+1 > h.round || m.Round+1+futureRounds < h.round || h.stale {
			// A keyframe off the schedule over a good copy means the
			// sender restarted or jumped rounds and may have lost its
			// copies of this node: one goes back next round, unless this
			// node sent one in the last round or since (that was the
			// answer, or crossed it: two nodes never answer each other
			// back and forth).
			answered := c.lastKey > 0 && c.lastKey+1 >= m.Round
			if !h.stale && (c.every == 0 || m.Round%c.every != 0) && !answered {
				c.key = true
			}
			h.x = n.copyIn(h.x, m.Params)
			h.round, h.stale, h.early = m.Round+1, false, nil
		}
		return
	}
	switch {
	case h.stale || m.Round < h.round:
		return // waiting for a keyframe, or a step already applied
	case m.Round > h.round:
		if m.Round > h.round+futureRounds {
			n.trace("choco-gap", m.From, "missed compressed steps: the copy waits for a keyframe", float64(m.Round-h.round))
			h.stale, h.early = true, nil
			return
		}
		if h.early == nil {
			h.early = map[uint64][]float32{}
		}
		h.early[m.Round] = m.Params
		n.keep()
		return
	}
	h.x = n.stepIn(h.x, m.Params)
	h.round++
	for q, ok := h.early[h.round]; ok; q, ok = h.early[h.round] {
		delete(h.early, h.round)
		h.x = n.stepIn(h.x, q)
		h.round++
	}
}

// mix returns x' + γ·Σ_j W_ij·(x̂_j − x̂_i) over the neighbours whose
// copies are current.
func (c *choco) mix(n *Core, d *dpsgd) []float32 {
	x := c.half
	c.half = nil
	xs, ws := [][]float32{x}, []float32{1}
	for _, p := range d.order {
		h := c.hats[p]
		if h == nil || h.stale {
			continue
		}
		w := float32(c.gamma * d.weights[p])
		if !d.mixes() {
			merge.Axpy(x, w, h.x)
			merge.Axpy(x, -w, c.self)
		}
		xs, ws = append(xs, h.x, c.self), append(ws, w, -w)
	}
	if d.mixes() && len(xs) > 1 {
		// The same sums in the same order (merge.Combine adds each
		// product, rounded, to the sum so far, as each Axpy does).
		return n.mixed(xs, ws, nil, 0)
	}
	return x
}
