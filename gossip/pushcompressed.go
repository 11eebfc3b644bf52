package gossip

import (
	"fmt"
	"slices"
)

// Push-sum with top-k or rand-k (Config.Sparse), in the style of CHOCO's
// push-sum (Taheri et al. 2020): each link i→j has a public copy ẑ of
// the sender's estimate z = x/w, held by both ends (links.go). A share
// of weight s carries a compressed step of the copy towards z, the
// receiver adds s·ẑ to its x and s to its w, and the sender takes away
// exactly s·ẑ and s: the sums Σx and Σw are kept whatever Q leaves out,
// and what it leaves out stays in z − ẑ for the link's next messages.
//
// Where ẑ lags z the sender's estimate moves by s·(z − ẑ)/(w − s), so
// the shares are damped by the consensus step γ (each out-neighbour gets
// γ/(k+1) of the weight, not 1/(k+1)), as CHOCO damps its mixing.
//
// A receiver whose copy missed a step (a lost share: the running sums
// correct the weight as before) takes the shares at its own estimate,
// as a mass correction does, until the link's next keyframe: the first
// share of a link, and every KeyframeEvery shares (links may go one way
// only, so the receiver cannot ask for one). A share the shell could not
// deliver comes back at the copy, and the link's next share is a
// keyframe. Handoffs and debts carry the link's step too; a handoff is
// taken at the copy (a departing node's last shares keep Σw, and Σx up to
// s·(z − ẑ)), a debt at the receiver's estimate as always.

// pushCompressed sends the round's k shares of γ·share each.
func (p *pushSum) pushCompressed(n *Core, k int, share float64) {
	nb := p.cfg.Neighbors
	z := p.estimate(n)
	if !p.mixes() {
		z = slices.Clone(z) // estimate's buffer, rewritten as the model changes
	}
	s := p.cfg.ConsensusStep * share * p.w
	for i := 0; i < k; i++ {
		to := nb[(p.cursor+i)%len(nb)].ID
		l := p.link(to)
		l.sent += s
		l.seqSent++
		params, packed := p.copies.pack(n, to, z, l.seqSent)
		n.add(-float32(s), p.copies.sent(to))
		p.w -= s
		m := Message{Kind: KindPushSum, To: to, Params: params, Packed: packed, Weight: s, Sent: l.sent, Round: l.seqSent}
		if params != nil && p.mixes() {
			m.sum = n.laterSum(params)
		}
		n.send(m)
	}
	p.cursor = (p.cursor + k) % len(nb)
	p.account(n)
}

// receiveCompressed takes a share (its running sums already checked).
func (p *pushSum) receiveCompressed(n *Core, m *Message) {
	zhat := p.copies.receive(n, m)
	switch {
	case m.Weight < 0:
		p.absorb(n, m.Weight)
	case zhat == nil:
		n.trace("stale-copy", m.From, fmt.Sprintf("share %d taken at this node's estimate: the link's copy waits for a keyframe", m.Round), m.Weight)
		p.rescale(n, p.w+m.Weight)
	default:
		n.add(float32(m.Weight), zhat)
		p.w += m.Weight
	}
}

// undeliveredCompressed takes back a share that never left: its weight
// at the link's copy (what the share took away, unless the link sent
// again since), and the link's next share is a keyframe.
func (p *pushSum) undeliveredCompressed(n *Core, m *Message, l *psLink) {
	if zhat := p.copies.sent(m.To); zhat != nil {
		n.add(float32(m.Weight), zhat)
	}
	l.sent -= m.Weight
	p.w += m.Weight
	p.copies.rekey(m.To)
	p.account(n)
	n.trace("undelivered", m.To, fmt.Sprintf("share %d (weight %.4g) taken back", m.Round, m.Weight), m.Weight)
}
