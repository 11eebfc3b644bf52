package gossip

import (
	"slices"
	"time"

	"github.com/gossipd/gossipd/merge"
)

// hyparview is HyParView membership (Leitão, Pereira & Rodrigues, "HyParView:
// a membership protocol for reliable gossip-based broadcast", DSN 2007):
// each node keeps a small active view, the peers it gossips with and, in
// the daemon, holds connections to, and a larger passive view of peers it
// knows, kept fresh by periodic shuffles, from which it replaces an active
// peer that fails. Active links are symmetric: a node adds a peer only
// when that peer adds it too (join, forward join, neighbour request), and
// drops one with a disconnect the other side obeys. The number of peers a
// node gossips with is therefore bounded by the active size whatever the
// size of the job, and D-PSGD can mix over the active view as over an
// undirected graph.
//
// Failure detection is the shell's: a message the shell could not deliver
// (Undelivered) removes its addressee from both views, and a node
// promotes a passive peer in its place. So that a dead neighbour is found
// within a bound even when nothing else goes to it, a node sends a ping
// to each active peer it has sent nothing to for pingEvery periods; a ping
// from a peer that is not in the receiver's active view is answered with
// a disconnect (or, when there is room, the link is taken up), which
// repairs links that one side dropped without the other hearing.
//
// A view below half its size (fewer than activeSize/2 neighbours, but
// not empty) asks every period, without backing off, at a third
// priority, which a full view does not refuse: it splits one of its
// links to take the asker in, dropping a random neighbour that is not
// already the asker's (the request lists the asker's neighbours) and
// telling it, with a disconnect that names the asker, to link to the
// asker instead. The asker gains two links and nobody loses one (unless
// messages cross), so a member left with few neighbours in a fleet whose
// views are all full (the paper's protocol can leave it there: every
// passive peer it asks is full and refuses) fills to half its view
// within a few periods. The split neighbour asks the asker at high
// priority, so that link cannot be refused either.
//
// Messages (kinds, and what they carry):
//
//	hv-join            a new node asks a contact to take it in
//	hv-forward-join    View = [{joiner, ttl}]: the join walks the active views
//	hv-neighbor        Round = 1: high priority (the asker has no neighbour);
//	                   Round = 2, View = the asker's neighbours: its view
//	                   is below half (hvPrioFew)
//	hv-neighbor-reply  Round = 1: accepted
//	hv-disconnect      the link is dropped; View = [{p}]: link to p instead
//	hv-shuffle         View = [{origin, ttl}, entries…]: walks, then answered
//	hv-shuffle-reply   View = entries, to the origin
//	hv-ping            nothing: keeps the link checked
type hyparview struct {
	self                    PeerID
	activeSize, passiveSize int
	active, passive         []PeerID // sorted
	contacts                []PeerID // SetPeers: where to join, sorted
	started                 bool
	next                    time.Duration // next period
	// joined says a join went out; joinAt is when to try again while the
	// active view stays empty.
	joined bool
	joinAt time.Duration
	// asked is the passive peer asked to become a neighbour, awaiting its
	// reply since askedAt.
	asked   PeerID
	askedAt time.Duration
	// backoff is how many periods a view that is not empty waits, after
	// a refused neighbour request, before it asks again (at promoteAt):
	// 2, doubling with each refusal in a row up to promoteBackoff, so
	// that in a fleet whose views are all nearly full the asking does
	// not open a connection every period on every member.
	backoff   int
	promoteAt time.Duration
	// shuffled is what the last shuffle sent, evicted first by its reply;
	// periods counts the periods, for shuffleEvery.
	shuffled []PeerID
	periods  int
	lastSent map[PeerID]time.Duration // the last message to each active peer
	// strays are the peers outside the active view answered this period
	// (stray).
	strays map[PeerID]bool
}

// HyParView's walk lengths and shuffle sizes (the paper's values for
// 10,000 nodes).
const (
	// hvActiveWalk is ARWL: how far a forward join or a shuffle walks.
	hvActiveWalk = 6
	// hvPassiveWalk is PRWL: where on its walk a forward join also enters
	// passive views.
	hvPassiveWalk = 3
	// hvShuffleActive and hvShufflePassive are how many active and passive
	// entries a shuffle carries, besides its origin.
	hvShuffleActive, hvShufflePassive = 3, 4
	// pingEvery is how many periods an active link may carry nothing
	// before a ping checks it.
	pingEvery = 2
	// shuffleEvery is how many periods apart a node shuffles: a shuffle
	// walks up to hvActiveWalk hops, and passive views need not be
	// fresher than this to replace failed neighbours.
	shuffleEvery = 4
	// promoteBackoff is the most periods a view with room but at least
	// one neighbour waits after refusals before it asks again.
	promoteBackoff = 16
)

