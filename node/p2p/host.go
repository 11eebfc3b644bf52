// Package p2p is gossipd's libp2p transport: a host with TCP and QUIC,
// Noise and TLS, yamux; a persistent identity key; bootstrap peers; mDNS
// discovery on the LAN; peer exchange so that a cluster bootstrapped through
// one node becomes fully reachable; and gossip frames on streams, one
// protocol per kind of message. It is the only package that imports
// go-libp2p.
package p2p

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/routing"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	noise "github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/gossipd/gossipd/node/transport"
)

// ProtoPEX is the peer-exchange protocol.
const ProtoPEX protocol.ID = "/gossipd/pex/1.0.0"

// ProtoModel is the protocol of the model lane; a peer that speaks it
// speaks gossipd.
var ProtoModel = ProtocolFor(transport.LaneModel)

// laneProtocols are the stream protocols of transport.Lanes.
var laneProtocols = func() []protocol.ID {
	out := make([]protocol.ID, len(transport.Lanes))
	for i, l := range transport.Lanes {
		out[i] = ProtocolFor(l)
	}
	return out
}()

// ProtocolFor is the stream protocol of a lane (transport.Lanes; empty:
// the params lane): frames of each lane travel on streams of their own.
func ProtocolFor(lane string) protocol.ID {
	if lane == "" {
		lane = transport.LaneParams
	}
	return protocol.ID("/gossipd/" + lane + "/1.0.0")
}

