package p2p

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/gossipd/gossipd/daemon/transport"
)

// Gossipsub carries one-to-all traffic: each job has a topic for its
// broadcasts (SFB's factors), and one topic carries every daemon's job
// announcements. Messages are signed by their author and verified on receipt
// (pubsub's StrictSign policy); validators drop malformed ones before they are
// delivered or forwarded.

// TopicJobs is the job-announcement topic.
const TopicJobs = "/gossipd/jobs/1.0.0"

// jobTopic is the broadcast topic of a job.
func jobTopic(job transport.JobID) string { return "/gossipd/job/" + job.String() + "/1.0.0" }

// maxAnnouncement bounds an announcement's encoded size.
const maxAnnouncement = 64 << 10

// ErrTooLarge means a frame exceeds the broadcast size limit; send it to
// each peer instead.
var ErrTooLarge = errors.New("p2p: frame too large to broadcast")

type broadcaster struct {
	ps     *pubsub.PubSub
	mu     sync.Mutex
	topics map[string]*pubsub.Topic
	joined map[transport.JobID]bool
	ann    map[peer.ID]transport.Announcement
}

// startPubSub starts gossipsub, joins the announcement topic and listens on it.
func (t *Host) startPubSub(ctx context.Context) error {
	ps, err := pubsub.NewGossipSub(ctx, t.h,
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithMaxMessageSize(t.cfg.MaxBroadcast+frameHeader+4<<10),
		pubsub.WithRawTracer(rejectTracer{t}),
	)
	if err != nil {
		return fmt.Errorf("p2p: gossipsub: %w", err)
	}
	t.bc = &broadcaster{ps: ps, topics: map[string]*pubsub.Topic{}, joined: map[transport.JobID]bool{}, ann: map[peer.ID]transport.Announcement{}}
	if err := ps.RegisterTopicValidator(TopicJobs, func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		if _, err := parseAnnouncement(m); err != nil {
			return pubsub.ValidationReject
		}
		return pubsub.ValidationAccept
	}); err != nil {
		return err
	}
	sub, err := t.subscribe(TopicJobs)
	if err != nil {
		return err
	}
	t.wg.Go(func() {
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return
			}
			if m.GetFrom() == t.h.ID() {
				continue
			}
			a, err := parseAnnouncement(m)
			if err != nil {
				continue // the validator already refused it
			}
			t.heard(ctx, a)
		}
	})
	return nil
}

// parseAnnouncement decodes an announcement; its peer is the message's
// verified author, whatever it claims.
func parseAnnouncement(m *pubsub.Message) (transport.Announcement, error) {
	return decodeAnnouncement(m.Data, m.GetFrom())
}

// decodeAnnouncement decodes an announcement published by from and checks
// its job spec: the spec must hash to the job ID, and its creator's
// signature must verify.
func decodeAnnouncement(data []byte, from peer.ID) (transport.Announcement, error) {
	var a transport.Announcement
	if len(data) > maxAnnouncement {
		return a, fmt.Errorf("%w: announcement of %d bytes", ErrFrame, len(data))
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("%w: announcement: %v", ErrFrame, err)
	}
	if len(a.Addrs) > maxPEX {
		return a, fmt.Errorf("%w: announcement lists %d addresses", ErrFrame, len(a.Addrs))
	}
	if a.EveryMS < 0 {
		return a, fmt.Errorf("%w: announcement interval every_ms %d", ErrFrame, a.EveryMS)
	}
	a.Peer = transport.PeerID(from.String())
	a.Heard = time.Time{}
	if err := VerifySpec(a); err != nil {
		return a, err
	}
	return a, nil
}

// ErrSpec means an announcement's job spec does not match its job ID or
// its creator's signature.
var ErrSpec = errors.New("p2p: bad job spec in announcement")

// VerifySpec checks an announcement's spec: its SHA-256 is the job ID,
// and CreatorSig is Creator's signature of it. An announcement without a
// spec (an older daemon's) passes; it cannot be joined from.
func VerifySpec(a transport.Announcement) error {
	if len(a.Spec) == 0 {
		if a.Creator != "" || len(a.CreatorSig) > 0 {
			return fmt.Errorf("%w: a creator signature without a spec", ErrSpec)
		}
		return nil
	}
	sum := sha256.Sum256(a.Spec)
	if hex.EncodeToString(sum[:]) != a.JobID {
		return fmt.Errorf("%w: the spec hashes to %x, the announcement says job %.12s", ErrSpec, sum[:6], a.JobID)
	}
	creator, err := peer.Decode(string(a.Creator))
	if err != nil {
		return fmt.Errorf("%w: creator %q: %v", ErrSpec, a.Creator, err)
	}
	pub, err := creator.ExtractPublicKey()
	if err != nil {
		return fmt.Errorf("%w: creator %s: no public key in its ID: %v", ErrSpec, creator, err)
	}
	ok, err := pub.Verify(append([]byte(transport.SpecSigningContext), a.Spec...), a.CreatorSig)
	if err != nil || !ok {
		return fmt.Errorf("%w: the creator's (%s) signature does not verify", ErrSpec, creator)
	}
	return nil
}

