package gossip

import (
	"slices"
	"time"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
)

// adpsgd is asynchronous D-PSGD (Lian et al. 2018): every Δ a node computes a
// gradient and averages pairwise with one random neighbour,
// x_i, x_j ← (x_i + x_j)/2, then applies its gradient. The active node sends
// its parameters; the passive one answers at once with its own and averages;
// neither waits for the other, so no cycle of waits, no deadlock. With
// top-k or rand-k the pair averages over public copies (links.go).
type adpsgd struct {
	base
	next  time.Duration
	outer outer     // with Config.Outer (outer.go)
	from  []float32 // where the running local steps started
	links *links    // with top-k or rand-k (links.go)
}

func newADPSGD(cfg *Config) *adpsgd {
	a := &adpsgd{outer: outer{cfg: &cfg.Outer}}
	if cfg.Sparse.Kind != compress.None {
		a.links = newLinks(cfg, true)
	}
	return a
}

func (a *adpsgd) start(n *Core) {
	a.next = n.firstWake()
}

func (a *adpsgd) wake(n *Core) time.Duration { return a.next }

func (a *adpsgd) tick(n *Core) {
	if n.now < a.next {
		return
	}
	a.next = n.now + n.jittered()
	if len(n.cfg.Neighbors) > 0 { // none: alone for now, train only
		nb := n.cfg.Neighbors[n.rng.IntN(len(n.cfg.Neighbors))].ID
		if a.links != nil {
			n.send(a.links.message(n, KindAvgRequest, nb, n.params))
		} else {
			n.send(ownModel(n, KindAvgRequest, nb))
		}
	}
	switch {
	case n.training:
	case a.outer.cfg.Enabled():
		a.from = slices.Clone(n.params)
		n.train(OpUpdate, a.from, a.outer.cfg.Steps, nil)
	case n.cfg.HandsMixes():
		n.trainShared(OpGradient, n.params) // never written
	default:
		n.train(OpGradient, n.params, 0, nil)
	}
}

func (a *adpsgd) step(n *Core, m *Message) {
	if a.links != nil {
		// Compressed links keep two copies of the model per peer: only
		// with neighbours, so that no one grows this node's memory.
		if !isNeighbor(n.cfg.Neighbors, m.From) {
			if n.cfg.Topology != "" || n.hvOn() { // its view of the roster differs from ours for a moment
				n.trace("not-neighbour", m.From, "a compressed exchange from a peer outside this view's neighbours", 0)
				return
			}
			n.drop(DropNotNeighbor, m.From, "a compressed exchange from a peer that is not a neighbour")
			return
		}
		theirs := a.links.receive(n, m)
		if m.Kind == KindAvgRequest {
			n.send(a.links.message(n, KindAvgReply, m.From, n.params))
		}
		if theirs != nil {
			n.params = a.links.average(n, n.params, theirs, m.From)
			n.commit()
		}
		return
	}
	if m.Kind == KindAvgRequest {
		n.send(ownModel(n, KindAvgReply, m.From))
	}
	if n.cfg.HandsMixes() {
		n.params = n.blended(n.params, m.Params, 0.5)
		n.keep() // the blend reads the message's model later
	} else {
		merge.Interpolate(n.params, n.params, m.Params, 0.5)
	}
	n.commit()
}

// ownModel is a message of kind to peer to with the node's model: the
// model itself where the core hands its mixes (each change is a new
// vector), with the sum its receiver checks; else a copy.
func ownModel(n *Core, kind Kind, to PeerID) Message {
	if n.cfg.HandsMixes() {
		return Message{Kind: kind, To: to, Params: n.params, sum: n.laterSum(n.params)}
	}
	return Message{Kind: kind, To: to, Params: slices.Clone(n.params)}
}

func (a *adpsgd) trainDone(n *Core, r *TrainResult) {
	if a.outer.cfg.Enabled() {
		if n.badVector(r, r.Params, "parameter vector") {
			return
		}
		a.outer.applyOwn(n.params, a.from, r.Params, 1)
	} else {
		if n.badVector(r, r.Grad, "gradient") {
			return
		}
		n.add(-float32(n.cfg.LR), r.Grad)
	}
	n.age += float64(r.Examples)
	n.round++
	n.commit()
}

// rewire forgets the compressed links to former neighbours.
func (a *adpsgd) rewire(n *Core) {
	if a.links != nil {
		a.links.prune(n.cfg.Neighbors)
	}
}

func (a *adpsgd) snapshot(s *State)      { a.outer.snapshot(s) }
func (a *adpsgd) restore(s *State) error { return a.outer.restore(s) }