// Neighbour request priorities (an hv-neighbor message's Round).
const (
	hvPrioLow  = 0 // taken into a view with room (or that holds the asker)
	hvPrioHigh = 1 // the asker has no neighbour: always taken
	hvPrioFew  = 2 // the asker's view is below half: a full view splits a link
)

// few reports whether the active view is below half its size (fewer
// than activeSize/2 neighbours) but not empty: such a view asks every
// period, at hvPrioFew.
func (h *hyparview) few() bool { return len(h.active) > 0 && len(h.active) < h.activeSize/2 }

// mayAsk reports whether the active view has room and may ask a passive
// peer now: at once when it is empty or below half, else once the
// backoff from refusals has run out.
func (h *hyparview) mayAsk(n *Core) bool {
	return len(h.active) < h.activeSize && (len(h.active) == 0 || h.few() || n.now >= h.promoteAt)
}

// hvOn reports whether the node runs HyParView.
func (n *Core) hvOn() bool {
	return (n.def.view || n.def.overView) && n.cfg.Sampling == SamplingHyParView
}

// UsesView reports whether the core samples its peers from a partial view
// (ViewMembers: Cyclon's, or HyParView's active view) rather than from
// every peer it knows.
func (n *Core) UsesView() bool { return n.viewOn() || n.hvOn() }

// viewChanged is called when HyParView's active view changes: a
// protocol that mixes over a graph (D-PSGD, AD-PSGD) takes the view as
// its neighbours, with Metropolis–Hastings weights that follow each
// neighbour's advertised degree once it is heard (this node's own degree
// until then), and rewires at once. Active links are symmetric, so the
// mixing is too, between neighbours that agree on each other's degree.
func (n *Core) viewChanged() {
	if !n.def.overView {
		return
	}
	view := n.hv.active
	nbs := make([]Neighbor, len(view))
	self := 1.0
	for i, p := range view {
		w := merge.MetropolisHastings(len(view), len(view))
		nbs[i], self = Neighbor{ID: p, Weight: w}, self-w
	}
	n.cfg.Neighbors, n.cfg.SelfWeight = nbs, self
	if r, ok := n.proto.(rewirer); ok && n.started {
		r.rewire(n)
	}
}

func newHyParView(self PeerID, active, passive int) *hyparview {
	return &hyparview{self: self, activeSize: active, passiveSize: passive, lastSent: map[PeerID]time.Duration{}}
}

// setContacts records where to join (SetPeers); the contacts also enter
// the passive view, as peers known to exist, as far as it has room: a
// random sample of them when they are more (a daemon's contacts are
// every member heard announcing, thousands in a large job), so that
// what shuffles brought in is not evicted for them.
func (h *hyparview) setContacts(n *Core, peers []PeerID) {
	h.contacts = slices.DeleteFunc(slices.Clone(peers), func(p PeerID) bool { return p == h.self })
	add := h.contacts
	if room := h.passiveSize - len(h.passive); len(add) > room {
		add = n.sample(h.contacts, max(room, 0))
	}
	for _, p := range add {
		h.addPassive(n, p, nil)
	}
}

// addActive takes p into the active view; a full view first drops a
// random member, which is told (disconnect) and moves to the passive
// view.
func (h *hyparview) addActive(n *Core, p PeerID) {
	if p == h.self || p == "" || p == Broadcast || hasSorted(h.active, p) {
		return
	}
	if len(h.active) >= h.activeSize {
		if d, ok := n.randomOf(h.active, p); ok {
			h.dropActive(n, d)
			n.send(Message{Kind: KindHVDisconnect, To: d})
			h.addPassive(n, d, nil)
		}
	}
	h.passive, _ = removeSorted(h.passive, p)
	h.active = insertSorted(h.active, p)
	h.lastSent[p] = n.now
	if p == h.asked {
		h.asked = ""
	}
	n.trace("neighbor-up", p, "", float64(len(h.active)))
	n.viewChanged()
}

// dropActive removes p from the active view (nothing is sent).
func (h *hyparview) dropActive(n *Core, p PeerID) bool {
	var ok bool
	if h.active, ok = removeSorted(h.active, p); ok {
		delete(h.lastSent, p)
		n.trace("neighbor-down", p, "", float64(len(h.active)))
		n.viewChanged()
	}
	return ok
}

