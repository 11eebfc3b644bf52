// Package transport is what the daemon and its transports share: frames of
// bytes addressed to peers, the Transport and Broadcaster interfaces, and
// job announcements. It knows nothing of gossip messages, models or jobs'
// contents, so a transport (daemon/p2p over libp2p, daemon/memnet in memory)
// moves bytes and depends on this package alone. Encoding, decoding and
// every check of a message's contents belong to the peer driver (package
// peer): a transport never calls back into it, or into the core.
package transport

import (
	"context"
	"encoding/hex"
	"errors"
	"time"
)

// PeerID identifies a peer (a libp2p peer ID in daemon/p2p).
type PeerID = string

// JobID identifies a training job: the SHA-256 of its canonical spec.
type JobID [32]byte

// String is the ID in hex.
func (id JobID) String() string { return hex.EncodeToString(id[:]) }

// Short is the first 12 hex digits, for logs.
func (id JobID) Short() string { return id.String()[:12] }

// Lanes are the streams frames travel on, one per class of traffic, so
// that a large model in flight does not hold up small messages; a
// transport may carry each lane separately (daemon/p2p: one libp2p protocol
// per lane). The sender picks a frame's lane.
var Lanes = []string{LaneModel, LaneView, LaneParams, LaneFactors}

// The lanes.
const (
	LaneModel   = "model"
	LaneView    = "view"
	LaneParams  = "params"
	LaneFactors = "factors"
)

// Frame is one message on the wire: the job it belongs to, an opaque kind
// byte the receiver checks against the payload, the lane it travels on,
// and the payload. The payload is bytes the peer driver encoded (package
// peer); a transport moves them as they are and never looks inside.
type Frame struct {
	Job  JobID
	Kind uint8
	// Lane is one of Lanes (empty: LaneParams). Receivers do not see it.
	Lane string
	// Payload is the encoded message. A transport does not retain an
	// outgoing frame's Payload once Send (or Publish) returns, so the
	// sender may reuse its buffer for the next frame.
	Payload []byte
}

// Inbound is a frame received from a peer, or a report of one the
// transport refused.
type Inbound struct {
	From PeerID
	Frame
	// Authenticated says the transport verified every byte with a MAC
	// (libp2p's Noise and TLS are AEADs): the message's own checksum need
	// not be checked again. It is Transport.Authenticates: transports
	// without integrity protection leave it false.
	Authenticated bool
	// Recycle, when set, hands Payload back to the transport for a later
	// frame. The receiver calls it at most once, when nothing refers to
	// the payload any more (a decoded message may borrow its memory).
	Recycle func()
	// Reject, when set, says the transport refused a frame from From
	// before it could be delivered (a malformed or oversized frame, a rate
	// limit, a forged broadcast): a snake_case reason for metrics, with
	// the details in Err. Such an Inbound carries no frame.
	Reject string
	// Fault, when set, reports a network fault rather than bad input: a
	// stream that broke mid-frame (stream_broken) or timed out
	// (stream_timeout). It carries no frame, and counts against nobody.
	Fault string
	Err   error
}

// Done releases the frame's payload to its transport, if it recycles them.
func (in *Inbound) Done() {
	if in.Recycle != nil {
		in.Recycle()
		in.Recycle = nil
	}
}

// ErrUnreachable means a frame could not be delivered to the peer.
var ErrUnreachable = errors.New("transport: peer unreachable")

// Transport moves frames between daemons. Implementations: daemon/p2p
// (libp2p) and daemon/memnet (in memory, for tests); daemon/transporttest holds
// the conformance suite both pass.
type Transport interface {
	// ID is this endpoint's peer ID.
	ID() PeerID
	// Send delivers f to peer to, or returns an error (wrapping
	// ErrUnreachable when the peer cannot be reached). It does not retain
	// f.Payload once it returns: callers may reuse it.
	Send(ctx context.Context, to PeerID, f Frame) error
	// Authenticates says whether the transport verifies every byte it
	// delivers with a MAC or a signature (libp2p's Noise and TLS are
	// AEADs, and its gossipsub messages are signed): then every Inbound it
	// delivers has Authenticated set, and a sender may leave out
	// checksums of its own. It does not change over the transport's life,
	// so a sender asks once.
	Authenticates() bool
	// Inbound yields received frames, and reports of refused ones, until
	// Close.
	Inbound() <-chan Inbound
	// Peers lists the peers currently known to be reachable, sorted.
	Peers() []PeerID
	// Close stops the transport and closes Inbound.
	Close() error
}

// Broadcaster is a Transport that can also deliver one frame to every peer
// of a job at once (gossipsub in daemon/p2p) and carry job announcements.
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

// OverheadCounter is a Transport that counts the bytes it spends on
// keeping the network together rather than on gossip messages:
// announcements, its pubsub's control messages, peer exchange, liveness
// checks, routing, by protocol since it started. The daemon adds them to
// its membership traffic.
type OverheadCounter interface {
	OverheadBytes() map[string]Bytes
}

// Bytes is a count of bytes received and sent.
type Bytes struct {
	In  uint64 `json:"in"`
	Out uint64 `json:"out"`
}

