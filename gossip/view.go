package gossip

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"time"
)

// view is a peer-sampling view refreshed by Cyclon shuffles (Voulgaris,
// Gavidia & van Steen 2005): every Δ a node ages its entries, contacts the
// oldest, and swaps a random subset of the others, with a fresh
// descriptor of itself, for a random subset of that peer's view; the
// answer takes the contacted entry's place first. It lets random-walk
// gossip pick random peers without global membership.
//
// Freshness is an age that every holder increments each period, not a
// timestamp: daemons' clocks start at their own start and cannot be
// compared, and a node that looked old for that reason would drop out of
// every view and never receive a model.
//
// Entries move rather than being copied, and each node puts itself into
// one view per period while the peer it contacts loses one entry of
// itself, so every node's in-degree is pulled towards the view size. The
// first policy here (Newscast: send the whole view, keep the youngest of
// the union) copied popular descriptors and let others drift to none: at
// 3,000 peers after 20 rounds 8% of the peers were in no view and some
// never received a model (TestViewInDegree, docs/explanation/simulation.md). Contacting the
// oldest entry also heals: a dead peer's entry is the one that ages, and
// one that has not answered by the next shuffle is dropped. Unlike
// Cyclon, the contacted entry stays until the answer replaces it (only
// when the view is full), so that the views of a handful of daemons never
// run empty.
type view struct {
	self    PeerID
	size    int
	entries []Descriptor // sorted by ID
	// keys holds each entry's idKey, in the same order: the searches
	// compare them first, and strings only where they tie.
	keys    []uint64
	selfKey uint64
	next    time.Duration
	started bool
	// pushed is what the last shuffle sent, the contacted peer first,
	// which its reply replaces; awaiting is the contacted peer until it
	// answers.
	pushed   []keyed
	awaiting PeerID
}

func newView(self PeerID, size int) *view { return &view{self: self, size: size, selfKey: idKey(self)} }

// shuffleLen is how many entries a shuffle moves each way.
func (v *view) shuffleLen() int { return max(1, v.size/2) }

// seed adds bootstrap peers not yet in the view, while there is room.
func (v *view) seed(peers []PeerID) {
	add := make([]Descriptor, 0, len(peers))
	for _, p := range peers {
		add = append(add, Descriptor{ID: p})
	}
	v.merge(add, nil)
}

// random returns a uniformly chosen view member.
func (v *view) random(rng *rand.Rand) (PeerID, bool) {
	if len(v.entries) == 0 {
		return "", false
	}
	return v.entries[rng.IntN(len(v.entries))].ID, true
}

// tick starts a shuffle every Δ: the oldest entry (ties at random) is
// taken out and sent this node's fresh descriptor and shuffleLen−1 random
// others.
func (v *view) tick(n *Core) {
	if !v.started {
		v.started = true
		v.next = n.firstWake()
	}
	if n.now < v.next {
		return
	}
	v.next = n.now + n.jittered()
	if v.awaiting != "" { // no answer within a period: dead, gone or lossy
		if i, ok := v.find(v.awaiting); ok {
			v.entries = slices.Delete(v.entries, i, i+1)
			v.keys = slices.Delete(v.keys, i, i+1)
		}
		v.awaiting = ""
	}
	for i := range v.entries {
		v.entries[i].Age++
	}
	if len(v.entries) == 0 {
		return
	}
	oldest, ties := 0, 1
	for i := 1; i < len(v.entries); i++ {
		switch a, o := v.entries[i].Age, v.entries[oldest].Age; {
		case a > o:
			oldest, ties = i, 1
		case a == o:
			ties++
			if n.rng.IntN(ties) == 0 {
				oldest = i
			}
		}
	}
	target := v.entries[oldest].ID
	sent, pushed := v.pick(len(v.entries)-1, v.shuffleLen()-1, oldest, append(make([]keyed, 0, v.shuffleLen()), keyed{target, v.keys[oldest]}), n.rng)
	v.pushed, v.awaiting = pushed, target
	n.send(Message{Kind: KindViewPush, To: target, View: append(sent, Descriptor{ID: v.self})})
}

// pick returns k random entries (all if fewer) of n, in random order:
// rng.Perm(n)'s first k. The n are the view's entries, or, with skip ≥
// 0, the entries but the one at skip (index i is entry i, or i+1 from
// skip on). It appends their IDs and keys to ids. The entries' slice has
// room for one more (the sender's own descriptor).
func (v *view) pick(n, k, skip int, ids []keyed, rng *rand.Rand) ([]Descriptor, []keyed) {
	var buf [32]int
	order := permute(buf[:0], n, rng)
	k = min(k, n)
	sent := make([]Descriptor, k, k+1)
	for j, i := range order[:k] {
		if skip >= 0 && i >= skip {
			i++
		}
		sent[j] = v.entries[i]
		ids = append(ids, keyed{sent[j].ID, v.keys[i]})
	}
	return sent, ids
}

