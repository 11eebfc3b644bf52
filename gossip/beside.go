package gossip

import "time"

// What a driver may reorder. A simulator hands a node the result of its
// training request later than it arrives where the node says nothing
// would change: the result's hand-over sends nothing (QuietTrainDone),
// and the events stepped before it touch nothing the hand-over does
// (StepsBeside, TicksBeside). These are pure queries of the node's state.

// QuietTrainDone reports whether handing the node the result of its
// outstanding training request now would make it send nothing: the
// result then changes this node alone (its model, its next wake, its
// next request), and a driver may hand it over later, as long as nothing
// reaches the node in between but what StepsBeside and TicksBeside
// allow. The simulator trains such peers on every
// core while other peers' events go on. It is false for protocols that
// answer an update with messages, and whenever no request is out.
func (n *Core) QuietTrainDone() bool {
	return n.training && !n.halted && n.proto.quietTrainDone(n)
}

// StepsBeside reports whether a message of kind k may be stepped (Step),
// or reported undelivered (Undelivered), before the node's outstanding
// training result is handed over, where the hand-over is quiet
// (QuietTrainDone): the two touch nothing in common, so either order
// leaves the node the same and has it send the same messages. It holds
// for Cyclon's shuffles (KindViewPush, KindViewReply), which read and
// write the view alone, where the protocol's hand-over reads and writes
// neither the view nor the node's randomness and asks for no training (a
// random walk's, with no model waiting). A simulator that holds quiet
// results back need not hand one over for a shuffle, which is most of
// what reaches a random-walk peer.
func (n *Core) StepsBeside(k Kind) bool {
	return (k == KindViewPush || k == KindViewReply) && n.apart()
}

// TicksBeside is StepsBeside for Tick(now): it holds where at now only
// Cyclon's shuffle is due, not the protocol's own tick (nor a join's).
// The hand-over's traces then carry the tick's later time.
func (n *Core) TicksBeside(now time.Duration) bool {
	return n.viewOn() && n.started && !n.joining && max(now, n.now) < n.proto.wake(n) && n.apart()
}

// apart reports whether handing the node its outstanding training result
// is quiet and touches neither the view nor the node's randomness.
func (n *Core) apart() bool {
	return !n.hvOn() && n.QuietTrainDone() && n.proto.trainDoneApart(n)
}
