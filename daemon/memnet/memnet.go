// Package memnet is an in-memory transport.Transport: a Network of endpoints that
// deliver frames to each other through buffered channels, with optional
// partitions. It is for tests, beside (never instead of) the libp2p
// transport.
package memnet

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
)

// Network connects endpoints.
type Network struct {
	mu    sync.Mutex
	nodes map[transport.PeerID]*Endpoint
	cut   map[[2]transport.PeerID]bool
	ann   map[transport.PeerID]transport.Announcement
	// sorted is ann's announcements sorted by peer, rebuilt on the first
	// read after an announcement (nil: stale); annBytes counts the
	// encoded bytes of every announcement made.
	sorted   []transport.Announcement
	annBytes uint64
	// ids are the endpoints' IDs, sorted (nil: stale).
	ids []transport.PeerID
}

// New returns an empty network.
func New() *Network {
	return &Network{nodes: map[transport.PeerID]*Endpoint{}, cut: map[[2]transport.PeerID]bool{}}
}

// Endpoint is one node's transport. It implements transport.Broadcaster.
type Endpoint struct {
	net    *Network
	id     transport.PeerID
	in     chan transport.Inbound
	mu     sync.Mutex
	closed bool
	jobs   map[transport.JobID]bool // joined broadcast channels (under net.mu)
	// annOut, annBytesAtJoin: this endpoint's announcement bytes, and
	// the network's when it joined (under net.mu; OverheadBytes).
	annOut, annBytesAtJoin uint64
}

var _ transport.Broadcaster = (*Endpoint)(nil)

// Join adds an endpoint; its inbound queue holds up to buffer frames (further
// frames are dropped, like a congested link).
func (n *Network) Join(id transport.PeerID, buffer int) (*Endpoint, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.nodes[id]; ok {
		return nil, fmt.Errorf("memnet: %s already joined", id)
	}
	e := &Endpoint{net: n, id: id, in: make(chan transport.Inbound, buffer), jobs: map[transport.JobID]bool{}, annBytesAtJoin: n.annBytes}
	n.nodes[id] = e
	n.ids = nil
	return e, nil
}

// Partition cuts (or, with cut false, heals) the link between a and b.
func (n *Network) Partition(a, b transport.PeerID, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[[2]transport.PeerID{a, b}] = cut
	n.cut[[2]transport.PeerID{b, a}] = cut
}

// ID implements transport.Transport.
func (e *Endpoint) ID() transport.PeerID { return e.id }

// Send implements transport.Transport.
func (e *Endpoint) Send(ctx context.Context, to transport.PeerID, f transport.Frame) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.net.mu.Lock()
	dst, ok := e.net.nodes[to]
	cut := e.net.cut[[2]transport.PeerID{e.id, to}]
	e.net.mu.Unlock()
	if !ok || cut || to == e.id {
		return fmt.Errorf("memnet: %s → %s: %w", e.id, to, transport.ErrUnreachable)
	}
	f.Payload = slices.Clone(f.Payload) // the sender may reuse its buffer
	dst.mu.Lock()
	defer dst.mu.Unlock()
	if dst.closed {
		return fmt.Errorf("memnet: %s is closed: %w", to, transport.ErrUnreachable)
	}
	select {
	case dst.in <- transport.Inbound{From: e.id, Frame: f}:
	default: // full: dropped like on a congested link
	}
	return nil
}

// Join implements transport.Broadcaster.
func (e *Endpoint) Join(job transport.JobID) error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.jobs[job] = true
	return nil
}

// Publish implements transport.Broadcaster: a Send to every other endpoint that
// joined f.Job and is not cut off.
func (e *Endpoint) Publish(ctx context.Context, f transport.Frame) error {
	e.net.mu.Lock()
	var to []transport.PeerID
	for id, o := range e.net.nodes {
		if id != e.id && o.jobs[f.Job] && !e.net.cut[[2]transport.PeerID{e.id, id}] {
			to = append(to, id)
		}
	}
	e.net.mu.Unlock()
	slices.Sort(to)
	for _, id := range to {
		if err := e.Send(ctx, id, f); err != nil && !errors.Is(err, transport.ErrUnreachable) {
			return err
		}
	}
	return nil
}

