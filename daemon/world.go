package daemon

import (
	"errors"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/peer"
)

// world is the daemon's side of its peer driver: it carries out what the
// peer asks (do): messages go to the sender workers and out through the
// transport, training to the trainer worker, commits to the API and the
// checkpoint writer. Its methods run on the core goroutine.
type world Node

func (w *world) node() *Node { return (*Node)(w) }

// do carries out what the peer asked, in order.
func (w *world) do(ds []peer.Do) {
	for _, d := range ds {
		switch {
		case d.Send != nil:
			w.Send(d.Send, d.Wire)
		case d.Train != nil:
			w.Train(d.Train)
		case d.Commit != nil:
			w.Commit(*d.Commit)
		case d.SaveAccounts != nil:
			w.SaveAccounts(*d.SaveAccounts)
		case d.Reject != nil:
			w.Reject(d.Reject.Reason, d.Reject.From, d.Reject.Err)
		case d.Halt != nil:
			w.Halt(d.Halt)
		}
	}
}

// driver is the daemon's peer: each event it is given, the world
// carries out what the peer asks in return.
type driver struct {
	*peer.Peer
	w *world
}

func (d driver) Tick(now time.Duration)          { d.w.do(d.Peer.Tick(now)) }
func (d driver) SetPeers(ids []gossip.PeerID)    { d.w.do(d.Peer.SetPeers(ids)) }
func (d driver) SetMembers(ms []gossip.Member)   { d.w.do(d.Peer.SetMembers(ms)) }
func (d driver) Undelivered(m *gossip.Message)   { d.w.do(d.Peer.Undelivered(m)) }
func (d driver) Leave()                          { d.w.do(d.Peer.Leave()) }
func (d driver) Depart()                         { d.w.do(d.Peer.Depart()) }
func (d driver) TrainDone(r *gossip.TrainResult) { d.w.do(d.Peer.TrainDone(r)) }

// Receive hands the peer an arriving message (peer.Peer.Receive).
func (d driver) Receive(e peer.Envelope) (stepped, kept bool) {
	r := d.Peer.Receive(e)
	d.w.do(r.Do)
	return r.Stepped, r.Kept
}

func (w *world) Send(m *gossip.Message, wire *peer.Wire) {
	n := w.node()
	o := outgoing{to: m.To, kind: m.Kind, wire: wire, saved: gossip.CompressionSaved(m)}
	if m.Kind == gossip.KindPushSum {
		o.share = m
	}
	if !n.mayGossip(o.to, o.kind) {
		n.withhold(o, &n.roster)
		wire.Release()
		return
	}
	if o.share != nil && n.accountsUnsaved > 0 {
		// Its accounts are not durable: a share sent now could be
		// counted twice after a crash. It goes back to the core, and
		// push-sum sends again once the accounts are written.
		n.giveBack(o)
		wire.Release()
		return
	}
	// The peer has encoded the message (peer.Do.Wire); a sender worker
	// hands the bytes to the transport.
	select {
	case n.sendCh <- o:
	default:
		n.met.sendErrors.Inc()
		n.log.Debug("send queue full: dropped a message", "to", m.To)
		wire.Release()
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
	err := n.cfg.Store.SaveAccounts(n.job, a)
	switch {
	case err != nil:
		n.accountsUnsaved++
		if now := n.cfg.Now(); n.accountsUnsaved == 1 || now.Sub(n.accountsWarned) >= time.Minute {
			n.accountsWarned = now
			n.log.Error("push-sum paused: its accounts cannot be saved, so no share leaves until they are (a crash could count it twice)",
				"store", n.cfg.Store.Dir(), "failures", n.accountsUnsaved, "err", err)
		}
	case n.accountsUnsaved > 0:
		n.log.Info("push-sum resumed: its accounts are saved again", "failed_before", n.accountsUnsaved)
		n.accountsUnsaved = 0
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
