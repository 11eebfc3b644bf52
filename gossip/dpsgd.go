package gossip

import (
	"fmt"
	"slices"
	"time"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
)

// dpsgd is decentralized parallel SGD (Lian et al. 2017). Round k at node i:
// compute g = ∇F_i(x_i) (at the pre-averaging point), send x_i to the
// neighbours, then x_i ← Σ_j W_ij·x_j − γ·g. Rounds start every Δ. A round
// that has not heard from every neighbour by its deadline (RoundTimeout)
// averages over what arrived, renormalising the weights, so a dead peer
// never stalls the rest.
type dpsgd struct {
	base
	cfg        *Config
	weights    map[PeerID]float64
	order      []PeerID // neighbours, sorted
	active     bool
	roundStart time.Duration
	next       time.Duration
	got        map[PeerID][]float32
	future     map[uint64]map[PeerID][]float32
	adv        map[PeerID]int    // neighbours' advertised degrees (live topology)
	filled     map[PeerID]uint64 // 1 + the latest round filled in for a neighbour behind
	grad       []float32
	xs         [][]float32
	ws         []float64
	choco      *choco    // with sparse compression (choco.go)
	sec        *secure   // with secure aggregation (secure.go)
	local      []float32 // the round's local result (outer.go)
	outer      outer     // the outer optimizer (outer.go)
}

// futureRounds bounds how far ahead of its own round a node buffers
// neighbours' parameters.
const futureRounds = 2

func newDPSGD(cfg *Config) *dpsgd {
	d := &dpsgd{cfg: cfg, outer: outer{cfg: &cfg.Outer}, future: map[uint64]map[PeerID][]float32{}, adv: map[PeerID]int{}, filled: map[PeerID]uint64{}}
	d.setNeighbors()
	if cfg.Sparse.Kind != compress.None {
		d.choco = newChoco(cfg)
	}
	if cfg.Secure.Enabled {
		d.sec = newSecure(&cfg.Secure)
	}
	return d
}

// setNeighbors takes the neighbours and weights of the config.
func (d *dpsgd) setNeighbors() {
	d.weights, d.order = map[PeerID]float64{}, d.order[:0]
	for _, nb := range d.cfg.Neighbors {
		d.weights[nb.ID] = nb.Weight
		d.order = append(d.order, nb.ID)
	}
	slices.Sort(d.order)
	if d.live() {
		for p, deg := range d.adv {
			if _, ok := d.weights[p]; ok {
				d.weights[p] = merge.MetropolisHastings(len(d.order), deg)
			} else {
				delete(d.adv, p)
			}
		}
	}
}

// live reports whether the neighbours follow the live members
// (Config.Topology) or HyParView's active view: weights then follow
// advertised degrees.
func (d *dpsgd) live() bool { return d.cfg.Topology != "" || d.cfg.Sampling == SamplingHyParView }

// selfWeight is W_ii: the config's, or over a live topology whatever the
// neighbours' weights leave.
func (d *dpsgd) selfWeight() float64 {
	if !d.live() {
		return d.cfg.SelfWeight
	}
	w := 1.0
	for _, p := range d.order {
		w -= d.weights[p]
	}
	return w
}

// rewire takes new neighbours (live membership): a neighbour that left is
// not waited for, so the round may close at once, and a new one is sent
// this round's parameters.
func (d *dpsgd) rewire(n *Core) {
	old := slices.Clone(d.order)
	d.setNeighbors()
	if d.choco != nil {
		d.choco.rewire(n, d.order)
	}
	if d.active && d.choco == nil {
		// A new neighbour has not had this round's parameters (they went
		// to the old ones); the model is still the round's starting point.
		// Under secure aggregation it takes part from the next round on.
		for _, p := range d.order {
			if d.sec == nil && !slices.Contains(old, p) {
				n.send(Message{Kind: KindParams, To: p, Round: n.round, Params: slices.Clone(n.resolved(n.params)), Weight: d.degree()})
			}
		}
		for p := range d.got {
			if _, ok := d.weights[p]; !ok {
				delete(d.got, p)
			}
		}
		d.tryFinish(n)
	}
}

func (d *dpsgd) start(n *Core) {
	if d.choco != nil {
		d.choco.init(n, d.order)
	}
	d.begin(n)
}