// Announce implements transport.Broadcaster.
func (e *Endpoint) Announce(ctx context.Context, a transport.Announcement) error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.net.ann == nil {
		e.net.ann = map[transport.PeerID]transport.Announcement{}
	}
	a.Peer, a.Heard = e.id, time.Now()
	e.net.ann[e.id] = a
	e.net.sorted = nil
	if b, err := json.Marshal(a); err == nil {
		// What a broadcast would cost: every other endpoint hears it.
		e.net.annBytes += uint64(len(b))
		e.annOut += uint64(len(b))
	}
	return nil
}

// SignSpec implements transport.SpecSigner with a stand-in: memnet has no
// keys, and nothing verifies its signatures.
func (e *Endpoint) SignSpec(spec []byte) ([]byte, error) {
	h := sha256.Sum256(append([]byte(e.id+"\x00"), spec...))
	return h[:], nil
}

var _ transport.Signer = (*Endpoint)(nil)

// Sign implements transport.Signer with a stand-in: memnet has no keys,
// so its "signature" is a hash of the signer's ID and the message, which
// Verify recomputes; it tells altered messages and keys apart, not
// forgers.
func (e *Endpoint) Sign(msg []byte) ([]byte, error) {
	h := sha256.Sum256(append([]byte("memnet sign\x00"+e.id+"\x00"), msg...))
	return h[:], nil
}

// Verify implements transport.Signer (Sign's stand-in).
func (e *Endpoint) Verify(signer transport.PeerID, msg, sig []byte) error {
	h := sha256.Sum256(append([]byte("memnet sign\x00"+signer+"\x00"), msg...))
	if string(h[:]) != string(sig) {
		return fmt.Errorf("memnet: %s's signature does not verify", signer)
	}
	return nil
}

// Announcements implements transport.Broadcaster.
func (e *Endpoint) Announcements() []transport.Announcement {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.net.sorted == nil {
		e.net.sorted = make([]transport.Announcement, 0, len(e.net.ann))
		for _, a := range e.net.ann {
			e.net.sorted = append(e.net.sorted, a)
		}
		slices.SortFunc(e.net.sorted, func(a, b transport.Announcement) int { return strings.Compare(string(a.Peer), string(b.Peer)) })
	}
	out := make([]transport.Announcement, 0, len(e.net.sorted))
	for _, a := range e.net.sorted {
		if a.Peer != e.id {
			out = append(out, a)
		}
	}
	return out
}

// OverheadBytes implements transport.OverheadCounter: the encoded bytes
// of the announcements this endpoint made, and of those the others made
// since it joined (each endpoint hears every announcement, as over
// gossipsub).
func (e *Endpoint) OverheadBytes() map[string]transport.Bytes {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	return map[string]transport.Bytes{"announcements": {In: e.net.annBytes - e.annBytesAtJoin - e.annOut, Out: e.annOut}}
}

// Inbound implements transport.Transport.
func (e *Endpoint) Inbound() <-chan transport.Inbound { return e.in }

// Authenticates implements transport.Transport: it is false, for memnet
// protects nothing, so senders keep their messages' own checksums and
// receivers check them.
func (e *Endpoint) Authenticates() bool { return false }

// Peers implements transport.Transport.
func (e *Endpoint) Peers() []transport.PeerID {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.net.ids == nil {
		for id := range e.net.nodes {
			e.net.ids = append(e.net.ids, id)
		}
		slices.Sort(e.net.ids)
	}
	var out []transport.PeerID
	for _, id := range e.net.ids {
		o := e.net.nodes[id]
		o.mu.Lock()
		live := !o.closed
		o.mu.Unlock()
		if id != e.id && live && !e.net.cut[[2]transport.PeerID{e.id, id}] {
			out = append(out, id)
		}
	}
	return out
}

// Close implements transport.Transport.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.in)
	}
	e.net.mu.Lock()
	delete(e.net.nodes, e.id)
	e.net.ids = nil
	e.net.mu.Unlock()
	return nil
}
