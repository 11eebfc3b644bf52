package gossip

import (
	"fmt"
	"slices"
	"time"

	"github.com/gossipd/gossipd/merge"
)

// dpsgd is decentralized parallel SGD (Lian et al. 2017). Round k at node i:
// compute g = ∇F_i(x_i) (at the pre-averaging point), send x_i to the
// neighbours, then x_i ← Σ_j W_ij·x_j − γ·g. Rounds start every Δ. A round
// that has not heard from every neighbour by its deadline (RoundTimeout)
// averages over what arrived, renormalising the weights, so a dead peer
// never stalls the rest.
type dpsgd struct {
	cfg        *Config
	weight     map[PeerID]float64
	order      []PeerID // neighbours, sorted
	active     bool
	roundStart time.Duration
	next       time.Duration
	got        map[PeerID][]float32
	future     map[uint64]map[PeerID][]float32
	grad       []float32
	scratch    []float32
	xs         [][]float32
	ws         []float64
}

// futureRounds bounds how far ahead of its own round a node buffers
// neighbours' parameters.
const futureRounds = 2

func newDPSGD(cfg *Config) *dpsgd {
	d := &dpsgd{cfg: cfg, weight: map[PeerID]float64{}, future: map[uint64]map[PeerID][]float32{}}
	for _, nb := range cfg.Neighbors {
		d.weight[nb.ID] = nb.Weight
		d.order = append(d.order, nb.ID)
	}
	slices.Sort(d.order)
	return d
}

func (d *dpsgd) start(n *Node) { d.begin(n) }

func (d *dpsgd) begin(n *Node) {
	d.active, d.roundStart, d.grad = true, n.now, nil
	d.got = d.future[n.round]
	if d.got == nil {
		d.got = map[PeerID][]float32{}
	}
	delete(d.future, n.round)
	for _, p := range d.order {
		n.send(Message{Kind: KindParams, To: p, Round: n.round, Params: slices.Clone(n.params)})
	}
	n.train(OpGradient, n.params, 0, nil)
}

func (d *dpsgd) wake(n *Node) time.Duration {
	if d.active {
		if d.grad == nil {
			return Never // the deadline matters once the gradient is in
		}
		return d.roundStart + d.cfg.RoundTimeout
	}
	return d.next
}

func (d *dpsgd) tick(n *Node) {
	if d.active {
		d.tryFinish(n)
		return
	}
	if n.now >= d.next {
		d.begin(n)
	}
}

func (d *dpsgd) step(n *Node, m *Message) {
	if _, ok := d.weight[m.From]; !ok {
		n.trace("drop", m.From, "parameters from a peer that is not a neighbour", 0)
		return
	}
	n.keep() // the parameters wait for the round (or are dropped as stale)
	switch {
	case d.active && m.Round == n.round:
		d.got[m.From] = m.Params
		d.tryFinish(n)
	case m.Round >= n.round && m.Round <= n.round+futureRounds:
		if d.future[m.Round] == nil {
			d.future[m.Round] = map[PeerID][]float32{}
		}
		d.future[m.Round][m.From] = m.Params
	case m.Round > n.round+futureRounds:
		// This node fell behind (it was offline or partitioned): jump to the
		// neighbour's round so that it mixes with the others again.
		n.trace("catch-up", m.From, fmt.Sprintf("round %d → %d", n.round, m.Round), float64(m.Round-n.round))
		n.round = m.Round
		clear(d.future)
		if d.active {
			d.got = map[PeerID][]float32{m.From: m.Params}
		} else {
			d.future[m.Round] = map[PeerID][]float32{m.From: m.Params}
		}
	default:
		n.trace("stale", m.From, fmt.Sprintf("round %d at round %d", m.Round, n.round), 0)
	}
}

func (d *dpsgd) trainDone(n *Node, r *TrainResult) {
	if len(r.Grad) != len(n.params) || !merge.Finite(r.Grad) {
		n.trace("drop", "", "training returned a bad gradient", 0)
		r.Grad = make([]float32, len(n.params)) // average without a step
	} else {
		n.age += float64(r.Examples)
	}
	d.grad = r.Grad
	d.tryFinish(n)
}

