package p2p

import (
	"fmt"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
)

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
