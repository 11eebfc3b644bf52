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
// no sign. So the host pings each connected gossipd peer it has heard
// nothing from for Config.Liveness, and disconnects one that does not
// answer within Config.PingTimeout: it leaves Peers, its streams are
// reset, and sends to it fail (and count as send errors).
//
// The check runs every Liveness/livenessTicks, so a peer that dies just
// after its last frame is dropped at most Liveness + Liveness/5 +
// PingTimeout later (DeadPeerBound: 7.6 s with the defaults).

// livenessTicks is how many checks run per Liveness interval.
const livenessTicks = 5

// rttEvery is how often a peer that talks (and so is never pinged for
// liveness) is pinged anyway, to measure its round-trip time for /status.
const rttEvery = 30 * time.Second

// DeadPeerBound is the longest a dead peer stays in Peers after its last
// frame, for a liveness interval l and a ping timeout pt.
func DeadPeerBound(l, pt time.Duration) time.Duration { return l + l/livenessTicks + pt }

// heardFrom notes that a frame arrived from p.
func (t *Host) heardFrom(p peer.ID) { t.lastHeard.Store(p, time.Now()) }

// checkLiveness runs until ctx ends.
func (t *Host) checkLiveness(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Liveness / livenessTicks)
	defer tick.Stop()
	var (
		mu       sync.Mutex
		inFlight = map[peer.ID]bool{} // one ping at a time per peer
		measured = map[peer.ID]time.Time{}
		wg       sync.WaitGroup
	)
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		since := time.Now().Add(-t.cfg.Liveness)
		present := map[peer.ID]bool{}
		for _, id := range t.Peers() {
			p, err := peer.Decode(string(id))
			if err != nil {
				continue
			}
			present[p] = true
			alive := false
			if v, ok := t.lastHeard.Load(p); ok && v.(time.Time).After(since) {
				alive = true // it spoke recently: pinged only for its RTT
			}
			mu.Lock()
			busy := inFlight[p]
			measure := alive && time.Since(measured[p]) >= rttEvery
			if !busy && (!alive || measure) {
				inFlight[p] = true
				measured[p] = time.Now()
			}
			mu.Unlock()
			if busy || (alive && !measure) {
				continue
			}
			wg.Go(func() {
				if alive {
					t.measureRTT(ctx, p)
				} else {
					t.ping(ctx, p)
				}
				mu.Lock()
				delete(inFlight, p)
				mu.Unlock()
			})
		}
		mu.Lock()
		for p := range measured {
			if !present[p] {
				delete(measured, p)
			}
		}
		mu.Unlock()
	}
}

// ping pings p once and disconnects it if no answer comes in time.
func (t *Host) ping(ctx context.Context, p peer.ID) {
	pctx, cancel := context.WithTimeout(ctx, t.cfg.PingTimeout)
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

// measureRTT pings a live peer once to record its round-trip time (the
// ping service does); a failure here means nothing, since it spoke.
func (t *Host) measureRTT(ctx context.Context, p peer.ID) {
	pctx, cancel := context.WithTimeout(ctx, t.cfg.PingTimeout)
	defer cancel()
	select {
	case <-ping.Ping(pctx, t.h, p):
	case <-pctx.Done():
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
