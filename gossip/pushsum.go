package gossip

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
	"weak"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
)

// pushSum is stochastic gradient push (Assran et al. 2019), push-sum
// (Kempe et al. 2003) with SGD: a node keeps (x, w), w starting at 1; every
// Δ it takes a gradient at z = x/w, steps x ← x − γ·w·g, and pushes equal
// shares of (x, w) to its out-neighbours for the round, keeping one share.
// Receivers add what arrives. Σx and Σw are conserved, so the z's converge
// to the average on directed and time-varying graphs.
//
// The step is scaled by w so that the estimate z moves by γ·g whatever the
// weight (SGP's x ← x − γ·g moves it by γ·g/w). On slow or lossy links
// much of the weight is in flight at any moment and a node's w can fall
// far below 1; the unscaled step then grows without bound and the models
// diverge (five containers at 5% loss and 1 Mbit/s: Σw fell from 5 to
// under 0.6 and accuracy swung between 0.1 and 0.9). Where w stays near 1
// the two agree.
//
// Mass through faults. Over the live members the weights must keep
// summing to their number, whatever happens to messages and peers:
//
//   - Running sums (Hadjicostis, Vaidya, Domínguez-García 2016): every
//     share also carries Sent, all the weight its sender ever pushed over
//     the link, and Round numbers the link's shares. A receiver whose
//     running sum lags (lost shares) or leads (the sender restarted from a
//     state older than what it had sent) corrects its weight by the
//     difference, at its own estimate, so its model does not jump. A
//     duplicate or reordered share is dropped.
//   - Accounts before sending: every change to the weight and running
//     sums goes out in the Ready as Accounts, which the shell makes
//     durable before it sends that Ready's shares (a few bytes per link,
//     not the model). A node killed at any moment restarts with accounts
//     that count every share it sent and every share it took in, and
//     with its last checkpoint's model at that weight (Config.Accounts):
//     the weights stay exact, the model is as old as any restart's. It
//     then sends its running sums (syncs), so receivers settle what its
//     queue never sent.
//   - A leaving node (Leave, then Depart) stops pushing, keeps receiving
//     for a grace period, then hands its weight beyond one unit (or its
//     shortfall below one) to its out-neighbours and leaves with exactly
//     one unit — the unit a joiner brings (join.go).
//
// What it cannot do: a node that dies for good takes its weight with it
// (about one unit, but not exactly).
type pushSum struct {
	base
	cfg *Config
	// random: GoSGD (gosgd.go): each round's share goes to one peer
	// drawn from the peer-sampling view, not to the topology's
	// out-neighbours.
	random bool
	w      float64
	next   time.Duration
	cursor int
	z      []float32
	// zOf and zW are the model and weight z was made of, where the core
	// hands its mixes (HandsMixes): z is then a vector of its own, never
	// written again, remade when either changes. zOf is weak, so as not to
	// keep a model the node has moved on from (and its device slot).
	zOf     weak.Pointer[float32]
	zW      float64
	links   map[PeerID]*psLink
	leaving bool
	resumed bool   // restored from a saved state: sync the links at start
	seq     uint64 // of the accounts
	// accounted: the weight came with Config.Accounts (a joiner keeps it).
	accounted bool
	// With a robust aggregator: the last CacheSize de-biased models
	// received, and the weight received since the last merge.
	window   [][]float32
	windowAt int
	inW      float64
	// fresh are the de-biased models received since the last merge and
	// their weights (clipped gossip merges these; the window sets τ).
	fresh  [][]float32
	freshW []float64
	outer  outer     // with Config.Outer (outer.go)
	from   []float32 // the estimate the running local steps started from
	// copies are the links' public copies of the estimates under top-k
	// or rand-k (links.go, pushcompressed.go).
	copies *links
}

// psLink is a node's account with one peer: the running sums of the
// weight pushed to it and received from it, and the numbers of the shares.
type psLink struct {
	sent, recv       float64
	seqSent, seqRecv uint64
}

// minWeight is the smallest weight a correction may leave a node with (a
// weight at or below zero has no estimate).
const minWeight = 1e-3

func newPushSum(cfg *Config) *pushSum {
	p := &pushSum{cfg: cfg, w: 1, links: map[PeerID]*psLink{}, outer: outer{cfg: &cfg.Outer}}
	if cfg.Sparse.Kind != compress.None {
		p.copies = newLinks(cfg, false)
	}
	return p
}

