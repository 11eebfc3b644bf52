// Package p2ptest plays misbehaving peers against real gossipd daemons in
// tests: it writes arbitrary bytes on gossipd's stream protocols and
// publishes gossipsub messages signed, unsigned or forged, speaking the
// pubsub wire protocol itself so that nothing on its side checks them.
// Nothing outside tests imports it.
package p2ptest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
)

// Peer is a libp2p host under a test's control.
type Peer struct {
	h   host.Host
	key crypto.PrivKey
}

// New starts a peer listening on 127.0.0.1.
func New() (*Peer, error) {
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, err
	}
	h, err := libp2p.New(libp2p.Identity(k), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		return nil, err
	}
	return &Peer{h: h, key: k}, nil
}

// ID is the peer's ID.
func (p *Peer) ID() transport.PeerID { return transport.PeerID(p.h.ID().String()) }

// Close stops the peer.
func (p *Peer) Close() error { return p.h.Close() }

// Connect dials a daemon at one of its multiaddrs (with /p2p/ID).
func (p *Peer) Connect(ctx context.Context, addr string) (transport.PeerID, error) {
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return "", err
	}
	ai, err := peer.AddrInfoFromP2pAddr(m)
	if err != nil {
		return "", err
	}
	return transport.PeerID(ai.ID.String()), p.h.Connect(ctx, *ai)
}

// SendRaw opens a stream of gossipd protocol proto to peer to and writes b
// on it as it is (a frame, several, or garbage), then closes the stream.
func (p *Peer) SendRaw(ctx context.Context, to transport.PeerID, proto protocol.ID, b []byte) error {
	pid, err := peer.Decode(string(to))
	if err != nil {
		return err
	}
	s, err := p.h.NewStream(ctx, pid, proto)
	if err != nil {
		return err
	}
	defer s.Close()
	s.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err = s.Write(b)
	return err
}

// SendFrame sends one well-framed payload of kind k for job on its stream
// protocol.
func (p *Peer) SendFrame(ctx context.Context, to transport.PeerID, job transport.JobID, k gossip.Kind, payload []byte) error {
	var b bytes.Buffer
	if err := p2p.WriteFrame(&b, transport.Frame{Job: job, Kind: uint8(k), Payload: payload}); err != nil {
		return err
	}
	return p.SendRaw(ctx, to, p2p.ProtocolFor(daemon.Lane(k)), b.Bytes())
}

// Signing says how Publish signs a message.
type Signing int

const (
	// Signed messages are signed by this peer, as gossipsub's StrictSign
	// policy wants.
	Signed Signing = iota
	// Unsigned messages carry an author and sequence number but no
	// signature.
	Unsigned
	// Forged messages name another peer as their author and carry this
	// peer's signature.
	Forged
)

// Publish sends one gossipsub message on topic straight to peer to (a
// /meshsub/1.1.0 stream carrying one RPC). With Forged, author is the peer
// it claims to come from.
func (p *Peer) Publish(ctx context.Context, to transport.PeerID, topic string, data []byte, how Signing, author transport.PeerID) error {
	pid, err := peer.Decode(string(to))
	if err != nil {
		return err
	}
	from := p.h.ID()
	if how == Forged {
		if from, err = peer.Decode(string(author)); err != nil {
			return err
		}
	}
	seq := make([]byte, 8)
	binary.BigEndian.PutUint64(seq, uint64(time.Now().UnixNano()))
	m := &pb.Message{From: []byte(from), Data: data, Seqno: seq, Topic: &topic}
	if how != Unsigned {
		b, err := m.Marshal()
		if err != nil {
			return err
		}
		if m.Signature, err = p.key.Sign(append([]byte("libp2p-pubsub:"), b...)); err != nil {
			return err
		}
	}
	sub := true
	rpc := &pb.RPC{Subscriptions: []*pb.RPC_SubOpts{{Subscribe: &sub, Topicid: &topic}}, Publish: []*pb.Message{m}}
	b, err := rpc.Marshal()
	if err != nil {
		return err
	}
	s, err := p.h.NewStream(ctx, pid, "/meshsub/1.1.0")
	if err != nil {
		return fmt.Errorf("p2ptest: meshsub stream: %w", err)
	}
	defer s.Close()
	s.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err = s.Write(append(binary.AppendUvarint(nil, uint64(len(b))), b...))
	return err
}