// Config configures a Host. Zero values take the documented defaults.
type Config struct {
	// Key is the identity; see LoadOrCreateKey.
	Key crypto.PrivKey
	// Listen addresses (default /ip4/0.0.0.0/tcp/4001 and
	// /ip4/0.0.0.0/udp/4001/quic-v1).
	Listen []string
	// Bootstrap peers as multiaddrs with /p2p/ID.
	Bootstrap []string
	// MDNS turns on LAN discovery (the daemon's default is on).
	MDNS bool
	// ServiceName is the mDNS service tag (default "gossipd").
	ServiceName string
	// MaxFrame bounds received payloads (default DefaultMaxFrame).
	MaxFrame int
	// ReadTimeout bounds reading or writing one frame (default 30s).
	ReadTimeout time.Duration
	// IdleTimeout is how long an inbound stream may wait for its next frame
	// before it is closed (default 5m); senders reopen closed streams.
	IdleTimeout time.Duration
	// PEXInterval is how often peers exchange addresses (default 5s).
	PEXInterval time.Duration
	// NoPEX turns peer exchange off (discovery is then left to mDNS, the
	// DHT and job announcements).
	NoPEX bool
	// Inbound is the receive queue length (default 1024); a full queue
	// drops frames.
	Inbound int
	// MaxBroadcast bounds a frame published on gossipsub (default 8 MiB);
	// larger ones go to each peer on streams.
	MaxBroadcast int
	// DHT is the Kademlia DHT mode: off, auto (default: on when bootstrap
	// peers are given), client or server. The DHT finds the other members
	// of a job and the addresses of peers known only by ID.
	DHT string
	// DiscoveryInterval is the longest wait between DHT lookups of a job's
	// members (default 1m; they start at 1s and back off).
	DiscoveryInterval time.Duration
	// NAT selects libp2p's NAT traversal features.
	NAT NATConfig
	// Consortium, when set, makes the network private: only peers holding
	// its key can connect, and only its members are admitted. TCP only.
	Consortium *Consortium
	// Limits bound what peers can make this host spend (resource manager,
	// per-peer rates).
	Limits Limits
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// NATConfig turns on libp2p's NAT traversal. All off by default.
type NATConfig struct {
	// PortMap asks the gateway for a port mapping (UPnP, NAT-PMP).
	PortMap bool
	// AutoNAT serves reachability checks to others and runs AutoNAT v2 to
	// learn this host's own reachability.
	AutoNAT bool
	// HolePunching upgrades relayed connections to direct ones (DCUtR).
	HolePunching bool
	// Relays are static circuit-relay v2 relays (multiaddrs with /p2p/ID):
	// a host behind NAT reserves a slot on them and is reachable through
	// them.
	Relays []string
	// RelayService makes this host a circuit-relay v2 relay for others; it
	// must be publicly reachable, and is treated as such.
	RelayService bool
	// ForcePrivate treats this host as unreachable from outside (behind a
	// NAT) without waiting for AutoNAT to find out: with Relays, it
	// reserves relay slots at once.
	ForcePrivate bool
}

// Host is a transport.Transport over libp2p.
type Host struct {
	cfg   Config
	h     host.Host
	in    chan transport.Inbound
	bufs  bufferPool // receive buffers, recycled by Inbound.Recycle
	limit *peerLimiter
	log   *slog.Logger
	mdns  mdns.Service
	bc    *broadcaster
	dht   interface {
		routing.Routing
		Bootstrap(context.Context) error
		Close() error
	}
	ctx context.Context

	omu sync.Mutex
	out map[outKey]*outbound

	refusedPeers sync.Map // peer.ID → true: refused by the consortium gater

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

var _ transport.Broadcaster = (*Host)(nil)

// New starts a host.
func New(cfg Config) (*Host, error) {
	if cfg.Key == nil {
		return nil, errors.New("p2p: no identity key")
	}
	if len(cfg.Listen) == 0 {
		cfg.Listen = []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = "gossipd"
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.PEXInterval == 0 {
		cfg.PEXInterval = 5 * time.Second
	}
	if cfg.Inbound == 0 {
		cfg.Inbound = 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBroadcast == 0 {
		cfg.MaxBroadcast = 8 << 20
	}
	if cfg.DHT == "" {
		cfg.DHT = DHTAuto
	}
	if !slices.Contains([]string{DHTOff, DHTAuto, DHTClient, DHTServer}, cfg.DHT) {
		return nil, fmt.Errorf("p2p: dht mode %q, want off|auto|client|server", cfg.DHT)
	}
	if cfg.DiscoveryInterval == 0 {
		cfg.DiscoveryInterval = time.Minute
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	cfg.Limits.defaults()
	rm, err := resourceManager(cfg.Limits)
	if err != nil {
		return nil, err
	}
	boot := make([]peer.AddrInfo, 0, len(cfg.Bootstrap))
	for _, s := range cfg.Bootstrap {
		ai, err := peer.AddrInfoFromString(s)
		if err != nil {
			return nil, fmt.Errorf("p2p: bootstrap address %q: %w", s, err)
		}
		boot = append(boot, *ai)
	}
	// A config shared by all nodes may list this node among its bootstrap
	// peers: skip it.
	self, err := peer.IDFromPrivateKey(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity key: %w", err)
	}
	boot = slices.DeleteFunc(boot, func(ai peer.AddrInfo) bool { return ai.ID == self })
	ctx, cancel := context.WithCancel(context.Background())
	t := &Host{cfg: cfg, in: make(chan transport.Inbound, cfg.Inbound), log: cfg.Logger, ctx: ctx, cancel: cancel, out: map[outKey]*outbound{},
		limit: newPeerLimiter(cfg.Limits, cfg.MaxFrame, cfg.ReadTimeout)}
	listen := cfg.Listen
	opts := []libp2p.Option{
		rm,
		libp2p.Identity(cfg.Key),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
	}
	if c := cfg.Consortium; c != nil {
		// libp2p's private networks run over TCP only: drop QUIC.
		listen = slices.DeleteFunc(slices.Clone(listen), func(a string) bool { return strings.Contains(a, "/quic") })
		if len(listen) == 0 {
			cancel()
			return nil, fmt.Errorf("p2p: a consortium network runs over TCP; none of the listen addresses %v is TCP", cfg.Listen)
		}
		opts = append(opts, libp2p.PrivateNetwork(pnet.PSK(c.PSK)), libp2p.ConnectionGater(memberGater{c: c, self: self, refused: t.refused}))
	} else {
		opts = append(opts, libp2p.Transport(quic.NewTransport))
	}
	opts = append(opts, libp2p.ListenAddrStrings(listen...))
	nat, err := natOptions(cfg.NAT)
	if err != nil {
		cancel()
		return nil, err
	}
	opts = append(opts, nat...)
	if cfg.dhtEnabled() {
		opts = append(opts, libp2p.Routing(func(h host.Host) (routing.PeerRouting, error) { return t.newDHT(h, boot) }))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("p2p: %w", err)
	}
	t.h = h
	h.Network().Notify(&network.NotifyBundle{DisconnectedF: func(nw network.Network, c network.Conn) {
		if nw.Connectedness(c.RemotePeer()) != network.Connected {
			t.forget(c.RemotePeer())
		}
	}})
	if err := t.startPubSub(ctx); err != nil {
		cancel()
		h.Close()
		return nil, err
	}
	for _, p := range laneProtocols {
		h.SetStreamHandler(p, t.handleFrame)
	}
	h.SetStreamHandler(ProtoPEX, t.handlePEX)
	for _, ai := range boot {
		h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.PermanentAddrTTL)
	}
	if cfg.MDNS {
		t.mdns = mdns.NewMdnsService(h, cfg.ServiceName, t)
		if err := t.mdns.Start(); err != nil {
			t.log.Warn("mDNS discovery unavailable", "err", err)
		}
	}
	t.wg.Go(func() { t.maintain(ctx, boot) })
	return t, nil
}

// HandlePeerFound implements mdns.Notifee.
func (t *Host) HandlePeerFound(ai peer.AddrInfo) {
	if ai.ID == t.h.ID() {
		return
	}
	t.h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := t.h.Connect(ctx, ai); err == nil {
		t.log.Debug("mDNS: connected", "peer", ai.ID)
	}
}

// maintain keeps bootstrap peers connected and exchanges peer addresses.
func (t *Host) maintain(ctx context.Context, boot []peer.AddrInfo) {
	tick := time.NewTicker(t.cfg.PEXInterval)
	defer tick.Stop()
	for {
		for _, ai := range boot {
			if t.h.Network().Connectedness(ai.ID) != network.Connected {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := t.h.Connect(cctx, ai); err != nil {
					t.log.Debug("bootstrap peer unreachable", "peer", ai.ID, "err", err)
				}
				cancel()
			}
		}
		if !t.cfg.NoPEX {
			t.exchangePeers(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ID implements transport.Transport.
func (t *Host) ID() transport.PeerID { return transport.PeerID(t.h.ID().String()) }

// Addrs returns the host's listen addresses with its /p2p/ID, for others
// to bootstrap from.
func (t *Host) Addrs() []string {
	var out []string
	for _, a := range t.h.Addrs() {
		out = append(out, a.Encapsulate(ma.StringCast("/p2p/"+t.h.ID().String())).String())
	}
	slices.Sort(out)
	return out
}

// Peers implements transport.Transport: the connected peers that speak gossipd.
func (t *Host) Peers() []transport.PeerID {
	var out []transport.PeerID
	for _, p := range t.h.Network().Peers() {
		if protos, err := t.h.Peerstore().SupportsProtocols(p, ProtoModel); err == nil && len(protos) > 0 {
			out = append(out, transport.PeerID(p.String()))
		}
	}
	slices.Sort(out)
	return out
}

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
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	select {
	case t.in <- transport.Inbound{From: from.String(), Reject: reason, Err: err}:
	default:
	}
}

// Inbound implements transport.Transport.
func (t *Host) Inbound() <-chan transport.Inbound { return t.in }

// Close implements transport.Transport.
func (t *Host) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.in)
	t.mu.Unlock()
	t.cancel()
	if t.mdns != nil {
		t.mdns.Close()
	}
	if t.dht != nil {
		t.dht.Close()
	}
	err := t.h.Close()
	t.wg.Wait()
	return err
}

// LoadOrCreateKey reads an Ed25519 identity from path, creating it (mode
// 0600) on first use. It refuses a key file others can read.
func LoadOrCreateKey(path string) (crypto.PrivKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return nil, err
		}
		raw, err := crypto.MarshalPrivateKey(k)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			return nil, err
		}
		return k, nil
	}
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("p2p: identity key %s has mode %v; it must be readable by its owner only (chmod 600)", path, st.Mode().Perm())
	}
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity key %s: %w", path, err)
	}
	return k, nil
}