// account records that the weight or a running sum changed: the Ready
// carries the accounts, durable before its messages leave.
func (p *pushSum) account(n *Core) {
	p.seq++
	if n.cfg.NoAccounts {
		return
	}
	a := &Accounts{Seq: p.seq, Weight: p.w + p.inW} // a robust node's weight not yet merged is its own too
	for _, id := range slices.Sorted(maps.Keys(p.links)) {
		l := p.links[id]
		a.Links = append(a.Links, Link{Peer: id, Sent: l.sent, Recv: l.recv, SeqSent: l.seqSent, SeqRecv: l.seqRecv})
	}
	n.rd.Accounts = a
}

// resumeAccounts takes saved accounts: the weight and running sums as of
// the node's last event, the model (its estimate) as of its last
// checkpoint, rescaled to that weight.
func (p *pushSum) resumeAccounts(n *Core, a *Accounts) error {
	if !(a.Weight > 0) {
		return fmt.Errorf("%w: saved push-sum weight %v", ErrConfig, a.Weight)
	}
	z := p.estimate(n)
	if !p.mixes() {
		z = slices.Clone(z)
	}
	p.w, p.seq, p.accounted, p.resumed = a.Weight, a.Seq, true, len(a.Links) > 0
	clear(p.links)
	for _, l := range a.Links {
		p.links[l.Peer] = &psLink{sent: l.Sent, recv: l.Recv, seqSent: l.SeqSent, seqRecv: l.SeqRecv}
	}
	p.setScaled(n, z, float32(p.w))
	return nil
}

func (p *pushSum) start(n *Core) {
	p.next = n.firstWake()
	if p.resumed {
		p.sync(n)
	}
}

// sync tells every peer this node has pushed to its running sum, without
// a share (a node restarted from a saved state): a receiver that got
// shares this node no longer accounts for, or missed shares that never
// left its queue, corrects its weight now, not whenever the link is next
// used (it may never be, once the topology has changed). A sync reuses
// the number of the link's last share, so it needs no durable state.
func (p *pushSum) sync(n *Core) {
	for _, id := range slices.Sorted(maps.Keys(p.links)) {
		if l := p.links[id]; l.seqSent > 0 {
			n.send(Message{Kind: KindPushSum, To: id, Sent: l.sent, Round: l.seqSent})
		}
	}
}

// undelivered takes back a share the shell could not deliver: its weight
// and model return to the node, and the link's running sum goes down. If
// the share did arrive after all, the receiver gives it back when the
// link's next running sum shows less than it got.
func (p *pushSum) undelivered(n *Core, m *Message) {
	l := p.links[m.To]
	if p.copies != nil && l != nil && m.Kind == KindPushSum && m.Weight > 0 {
		p.undeliveredCompressed(n, m, l)
		return
	}
	if m.Kind != KindPushSum || l == nil || len(m.Params) != len(n.params) || m.Weight == 0 {
		return
	}
	l.sent -= m.Weight
	n.add(1, m.Params)
	p.w += m.Weight
	p.account(n)
	n.trace("undelivered", m.To, fmt.Sprintf("share %d (weight %.4g) taken back", m.Round, m.Weight), m.Weight)
}

func (p *pushSum) link(id PeerID) *psLink {
	l := p.links[id]
	if l == nil {
		l = &psLink{}
		p.links[id] = l
	}
	return l
}

// estimate is the node's de-biased model, x/w. Where the core hands its
// mixes it is a vector of its own, made once for each model and weight
// (the model itself at weight 1: 1·x is x); else a buffer rewritten at
// each call.
func (p *pushSum) estimate(n *Core) []float32 {
	if p.mixes() {
		if p.w == 1 {
			return n.params
		}
		if len(n.params) > 0 && (p.zOf.Value() != &n.params[0] || p.zW != p.w) {
			p.z = n.mixed([][]float32{n.params}, []float32{float32(1 / p.w)}, nil, 0) // merge.DeBias
			p.zOf, p.zW = weak.Make(&n.params[0]), p.w
		}
		return p.z
	}
	if len(p.z) != len(n.params) {
		p.z = make([]float32, len(n.params))
	}
	merge.DeBias(p.z, n.params, p.w)
	return p.z
}

func (p *pushSum) wake(n *Core) time.Duration {
	if n.training || p.leaving {
		return Never
	}
	return p.next
}

