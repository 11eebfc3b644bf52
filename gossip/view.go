package gossip

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"
)

// view is a Newscast peer-sampling view (Jelasity et al. 2007): a small set of
// descriptors refreshed by swapping views with a random member every Δ and
// keeping the freshest entries. Freshness is an age that every holder
// increments each period (as in Cyclon), not a timestamp: daemons' clocks
// start at their own start and cannot be compared, and a node that looked
// old for that reason would drop out of every view and never receive a
// model. It lets random-walk gossip pick random peers without global
// membership.
type view struct {
	self    PeerID
	size    int
	entries []Descriptor // sorted by ID
	next    time.Duration
	started bool
}

func newView(self PeerID, size int) *view { return &view{self: self, size: size} }

// seed adds bootstrap peers not yet in the view.
func (v *view) seed(peers []PeerID, rng *rand.Rand) {
	add := make([]Descriptor, 0, len(peers))
	for _, p := range peers {
		add = append(add, Descriptor{ID: p})
	}
	v.merge(add, rng)
}

// random returns a uniformly chosen view member.
func (v *view) random(rng *rand.Rand) (PeerID, bool) {
	if len(v.entries) == 0 {
		return "", false
	}
	return v.entries[rng.IntN(len(v.entries))].ID, true
}

// tick starts a view exchange every Δ.
func (v *view) tick(n *Node) {
	if !v.started {
		v.started = true
		v.next = n.firstWake()
	}
	if n.now < v.next {
		return
	}
	v.next = n.now + n.jittered()
	for i := range v.entries {
		v.entries[i].Age++
	}
	if p, ok := v.random(n.rng); ok {
		n.send(Message{Kind: KindViewPush, To: p, View: v.outgoing()})
	}
}

// outgoing is the view plus a fresh (age 0) descriptor of this node.
func (v *view) outgoing() []Descriptor {
	out := make([]Descriptor, 0, len(v.entries)+1)
	out = append(out, v.entries...)
	return append(out, Descriptor{ID: v.self})
}

func (v *view) step(n *Node, m *Message) {
	if m.Kind == KindViewPush {
		n.send(Message{Kind: KindViewReply, To: m.From, View: v.outgoing()})
	}
	v.merge(m.View, n.rng)
}

// merge unites the view with entries, keeps the youngest descriptor of each
// peer, drops this node and negative ages, and keeps the size youngest.
// Ages tie often, so ties are broken at random (with the node's rng):
// breaking them by ID would collapse every view onto the lowest IDs.
func (v *view) merge(entries []Descriptor, rng *rand.Rand) {
	all := append(slices.Clone(v.entries), entries...)
	all = slices.DeleteFunc(all, func(d Descriptor) bool { return d.ID == v.self || d.ID == "" || d.Age < 0 })
	slices.SortFunc(all, func(a, b Descriptor) int {
		if c := cmp.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return cmp.Compare(a.Age, b.Age) // youngest first
	})
	all = slices.CompactFunc(all, func(a, b Descriptor) bool { return a.ID == b.ID })
	if len(all) > v.size {
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		slices.SortStableFunc(all, func(a, b Descriptor) int { return cmp.Compare(a.Age, b.Age) })
		all = all[:v.size]
		slices.SortFunc(all, func(a, b Descriptor) int { return cmp.Compare(a.ID, b.ID) })
	}
	v.entries = all
}

// Members returns the IDs in the view, sorted.
func (n *Node) ViewMembers() []PeerID {
	out := make([]PeerID, len(n.view.entries))
	for i, d := range n.view.entries {
		out[i] = d.ID
	}
	return out
}
