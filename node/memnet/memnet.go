// Package memnet is an in-memory node.Transport: a Network of endpoints that
// deliver frames to each other through buffered channels, with optional
// partitions. It is for tests, beside (never instead of) the libp2p
// transport.
package memnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/node"
)

// Network connects endpoints.
type Network struct {
	mu    sync.Mutex
	nodes map[gossip.PeerID]*Endpoint
	cut   map[[2]gossip.PeerID]bool
	ann   map[gossip.PeerID]node.Announcement
}

// New returns an empty network.
func New() *Network {
	return &Network{nodes: map[gossip.PeerID]*Endpoint{}, cut: map[[2]gossip.PeerID]bool{}}
}

// Endpoint is one node's transport. It implements node.Broadcaster.
type Endpoint struct {
	net    *Network
	id     gossip.PeerID
	in     chan node.Inbound
	mu     sync.Mutex
	closed bool
	jobs   map[node.JobID]bool // joined broadcast channels (under net.mu)
}

var _ node.Broadcaster = (*Endpoint)(nil)

// Join adds an endpoint; its inbound queue holds up to buffer frames (further
// frames are dropped, like a congested link).
func (n *Network) Join(id gossip.PeerID, buffer int) (*Endpoint, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.nodes[id]; ok {
		return nil, fmt.Errorf("memnet: %s already joined", id)
	}
	e := &Endpoint{net: n, id: id, in: make(chan node.Inbound, buffer), jobs: map[node.JobID]bool{}}
	n.nodes[id] = e
	return e, nil
}

// Partition cuts (or, with cut false, heals) the link between a and b.
func (n *Network) Partition(a, b gossip.PeerID, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[[2]gossip.PeerID{a, b}] = cut
	n.cut[[2]gossip.PeerID{b, a}] = cut
}

// ID implements node.Transport.
func (e *Endpoint) ID() gossip.PeerID { return e.id }

// Send implements node.Transport.
func (e *Endpoint) Send(ctx context.Context, to gossip.PeerID, f node.Frame) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.net.mu.Lock()
	dst, ok := e.net.nodes[to]
	cut := e.net.cut[[2]gossip.PeerID{e.id, to}]
	e.net.mu.Unlock()
	if !ok || cut || to == e.id {
		return fmt.Errorf("memnet: %s → %s: %w", e.id, to, node.ErrUnreachable)
	}
	if f.Msg != nil {
		b, err := gossip.Encode(f.Msg)
		if err != nil {
			return err
		}
		f.Payload, f.Msg = b, nil
	} else {
		f.Payload = slices.Clone(f.Payload)
	}
	dst.mu.Lock()
	defer dst.mu.Unlock()
	if dst.closed {
		return fmt.Errorf("memnet: %s is closed: %w", to, node.ErrUnreachable)
	}
	select {
	case dst.in <- node.Inbound{From: e.id, Frame: f}:
	default: // full: dropped like on a congested link
	}
	return nil
}

// Join implements node.Broadcaster.
func (e *Endpoint) Join(job node.JobID) error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.jobs[job] = true
	return nil
}

// Publish implements node.Broadcaster: a Send to every other endpoint that
// joined f.Job and is not cut off.
func (e *Endpoint) Publish(ctx context.Context, f node.Frame) error {
	e.net.mu.Lock()
	var to []gossip.PeerID
	for id, o := range e.net.nodes {
		if id != e.id && o.jobs[f.Job] && !e.net.cut[[2]gossip.PeerID{e.id, id}] {
			to = append(to, id)
		}
	}
	e.net.mu.Unlock()
	slices.Sort(to)
	for _, id := range to {
		if err := e.Send(ctx, id, f); err != nil && !errors.Is(err, node.ErrUnreachable) {
			return err
		}
	}
	return nil
}

// Announce implements node.Broadcaster.
func (e *Endpoint) Announce(ctx context.Context, a node.Announcement) error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.net.ann == nil {
		e.net.ann = map[gossip.PeerID]node.Announcement{}
	}
	a.Peer = e.id
	e.net.ann[e.id] = a
	return nil
}

// Announcements implements node.Broadcaster.
func (e *Endpoint) Announcements() []node.Announcement {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	var out []node.Announcement
	for id, a := range e.net.ann {
		if id != e.id {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b node.Announcement) int { return strings.Compare(string(a.Peer), string(b.Peer)) })
	return out
}

// Inbound implements node.Transport.
func (e *Endpoint) Inbound() <-chan node.Inbound { return e.in }

// Peers implements node.Transport.
func (e *Endpoint) Peers() []gossip.PeerID {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	var out []gossip.PeerID
	for id, o := range e.net.nodes {
		o.mu.Lock()
		live := !o.closed
		o.mu.Unlock()
		if id != e.id && live && !e.net.cut[[2]gossip.PeerID{e.id, id}] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Close implements node.Transport.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.in)
	}
	e.net.mu.Lock()
	delete(e.net.nodes, e.id)
	e.net.mu.Unlock()
	return nil
}
