package gossip

import (
	"slices"
	"time"
)

// step handles a membership message.
func (h *hyparview) step(n *Core, m *Message) {
	q := m.From
	switch m.Kind {
	case KindHVJoin:
		h.addActive(n, q)
		n.send(Message{Kind: KindHVNeighborReply, To: q, Round: 1})
		for _, a := range h.active {
			if a != q {
				n.send(Message{Kind: KindHVForwardJoin, To: a, View: []Descriptor{{ID: q, Age: hvActiveWalk}}})
			}
		}
	case KindHVForwardJoin:
		joiner, ttl := m.View[0].ID, m.View[0].Age
		if joiner == h.self {
			return
		}
		if ttl <= 0 || len(h.active) <= 1 {
			if !hasSorted(h.active, joiner) {
				h.addActive(n, joiner)
				n.send(Message{Kind: KindHVNeighbor, To: joiner, Round: 1})
			}
			return
		}
		if ttl == hvPassiveWalk {
			h.addPassive(n, joiner, nil)
		}
		next, ok := n.randomOf(h.active, q, joiner)
		if !ok {
			h.addActive(n, joiner)
			n.send(Message{Kind: KindHVNeighbor, To: joiner, Round: 1})
			return
		}
		n.send(Message{Kind: KindHVForwardJoin, To: next, View: []Descriptor{{ID: joiner, Age: ttl - 1}}})
	case KindHVNeighbor:
		if m.Round == hvPrioFew && !hasSorted(h.active, q) && len(h.active) >= h.activeSize {
			h.split(n, q, m.View)
		}
		if hasSorted(h.active, q) || m.Round == hvPrioHigh || len(h.active) < h.activeSize {
			h.addActive(n, q)
			n.send(Message{Kind: KindHVNeighborReply, To: q, Round: 1})
			return
		}
		h.addPassive(n, q, nil)
		n.send(Message{Kind: KindHVNeighborReply, To: q})
	case KindHVNeighborReply:
		if q == h.asked {
			h.asked = ""
			if m.Round != 1 {
				h.backoff = min(max(2*h.backoff, 2), promoteBackoff)
				h.promoteAt = n.now + time.Duration(h.backoff)*n.cfg.Delta
			}
		}
		if m.Round == 1 {
			h.backoff, h.promoteAt = 0, n.now
			h.addActive(n, q)
		}
	case KindHVDisconnect:
		if !h.dropActive(n, q) {
			return
		}
		h.addPassive(n, q, nil)
		if len(m.View) == 1 { // q split this link: link to its asker instead
			if p := m.View[0].ID; p != h.self && !hasSorted(h.active, p) {
				h.addActive(n, p)
				n.send(Message{Kind: KindHVNeighbor, To: p, Round: hvPrioHigh})
				return
			}
		}
		if h.mayAsk(n) {
			h.promote(n) // a passive peer in its place
		}
	case KindHVPing:
		h.answerLink(n, q)
	case KindHVShuffle:
		origin, ttl := m.View[0].ID, m.View[0].Age-1
		if origin == h.self {
			return
		}
		if ttl > 0 && len(h.active) > 1 {
			if next, ok := n.randomOf(h.active, q, origin); ok {
				view := slices.Clone(m.View)
				view[0].Age = ttl
				n.send(Message{Kind: KindHVShuffle, To: next, View: view})
				return
			}
		}
		got := make([]PeerID, 0, len(m.View))
		for _, d := range m.View {
			got = append(got, d.ID)
		}
		reply := n.sample(h.passive, len(got), got...)
		n.send(Message{Kind: KindHVShuffleReply, To: origin, View: descriptors(reply)})
		prefer := slices.Clone(reply)
		for _, p := range got {
			prefer = h.addPassive(n, p, prefer)
		}
	case KindHVShuffleReply:
		prefer := h.shuffled
		for _, d := range m.View {
			prefer = h.addPassive(n, d.ID, prefer)
		}
		h.shuffled = nil
	}
}

// split makes room in a full view for q, whose own view (its
// neighbours: has) is below half: a random neighbour other than q and
// not among q's is dropped and told to link to q instead (a disconnect
// naming q), so that it keeps its number of links. When every neighbour
// is q's already nothing is dropped, and q's request is refused.
func (h *hyparview) split(n *Core, q PeerID, has []Descriptor) {
	d, ok := n.randomOf(h.active, append(ids(has), q)...)
	if !ok {
		return
	}
	h.dropActive(n, d)
	n.send(Message{Kind: KindHVDisconnect, To: d, View: []Descriptor{{ID: q}}})
	h.addPassive(n, d, nil)
}

// answerLink answers a peer that holds a link to this node (its ping, or
// a protocol message, which goes to active peers only) when this node
// holds none to it: take the link up if there is room, else tell the
// peer to drop it.
func (h *hyparview) answerLink(n *Core, q PeerID) {
	if hasSorted(h.active, q) {
		return
	}
	if len(h.active) < h.activeSize {
		h.addActive(n, q)
		n.send(Message{Kind: KindHVNeighborReply, To: q, Round: 1})
		return
	}
	n.send(Message{Kind: KindHVDisconnect, To: q})
}

// stray answers a protocol message from a peer outside the active view
// as its ping (answerLink), at most once a period per peer, for the
// messages already on their way. Without it a link one side dropped
// (its disconnect lost) would last as long as the other kept sending
// models over it, for only a silent link is pinged.
func (h *hyparview) stray(n *Core, q PeerID) {
	if q == "" || hasSorted(h.active, q) || h.strays[q] {
		return
	}
	if h.strays == nil {
		h.strays = map[PeerID]bool{}
	}
	h.strays[q] = true
	h.answerLink(n, q)
}