func (p *pushSum) tick(n *Core) {
	if n.now < p.next || n.training || p.leaving {
		return
	}
	p.next = n.now + n.jittered()
	if p.cfg.robust() {
		p.robustMerge(n)
	}
	if p.cfg.Outer.Enabled() {
		p.from = slices.Clone(p.estimate(n))
		n.train(OpUpdate, p.from, p.cfg.Outer.Steps, nil)
		return
	}
	if p.mixes() {
		n.trainShared(OpGradient, p.estimate(n)) // a vector of its own, never written
		return
	}
	n.train(OpGradient, p.estimate(n), 0, nil)
}

func (p *pushSum) trainDone(n *Core, r *TrainResult) {
	switch {
	case p.cfg.Outer.Enabled():
		if !n.badVector(r, r.Params, "parameter vector") {
			p.outer.applyOwn(n.params, p.from, r.Params, float32(p.w)) // x = w·z
			n.age += float64(r.Examples)
		}
	case !n.badVector(r, r.Grad, "gradient"):
		n.add(-float32(p.cfg.LR*p.w), r.Grad) // the step on z = x/w is γ
		n.age += float64(r.Examples)
	}
	if p.leaving {
		n.commit()
		return
	}
	p.push(n)
	n.round++
	n.commit()
}

// push sends this round's shares: to one out-neighbour, cycling through
// them (Fanout 0), or to Fanout of them, cycling.
func (p *pushSum) push(n *Core) {
	if p.random {
		p.pushRandom(n)
		return
	}
	nb := p.cfg.Neighbors
	if len(nb) == 0 {
		return // alone for now: keep the whole mass
	}
	k := max(1, min(p.cfg.Fanout, len(nb)))
	share := 1 / float64(k+1)
	if p.copies != nil {
		p.pushCompressed(n, k, share)
		return
	}
	// Every share is share·x, the node's part too: one vector, sent to
	// the k out-neighbours (a receiver only reads it), then copied into
	// the node's own.
	x := p.scaled(n, n.params, float32(share))
	for i := 0; i < k; i++ {
		p.send(n, nb[(p.cursor+i)%len(nb)].ID, x, share*p.w)
	}
	p.cursor = (p.cursor + k) % len(nb)
	p.keepShare(n, x)
	p.w *= share
	p.account(n)
}

// send pushes the share (x, w) to a peer over its link.
func (p *pushSum) send(n *Core, to PeerID, x []float32, w float64) {
	l := p.link(to)
	l.sent += w
	l.seqSent++
	m := Message{Kind: KindPushSum, To: to, Params: x, Weight: w, Sent: l.sent, Round: l.seqSent}
	if p.copies != nil {
		// A handoff or a debt: the receiver takes it at the link's copy.
		m.Params, m.Packed = p.copies.pack(n, to, p.estimate(n), l.seqSent)
	}
	if p.mixes() && m.Params != nil {
		m.sum = n.laterSum(m.Params) // checked by its receivers once the mixer has made it
	}
	n.send(m)
}

func (p *pushSum) step(n *Core, m *Message) {
	l := p.link(m.From)
	sync := m.Weight == 0 // a running sum without a share (sync)
	if m.Round < l.seqRecv || (m.Round == l.seqRecv && !sync) {
		n.trace("stale", m.From, fmt.Sprintf("push-sum share %d after share %d", m.Round, l.seqRecv), 0)
		return
	}
	// What the sender's running sum says beyond this share and what was
	// received before. A link never heard from has no past to credit.
	var c float64
	if l.seqRecv > 0 {
		c = m.Sent - l.recv - m.Weight
		if math.Abs(c) <= 1e-9*max(1, math.Abs(m.Sent)) {
			c = 0 // rounding in the running sums, not a lost share
		}
	}
	l.recv, l.seqRecv = m.Sent, m.Round
	defer p.account(n)
	if sync {
		if c != 0 {
			n.trace("mass-correction", m.From, fmt.Sprintf("running sum differs by %.4g from the shares received", c), c)
			if p.cfg.robust() {
				p.inW += c
			} else {
				p.rescale(n, p.w+c)
			}
		}
		return
	}
	if p.cfg.robust() {
		p.keep(n, m, c)
		return
	}
	switch {
	case p.copies != nil:
		p.receiveCompressed(n, m)
	case m.Weight < 0:
		p.absorb(n, m.Weight)
	default:
		n.add(1, m.Params)
		p.w += m.Weight
		if p.mixes() {
			n.keep() // the mix reads the share later
		}
	}
	if c != 0 {
		n.trace("mass-correction", m.From, fmt.Sprintf("running sum differs by %.4g from the shares received", c), c)
		p.rescale(n, p.w+c)
	}
}

