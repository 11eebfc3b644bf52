package p2p

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/routing"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"
	dutil "github.com/libp2p/go-libp2p/p2p/discovery/util"
)

// DHT modes (Config.DHT).
const (
	DHTOff    = "off"
	DHTAuto   = "auto"   // on when bootstrap peers are given; server once publicly reachable
	DHTClient = "client" // query, never serve
	DHTServer = "server" // query and serve (e.g. a cluster on a private network)
)

// DHTProtocolPrefix keeps gossipd's Kademlia DHT apart from IPFS's.
const DHTProtocolPrefix = "/gossipd"

// dhtEnabled says whether the config asks for a DHT.
func (c *Config) dhtEnabled() bool {
	return c.DHT == DHTClient || c.DHT == DHTServer || (c.DHT == DHTAuto && len(c.Bootstrap) > 0)
}

// newDHT builds the Kademlia DHT (used as the host's peer routing, so
// streams to a peer whose address is unknown look it up).
func (t *Host) newDHT(h host.Host, boot []peer.AddrInfo) (routing.PeerRouting, error) {
	mode := dht.ModeAutoServer
	switch t.cfg.DHT {
	case DHTClient:
		mode = dht.ModeClient
	case DHTServer:
		mode = dht.ModeServer
	}
	// The DHT dials its bootstrap peers as soon as it exists, which is
	// before the host listens: a QUIC dial then leaves from a random port,
	// and what peers observe of it is no use for hole punching. So it gets
	// its bootstrap peers only once the host is listening.
	d, err := dht.New(t.ctx, h, dht.Mode(mode), dht.ProtocolPrefix(DHTProtocolPrefix), dht.BootstrapPeersFunc(func() []peer.AddrInfo {
		if !t.listening.Load() {
			return nil
		}
		return boot
	}))
	if err != nil {
		return nil, fmt.Errorf("p2p: dht: %w", err)
	}
	t.dht = d
	return d, nil
}

// discover advertises this host under ns in the DHT and connects to the
// other hosts found there, until ctx ends.
func (t *Host) discover(ctx context.Context, ns string) {
	if err := t.dht.Bootstrap(ctx); err != nil {
		t.log.Warn("dht bootstrap", "err", err)
	}
	rd := drouting.NewRoutingDiscovery(t.dht)
	if t.partial.Load() {
		t.wg.Go(func() { t.advertiseSparse(ctx, rd, ns) })
	} else {
		dutil.Advertise(ctx, rd, ns) // re-advertises by itself until ctx ends
	}
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, t.cfg.DiscoveryInterval)
		if t.partial.Load() && t.hasNeighbours() {
			// A partial view that has neighbours finds more peers by
			// its shuffles: no DHT query, which would dial the few
			// peers closest to the job's key from every member.
			continue
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		found, err := rd.FindPeers(actx, ns)
		if err != nil {
			cancel()
			t.log.Debug("dht: find peers", "ns", ns, "err", err)
			continue
		}
		for ai := range found {
			if ai.ID == t.h.ID() || len(ai.Addrs) == 0 || t.h.Network().Connectedness(ai.ID) == network.Connected {
				continue
			}
			if t.dialLater(ai.ID, ai.Addrs) {
				continue
			}
			if err := t.h.Connect(actx, ai); err == nil {
				t.log.Debug("dht: connected to a member of the job", "peer", ai.ID)
			}
		}
		cancel()
	}
}

// DHTProviders is how many members of a job under partial views keep it
// advertised in the DHT: enough for a joiner to find live ones.
const DHTProviders = 16

// advertiseSparse advertises the job under ns only while fewer than
// DHTProviders members are found doing so, checking again every 5 to 10
// DiscoveryIntervals; first within one (a member that has found
// neighbours by then waits up to 5 more, so that members started
// together do not all look at once).
// Under partial views every member advertising would have each walk the
// DHT and store its record on the peers closest to the job's key: dozens
// of connections opened per member, which the trim then closes, for a
// record a joiner needs from a few members only.
func (t *Host) advertiseSparse(ctx context.Context, rd *drouting.RoutingDiscovery, ns string) {
	jitter := func(lo, hi int) time.Duration {
		return time.Duration(lo)*t.cfg.DiscoveryInterval + rand.N(time.Duration(hi-lo)*t.cfg.DiscoveryInterval)
	}
	wait := jitter(0, 1)
	for first := true; ; first = false {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if first && t.hasNeighbours() {
			wait = jitter(0, 5) // found the job without the DHT: no hurry
			continue
		}
		wait = jitter(5, 10)
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		found, err := rd.FindPeers(fctx, ns, discovery.Limit(DHTProviders))
		n := 0
		if err == nil {
			for range found {
				n++
			}
		}
		cancel()
		if n >= DHTProviders {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		if _, err := rd.Advertise(actx, ns); err != nil && ctx.Err() == nil {
			t.log.Debug("dht: advertise", "ns", ns, "err", err)
			wait = jitter(1, 2)
		}
		cancel()
	}
}