// Announcement is what a daemon periodically tells the network about itself
// and its job. It carries the job's full spec, signed by the peer that
// created the job, so that a peer can join the job from its announcement
// alone: a transport delivers only announcements whose Spec hashes to
// JobID and whose signature verifies against Creator's key.
type Announcement struct {
	Peer     PeerID   `json:"peer"`
	Addrs    []string `json:"addrs,omitempty"`
	JobID    string   `json:"job_id"`
	Name     string   `json:"name"`
	Protocol string   `json:"protocol"`
	Model    string   `json:"model"`
	// Members is how many live members the announcer sees (itself
	// included).
	Members int    `json:"members,omitempty"`
	Updates uint64 `json:"updates"`
	Round   uint64 `json:"round"`
	// Accuracy is the announcer's last test accuracy.
	Accuracy float64 `json:"accuracy"`
	// Spec is the job's canonical spec (JSON); its SHA-256 is JobID.
	Spec []byte `json:"spec,omitempty"`
	// Creator is the peer that created the job and signed Spec;
	// CreatorSig is its signature (SignSpec), forwarded unchanged by every
	// member that announces the job.
	Creator    PeerID `json:"creator,omitempty"`
	CreatorSig []byte `json:"creator_sig,omitempty"`
	// Incarnation is new at every start of the announcer: a peer that
	// restarted is a new incarnation, and its neighbours settle their
	// accounts with the old one (push-sum).
	Incarnation uint64 `json:"incarnation,omitempty"`
	// Leaving says the announcer is leaving the job (its goodbye): its
	// neighbours rewire at once.
	Leaving bool `json:"leaving,omitempty"`
	// Time is the announcer's clock, Unix seconds.
	Time int64 `json:"time"`
	// EveryMS is how often the announcer announces now, in milliseconds
	// (0: the receiver's own interval). Under partial views the members
	// of a large job announce less often each (daemon.AnnounceBudget),
	// and a receiver keeps the announcement live for three of the
	// announcer's intervals (LiveFor).
	EveryMS int64 `json:"every_ms,omitempty"`
	// Heard is when this peer received the announcement (its own clock;
	// set by the transport, not sent).
	Heard time.Time `json:"heard"`
}

// MaxAnnounceEvery bounds the interval an announcement may claim: an
// announcer that claims more is kept live as if it claimed this.
const MaxAnnounceEvery = 30 * time.Minute

// LiveFor is how long after it was heard the announcement counts: the
// receiver's live timeout, or three of the announcer's intervals if that
// is longer (at most three MaxAnnounceEvery).
func (a Announcement) LiveFor(timeout time.Duration) time.Duration {
	every := min(time.Duration(a.EveryMS)*time.Millisecond, MaxAnnounceEvery)
	return max(timeout, 3*every)
}

// Live reports whether the announcement, heard at a.Heard, still counts
// at now for a receiver whose live timeout is timeout.
func (a Announcement) Live(now time.Time, timeout time.Duration) bool {
	return now.Sub(a.Heard) <= a.LiveFor(timeout)
}

// Addresser is a Transport that knows the addresses it can be reached at
// now (they change with the network: a new IP, a NAT mapping); /status
// shows them.
type Addresser interface {
	Addrs() []string
}

// SpecSigner signs a job's spec with the peer's identity key, for the
// announcements of a job it creates.
type SpecSigner interface {
	SignSpec(spec []byte) ([]byte, error)
}

// Signer signs messages with the peer's identity key and checks other
// peers' signatures by their IDs: secure aggregation's members sign
// the keys they advertise (gossip.SecureConfig.Sign, Verify).
type Signer interface {
	Sign(msg []byte) ([]byte, error)
	Verify(signer PeerID, msg, sig []byte) error
}

// SpecSigningContext prefixes what a creator signs, so that a spec
// signature cannot be taken for any other signed message.
const SpecSigningContext = "gossipd job spec v1\n"

// Conn is one open connection to a peer, as /status shows it.
type Conn struct {
	Peer PeerID `json:"peer"`
	// Type is "direct", or "relayed" through a circuit relay (the peers
	// could not dial each other, or not yet: hole punching upgrades a
	// relayed connection to a direct one).
	Type string `json:"type"`
	// Transport is the connection's transport protocol ("tcp", "quic-v1").
	Transport string `json:"transport"`
	// Direction is "inbound" or "outbound".
	Direction string `json:"direction"`
	// Addr is the peer's address as this connection sees it.
	Addr string `json:"addr"`
	// RTTMillis is the peer's smoothed round-trip time, when measured.
	RTTMillis float64 `json:"rtt_ms,omitempty"`
	// Opened is when the connection was made.
	Opened time.Time `json:"opened"`
}

// The types of Conn.
const (
	ConnDirect  = "direct"
	ConnRelayed = "relayed"
)

// HolePunches counts attempts to upgrade relayed connections to direct
// ones (hole punching), by outcome.
type HolePunches struct {
	Succeeded uint64 `json:"succeeded"`
	Failed    uint64 `json:"failed"`
}

// ConnLister is a Transport that can list its open connections to peers,
// say how its hole punching went, and count the peers it disconnected for
// failing their liveness check.
type ConnLister interface {
	Conns() []Conn
	HolePunches() HolePunches
	DeadPeersDropped() uint64
}

// IDResponse is what a daemon's GET /id serves: its peer ID and current
// addresses (with /p2p/ID), for others to bootstrap from its API address.
type IDResponse struct {
	PeerID PeerID   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
}

// Keeper is a transport that holds connections and can be told which
// peers to keep them to: a member that keeps a partial view hands it its
// neighbours, and the transport closes the others' connections beyond a
// small headroom, so that the connections a member holds do not grow
// with the job.
type Keeper interface {
	Keep(peers []PeerID)
}