// PeerIDOf returns the peer ID of a key.
func PeerIDOf(k crypto.PrivKey) (string, error) {
	id, err := peer.IDFromPrivateKey(k)
	return id.String(), err
}

// natOptions turns a NATConfig into libp2p options.
func natOptions(c NATConfig) ([]libp2p.Option, error) {
	var opts []libp2p.Option
	if c.PortMap {
		opts = append(opts, libp2p.NATPortMap())
	}
	if c.AutoNAT {
		opts = append(opts, libp2p.EnableNATService(), libp2p.EnableAutoNATv2())
	}
	if c.HolePunching {
		opts = append(opts, libp2p.EnableHolePunching())
	}
	if c.RelayService {
		// libp2p runs the relay service only on hosts it deems publicly
		// reachable; an operator who makes a host a relay asserts that.
		opts = append(opts, libp2p.EnableRelayService(), libp2p.ForceReachabilityPublic())
	}
	if c.ForcePrivate {
		opts = append(opts, libp2p.ForceReachabilityPrivate())
	}
	if len(c.Relays) > 0 {
		var relays []peer.AddrInfo
		for _, s := range c.Relays {
			ai, err := peer.AddrInfoFromString(s)
			if err != nil {
				return nil, fmt.Errorf("p2p: relay address %q: %w", s, err)
			}
			relays = append(relays, *ai)
		}
		// Static relays are known up front: use them at once rather than
		// after autorelay's boot delay for gathering candidates.
		opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(relays,
			autorelay.WithMinCandidates(len(relays)), autorelay.WithBootDelay(0)))
	}
	return opts, nil
}

// CheckPeerID reports whether s is a valid libp2p peer ID.
func CheckPeerID(s string) error {
	if _, err := peer.Decode(s); err != nil {
		return fmt.Errorf("peer ID %q: %w", s, err)
	}
	return nil
}