// tryFinish closes the round once the gradient is in and either every
// neighbour's parameters arrived or the deadline passed.
func (d *dpsgd) tryFinish(n *Node) {
	if !d.active || d.grad == nil {
		return
	}
	if len(d.got) < len(d.order) && n.now < d.roundStart+d.cfg.RoundTimeout {
		return
	}
	d.xs = append(d.xs[:0], n.params)
	d.ws = append(d.ws[:0], d.cfg.SelfWeight)
	for _, p := range d.order {
		if x, ok := d.got[p]; ok {
			d.xs = append(d.xs, x)
			d.ws = append(d.ws, d.weight[p])
		}
	}
	if miss := len(d.order) + 1 - len(d.xs); miss > 0 {
		n.trace("missing", "", fmt.Sprintf("round %d closed without %d neighbour(s)", n.round, miss), float64(miss))
	}
	if len(d.scratch) != len(n.params) {
		d.scratch = make([]float32, len(n.params))
	}
	if err := d.cfg.Aggregator.Aggregate(d.scratch, d.xs, d.ws, 0); err != nil {
		n.trace("drop", "", "aggregation failed: "+err.Error(), 0)
		copy(d.scratch, n.params)
	}
	merge.Axpy(d.scratch, -float32(d.cfg.LR), d.grad)
	n.params, d.scratch = d.scratch, n.params
	d.active = false
	n.round++
	n.commit()
	d.next = max(n.now, d.roundStart+d.cfg.Delta)
	if n.now >= d.next {
		d.begin(n)
	}
}

// adpsgd is asynchronous D-PSGD (Lian et al. 2018): every Δ a node computes a
// gradient and averages pairwise with one random neighbour,
// x_i, x_j ← (x_i + x_j)/2, then applies its gradient. The active node sends
// its parameters; the passive one answers at once with its own and averages;
// neither waits for the other, so no cycle of waits, no deadlock.
type adpsgd struct {
	next time.Duration
}

func (a *adpsgd) start(n *Node) {
	a.next = n.firstWake()
}

func (a *adpsgd) wake(n *Node) time.Duration { return a.next }

func (a *adpsgd) tick(n *Node) {
	if n.now < a.next {
		return
	}
	a.next = n.now + n.jittered()
	nb := n.cfg.Neighbors[n.rng.IntN(len(n.cfg.Neighbors))].ID
	n.send(Message{Kind: KindAvgRequest, To: nb, Params: slices.Clone(n.params)})
	if !n.training {
		n.train(OpGradient, n.params, 0, nil)
	}
}

func (a *adpsgd) step(n *Node, m *Message) {
	if m.Kind == KindAvgRequest {
		n.send(Message{Kind: KindAvgReply, To: m.From, Params: slices.Clone(n.params)})
	}
	merge.Interpolate(n.params, n.params, m.Params, 0.5)
	n.commit()
}

func (a *adpsgd) trainDone(n *Node, r *TrainResult) {
	if len(r.Grad) != len(n.params) || !merge.Finite(r.Grad) {
		n.trace("drop", "", "training returned a bad gradient", 0)
		return
	}
	merge.Axpy(n.params, -float32(n.cfg.LR), r.Grad)
	n.age += float64(r.Examples)
	n.round++
	n.commit()
}

// pushSum is stochastic gradient push (Assran et al. 2019), push-sum
// (Kempe et al. 2003) with SGD: a node keeps (x, w), w starting at 1; every
// Δ it takes a gradient at z = x/w, steps x ← x − γ·g, and pushes equal
// shares of (x, w) to its out-neighbours for the round, keeping one share.
// Receivers add what arrives. Σx and Σw are conserved, so the z's converge
// to the average on directed and time-varying graphs.
type pushSum struct {
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
	if len(r.Grad) == len(n.params) && merge.Finite(r.Grad) {
		merge.Axpy(n.params, -float32(p.cfg.LR), r.Grad)
		n.age += float64(r.Examples)
	} else {
		n.trace("drop", "", "training returned a bad gradient", 0)
	}
	p.push(n)
	n.round++
	n.commit()
}

// push sends this round's shares: to one out-neighbour, cycling through
// them (Fanout 0), or to Fanout of them, cycling.
func (p *pushSum) push(n *Node) {
	nb := p.cfg.Neighbors
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

// PushSumWeight returns the node's push-sum weight (1 for other protocols).
func (n *Node) PushSumWeight() float64 {
	if p, ok := n.proto.(*pushSum); ok {
		return p.w
	}
	return 1
}
