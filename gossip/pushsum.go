package gossip

import (
	"time"

	"github.com/gossipd/gossipd/merge"
)

// pushSum is stochastic gradient push (Assran et al. 2019), push-sum
// (Kempe et al. 2003) with SGD: a node keeps (x, w), w starting at 1; every
// Δ it takes a gradient at z = x/w, steps x ← x − γ·g, and pushes equal
// shares of (x, w) to its out-neighbours for the round, keeping one share.
// Receivers add what arrives. Σx and Σw are conserved, so the z's converge
// to the average on directed and time-varying graphs.
type pushSum struct {
	base
	cfg    *Config
	w      float64
	next   time.Duration
	cursor int
	z      []float32
	// With a robust aggregator: the last CacheSize de-biased models
	// received, and the weight received since the last merge.
	window   [][]float32
	windowAt int
	inW      float64
}

func newPushSum(cfg *Config) *pushSum { return &pushSum{cfg: cfg, w: 1} }

func (p *pushSum) start(n *Node) {
	p.next = n.firstWake()
}

func (p *pushSum) estimate(n *Node) []float32 {
	if len(p.z) != len(n.params) {
		p.z = make([]float32, len(n.params))
	}
	merge.DeBias(p.z, n.params, p.w)
	return p.z
}

func (p *pushSum) wake(n *Node) time.Duration {
	if n.training {
		return Never
	}
	return p.next
}

func (p *pushSum) tick(n *Node) {
	if n.now < p.next || n.training {
		return
	}
	p.next = n.now + n.jittered()
	if p.cfg.robust() {
		p.robustMerge(n)
	}
	n.train(OpGradient, p.estimate(n), 0, nil)
}

// robustMerge replaces the node's estimate by the robust aggregate of it
// and the window, and takes in the weight received since the last merge
// (x = z*·w, so the estimate x/w is z*): the weights keep flowing as in
// push-sum, while no single sender can move the estimate far. Until the
// window holds enough models the node keeps its own estimate.
func (p *pushSum) robustMerge(n *Node) {
	z := make([]float32, len(n.params))
	n.aggregateEqual(z, append([][]float32{p.estimate(n)}, p.window...))
	p.w += p.inW
	p.inW = 0
	for j := range n.params {
		n.params[j] = z[j] * float32(p.w)
	}
}

func (p *pushSum) trainDone(n *Node, r *TrainResult) {
	if !n.badVector(r.Grad, "gradient") {
		merge.Axpy(n.params, -float32(p.cfg.LR), r.Grad)
		n.age += float64(r.Examples)
	}
	p.push(n)
	n.round++
	n.commit()
}

// push sends this round's shares: to one out-neighbour, cycling through
// them (Fanout 0), or to Fanout of them, cycling.
func (p *pushSum) push(n *Node) {
	nb := p.cfg.Neighbors
	if len(nb) == 0 {
		return // alone for now: keep the whole mass
	}
	k := max(1, min(p.cfg.Fanout, len(nb)))
	share := 1 / float64(k+1)
	for i := 0; i < k; i++ {
		to := nb[(p.cursor+i)%len(nb)].ID
		x := make([]float32, len(n.params))
		for j, v := range n.params {
			x[j] = float32(share) * v
		}
		n.send(Message{Kind: KindPushSum, To: to, Params: x, Weight: share * p.w})
	}
	p.cursor = (p.cursor + k) % len(nb)
	merge.Scale(n.params, float32(share))
	p.w *= share
}

func (p *pushSum) step(n *Node, m *Message) {
	if p.cfg.robust() {
		z := make([]float32, len(m.Params))
		merge.DeBias(z, m.Params, m.Weight)
		if len(p.window) < p.cfg.CacheSize {
			p.window = append(p.window, z)
		} else {
			p.window[p.windowAt] = z
			p.windowAt = (p.windowAt + 1) % p.cfg.CacheSize
		}
		p.inW += m.Weight
		return
	}
	merge.Axpy(n.params, 1, m.Params)
	p.w += m.Weight
}

func (p *pushSum) params(n *Node) []float32 { return p.estimate(n) }

// rewire takes new out-neighbours (live membership).
func (p *pushSum) rewire(*Node) { p.cursor = 0 }

func (p *pushSum) weight() float64 { return p.w }

func (p *pushSum) snapshot(s *State) { s.Weight = p.w }

// joined: the joiner's model is the member's de-biased estimate, with
// the joiner's own unit of weight.
func (p *pushSum) joined(*Node) { p.w = 1 }

func (p *pushSum) restore(s *State) error {
	p.w = s.Weight
	return nil
}
