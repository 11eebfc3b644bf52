package daemon

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/peer"
)

// The daemon's workers: each runs on a goroutine of its own, fed by the
// core goroutine through a channel.

// outgoing is an encoded message for the sender workers.
type outgoing struct {
	to    gossip.PeerID // gossip.Broadcast: every member
	kind  gossip.Kind
	wire  *peer.Wire // the encoding (the peer's), released once written
	saved int        // bytes its compression saved (gossip.CompressionSaved)
	// share is a push-sum share, kept to go back to the core if it cannot
	// be delivered (no weight may be lost); nil for every other kind, so
	// that a queued message holds only its encoding.
	share *gossip.Message
}

// trainLoop runs training requests on the peer's trainer.
func (n *Node) trainLoop() {
	for req := range n.trainCh {
		r, err := n.train(req)
		if err != nil {
			n.log.Error("training failed", "err", err)
			r = &gossip.TrainResult{ID: req.ID}
		}
		n.doneCh <- r
	}
}

// sendLoop writes encoded messages until sendCh closes: the peer
// encoded each as the core handed it over (peer.Do.Wire); here it only
// goes to the transport, which retains no payload once Send returns, and
// its buffer goes back to the pool.
func (n *Node) sendLoop(ctx context.Context) {
	for o := range n.sendCh {
		n.write(ctx, o)
		o.wire.Release()
	}
}

// write sends one message: to its addressee, or to every member.
func (n *Node) write(ctx context.Context, o outgoing) {
	f := transport.Frame{Job: n.job, Kind: uint8(o.kind), Lane: Lane(o.kind), Payload: o.wire.Bytes}
	if o.to != gossip.Broadcast {
		// The addressee may have left the job (died, said goodbye)
		// since the core sent: look again at the latest roster.
		if r := n.sendRoster.Load(); r != nil && !r.allows(o.to, o.kind, n.cfg.Local.IsMember) {
			n.withhold(o, r)
			return
		}
		if !n.send(ctx, o.to, f, o.saved) {
			n.giveBack(o)
		}
		return
	}
	// One publish reaches every member; without a broadcaster, or for a
	// frame too large to publish, send to each neighbour.
	if b, ok := n.cfg.Transport.(transport.Broadcaster); ok {
		if err := n.pace.wait(ctx, len(f.Payload)); err != nil {
			return
		}
		sctx, cancel := context.WithTimeout(ctx, n.cfg.SendTimeout)
		err := b.Publish(sctx, f)
		cancel()
		if err == nil {
			n.met.published.Inc()
			n.sent(f, o.saved)
			return
		}
		n.log.Debug("publish failed: sending to each neighbour", "err", err)
	}
	if live := n.live.Load(); live != nil {
		for _, p := range *live {
			n.send(ctx, p, f, o.saved)
		}
	}
}

// giveBack hands the core a push-sum share that could not be delivered,
// so that it takes the share back, and, under partial views, the header
// of any other message, so that the core replaces its addressee; other
// messages are simply lost.
func (n *Node) giveBack(o outgoing) {
	m := o.share
	if m == nil && n.partial && o.to != gossip.Broadcast {
		m = &gossip.Message{Kind: o.kind, To: o.to}
	}
	if m == nil {
		return
	}
	select {
	case n.undeliveredCh <- m:
	default:
		n.log.Warn("undelivered push-sum share dropped: the queue is full", "to", o.to)
	}
}

// Lane is the transport lane of a message kind: models, views and SFB
// factors each travel apart from the small rest.
func Lane(k gossip.Kind) string {
	switch {
	case k == gossip.KindModel || k == gossip.KindStateReply:
		return transport.LaneModel
	case k.Membership():
		return transport.LaneView
	case k == gossip.KindFactors:
		return transport.LaneFactors
	}
	return transport.LaneParams
}

// send delivers one frame, counting it (saved: the bytes its compression
// saved), and reports
// whether it could.
func (n *Node) send(ctx context.Context, to gossip.PeerID, f transport.Frame, saved int) bool {
	if err := n.pace.wait(ctx, len(f.Payload)); err != nil {
		return false // shutting down
	}
	sctx, cancel := context.WithTimeout(ctx, n.cfg.SendTimeout)
	err := n.cfg.Transport.Send(sctx, to, f)
	cancel()
	if err != nil {
		n.met.sendErrors.Inc()
		n.traffic.failed(to, n.cfg.Now())
		n.log.Debug("send failed", "to", to, "err", err)
		return false
	}
	n.sent(f, saved)
	n.traffic.out(to, len(f.Payload), n.cfg.Now())
	return true
}

// sent counts a frame that went out (saved: as in send).
func (n *Node) sent(f transport.Frame, saved int) {
	size := len(f.Payload)
	n.msgsOut.Add(1)
	n.bytesOut.Add(uint64(size))
	n.met.msgsOut.Inc()
	n.met.bytesOut.Add(float64(size))
	n.met.bytesOutFull.Add(float64(size + saved))
	if gossip.Kind(f.Kind).Membership() {
		n.memOut.Add(uint64(size))
	}
}

// evalLoop evaluates the parameters it is handed on the test split.
func (n *Node) evalLoop() {
	m, err := model.New(n.cfg.Job.Model, model.WithBackend(compute.NewCPU(compute.WithThreads(1))))
	if err != nil {
		return
	}
	for p := range n.evalCh {
		if err := m.SetParams(p); err != nil {
			continue
		}
		met := m.Evaluate(n.cfg.Test.X, n.cfg.Test.Y, n.cfg.Test.N)
		n.mu.Lock()
		n.status.Accuracy, n.status.Loss = met.Accuracy, met.Loss
		n.mu.Unlock()
		n.met.accuracy.Set(met.Accuracy)
		n.met.loss.Set(met.Loss)
	}
}

// announce tells the network about this node's job, now and every
// announceEvery, until ctx ends.
func (n *Node) announce(ctx context.Context, b transport.Broadcaster) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a := n.announcement(false)
		every := announceEvery(n.cfg.AnnounceInterval, n.partial, a.Members)
		a.EveryMS = every.Milliseconds()
		if err := b.Announce(ctx, a); err != nil && ctx.Err() == nil {
			n.log.Debug("announce failed", "err", err)
		}
		// ±10% so that members that started together drift apart.
		t.Reset(time.Duration(float64(every) * (0.9 + 0.2*rand.Float64())))
	}
}

// announceEvery is a node's announcement interval: base
// (AnnounceInterval), or under partial views base·members/AnnounceBudget
// when that is longer (see AnnounceBudget). Pure, for tests.
func announceEvery(base time.Duration, partial bool, members int) time.Duration {
	if !partial || members <= AnnounceBudget {
		return base
	}
	return min(base*time.Duration(members)/AnnounceBudget, transport.MaxAnnounceEvery)
}

// Announcements lists the job announcements heard from other peers (none
// when the transport is not a Broadcaster).
func (n *Node) Announcements() []transport.Announcement {
	if b, ok := n.cfg.Transport.(transport.Broadcaster); ok {
		return b.Announcements()
	}
	return []transport.Announcement{}
}