// SignSpec implements transport.SpecSigner with the host's identity key.
func (t *Host) SignSpec(spec []byte) ([]byte, error) {
	return t.h.Peerstore().PrivKey(t.h.ID()).Sign(append([]byte(transport.SpecSigningContext), spec...))
}

// Sign implements transport.Signer with the host's identity key.
func (t *Host) Sign(msg []byte) ([]byte, error) {
	return t.h.Peerstore().PrivKey(t.h.ID()).Sign(msg)
}

// Verify implements transport.Signer: signer's public key is in its ID
// (Ed25519, as gossipd keygen makes them) or, for RSA keys, in the
// peerstore once connected.
func (t *Host) Verify(signer transport.PeerID, msg, sig []byte) error {
	id, err := peer.Decode(string(signer))
	if err != nil {
		return fmt.Errorf("p2p: signer %q: %w", signer, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil || pub == nil {
		if pub = t.h.Peerstore().PubKey(id); pub == nil {
			return fmt.Errorf("p2p: no public key for %s", id)
		}
	}
	if ok, err := pub.Verify(msg, sig); err != nil || !ok {
		return fmt.Errorf("p2p: %s's signature does not verify", id)
	}
	return nil
}

// heard records an announcement and connects to the announcer when it runs
// a job this host joined (under partial views: only keeps its addresses).
func (t *Host) heard(ctx context.Context, a transport.Announcement) {
	pid, err := peer.Decode(string(a.Peer))
	if err != nil {
		return
	}
	a.Heard = time.Now()
	t.bc.mu.Lock()
	t.bc.ann[pid] = a
	mine := false
	for j := range t.bc.joined {
		mine = mine || j.String() == a.JobID
	}
	t.bc.mu.Unlock()
	if !mine || t.h.Network().Connectedness(pid) == network.Connected {
		return
	}
	addrs := announcedAddrs(a, pid)
	if t.dialLater(pid, addrs) {
		return
	}
	t.h.Peerstore().AddAddrs(pid, addrs, peerstore.TempAddrTTL)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := t.h.Connect(cctx, peer.AddrInfo{ID: pid}); err == nil {
		t.log.Debug("connected to a member of the job", "peer", pid)
	}
}

// announcedAddrs are the addresses an announcement of pid gives for it.
func announcedAddrs(a transport.Announcement, pid peer.ID) []ma.Multiaddr {
	var addrs []ma.Multiaddr
	for _, s := range a.Addrs {
		if m, err := ma.NewMultiaddr(s); err == nil {
			if _, id := peer.SplitAddr(m); id == "" || id == pid {
				addrs = append(addrs, m)
			}
		}
	}
	return addrs
}

// topic returns the handle of a topic, joining it on first use (under bc.mu).
func (t *Host) topic(name string) (*pubsub.Topic, error) {
	if tp, ok := t.bc.topics[name]; ok {
		return tp, nil
	}
	tp, err := t.bc.ps.Join(name)
	if err != nil {
		return nil, fmt.Errorf("p2p: topic %s: %w", name, err)
	}
	t.bc.topics[name] = tp
	return tp, nil
}

func (t *Host) subscribe(name string) (*pubsub.Subscription, error) {
	t.bc.mu.Lock()
	defer t.bc.mu.Unlock()
	tp, err := t.topic(name)
	if err != nil {
		return nil, err
	}
	return tp.Subscribe()
}

// Join implements transport.Broadcaster: it subscribes to the job's topic and,
// with the DHT on, advertises the job and looks for its other members.
func (t *Host) Join(job transport.JobID) error {
	t.bc.mu.Lock()
	if t.bc.joined[job] {
		t.bc.mu.Unlock()
		return nil
	}
	t.bc.joined[job] = true
	t.bc.mu.Unlock()
	name := jobTopic(job)
	max := t.cfg.MaxBroadcast
	if err := t.bc.ps.RegisterTopicValidator(name, func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		f, err := ReadFrame(bytes.NewReader(m.Data), max)
		if err != nil || f.Job != job || len(m.Data) != frameHeader+len(f.Payload) {
			return pubsub.ValidationReject
		}
		return pubsub.ValidationAccept
	}); err != nil {
		return fmt.Errorf("p2p: topic %s: %w", name, err)
	}
	sub, err := t.subscribe(name)
	if err != nil {
		return err
	}
	t.wg.Go(func() {
		for {
			m, err := sub.Next(t.ctx)
			if err != nil {
				return
			}
			if m.GetFrom() == t.h.ID() {
				continue // gossipsub delivers our own messages too
			}
			f, err := ReadFrame(bytes.NewReader(m.Data), max)
			if err != nil {
				continue // the validator already refused it
			}
			t.deliver(transport.Inbound{From: transport.PeerID(m.GetFrom().String()), Frame: f, Authenticated: true})
		}
	})
	if t.dht != nil && !t.dhtOff.Load() {
		t.wg.Go(func() { t.discover(t.ctx, "gossipd/job/"+job.String()) })
	}
	return nil
}

// Publish implements transport.Broadcaster.
func (t *Host) Publish(ctx context.Context, f transport.Frame) error {
	if n := len(f.Payload); n > t.cfg.MaxBroadcast {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, t.cfg.MaxBroadcast)
	}
	var b bytes.Buffer
	b.Grow(frameHeader + len(f.Payload))
	if err := WriteFrame(&b, f); err != nil {
		return err
	}
	t.bc.mu.Lock()
	tp, err := t.topic(jobTopic(f.Job))
	t.bc.mu.Unlock()
	if err != nil {
		return err
	}
	if err := tp.Publish(ctx, b.Bytes()); err != nil {
		return fmt.Errorf("p2p: publish: %w", err)
	}
	return nil
}

