package node

import (
	"context"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/node/transport"
	"github.com/gossipd/gossipd/peer"
)

// The daemon's workers: each runs on a goroutine of its own, fed by the
// core goroutine through a channel.

// outgoing is a message for the sender workers.
type outgoing struct {
	to  gossip.PeerID // gossip.Broadcast: every member
	msg *gossip.Message
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

// sendLoop sends messages until sendCh closes. It encodes each message
// once, with an encoder of its own (peer.Encoder) whose buffer it reuses
// for every frame: the transport retains no payload once Send returns.
func (n *Node) sendLoop(ctx context.Context) {
	enc := peer.NewEncoder(n.cfg.Transport.Authenticates())
	for o := range n.sendCh {
		if o.to != gossip.Broadcast {
			// The addressee may have left the job (died, said goodbye)
			// since the core sent: look again at the latest roster.
			if r := n.sendRoster.Load(); r != nil && !r.allows(o.msg, n.cfg.Local.IsMember) {
				n.withhold(o.msg, r)
				continue
			}
		}
		f, err := n.frame(enc, o.msg)
		if err != nil {
			n.met.sendErrors.Inc()
			n.log.Error("encoding a message failed", "kind", o.msg.Kind, "to", o.to, "err", err)
			if o.to != gossip.Broadcast {
				n.giveBack(o.msg)
			}
			continue
		}
		if o.to != gossip.Broadcast {
			if !n.send(ctx, o.to, f, o.msg) {
				n.giveBack(o.msg)
			}
			continue
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
				n.sent(f, o.msg)
				continue
			}
			n.log.Debug("publish failed: sending to each neighbour", "err", err)
		}
		if live := n.live.Load(); live != nil {
			for _, p := range *live {
				n.send(ctx, p, f, o.msg)
			}
		}
	}
}

// giveBack hands the core a push-sum share that could not be delivered,
// so that it takes the share back; other messages are simply lost.
func (n *Node) giveBack(m *gossip.Message) {
	if m.Kind != gossip.KindPushSum {
		return
	}
	select {
	case n.undeliveredCh <- m:
	default:
		n.log.Warn("undelivered push-sum share dropped: the queue is full", "to", m.To)
	}
}

// frame encodes a message (the peer driver's encoder) and wraps the bytes
// for the transport. The payload is enc's: valid until its next Encode.
func (n *Node) frame(enc *peer.Encoder, m *gossip.Message) (transport.Frame, error) {
	b, err := enc.Encode(m)
	if err != nil {
		return transport.Frame{}, err
	}
	return transport.Frame{Job: n.job, Kind: uint8(m.Kind), Lane: Lane(m.Kind), Payload: b}, nil
}

// Lane is the transport lane of a message kind: models, views and SFB
// factors each travel apart from the small rest.
func Lane(k gossip.Kind) string {
	switch k {
	case gossip.KindModel, gossip.KindStateReply:
		return transport.LaneModel
	case gossip.KindViewPush, gossip.KindViewReply:
		return transport.LaneView
	case gossip.KindFactors:
		return transport.LaneFactors
	}
	return transport.LaneParams
}

// send delivers one frame, the encoding of m, counting it, and reports
// whether it could.
func (n *Node) send(ctx context.Context, to gossip.PeerID, f transport.Frame, m *gossip.Message) bool {
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
	n.sent(f, m)
	n.traffic.out(to, len(f.Payload), n.cfg.Now())
	return true
}

// sent counts a frame that went out, the encoding of m.
func (n *Node) sent(f transport.Frame, m *gossip.Message) {
	size := len(f.Payload)
	n.msgsOut.Add(1)
	n.bytesOut.Add(uint64(size))
	n.met.msgsOut.Inc()
	n.met.bytesOut.Add(float64(size))
	n.met.bytesOutFull.Add(float64(size + gossip.CompressionSaved(m)))
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
// AnnounceInterval, until ctx ends.
func (n *Node) announce(ctx context.Context, b transport.Broadcaster) {
	t := time.NewTicker(n.cfg.AnnounceInterval)
	defer t.Stop()
	for {
		if err := b.Announce(ctx, n.announcement(false)); err != nil && ctx.Err() == nil {
			n.log.Debug("announce failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Announcements lists the job announcements heard from other peers (none
// when the transport is not a Broadcaster).
func (n *Node) Announcements() []transport.Announcement {
	if b, ok := n.cfg.Transport.(transport.Broadcaster); ok {
		return b.Announcements()
	}
	return []transport.Announcement{}
}
