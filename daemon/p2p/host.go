// Package p2p is gossipd's libp2p transport: a host with TCP and QUIC,
// Noise and TLS, yamux; a persistent identity key; bootstrap peers; mDNS
// discovery on the LAN; peer exchange so that a cluster bootstrapped through
// one node becomes fully reachable; and gossip frames on streams, one
// protocol per kind of message. It is the only package that imports
// go-libp2p.
package p2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/routing"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	noise "github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/gossipd/gossipd/daemon/transport"
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

// The defaults of Config.Liveness and Config.PingTimeout: a dead peer is
// dropped at most DeadPeerBound(DefaultLiveness, DefaultPingTimeout) =
// 7.6 s after its last frame.
const (
	DefaultLiveness    = 3 * time.Second
	DefaultPingTimeout = 4 * time.Second
)

// Config configures a Host. Zero values take the documented defaults.
type Config struct {
	// Key is the identity; see LoadOrCreateKey.
	Key crypto.PrivKey
	// Listen addresses (default /ip4/0.0.0.0/tcp/4001 and
	// /ip4/0.0.0.0/udp/4001/quic-v1).
	Listen []string
	// Bootstrap peers as multiaddrs with /p2p/ID, or the http(s):// address
	// of a daemon's API, whose GET /id names it (bootstrap.go).
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
	// Liveness: a connected gossipd peer that has sent no frame for
	// Liveness is pinged, and one that does not answer within PingTimeout
	// is disconnected, so that a dead peer leaves Peers (and sends to it
	// fail) within DeadPeerBound(Liveness, PingTimeout), whatever the
	// transport (a QUIC connection to a killed peer otherwise lingers for
	// its 30 s idle timeout). Default 3s (DefaultLiveness); negative: off.
	Liveness time.Duration
	// PingTimeout is how long a liveness ping may take (default 4s,
	// DefaultPingTimeout: a slow, lossy link may queue it behind a model).
	PingTimeout time.Duration
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
	// It must list the host itself (New fails with ErrNotMember), unless
	// the host is an Observer.
	Consortium *Consortium
	// Observer marks a short-lived host that only listens (gossipd jobs,
	// with a throwaway identity): its consortium need not list it.
	Observer bool
	// Limits bound what peers can make this host spend (resource manager,
	// per-peer rates).
	Limits Limits
	// Logger (default slog.Default()).
	Logger *slog.Logger
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
	// live pings silent peers and drops dead ones (liveness.go).
	live *liveness
	// bwc counts the bytes of every stream, by protocol (overhead.go).
	bwc *metrics.BandwidthCounter

	omu sync.Mutex
	out map[outKey]*outbound

	refusedPeers sync.Map // peer.ID → true: refused by the consortium gater
	punches      *punchTracer
	listening    atomic.Bool // the host is up and listening (dht.go)
	// unidentified counts the connections closed because their
	// identification failed (identify.go).
	unidentified atomic.Uint64
	// partial: the job keeps partial views; members are dialled when
	// sent to, not on being heard of (SetPartialViews). keep is the
	// neighbours whose connections stay (Keep).
	partial atomic.Bool
	// dhtOff: SetPartialViews closed the DHT.
	dhtOff atomic.Bool
	keep   atomic.Pointer[map[peer.ID]bool]

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
	if cfg.Liveness == 0 {
		cfg.Liveness = DefaultLiveness
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = DefaultPingTimeout
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
	if cfg.DiscoveryInterval == 0 {
		cfg.DiscoveryInterval = time.Minute
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Limits.defaults()
	rm, err := resourceManager(cfg.Limits)
	if err != nil {
		return nil, err
	}
	boot := make([]peer.AddrInfo, 0, len(cfg.Bootstrap))
	var bootURLs []string
	for _, s := range cfg.Bootstrap {
		if isBootstrapURL(s) {
			if err := checkBootstrapURL(s); err != nil {
				return nil, err
			}
			bootURLs = append(bootURLs, s)
			continue
		}
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
	if c := cfg.Consortium; c != nil && !cfg.Observer {
		if err := c.checkMember(self); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Host{cfg: cfg, in: make(chan transport.Inbound, cfg.Inbound), log: cfg.Logger, ctx: ctx, cancel: cancel, out: map[outKey]*outbound{},
		limit: newPeerLimiter(cfg.Limits, cfg.MaxFrame, cfg.ReadTimeout)}
	t.live = &liveness{interval: cfg.Liveness, timeout: cfg.PingTimeout, peers: t.gossipPeers, ping: t.pingOnce, drop: t.dropDead}
	listen := cfg.Listen
	t.bwc = newOverhead()
	opts := []libp2p.Option{
		rm,
		libp2p.BandwidthReporter(t.bwc),
		libp2p.DisableMetrics(), // see resourceManager
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
	t.punches = &punchTracer{log: t.log}
	nat, err := natOptions(cfg.NAT)
	if err != nil {
		cancel()
		return nil, err
	}
	opts = append(opts, nat...)
	var basic host.Host // the host under the routed one
	if cfg.dhtEnabled() {
		opts = append(opts, libp2p.Routing(func(h host.Host) (routing.PeerRouting, error) { basic = h; return t.newDHT(h, boot) }))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("p2p: %w", err)
	}
	t.h = h
	t.listening.Store(true)
	if basic == nil {
		basic = h
	}
	if cfg.NAT.HolePunching {
		if _, err := startPuncher(t, basic); err != nil {
			cancel()
			h.Close()
			return nil, err
		}
	}
	if err := t.watchIdentify(); err != nil {
		cancel()
		h.Close()
		return nil, err
	}
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
	t.wg.Go(func() { t.maintain(ctx, boot, bootURLs) })
	if cfg.Liveness > 0 {
		t.wg.Go(func() { t.live.run(ctx) })
	}
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

// ID implements transport.Transport.
func (t *Host) ID() transport.PeerID { return transport.PeerID(t.h.ID().String()) }

// Addrs returns the host's listen addresses with its /p2p/ID, for others
// to bootstrap from.
func (t *Host) Addrs() []string {
	var out []string
	for _, a := range advertised(t.h.Addrs()) {
		out = append(out, a.Encapsulate(ma.StringCast("/p2p/"+t.h.ID().String())).String())
	}
	slices.Sort(out)
	return out
}

// advertised drops loopback addresses when there are others: a remote
// peer cannot dial 127.0.0.1, and a node listening on every interface
// would otherwise announce it. A node that listens on loopback only (a
// cluster on one machine) keeps them.
func advertised(addrs []ma.Multiaddr) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, a := range addrs {
		if !manet.IsIPLoopback(a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return addrs
	}
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

// Inbound implements transport.Transport.
func (t *Host) Inbound() <-chan transport.Inbound { return t.in }

// Authenticates implements transport.Transport: it is true, for every
// stream is secured by Noise or TLS (AEADs) and every gossipsub message
// signed by its author (StrictSign), so every Inbound is Authenticated.
func (t *Host) Authenticates() bool { return true }

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
	if t.dht != nil && !t.dhtOff.Load() {
		t.dht.Close()
	}
	err := t.h.Close()
	t.wg.Wait()
	return err
}
