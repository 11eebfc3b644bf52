package p2p

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Identification. libp2p learns which protocols a peer speaks from its
// identify message, once per connection, and gives up after 5 seconds.
// A connection whose identification failed (the peer answered too late,
// as a loaded machine may) stays open, yet the peer is not known to
// speak gossipd's protocols: it is no gossipd peer (Peers), so never a
// member, and, being connected, it is never dialled again. The host
// therefore closes such a connection while nothing is known of the
// peer's protocols; whichever side wants it (a bootstrap round, an
// announcement heard, a peer exchange) dials again, and the new
// connection is identified afresh.

// watchIdentify closes connections whose identification failed, until
// the host closes.
func (t *Host) watchIdentify() error {
	sub, err := t.h.EventBus().Subscribe(new(event.EvtPeerIdentificationFailed))
	if err != nil {
		return fmt.Errorf("p2p: identify events: %w", err)
	}
	t.watch(sub, func(e any) {
		ev := e.(event.EvtPeerIdentificationFailed)
		t.identifyFailed(ev.Peer, ev.Reason)
	})
	return nil
}

// watch hands each event sub delivers to f, on a goroutine of its own,
// until the host closes.
func (t *Host) watch(sub event.Subscription, f func(any)) {
	t.wg.Go(func() {
		defer sub.Close()
		for {
			select {
			case <-t.ctx.Done():
				return
			case e, ok := <-sub.Out():
				if !ok {
					return
				}
				f(e)
			}
		}
	})
}

// identifyFailed closes the connections to p after an identification
// failed, unless p is gone or another connection identified it.
func (t *Host) identifyFailed(p peer.ID, reason error) {
	if t.h.Network().Connectedness(p) != network.Connected {
		return
	}
	if protos, err := t.h.Peerstore().GetProtocols(p); err == nil && len(protos) > 0 {
		return
	}
	t.unidentified.Add(1)
	t.log.Info("could not identify a peer: closed its connection, to identify it afresh when it is dialled again", "peer", p, "err", reason)
	t.h.Network().ClosePeer(p)
}