func (d *dpsgd) begin(n *Core) {
	if d.sec != nil {
		d.sec.catchUp(n)
	}
	d.active, d.roundStart, d.grad = true, n.now, nil
	d.got = d.future[n.round]
	if d.got == nil {
		d.got = map[PeerID][]float32{}
	}
	delete(d.future, n.round)
	deg := d.degree()
	// With CHOCO or an outer optimizer the parameters go out once the
	// local step(s) are taken (trainDone). Else the model itself goes to
	// every neighbour: a message's Params are read-only, and the round
	// ends in a new vector (tryFinish), so nobody writes it again.
	if d.sec != nil {
		if !d.cfg.Outer.Enabled() {
			d.sec.begin(n, d, n.params)
		} // else once the local steps are taken (trainDone)
	} else if d.choco == nil && !d.cfg.Outer.Enabled() && len(d.order) > 0 {
		// It is measured once here, for receivers in this process
		// (Message): they check its norm by that.
		sent := n.params
		sum := d.sumOf(n, sent)
		for _, p := range d.order {
			n.send(Message{Kind: KindParams, To: p, Round: n.round, Params: sent, Weight: deg, sum: sum})
		}
		// The gradient is taken at the same values, which nobody writes.
		n.trainShared(OpGradient, sent)
		return
	}
	if d.cfg.Outer.Enabled() {
		n.train(OpUpdate, n.params, d.cfg.Outer.Steps, nil)
		return
	}
	if d.mixes() { // CHOCO: the model is never written in place
		n.trainShared(OpGradient, n.params)
		return
	}
	n.train(OpGradient, n.resolved(n.params), 0, nil)
}

func (d *dpsgd) wake(n *Core) time.Duration {
	if d.active && d.sec != nil {
		return d.sec.wake(d)
	}
	if d.active {
		if d.grad == nil {
			return Never // the deadline matters once the gradient is in
		}
		return d.roundStart + d.cfg.RoundTimeout
	}
	return d.next
}

func (d *dpsgd) tick(n *Core) {
	if d.active {
		if d.sec != nil {
			d.sec.advance(n, d)
		}
		d.tryFinish(n)
		return
	}
	if n.now >= d.next {
		d.begin(n)
	}
}

func (d *dpsgd) step(n *Core, m *Message) {
	if _, ok := d.weights[m.From]; !ok {
		if d.live() {
			// Its view of the roster differs from ours for a moment.
			n.trace("not-neighbour", m.From, fmt.Sprintf("parameters of round %d from a peer outside this view's neighbours", m.Round), 0)
			return
		}
		n.drop(DropNotNeighbor, m.From, "parameters from a peer that is not a neighbour")
		return
	}
	if d.sec != nil {
		if !m.Kind.Secure() {
			n.drop(DropUnmasked, m.From, "parameters in the clear to a node that runs secure aggregation")
			return
		}
		d.sec.step(n, d, m)
		return
	}
	if d.live() && m.Weight > 0 && d.adv[m.From] != int(m.Weight) {
		d.adv[m.From] = int(m.Weight)
		d.weights[m.From] = merge.MetropolisHastings(len(d.order), int(m.Weight))
	}
	if d.choco != nil {
		d.choco.receive(n, m)
	}
	switch {
	case d.active && m.Round == n.round:
		n.keep() // the parameters wait for the round
		d.got[m.From] = m.Params
		d.tryFinish(n)
	case m.Round >= n.round && m.Round <= n.round+futureRounds:
		n.keep()
		if d.future[m.Round] == nil {
			d.future[m.Round] = map[PeerID][]float32{}
		}
		d.future[m.Round][m.From] = m.Params
	case m.Round > n.round+futureRounds:
		// This node fell behind (it was offline or partitioned): jump to the
		// neighbour's round so that it mixes with the others again.
		n.trace("catch-up", m.From, fmt.Sprintf("round %d → %d", n.round, m.Round), float64(m.Round-n.round))
		n.round = m.Round
		n.keep()
		clear(d.future)
		if d.choco != nil {
			d.choco.key = true // the neighbours' copies of this node skip the rounds jumped
		}
		if d.active {
			d.got = map[PeerID][]float32{m.From: m.Params}
		} else {
			d.future[m.Round] = map[PeerID][]float32{m.From: m.Params}
		}
	default:
		// The neighbour is behind: it waits for this node's parameters of
		// its round, which went to others or were mixed long ago. Send the
		// current ones in their place, once per round, so that it closes
		// its round now rather than at its deadline; otherwise one late
		// round begets the next, and after a change of membership the
		// rounds drift apart along the graph.
		n.trace("stale", m.From, fmt.Sprintf("round %d at round %d", m.Round, n.round), 0)
		if m.Round+1 > d.filled[m.From] && d.choco == nil { // rounds only go up: a filled-in answer to a fill-in gets none; CHOCO's copies take steps in order

			d.filled[m.From] = m.Round + 1
			n.send(Message{Kind: KindParams, To: m.From, Round: m.Round, Params: slices.Clone(n.resolved(n.params)), Weight: d.degree()})
		}
	}
}

// degree is the degree this node advertises (over a live topology).
func (d *dpsgd) degree() float64 {
	if d.live() {
		return float64(len(d.order))
	}
	return 0
}

