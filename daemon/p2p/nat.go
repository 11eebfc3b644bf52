package p2p

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"

	"github.com/gossipd/gossipd/daemon/transport"
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

// punchTracer counts and logs the outcome of each hole punch, on both
// sides of it: an operator sees whether peers behind NATs reached each
// other directly or still talk through a relay.
type punchTracer struct {
	log               *slog.Logger
	succeeded, failed atomic.Uint64
}

// Trace implements holepunch.EventTracer.
func (p *punchTracer) Trace(e *holepunch.Event) {
	var end *holepunch.EndHolePunchEvt
	switch ev := e.Evt.(type) {
	case *holepunch.EndHolePunchEvt:
		end = ev
	case *holepunch.ProtocolErrorEvt:
		p.failed.Add(1)
		p.log.Info("hole punching could not start: the connection stays relayed", "peer", e.Remote, "err", ev.Error)
		return
	case *holepunch.DirectDialEvt:
		p.log.Debug("hole punching: direct dial first", "peer", e.Remote, "ok", ev.Success, "err", ev.Error)
		return
	default:
		return
	}
	if end.Success {
		p.succeeded.Add(1)
		p.log.Info("hole punched: a direct connection replaces the relayed one", "peer", e.Remote, "took", end.EllapsedTime)
		return
	}
	p.failed.Add(1)
	p.log.Info("hole punching failed: the connection stays relayed", "peer", e.Remote, "took", end.EllapsedTime, "err", end.Error)
}

func (p *punchTracer) stats() transport.HolePunches {
	return transport.HolePunches{Succeeded: p.succeeded.Load(), Failed: p.failed.Load()}
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
	// Hole punching (HolePunching) is started on the host by New
	// (holepunch.go), with retries.
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
