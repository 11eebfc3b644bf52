package p2p

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// Liveness the application can see. A connection's transport may take
// long to notice that the peer behind it died (QUIC waits for its idle
// timeout), and meanwhile writes to it succeed and models are lost with
// no sign. So every Config.Liveness the host pings each connected gossipd
// peer it has heard nothing from since the last check, and disconnects
// one that does not answer in time: it leaves Peers, its streams are
// reset, and sends to it fail (and count as send errors).

// heard notes that a frame arrived from p.
func (t *Host) heardFrom(p peer.ID) { t.lastHeard.Store(p, time.Now()) }

// checkLiveness runs until ctx ends.
func (t *Host) checkLiveness(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Liveness)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		since := time.Now().Add(-t.cfg.Liveness)
		var wg sync.WaitGroup
		for _, id := range t.Peers() {
			p, err := peer.Decode(string(id))
			if err != nil {
				continue
			}
			if v, ok := t.lastHeard.Load(p); ok && v.(time.Time).After(since) {
				continue // it spoke recently
			}
			wg.Go(func() { t.ping(ctx, p) })
		}
		wg.Wait()
	}
}

// ping pings p once and disconnects it if no answer comes in time.
func (t *Host) ping(ctx context.Context, p peer.ID) {
	pctx, cancel := context.WithTimeout(ctx, t.cfg.Liveness)
	defer cancel()
	select {
	case r, ok := <-ping.Ping(pctx, t.h, p):
		if ok && r.Error == nil {
			t.heardFrom(p)
			return
		}
		err := pctx.Err()
		if ok && r.Error != nil {
			err = r.Error
		}
		t.dropDead(ctx, p, err)
	case <-pctx.Done():
		t.dropDead(ctx, p, pctx.Err())
	}
}

// dropDead disconnects a peer that failed its liveness check.
func (t *Host) dropDead(ctx context.Context, p peer.ID, err error) {
	if ctx.Err() != nil {
		return // shutting down
	}
	t.log.Info("peer did not answer its liveness check: disconnected", "peer", p, "err", err)
	t.h.Network().ClosePeer(p)
	t.forget(p)
}
