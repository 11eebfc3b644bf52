package p2p

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Hole punching (DCUtR) with retries. libp2p tries to punch a hole once,
// when a relayed connection arrives, and only once each side has learnt a
// public address of its own; a peer that dialled through the relay a
// moment after it started (before its first identify told it its NAT's
// address) turns that one attempt away, and the two peers stay relayed for
// good (seen in the e2e NAT scenario). So the host runs the hole-punching
// service itself: it learns its public addresses from what peers observe
// (one observer is enough to try), and every punchInterval it tries again
// for each gossipd peer it reaches only through a relay, backing off
// exponentially up to punchMaxBackoff.

const (
	punchInterval   = 2 * time.Second
	punchFirstRetry = 4 * time.Second
	punchMaxBackoff = 5 * time.Minute
	maxObserved     = 8
)

// puncher runs the host's hole punching.
type puncher struct {
	t   *Host
	svc *holepunch.Service

	mu       sync.Mutex
	observed []ma.Multiaddr // our public addresses as peers saw them, newest first
	tries    map[peer.ID]*punchTry
}

type punchTry struct {
	next    time.Time
	backoff time.Duration
	active  bool
}

// idHost is the basic host under a routed one: it has the identify
// service that the hole-punching service waits on.
type idHost interface {
	host.Host
	IDService() identify.IDService
}

// startPuncher starts hole punching on t's host; basic is the host with
// the identify service (t.h itself, or the one under the routed host).
func startPuncher(t *Host, basic host.Host) (*puncher, error) {
	ih, ok := basic.(idHost)
	if !ok {
		return nil, fmt.Errorf("p2p: hole punching: host %T has no identify service", basic)
	}
	p := &puncher{t: t, tries: map[peer.ID]*punchTry{}}
	sub, err := basic.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
	if err != nil {
		return nil, fmt.Errorf("p2p: hole punching: %w", err)
	}
	svc, err := holepunch.NewService(t.h, ih.IDService(), p.publicAddrs, holepunch.WithTracer(t.punches))
	if err != nil {
		sub.Close()
		return nil, fmt.Errorf("p2p: hole punching: %w", err)
	}
	p.svc = svc
	t.watch(sub, func(e any) {
		ev := e.(event.EvtPeerIdentificationCompleted)
		p.observe(ev.Conn, ev.ObservedAddr)
	})
	t.wg.Go(p.retry)
	return p, nil
}

// observe records the address a peer saw this host's connection come
// from, if it is a public one that maps to a socket the host listens on
// (QUIC always; TCP when the dial reused the listening port).
func (p *puncher) observe(c network.Conn, obs ma.Multiaddr) {
	if c == nil || obs == nil || isRelayed(c.RemoteMultiaddr()) || isRelayed(obs) || !manet.IsPublicAddr(obs) {
		return
	}
	if !p.listensOn(c.LocalMultiaddr()) || transportOf(obs) != transportOf(c.LocalMultiaddr()) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.observed = slices.DeleteFunc(p.observed, obs.Equal)
	p.observed = slices.Insert(p.observed, 0, obs)
	if len(p.observed) > maxObserved {
		p.observed = p.observed[:maxObserved]
	}
}

// listensOn says whether the local end of a connection is one of the
// host's listening sockets (same transport and port).
func (p *puncher) listensOn(local ma.Multiaddr) bool {
	port, tr := portOf(local), transportOf(local)
	for _, l := range p.t.h.Network().ListenAddresses() {
		if portOf(l) == port && transportOf(l) == tr {
			return true
		}
	}
	return false
}

// publicAddrs are the addresses the hole-punching service offers the
// other side: the host's own public ones and those peers observed.
func (p *puncher) publicAddrs() []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, a := range p.t.h.Addrs() {
		if !isRelayed(a) && manet.IsPublicAddr(a) {
			out = append(out, a)
		}
	}
	p.mu.Lock()
	out = append(out, p.observed...)
	p.mu.Unlock()
	return ma.Unique(out)
}

// retry tries again, with backoff, to punch a hole to each gossipd peer
// that is reached only through a relay. Of two such peers, the one that
// holds an inbound relayed connection tries (as libp2p's first attempt
// does); if both do, the lower peer ID.
func (p *puncher) retry() {
	tick := time.NewTicker(punchInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.t.ctx.Done():
			p.svc.Close()
			return
		case <-tick.C:
		}
		now := time.Now()
		live := map[peer.ID]bool{}
		p.mu.Lock()
		for _, id := range p.t.Peers() {
			rp, err := peer.Decode(string(id))
			if err != nil {
				continue
			}
			live[rp] = true
			if !p.shouldPunch(rp) {
				delete(p.tries, rp)
				continue
			}
			try := p.tries[rp]
			if try == nil { // libp2p tries at once; we retry after that
				p.tries[rp] = &punchTry{next: now.Add(punchFirstRetry), backoff: punchFirstRetry}
				continue
			}
			if try.active || now.Before(try.next) {
				continue
			}
			try.active = true
			try.backoff = min(2*try.backoff, punchMaxBackoff)
			try.next = now.Add(try.backoff)
			p.t.wg.Go(func() {
				err := p.svc.DirectConnect(rp)
				p.t.log.Debug("hole punching: retried", "peer", rp, "err", err)
				p.mu.Lock()
				try.active = false
				p.mu.Unlock()
			})
		}
		for rp := range p.tries {
			if !live[rp] {
				delete(p.tries, rp)
			}
		}
		p.mu.Unlock()
	}
}

// shouldPunch says whether this host should try to punch a hole to rp: it
// is connected to rp through relays only, and it is the side that tries.
func (p *puncher) shouldPunch(rp peer.ID) bool {
	var in, out bool
	for _, c := range p.t.h.Network().ConnsToPeer(rp) {
		if !isRelayed(c.RemoteMultiaddr()) {
			return false // a direct connection already
		}
		if c.Stat().Direction == network.DirInbound {
			in = true
		} else {
			out = true
		}
	}
	switch {
	case in && out:
		return p.t.h.ID() < rp
	default:
		return in
	}
}

func isRelayed(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// transportOf is "tcp", "quic-v1", ... of an address ("" if none).
func transportOf(a ma.Multiaddr) string {
	name := ""
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_TCP, ma.P_UDP:
			name = c.Protocol().Name
		case ma.P_QUIC_V1, ma.P_WEBTRANSPORT, ma.P_WEBRTC_DIRECT:
			name = c.Protocol().Name
		}
	}
	return name
}

// portOf is an address's TCP or UDP port ("" if none).
func portOf(a ma.Multiaddr) string {
	for _, code := range []int{ma.P_TCP, ma.P_UDP} {
		if v, err := a.ValueForProtocol(code); err == nil {
			return v
		}
	}
	return ""
}