// absorb takes in a debt (a negative share: a departing node's shortfall
// below one unit) at the node's own estimate, but never more than half
// its weight; the rest goes on to an out-neighbour. The debt is paid in
// full, so the weights keep summing to the members' number, and no
// weight comes near zero, where an estimate x/w would blow up.
func (p *pushSum) absorb(n *Core, debt float64) {
	take := max(debt, -p.w/2)
	p.rescale(n, p.w+take)
	rest := debt - take
	if rest == 0 {
		return
	}
	to, ok := p.nextOut(n)
	if !ok {
		n.trace("debt-dropped", "", fmt.Sprintf("no out-neighbour to pass a debt of %.4g on to", rest), rest)
		return
	}
	x := p.scaled(n, p.estimate(n), float32(rest))
	p.send(n, to, x, rest)
	n.trace("debt-passed", to, fmt.Sprintf("a debt of %.4g passed on", rest), rest)
}

// rescale sets the weight to w, moving x along so that the estimate x/w
// stays where it is; the weight never falls below minWeight.
func (p *pushSum) rescale(n *Core, w float64) {
	if w < minWeight {
		n.trace("weight-floor", "", fmt.Sprintf("weight %.4g raised to %g", w, minWeight), w)
		w = minWeight
	}
	z := p.estimate(n)
	p.w = w
	p.setScaled(n, z, float32(w))
}

func (p *pushSum) params(n *Core) []float32 { return p.estimate(n) }

func (p *pushSum) weight() float64 { return p.w }

// rewire takes new out-neighbours (live membership); the cursor keeps
// its place, so that the shares after a change do not all go to the
// first out-neighbour.
func (p *pushSum) rewire(*Core) { p.cursor %= max(1, len(p.cfg.Neighbors)) }

// leave stops pushing: the node keeps what arrives until it departs.
func (p *pushSum) leave(*Core) { p.leaving = true }

// depart hands the weight beyond one unit (or the shortfall below it) to
// the out-neighbours, in equal parts at the node's estimate, and keeps one
// unit: the weights over the members that stay keep summing to their
// number.
func (p *pushSum) depart(n *Core) {
	nb := p.outs(n)
	excess := p.w - 1
	if len(nb) == 0 || excess == 0 {
		return
	}
	z := p.estimate(n)
	if !p.mixes() {
		z = slices.Clone(z)
	}
	part := excess / float64(len(nb))
	x := p.scaled(n, z, float32(part)) // one share for all, read only
	for _, to := range nb {
		p.send(n, to, x, part)
	}
	n.trace("handoff", "", fmt.Sprintf("weight %.4g: %.4g handed to %d out-neighbours", p.w, excess, len(nb)), excess)
	p.w = 1
	p.keepShare(n, z)
	p.account(n)
	n.commit()
}

// joined: the joiner's model is the member's de-biased estimate, with the
// joiner's own unit of weight (or, restarted before its first checkpoint,
// the weight its accounts hold).
func (p *pushSum) joined(n *Core) {
	if !p.accounted {
		p.w = 1
		p.account(n)
		return
	}
	p.setScaled(n, n.params, float32(p.w))
}

func (p *pushSum) snapshot(s *State) {
	p.outer.snapshot(s)
	s.Weight = p.w
	for _, id := range slices.Sorted(maps.Keys(p.links)) {
		l := p.links[id]
		s.Links = append(s.Links, Link{Peer: id, Sent: l.sent, Recv: l.recv, SeqSent: l.seqSent, SeqRecv: l.seqRecv})
	}
}

func (p *pushSum) restore(s *State) error {
	if err := p.outer.restore(s); err != nil {
		return err
	}
	p.w, p.resumed = s.Weight, len(s.Links) > 0
	for _, l := range s.Links {
		p.links[l.Peer] = &psLink{sent: l.Sent, recv: l.Recv, seqSent: l.SeqSent, seqRecv: l.SeqRecv}
	}
	return nil
}