func (d *dpsgd) trainDone(n *Core, r *TrainResult) {
	if d.cfg.Outer.Enabled() {
		d.local = r.Params
		if n.badVector(r, r.Params, "parameter vector") {
			d.local = slices.Clone(n.params) // mix without local progress
		} else {
			n.age += float64(r.Examples)
		}
		d.grad = d.local // the round's own part is in
		if d.sec != nil {
			d.sec.begin(n, d, d.local) // the local result goes out masked
		} else {
			for _, p := range d.order {
				n.send(Message{Kind: KindParams, To: p, Round: n.round, Params: d.local, Weight: d.degree()})
			}
		}
		d.tryFinish(n)
		return
	}
	if n.badVector(r, r.Grad, "gradient") {
		r.Grad = make([]float32, len(n.params)) // average without a step
	} else {
		n.age += float64(r.Examples)
	}
	if d.choco != nil {
		d.choco.step(n, d, r.Grad)
	}
	d.grad = r.Grad
	d.tryFinish(n)
}

// tryFinish closes the round once the gradient is in and either every
// neighbour's parameters arrived or the deadline passed.
func (d *dpsgd) tryFinish(n *Core) {
	if !d.active || d.grad == nil {
		return
	}
	if d.sec != nil {
		if !d.sec.done() {
			return
		}
		if d.cfg.Outer.Enabled() {
			// The outer step from the round's start towards the mixed
			// local results.
			x := d.sec.mix(d.local, d.sec.selfWeight(d))
			d.local = nil
			d.finish(n, d.outer.step(n.params, x))
			return
		}
		x := d.sec.mix(n.params, d.sec.selfWeight(d))
		merge.Axpy(x, -float32(d.cfg.LR), d.grad)
		d.finish(n, x)
		return
	}
	if len(d.got) < len(d.order) && n.now < d.roundStart+d.cfg.RoundTimeout {
		return
	}
	if d.choco != nil {
		d.finish(n, d.choco.mix(n, d))
		return
	}
	own := n.params
	if d.cfg.Outer.Enabled() {
		own = d.local
	}
	d.xs = append(d.xs[:0], own)
	d.ws = append(d.ws[:0], d.selfWeight())
	for _, p := range d.order {
		if x, ok := d.got[p]; ok {
			d.xs = append(d.xs, x)
			d.ws = append(d.ws, d.weights[p])
		}
	}
	if miss := len(d.order) + 1 - len(d.xs); miss > 0 {
		n.trace("missing", "", fmt.Sprintf("round %d closed without %d neighbour(s)", n.round, miss), float64(miss))
	}
	// The round ends in a new vector: the neighbours may still hold the
	// old one, which went to them as it is (begin).
	if d.mixes() {
		x := d.cfg.Mixer.Vector(len(n.params))
		// Without usable weights, or too few inputs for a robust rule,
		// the step from the node's own model alone (1·x is x).
		xs, w := [][]float32{n.params}, []float32{1}
		if agg := d.cfg.Aggregator; merge.Checked(agg) {
			err := merge.Check(agg, len(d.xs), d.ws, 0)
			if err == nil {
				// Combined later, where the mixer says; it owns the lists.
				d.cfg.Mixer.Aggregate(x, slices.Clone(d.xs), slices.Clone(d.ws), agg, d.grad, -float32(d.cfg.LR))
				d.finish(n, x)
				return
			}
			n.drop(DropAggregation, "", "aggregation failed: "+err.Error())
		} else if nw, err := merge.Normalized(nil, d.ws); err != nil {
			n.drop(DropAggregation, "", "aggregation failed: "+err.Error())
		} else {
			xs, w = slices.Clone(d.xs), nw
		}
		// Mixed later, where the mixer says; Mix owns the lists.
		d.cfg.Mixer.Mix(x, xs, w, d.grad, -float32(d.cfg.LR))
		d.finish(n, x)
		return
	}
	x := make([]float32, len(n.params)) // first written by the aggregation, across the cores
	if err := d.cfg.Aggregator.Aggregate(x, d.xs, d.ws, 0); err != nil {
		n.drop(DropAggregation, "", "aggregation failed: "+err.Error())
		copy(x, n.params)
	}
	if d.cfg.Outer.Enabled() {
		d.local = nil // the messages share the local result
		d.finish(n, d.outer.step(n.params, x))
		return
	}
	merge.Axpy(x, -float32(d.cfg.LR), d.grad)
	d.finish(n, x)
}

// finish ends the round with the new model x.
func (d *dpsgd) finish(n *Core, x []float32) {
	n.params = x
	d.active = false
	n.round++
	n.commit()
	d.next = max(n.now, d.roundStart+d.cfg.Delta)
	if d.sec != nil {
		if _, behind := d.sec.ahead(n); behind {
			d.next = n.now // the neighbours are in this round already
		}
	}
	if n.now >= d.next {
		d.begin(n)
	}
}

func (d *dpsgd) snapshot(s *State)      { d.outer.snapshot(s) }
func (d *dpsgd) restore(s *State) error { return d.outer.restore(s) }