// permute appends to p a random permutation of 0…n−1 and returns it:
// rng.Perm(n)'s, from the same draws, without allocating where p has
// room (a view's entries).
func permute(p []int, n int, rng *rand.Rand) []int {
	for i := range n {
		p = append(p, i)
	}
	q := p[len(p)-n:]
	for i := n - 1; i > 0; i-- { // rand.Shuffle's Fisher–Yates
		j := int(rng.Uint64N(uint64(i + 1)))
		q[i], q[j] = q[j], q[i]
	}
	return p
}

// ids returns the peers ds names, in order.
func ids(ds []Descriptor) []PeerID {
	out := make([]PeerID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// descriptors returns a view entry of age 0 for each of ps, in order.
func descriptors(ps []PeerID) []Descriptor {
	out := make([]Descriptor, len(ps))
	for i, p := range ps {
		out[i] = Descriptor{ID: p}
	}
	return out
}

func (v *view) step(n *Core, m *Message) {
	switch m.Kind {
	case KindViewPush:
		var idBuf [16]keyed
		sent, sentIDs := v.pick(len(v.entries), v.shuffleLen(), -1, idBuf[:0], n.rng)
		n.send(Message{Kind: KindViewReply, To: m.From, View: sent})
		v.merge(m.View, sentIDs)
	case KindViewReply:
		if m.From == v.awaiting {
			v.awaiting = ""
		}
		v.merge(m.View, v.pushed)
		v.pushed = nil
	}
}

// merge takes in received entries, in order: this node, empty IDs and
// negative ages are dropped; a peer already in the view keeps the younger
// age; a new one fills a free slot, or else takes the place of an entry
// this node sent in the same shuffle (which now lives in the other view),
// or else is dropped.
func (v *view) merge(entries []Descriptor, sent []keyed) {
	for _, d := range entries {
		if d.ID == "" || d.Age < 0 {
			continue
		}
		k := idKey(d.ID)
		if k == v.selfKey && d.ID == v.self {
			continue
		}
		i, ok := v.findKey(d.ID, k)
		if ok {
			v.entries[i].Age = min(v.entries[i].Age, d.Age)
			continue
		}
		if len(v.entries) >= v.size {
			j := -1
			for len(sent) > 0 && j < 0 {
				s := sent[0]
				sent = sent[1:]
				if k, ok := v.findKey(s.id, s.key); ok {
					j = k
				}
			}
			if j < 0 {
				continue
			}
			// d takes entry j's place, the entries between moving by one
			// to keep the order: what deleting j, then inserting d where
			// it sorts, does.
			if j < i {
				i--
				copy(v.entries[j:i], v.entries[j+1:i+1])
				copy(v.keys[j:i], v.keys[j+1:i+1])
			} else {
				copy(v.entries[i+1:j+1], v.entries[i:j])
				copy(v.keys[i+1:j+1], v.keys[i:j])
			}
			v.entries[i], v.keys[i] = d, k
			continue
		}
		v.entries = slices.Insert(v.entries, i, d)
		v.keys = slices.Insert(v.keys, i, k)
	}
}

// find returns where id is in the entries, which stay sorted by ID, or
// where it would be inserted (slices.BinarySearch's answer, without its
// three-way comparisons).
func (v *view) find(id PeerID) (int, bool) { return v.findKey(id, idKey(id)) }

// findKey is find of an ID whose idKey is k. The keys order the entries
// as their IDs do wherever they differ (an ID's key is its first 8 bytes,
// big-endian, padded with zeros), so the entries whose keys are below k
// come first, counted without a branch to mispredict (a view is a few
// dozen entries), and the IDs are compared only among those whose keys
// tie with k.
func (v *view) findKey(id PeerID, k uint64) (int, bool) {
	i := 0
	for _, km := range v.keys {
		if km < k {
			i++
		}
	}
	for ; i < len(v.keys) && v.keys[i] == k; i++ {
		if e := v.entries[i].ID; e >= id {
			return i, e == id
		}
	}
	return i, false
}

// idKey is id's first 8 bytes as a big-endian number, padded with
// zeros: if a < b, idKey(a) ≤ idKey(b).
func idKey(id PeerID) uint64 {
	if len(id) < 8 {
		var b [8]byte
		copy(b[:], id)
		return binary.BigEndian.Uint64(b[:])
	}
	return uint64(id[0])<<56 | uint64(id[1])<<48 | uint64(id[2])<<40 | uint64(id[3])<<32 |
		uint64(id[4])<<24 | uint64(id[5])<<16 | uint64(id[6])<<8 | uint64(id[7])
}

// keyed is a view entry's ID with its idKey, which a shuffle keeps for
// the IDs it sent, so that finding them again hashes nothing.
type keyed struct {
	id  PeerID
	key uint64
}

// ViewMembers returns the IDs in the node's view, sorted: Cyclon's, or
// HyParView's active view.
func (n *Core) ViewMembers() []PeerID {
	if n.hvOn() {
		return slices.Clone(n.hv.active)
	}
	return ids(n.view.entries)
}

// PassiveMembers returns HyParView's passive view, sorted (nil under
// other samplings).
func (n *Core) PassiveMembers() []PeerID {
	if n.hvOn() {
		return slices.Clone(n.hv.passive)
	}
	return nil
}
