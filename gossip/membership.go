package gossip

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Live membership. A job's roster changes while it runs: peers join, say
// goodbye, or die and are timed out. The shell's membership layer tells
// the core the live members it agrees on (SetMembers); with a Topology,
// dpsgd, adpsgd, pushsum and sfb then build their graph over that sorted
// set and rebuild it whenever the set changes, so every member that sees
// the same set derives the same graph. D-PSGD's Metropolis–Hastings
// weights use each neighbour's advertised degree (carried in its
// parameters), so the mixing stays symmetric and doubly stochastic
// between any two peers that agree on each other's degree, even while
// their views of the roster differ.

// Member is a live member of the job: its ID and its incarnation, which is
// new at each of its starts (0: unknown).
type Member struct {
	ID          PeerID
	Incarnation uint64
}

// SetMembers tells the node the live members of its job (it adds itself).
// With Config.Topology set, a protocol that mixes over a graph rewires at
// once: a neighbour that left is no longer waited for, and a new one is
// mixed with from its first message. A member that left, or restarted as
// a new incarnation, is settled with (push-sum returns the mass of their
// exchanges).
func (n *Core) SetMembers(members []Member) {
	inc := make(map[PeerID]uint64, len(members))
	m := []PeerID{n.cfg.ID}
	for _, x := range members {
		if x.ID != n.cfg.ID {
			m = append(m, x.ID)
			inc[x.ID] = x.Incarnation
		}
	}
	slices.Sort(m)
	m = slices.Compact(m)
	if s, ok := n.proto.(settler); ok {
		s.settle(n, inc)
	}
	if n.membersSet && slices.Equal(m, n.members) {
		return
	}
	if n.hvOn() && n.membersSet {
		// Members that left (goodbye, or timed out by the shell) leave
		// the views; peers not known yet stay (a joiner can reach this
		// node before its first announcement does).
		for _, p := range n.members {
			if _, ok := slices.BinarySearch(m, p); !ok {
				n.hv.forget(n, p)
			}
		}
	}
	n.members, n.membersSet = m, true
	if n.cfg.Topology == "" || !n.def.neighbors || n.hvOn() {
		return // no graph over the members (under HyParView: the view is it)
	}
	nbs, self, err := LiveNeighbors(n.cfg.Protocol, n.cfg.Topology, n.cfg.TopologySeed, m, n.cfg.ID)
	if err != nil {
		n.drop(DropAggregation, "", "topology over the live members: "+err.Error())
		return
	}
	n.cfg.Neighbors, n.cfg.SelfWeight = nbs, self
	n.trace("rewire", "", fmt.Sprintf("%d live members, %d neighbours", len(m), len(nbs)), float64(len(nbs)))
	if r, ok := n.proto.(rewirer); ok {
		r.rewire(n)
	}
}

// Members returns the live members last given to SetMembers, sorted, the
// node included.
func (n *Core) Members() []PeerID { return slices.Clone(n.members) }

// settler is a protocol that keeps accounts with each peer and settles
// them when a peer leaves or restarts (incarnations by live member).
type settler interface {
	settle(n *Core, incarnations map[PeerID]uint64)
}

// rewirer is a protocol whose neighbours change with the live members.
type rewirer interface {
	rewire(n *Core)
}

// LiveNeighbors returns self's neighbours and self-weight in the graph
// spec (ParseTopology) built over the sorted members, self among them:
// what Assign gives for the same graph. Random graphs are drawn from
// seed and the member count, so every member that sees the same set
// draws the same graph. Fewer than two members: no neighbours. A
// regular:K graph that cannot exist on so few members becomes the
// complete graph, or K+1-regular when n·K is odd.
func LiveNeighbors(protocol, spec string, seed uint64, members []PeerID, self PeerID) ([]Neighbor, float64, error) {
	i, ok := slices.BinarySearch(members, self)
	if !ok {
		return nil, 0, fmt.Errorf("%w: %s is not among the members", ErrConfig, self)
	}
	k := len(members)
	if k < 2 {
		return nil, 1, nil
	}
	var g *Graph
	if protocol != SFB {
		var err error
		if g, err = ParseTopology(liveSpec(spec, k), k, rand.New(rand.NewPCG(seed, uint64(k)))); err != nil {
			return nil, 0, err
		}
	}
	nbs, w := Assign(protocol, g, k, i, func(j int) PeerID { return members[j] })
	return nbs, w, nil
}

// liveSpec adapts a regular:K spec to k members.
func liveSpec(spec string, k int) string {
	name, arg, _ := strings.Cut(spec, ":")
	if name != "regular" {
		return spec
	}
	d, err := strconv.Atoi(arg)
	if err != nil {
		return spec // ParseTopology reports it
	}
	if k*d%2 != 0 {
		d++
	}
	if d >= k {
		return "complete"
	}
	return "regular:" + strconv.Itoa(d)
}

// Leave starts the node's departure from its job: it keeps taking what
// arrives but sends no more of its own (push-sum stops pushing; other
// protocols simply go on until Depart). The shell then waits a grace
// period, for shares in flight to land, and calls Depart.
func (n *Core) Leave() {
	if l, ok := n.proto.(leaver); ok && !n.halted {
		l.leave(n)
	}
}

// Depart ends the departure: push-sum hands its weight beyond one unit
// (or its shortfall) to its out-neighbours, so that the weights over the
// members that stay keep summing to their number; then the node halts.
func (n *Core) Depart() {
	if l, ok := n.proto.(leaver); ok && !n.halted && n.started && !n.joining {
		l.depart(n)
	}
	if n.hvOn() && !n.halted {
		n.hv.leave(n) // the neighbours drop their links at once
	}
	n.halted = true
	n.rd.Train = nil
}

// leaver is a protocol with something to settle before it leaves.
type leaver interface {
	leave(n *Core)
	depart(n *Core)
}

// Undelivered tells the node that the shell could not deliver one of its
// messages (the peer was unreachable): push-sum takes the share back, so
// that its weight is not lost.
func (n *Core) Undelivered(m *Message) {
	if n.hvOn() && !n.halted {
		n.hv.undelivered(n, m.To)
	}
	if u, ok := n.proto.(undeliverer); ok && !n.halted {
		u.undelivered(n, m)
	}
}

// undeliverer is a protocol that takes back what could not be delivered.
type undeliverer interface {
	undelivered(n *Core, m *Message)
}