// Announce implements transport.Broadcaster; the announcement carries this
// host's addresses.
func (t *Host) Announce(ctx context.Context, a transport.Announcement) error {
	a.Peer, a.Addrs = t.ID(), t.Addrs()
	if len(a.Addrs) > maxPEX {
		a.Addrs = a.Addrs[:maxPEX]
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	t.bc.mu.Lock()
	tp, err := t.topic(TopicJobs)
	t.bc.mu.Unlock()
	if err != nil {
		return err
	}
	return tp.Publish(ctx, b)
}

// Announcements implements transport.Broadcaster.
func (t *Host) Announcements() []transport.Announcement {
	t.bc.mu.Lock()
	defer t.bc.mu.Unlock()
	out := make([]transport.Announcement, 0, len(t.bc.ann))
	for _, a := range t.bc.ann {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b transport.Announcement) int { return strings.Compare(string(a.Peer), string(b.Peer)) })
	return out
}

// deliver queues an inbound frame unless the host is closed or the queue is
// full.
func (t *Host) deliver(in transport.Inbound) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	select {
	case t.in <- in:
	default:
		t.log.Warn("inbound queue full: dropped a frame", "peer", in.From)
	}
}

// rejectTracer reports the messages gossipsub drops — unsigned, forged
// (a signature that does not verify against the claimed author), refused
// by a validator — on Inbound as "pubsub_<reason>".
type rejectTracer struct{ t *Host }

func (r rejectTracer) RejectMessage(m *pubsub.Message, reason string) {
	switch reason {
	case pubsub.RejectSelfOrigin, pubsub.RejectValidationIgnored:
		return // our own messages coming back; not an offence
	}
	r.t.rejected("pubsub_"+strings.ReplaceAll(reason, " ", "_"), m.ReceivedFrom,
		fmt.Errorf("gossipsub message on %s: %s", m.GetTopic(), reason))
}

func (rejectTracer) AddPeer(peer.ID, protocol.ID)             {}
func (rejectTracer) RemovePeer(peer.ID)                       {}
func (rejectTracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (rejectTracer) OnClosedOutboundStream(peer.ID)           {}
func (rejectTracer) Join(string)                              {}
func (rejectTracer) Leave(string)                             {}
func (rejectTracer) Graft(peer.ID, string)                    {}
func (rejectTracer) Prune(peer.ID, string)                    {}
func (rejectTracer) ValidateMessage(*pubsub.Message)          {}
func (rejectTracer) DeliverMessage(*pubsub.Message)           {}
func (rejectTracer) DuplicateMessage(*pubsub.Message)         {}
func (rejectTracer) ThrottlePeer(peer.ID)                     {}
func (rejectTracer) RecvRPC(*pubsub.RPC)                      {}
func (rejectTracer) SendRPC(*pubsub.RPC, peer.ID)             {}
func (rejectTracer) DropRPC(*pubsub.RPC, peer.ID)             {}
func (rejectTracer) UndeliverableMessage(*pubsub.Message)     {}
