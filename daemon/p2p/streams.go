package p2p

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/gossipd/gossipd/daemon/transport"
)

// Send implements transport.Transport. Frames to a peer travel back to back on
// one long-lived stream per protocol, opened on first use and reopened once
// if writing fails (the peer restarted, or closed an idle stream): no
// per-frame stream setup or round trip, so frames pipeline. A nil error
// means the frame was written to the connection, not that the peer
// accepted it.
func (t *Host) Send(ctx context.Context, to transport.PeerID, f transport.Frame) error {
	pid, err := peer.Decode(string(to))
	if err != nil {
		return fmt.Errorf("p2p: peer ID %q: %w: %v", to, transport.ErrUnreachable, err)
	}
	if pid == t.h.ID() {
		return fmt.Errorf("p2p: sending to self: %w", transport.ErrUnreachable)
	}
	if f.Lane != "" && !slices.Contains(transport.Lanes, f.Lane) {
		return fmt.Errorf("p2p: unknown lane %q", f.Lane)
	}
	key := outKey{pid, ProtocolFor(f.Lane)}
	for attempt := 0; ; attempt++ {
		o := t.outStream(key)
		o.mu.Lock()
		fresh := o.s == nil
		if fresh {
			if err := t.knowAddrs(pid); err != nil {
				o.mu.Unlock()
				return fmt.Errorf("p2p: %s: %w: %v", to, transport.ErrUnreachable, err)
			}
			s, err := t.h.NewStream(network.WithAllowLimitedConn(ctx, "gossip"), pid, key.proto)
			if err != nil {
				o.mu.Unlock()
				return fmt.Errorf("p2p: %s: %w: %v", to, transport.ErrUnreachable, err)
			}
			o.s = s
		}
		dl, ok := ctx.Deadline()
		if !ok {
			dl = time.Now().Add(t.cfg.ReadTimeout)
		}
		o.s.SetWriteDeadline(dl)
		err := WriteFrame(o.s, f)
		if err == nil {
			o.s.SetWriteDeadline(time.Time{})
			o.mu.Unlock()
			return nil
		}
		o.s.Reset()
		o.s = nil
		o.mu.Unlock()
		if fresh || attempt > 0 || ctx.Err() != nil {
			return fmt.Errorf("p2p: sending to %s: %w: %v", to, transport.ErrUnreachable, err)
		}
	}
}

// errNoAddress: under partial views, a peer is sent to only at an address
// known from a connection or an announcement.
var errNoAddress = errors.New("no address known for the peer (not connected, no announcement heard)")

// knowAddrs, under partial views, makes sure the peerstore has an address
// of p before a stream is opened to it: one from a connection, else from
// its announcement, else errNoAddress. Without an address libp2p's routed
// host would look p up in the DHT, a walk that opens connections to a
// dozen peers the trim then closes: at 150 members, most of the
// connections opened, for peers a shuffle names by ID only, whose
// announcements come round in their time.
func (t *Host) knowAddrs(p peer.ID) error {
	if !t.partial.Load() || t.h.Network().Connectedness(p) == network.Connected || len(t.h.Peerstore().Addrs(p)) > 0 {
		return nil
	}
	t.bc.mu.Lock()
	a, ok := t.bc.ann[p]
	t.bc.mu.Unlock()
	addrs := announcedAddrs(a, p)
	if !ok || len(addrs) == 0 {
		return errNoAddress
	}
	t.h.Peerstore().AddAddrs(p, addrs, peerstore.RecentlyConnectedAddrTTL)
	return nil
}

// outKey names an outbound stream.
type outKey struct {
	peer  peer.ID
	proto protocol.ID
}

// outbound is a long-lived stream to a peer; mu serialises its frames.
type outbound struct {
	mu sync.Mutex
	s  network.Stream // nil until opened, or after a failure
}

func (t *Host) outStream(k outKey) *outbound {
	t.omu.Lock()
	defer t.omu.Unlock()
	o := t.out[k]
	if o == nil {
		o = &outbound{}
		t.out[k] = o
	}
	return o
}

// refused logs a peer the consortium gater turned away (once per peer).
func (t *Host) refused(p peer.ID) {
	if _, seen := t.refusedPeers.LoadOrStore(p, true); !seen {
		t.log.Warn("refused a peer outside the consortium", "peer", p)
	}
}

// forget drops the outbound streams to a disconnected peer.
func (t *Host) forget(p peer.ID) {
	t.omu.Lock()
	defer t.omu.Unlock()
	for k := range t.out {
		if k.peer == p {
			delete(t.out, k)
		}
	}
}

// handleFrame reads frames from an inbound stream until the sender closes
// it. Waiting for a frame may take IdleTimeout; reading one, ReadTimeout.
func (t *Host) handleFrame(s network.Stream) {
	from := s.Conn().RemotePeer()
	r := bufio.NewReaderSize(s, 8<<10) // small: payloads bypass it
	for {
		s.SetReadDeadline(time.Now().Add(t.cfg.IdleTimeout))
		if _, err := r.Peek(1); err != nil {
			if errors.Is(err, io.EOF) {
				s.Close() // the sender closed the stream between frames
			} else {
				s.Reset()
			}
			return
		}
		s.SetReadDeadline(time.Now().Add(t.cfg.ReadTimeout))
		f, err := readFrame(r, t.cfg.MaxFrame, func(n int) ([]byte, error) {
			if err := t.limit.admit(from, n); err != nil {
				return nil, err
			}
			s.SetReadDeadline(time.Now().Add(t.cfg.ReadTimeout)) // not counting the wait
			return t.bufs.get(n), nil
		})
		if errors.Is(err, ErrBroken) {
			// The connection failed under the frame (a reset, a dead peer,
			// a deadline): a fault of the network, reported apart.
			reason := "stream_broken"
			if errors.Is(err, os.ErrDeadlineExceeded) {
				reason = "stream_timeout"
			}
			t.report(transport.Inbound{From: from.String(), Fault: reason, Err: err})
			s.Reset()
			return
		}
		if err != nil {
			reason := "bad_frame"
			switch {
			case errors.Is(err, errOversized):
				reason = "oversized_frame"
			case errors.Is(err, errRateLimited):
				reason = "rate_limited"
			}
			t.rejected(reason, s.Conn().RemotePeer(), err)
			s.Reset()
			return
		}
		t.live.heard(from)
		payload := f.Payload
		t.deliver(transport.Inbound{From: transport.PeerID(s.Conn().RemotePeer().String()), Frame: f, Authenticated: true,
			Recycle: func() { t.bufs.put(payload) }})
	}
}

// rejected reports an inbound message the host dropped before it could be
// delivered — a malformed or oversized frame, a rate limit, a gossipsub
// message with a missing or invalid signature or one a validator refused —
// on Inbound (transport.Inbound.Reject), where the daemon counts it with
// every other reject. Reasons are short snake_case words. A full queue
// loses the report, not a frame: a hostile peer cannot crowd out real
// frames with its rejects.
func (t *Host) rejected(reason string, from peer.ID, err error) {
	t.report(transport.Inbound{From: from.String(), Reject: reason, Err: err})
}

// report puts a report (a reject or a fault) on Inbound unless the queue
// is full.
func (t *Host) report(in transport.Inbound) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	select {
	case t.in <- in:
	default:
	}
}
