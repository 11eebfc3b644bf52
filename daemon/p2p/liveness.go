package p2p

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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
// PingTimeout later (DeadPeerBound: 7.6 s with the defaults), and not
// before Liveness + PingTimeout. TestLivenessBound checks both on
// testing/synctest's virtual clock.

// livenessTicks is how many checks run per Liveness interval.
const livenessTicks = 5

// rttEvery is how often a peer that talks (and so is never pinged for
// liveness) is pinged anyway, to measure its round-trip time for /status.
const rttEvery = 30 * time.Second

// DeadPeerBound is the longest a dead peer stays in Peers after its last
// frame, for a liveness interval l and a ping timeout pt.
func DeadPeerBound(l, pt time.Duration) time.Duration { return l + l/livenessTicks + pt }

// liveness decides which peers to ping and drops those that do not
// answer. It knows the network only through its three functions, so that
// its timing can be tested on a virtual clock.
type liveness struct {
	interval, timeout time.Duration
	// peers lists the connected gossipd peers.
	peers func() []peer.ID
	// ping pings p once; nil means it answered before ctx ended.
	ping func(ctx context.Context, p peer.ID) error
	// drop disconnects a peer that did not answer.
	drop func(p peer.ID, err error)

	lastHeard sync.Map // peer.ID → time.Time of its last frame
	dropped   atomic.Uint64
}

// heard notes that a frame arrived from p.
func (l *liveness) heard(p peer.ID) { l.lastHeard.Store(p, time.Now()) }

// run checks the peers until ctx ends.
func (l *liveness) run(ctx context.Context) {
	tick := time.NewTicker(l.interval / livenessTicks)
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
		since := time.Now().Add(-l.interval)
		present := map[peer.ID]bool{}
		for _, p := range l.peers() {
			present[p] = true
			alive := false
			if v, ok := l.lastHeard.Load(p); ok && v.(time.Time).After(since) {
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
				l.check(ctx, p, alive)
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

// check pings p once. A peer that spoke recently is pinged only for its
// round-trip time (the ping service records it), and a failure means
// nothing; a silent one that does not answer in time is dropped.
func (l *liveness) check(ctx context.Context, p peer.ID, alive bool) {
	pctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	err := l.ping(pctx, p)
	switch {
	case alive:
	case err == nil:
		l.heard(p)
	case ctx.Err() != nil: // shutting down
	default:
		l.lastHeard.Delete(p)
		l.dropped.Add(1)
		l.drop(p, err)
	}
}

// errPingClosed: the ping service ended without a result.
var errPingClosed = errors.New("ping ended without an answer")

// pingOnce pings p over libp2p's ping protocol until ctx ends.
func (t *Host) pingOnce(ctx context.Context, p peer.ID) error {
	select {
	case r, ok := <-ping.Ping(ctx, t.h, p):
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errPingClosed
		}
		return r.Error
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dropDead disconnects a peer that failed its liveness check.
func (t *Host) dropDead(p peer.ID, err error) {
	t.log.Info("peer did not answer its liveness check: disconnected", "peer", p, "err", err)
	t.h.Network().ClosePeer(p)
	t.forget(p)
}

// gossipPeers are the peers liveness checks: Peers as libp2p IDs, and
// under partial views only the neighbours among them (Keep). A connection
// to any other peer is a short exchange that trim closes, from either
// end: pinging it would take a closed connection, or a late answer on a
// busy host, for a death, and close connections the daemon then dials
// again.
func (t *Host) gossipPeers() []peer.ID {
	var keep map[peer.ID]bool
	if k := t.keep.Load(); k != nil && t.partial.Load() {
		keep = *k
	}
	var out []peer.ID
	for _, id := range t.Peers() {
		if p, err := peer.Decode(string(id)); err == nil && (keep == nil || keep[p]) {
			out = append(out, p)
		}
	}
	return out
}

// DeadPeersDropped counts the peers this host disconnected because they
// did not answer their liveness check.
func (t *Host) DeadPeersDropped() uint64 { return t.live.dropped.Load() }