// addPassive takes p into the passive view; a full view evicts one of
// prefer first (what this node just sent away), else a random entry.
func (h *hyparview) addPassive(n *Core, p PeerID, prefer []PeerID) []PeerID {
	if p == h.self || p == "" || p == Broadcast || hasSorted(h.active, p) || hasSorted(h.passive, p) {
		return prefer
	}
	if len(h.passive) >= h.passiveSize {
		evicted := false
		for len(prefer) > 0 && !evicted {
			var ok bool
			h.passive, ok = removeSorted(h.passive, prefer[0])
			prefer, evicted = prefer[1:], ok
		}
		if !evicted {
			d, _ := n.randomOf(h.passive)
			h.passive, _ = removeSorted(h.passive, d)
		}
	}
	h.passive = insertSorted(h.passive, p)
	return prefer
}

// tick runs once per period: an unanswered neighbour request gives up on
// its peer, silent links are pinged, a view with room promotes a passive
// peer (backing off after refusals unless the view is empty; or joins
// again through a contact when it knows nobody), and
// every shuffleEvery periods a shuffle goes out.
func (h *hyparview) tick(n *Core) {
	if !h.started {
		h.started = true
		h.next = n.firstWake()
		h.joinAt = h.next
	}
	if n.now < h.next {
		return
	}
	h.next = n.now + n.jittered()
	clear(h.strays)
	if h.asked != "" && n.now-h.askedAt >= 2*n.cfg.Delta { // a dial may take a while
		h.passive, _ = removeSorted(h.passive, h.asked) // no answer: gone
		h.asked = ""
	}
	for _, p := range h.active {
		if n.now-h.lastSent[p] >= pingEvery*n.cfg.Delta {
			n.send(Message{Kind: KindHVPing, To: p})
		}
	}
	switch {
	case len(h.active) == 0 && !h.joined:
		h.join(n) // the first time: the join spreads this node
	case len(h.active) == 0 && len(h.passive) == 0 && n.now >= h.joinAt:
		h.join(n) // knows nobody any more: join again
	case h.mayAsk(n):
		h.promote(n)
	}
	if h.periods%shuffleEvery == 0 {
		h.shuffle(n)
	}
	h.periods++
}

// join sends a join to a random contact, and tries again (another, at
// random) two periods later if the active view is still empty.
func (h *hyparview) join(n *Core) {
	c, ok := n.randomOf(h.contacts)
	if !ok {
		return
	}
	h.joined, h.joinAt = true, n.now+2*n.cfg.Delta
	n.send(Message{Kind: KindHVJoin, To: c})
}

// promote asks a random passive peer to become a neighbour, at high
// priority when this node has none, and at hvPrioFew when its view is
// below half.
func (h *hyparview) promote(n *Core) {
	if h.asked != "" {
		return
	}
	p, ok := n.randomOf(h.passive)
	if !ok {
		return
	}
	var prio uint64 = hvPrioLow
	var view []Descriptor
	switch {
	case len(h.active) == 0:
		prio = hvPrioHigh
	case h.few():
		prio, view = hvPrioFew, descriptors(h.active)
	}
	h.asked, h.askedAt = p, n.now
	n.send(Message{Kind: KindHVNeighbor, To: p, Round: prio, View: view})
}

// shuffle sends this node, a few active and a few passive peers on a
// walk from a random active peer.
func (h *hyparview) shuffle(n *Core) {
	to, ok := n.randomOf(h.active)
	if !ok {
		return
	}
	list := append(n.sample(h.active, hvShuffleActive, to), n.sample(h.passive, hvShufflePassive)...)
	h.shuffled = list
	view := append([]Descriptor{{ID: h.self, Age: hvActiveWalk}}, descriptors(list)...)
	n.send(Message{Kind: KindHVShuffle, To: to, View: view})
}

// sent records a message to an active peer (the ping clock).
func (h *hyparview) sent(n *Core, to PeerID) {
	if _, ok := h.lastSent[to]; ok {
		h.lastSent[to] = n.now
	}
}

// undelivered takes a peer the shell could not reach out of both views
// and promotes a passive peer in its place.
func (h *hyparview) undelivered(n *Core, to PeerID) {
	if to == Broadcast || to == "" {
		return
	}
	h.forget(n, to)
}

// forget takes a peer that is gone out of both views and promotes a
// passive peer in its place.
func (h *hyparview) forget(n *Core, to PeerID) {
	wasActive := h.dropActive(n, to)
	h.passive, _ = removeSorted(h.passive, to)
	if to == h.asked {
		h.asked = ""
	}
	if wasActive {
		h.promote(n)
	}
}

// leave tells every neighbour that this node is going.
func (h *hyparview) leave(n *Core) {
	for _, p := range slices.Clone(h.active) {
		n.send(Message{Kind: KindHVDisconnect, To: p})
		h.dropActive(n, p)
	}
}

// random returns a uniformly chosen active peer.
func (h *hyparview) random(n *Core) (PeerID, bool) { return n.randomOf(h.active) }
