package gossip

import (
	"fmt"
	"slices"
)

// State is what a node must keep across restarts: its model and the
// protocol's progress. The daemon checkpoints it; Config.Resume restores it.
type State struct {
	Params  []float32
	Age     float64
	Round   uint64
	Updates uint64
	// Weight is the push-sum weight (1 for other protocols).
	Weight float64
	// Tokens is the token account balance (random walk).
	Tokens int
	// PartitionAges are the ages of a partitioned model's partitions.
	PartitionAges []float64
	// View is the Newscast view.
	View []Descriptor
	// Links are push-sum's accounts with its peers (running sums).
	Links []Link
	// Momentum is the outer optimizer's momentum (Config.Outer).
	Momentum []float32
	// Residual is what top-k or rand-k has left out of SFB's updates so
	// far (error feedback), to go out with the next ones. (D-PSGD's CHOCO
	// copies are not kept: a checkpoint is older than the steps sent
	// since, which neighbours applied, so a restarted node resends its
	// copy whole instead; choco.go.)
	Residual []float32
}

// Link is push-sum's account with one peer: the running sums of weight
// pushed to and received from it, and the numbers of the last shares.
type Link struct {
	Peer             PeerID
	Sent, Recv       float64
	SeqSent, SeqRecv uint64
}

// Snapshot returns a copy of the node's state.
func (n *Core) Snapshot() State {
	s := State{Params: slices.Clone(n.resolved(n.params)), Age: n.age, Round: n.round, Updates: n.updates, Weight: 1,
		View: slices.Clone(n.view.entries)}
	n.proto.snapshot(&s)
	return s
}

// restore applies a saved state in New.
func (n *Core) restore(s *State) error {
	if len(s.Params) != n.layout.Size {
		return fmt.Errorf("%w: saved state has %d parameters, the job's model %d", ErrConfig, len(s.Params), n.layout.Size)
	}
	if !(s.Weight > 0) {
		return fmt.Errorf("%w: saved push-sum weight %v", ErrConfig, s.Weight)
	}
	n.params = slices.Clone(s.Params)
	n.age, n.round, n.updates = s.Age, s.Round, s.Updates
	n.view.merge(s.View, nil)
	return n.proto.restore(s)
}
