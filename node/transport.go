package node

import (
	"context"
	"errors"
	"io"

	"github.com/gossipd/gossipd/gossip"
)

// JobID identifies a training job: the SHA-256 of its canonical spec.
type JobID [32]byte

// Frame is one message on the wire: the job it belongs to, the gossip kind
// (transports may route kinds to different protocols) and the encoded
// gossip message.
type Frame struct {
	Job  JobID
	Kind gossip.Kind
	// Payload is the encoded message. An outgoing frame may set Msg instead:
	// the transport then encodes it as it writes (gossip.WriteMessage), so
	// a model is never copied into a buffer. Received frames carry Payload.
	Payload []byte
	Msg     *gossip.Message
}

// Len is the payload's length in bytes.
func (f *Frame) Len() int {
	if f.Msg != nil {
		return gossip.EncodedSize(f.Msg)
	}
	return len(f.Payload)
}

// WritePayload writes the payload (Len bytes) to w. A transport that
// authenticates every byte (an AEAD channel, whose receivers set
// Inbound.Authenticated) passes authenticated: a message is then written
// without computing its CRC (gossip.WriteMessageUnchecked).
func (f *Frame) WritePayload(w io.Writer, authenticated bool) error {
	if f.Msg != nil {
		if authenticated {
			return gossip.WriteMessageUnchecked(w, f.Msg)
		}
		return gossip.WriteMessage(w, f.Msg)
	}
	_, err := w.Write(f.Payload)
	return err
}

// Bytes returns the payload, encoding Msg if set (a fresh buffer then).
func (f *Frame) Bytes() ([]byte, error) {
	if f.Msg != nil {
		return gossip.Encode(f.Msg)
	}
	return f.Payload, nil
}

// Inbound is a frame received from a peer.
type Inbound struct {
	From gossip.PeerID
	Frame
	// Authenticated says the transport verified every byte with a MAC
	// (libp2p's Noise and TLS are AEADs): the message's own CRC need not be
	// checked again. Transports without integrity protection leave it false.
	Authenticated bool
	// Recycle, when set, hands Payload back to the transport for a later
	// frame. The receiver calls it at most once, when nothing refers to
	// the payload any more (a decoded message may borrow its memory).
	Recycle func()
}

// Done releases the frame's payload to its transport, if it recycles them.
func (in *Inbound) Done() {
	if in.Recycle != nil {
		in.Recycle()
		in.Recycle = nil
	}
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
	// ErrUnreachable when the peer cannot be reached). It retains neither
	// f.Payload nor f.Msg once it returns: callers may reuse them.
	Send(ctx context.Context, to gossip.PeerID, f Frame) error
	// Inbound yields received frames until Close.
	Inbound() <-chan Inbound
	// Peers lists the peers currently known to be reachable, sorted.
	Peers() []gossip.PeerID
	// Close stops the transport and closes Inbound.
	Close() error
}

// Broadcaster is a Transport that can also deliver one frame to every peer
// of a job at once (gossipsub in node/p2p) and carry job announcements.
// The daemon uses it for SFB's broadcasts and for discovery; without it,
// it sends to each member in turn and announces nothing.
type Broadcaster interface {
	Transport
	// Join subscribes to job's broadcast channel: frames published there by
	// other peers arrive on Inbound, From their (authenticated) author.
	Join(job JobID) error
	// Publish delivers f to every other peer that joined f.Job.
	Publish(ctx context.Context, f Frame) error
	// Announce tells the network about this node and its job; peers of the
	// same job that hear it connect to the announcer.
	Announce(ctx context.Context, a Announcement) error
	// Announcements lists the latest announcement heard from each other
	// peer (any job), sorted by peer.
	Announcements() []Announcement
}

// Announcement is what a daemon periodically tells the network about itself
// and its job.
type Announcement struct {
	Peer     gossip.PeerID `json:"peer"`
	Addrs    []string      `json:"addrs,omitempty"`
	JobID    string        `json:"job_id"`
	Name     string        `json:"name"`
	Protocol string        `json:"protocol"`
	Model    string        `json:"model"`
	Members  int           `json:"members,omitempty"`
	Updates  uint64        `json:"updates"`
	Round    uint64        `json:"round"`
	// Time is the announcer's clock, Unix seconds.
	Time int64 `json:"time"`
}
