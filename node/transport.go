package node

import (
	"context"
	"errors"

	"github.com/gossipd/gossipd/gossip"
)

// JobID identifies a training job: the SHA-256 of its canonical spec.
type JobID [32]byte

// Frame is one message on the wire: the job it belongs to, the gossip kind
// (transports may route kinds to different protocols) and the encoded
// gossip message.
type Frame struct {
	Job     JobID
	Kind    gossip.Kind
	Payload []byte
}

// Inbound is a frame received from a peer.
type Inbound struct {
	From gossip.PeerID
	Frame
}

// ErrUnreachable means a frame could not be delivered to the peer.
var ErrUnreachable = errors.New("node: peer unreachable")

// Transport moves frames between daemons. Implementations: node/p2p
// (libp2p) and node/memnet (in memory, for tests); node/transporttest holds
// the conformance suite both pass.
type Transport interface {
	// ID is this endpoint's peer ID.
	ID() gossip.PeerID
	// Send delivers f to peer to, or returns an error (wrapping
	// ErrUnreachable when the peer cannot be reached).
	Send(ctx context.Context, to gossip.PeerID, f Frame) error
	// Inbound yields received frames until Close.
	Inbound() <-chan Inbound
	// Peers lists the peers currently known to be reachable, sorted.
	Peers() []gossip.PeerID
	// Close stops the transport and closes Inbound.
	Close() error
}
