package p2p

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"golang.org/x/time/rate"
)

// Limits bounds what other peers can make a host spend. Zero fields take
// the documented defaults; a negative rate turns that limit off.
type Limits struct {
	// Memory is what libp2p's resource manager lets connections and
	// streams hold in all (default: libp2p's autoscaling, 1/8 of the
	// machine's memory).
	Memory int64
	// Conns bounds connections (default 256). A gossip node talks to tens
	// of peers; more connections are a sign of a flood.
	Conns int
	// PeerStreams bounds one peer's inbound streams on each gossipd frame
	// protocol (default 8: senders keep one long-lived stream per kind).
	PeerStreams int
	// PeerBytes is the rate, in payload bytes per second, at which one
	// peer's frames are read (default 256 MiB/s, far above what a gossip
	// schedule needs). A faster sender is slowed by flow control; a frame
	// that would have to wait longer than ReadTimeout is dropped
	// ("rate_limited") and its stream reset.
	PeerBytes float64
	// PeerFrames is the rate of frames per second one peer may send
	// (default 200), with a burst of as many; beyond it frames wait or are
	// dropped, as for PeerBytes.
	PeerFrames float64
}

func (l *Limits) defaults() {
	if l.Conns == 0 {
		l.Conns = 256
	}
	if l.PeerStreams == 0 {
		l.PeerStreams = 8
	}
	if l.PeerBytes == 0 {
		l.PeerBytes = 256 << 20
	}
	if l.PeerFrames == 0 {
		l.PeerFrames = 200
	}
}

// Validate checks the limits.
func (l Limits) Validate() error {
	if l.Memory < 0 || l.Conns < 0 || l.PeerStreams < 0 {
		return fmt.Errorf("p2p: limits: memory %d, conns %d and peer streams %d must not be negative", l.Memory, l.Conns, l.PeerStreams)
	}
	if math.IsNaN(l.PeerBytes) || math.IsNaN(l.PeerFrames) {
		return errors.New("p2p: limits: NaN rate")
	}
	return nil
}

// resourceManager builds libp2p's resource manager with gossipd's limits:
// libp2p's scaled defaults, a connection cap, and per-peer stream caps on
// each frame protocol.
func resourceManager(l Limits) (libp2p.Option, error) {
	cfg := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&cfg)
	for _, p := range append(slices.Clone(laneProtocols), ProtoPEX) {
		cfg.AddProtocolPeerLimit(p, rcmgr.BaseLimit{StreamsInbound: l.PeerStreams, StreamsOutbound: l.PeerStreams, Streams: 2 * l.PeerStreams, Memory: 64 << 20},
			rcmgr.BaseLimitIncrease{})
	}
	var concrete rcmgr.ConcreteLimitConfig
	if l.Memory > 0 {
		concrete = cfg.Scale(l.Memory, 0)
	} else {
		concrete = cfg.AutoScale()
	}
	partial := rcmgr.PartialLimitConfig{System: rcmgr.ResourceLimits{
		Conns: rcmgr.LimitVal(l.Conns), ConnsInbound: rcmgr.LimitVal(l.Conns), ConnsOutbound: rcmgr.LimitVal(l.Conns)}}
	// libp2p's own metrics go to Prometheus's default registry, which
	// gossipd does not serve (its /metrics has its own): off, for the
	// resource manager's trace of every stream costs CPU on every host.
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(partial.Build(concrete)), rcmgr.WithMetricsDisabled())
	if err != nil {
		return nil, fmt.Errorf("p2p: resource manager: %w", err)
	}
	return libp2p.ResourceManager(rm), nil
}

// errRateLimited marks a frame dropped by a peer's rate limit.
var errRateLimited = errors.New("rate limited")

// peerLimiter paces the frames each peer sends.
type peerLimiter struct {
	bytes, frames rate.Limit
	burstBytes    int
	burstFrames   int
	maxWait       time.Duration
	now           func() time.Time
	sleep         func(time.Duration)

	mu    sync.Mutex
	peers map[peer.ID]*peerRate
}

type peerRate struct{ bytes, frames *rate.Limiter }

func newPeerLimiter(l Limits, maxFrame int, maxWait time.Duration) *peerLimiter {
	pl := &peerLimiter{bytes: rate.Inf, frames: rate.Inf, burstBytes: maxFrame, maxWait: maxWait,
		now: time.Now, sleep: time.Sleep, peers: map[peer.ID]*peerRate{}}
	if l.PeerBytes > 0 {
		pl.bytes = rate.Limit(l.PeerBytes)
	}
	if l.PeerFrames > 0 {
		pl.frames = rate.Limit(l.PeerFrames)
		pl.burstFrames = int(math.Ceil(l.PeerFrames))
	}
	return pl
}

// admit waits until peer p may deliver a frame of n payload bytes, or
// refuses it when that would take longer than maxWait.
func (pl *peerLimiter) admit(p peer.ID, n int) error {
	if pl.bytes == rate.Inf && pl.frames == rate.Inf {
		return nil
	}
	now := pl.now()
	pl.mu.Lock()
	r := pl.peers[p]
	if r == nil {
		if len(pl.peers) >= maxTrackedPeers {
			pl.prune(now)
		}
		r = &peerRate{bytes: rate.NewLimiter(pl.bytes, pl.burstBytes), frames: rate.NewLimiter(pl.frames, pl.burstFrames)}
		pl.peers[p] = r
	}
	pl.mu.Unlock()
	rb := r.bytes.ReserveN(now, n)
	rf := r.frames.ReserveN(now, 1)
	wait := max(rb.DelayFrom(now), rf.DelayFrom(now))
	if !rb.OK() || !rf.OK() || wait > pl.maxWait {
		rb.CancelAt(now)
		rf.CancelAt(now)
		return fmt.Errorf("%w: a %d-byte frame would wait %v for the peer's allowance (limits %v B/s, %v frames/s)",
			errRateLimited, n, wait.Round(time.Millisecond), pl.bytes, pl.frames)
	}
	if wait > 0 {
		pl.sleep(wait) // flow control slows the sender meanwhile
	}
	return nil
}

// maxTrackedPeers is how many peers' allowances are kept before full ones
// are pruned.
const maxTrackedPeers = 4096

// prune forgets peers whose allowances are full again: they carry no
// state. (A peer that disconnects keeps its allowance until then, so
// reconnecting does not refill it.)
func (pl *peerLimiter) prune(now time.Time) {
	for p, r := range pl.peers {
		if r.bytes.TokensAt(now) >= float64(r.bytes.Burst()) && r.frames.TokensAt(now) >= float64(r.frames.Burst()) {
			delete(pl.peers, p)
		}
	}
}
