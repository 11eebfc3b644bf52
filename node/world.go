package node

import (
	"errors"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/peer"
)

// world is the daemon's side of its peer driver: messages go to the
// sender workers and out through the transport, training to the trainer
// worker, commits to the API and the checkpoint writer. Its methods run on
// the core goroutine.
type world Node

var _ peer.World = (*world)(nil)

func (w *world) node() *Node { return (*Node)(w) }

func (w *world) Send(m *gossip.Message) {
	n := w.node()
	if !n.mayGossip(m) {
		n.withhold(m)
		return
	}
	// The transport encodes the message as it writes it: the model is not
	// copied again (the core gave the message its own copy).
	select {
	case n.sendCh <- outgoing{to: m.To, msg: m}:
	default:
		n.met.sendErrors.Inc()
		n.log.Debug("send queue full: dropped a message", "to", m.To)
	}
}

func (w *world) Train(req *gossip.TrainRequest) {
	w.trainCh <- req // the core has at most one request out
}

func (w *world) Commit(c gossip.Commit) {
	n := w.node()
	n.publish()
	n.met.updates.Inc()
	if c.Updates-n.lastCkptUpdates >= uint64(n.cfg.CheckpointEvery) {
		n.checkpoint("periodic")
	}
}

func (w *world) SaveAccounts(a gossip.Accounts) {
	n := w.node()
	if n.cfg.Store == nil {
		return
	}
	if err := n.cfg.Store.SaveAccounts(n.job, a); err != nil {
		n.log.Error("saving push-sum accounts failed: a crash now may count shares twice", "err", err)
	}
}

func (w *world) Reject(reason string, from gossip.PeerID, err error) {
	w.node().reject(reason, from, err)
}

func (w *world) Halt(err error) {
	n := w.node()
	if errors.Is(err, peer.ErrBudgetSpent) {
		n.log.Warn("privacy budget spent: no more training or sharing", "err", err, "budget", n.cfg.DP.Epsilon)
	} else {
		n.log.Error("halting", "err", err)
	}
	n.mu.Lock()
	n.status.DPHalted = true
	n.mu.Unlock()
}
