package p2p

import (
	"cmp"
	"slices"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/gossipd/gossipd/daemon/transport"
)

var _ transport.ConnLister = (*Host)(nil)

// Conns lists the open connections to gossipd peers (those of Peers),
// sorted by peer, direct before relayed: how each peer is reached, and
// whether hole punching has upgraded a relayed connection.
func (t *Host) Conns() []transport.Conn {
	var out []transport.Conn
	for _, id := range t.Peers() {
		p, err := peer.Decode(string(id))
		if err != nil {
			continue
		}
		rtt := t.h.Peerstore().LatencyEWMA(p)
		for _, c := range t.h.Network().ConnsToPeer(p) {
			out = append(out, describeConn(id, c.RemoteMultiaddr(), c.Stat(), float64(rtt.Microseconds())/1000))
		}
	}
	slices.SortFunc(out, func(a, b transport.Conn) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Type, b.Type), a.Opened.Compare(b.Opened))
	})
	return out
}

// describeConn turns a libp2p connection's address and stats into a Conn.
func describeConn(id transport.PeerID, remote ma.Multiaddr, st network.ConnStats, rttMillis float64) transport.Conn {
	c := transport.Conn{Peer: id, Type: transport.ConnDirect, Addr: remote.String(), Direction: "outbound", RTTMillis: rttMillis, Opened: st.Opened}
	if st.Direction == network.DirInbound {
		c.Direction = "inbound"
	}
	for _, p := range remote {
		switch p.Protocol().Code {
		case ma.P_CIRCUIT:
			c.Type = transport.ConnRelayed
		case ma.P_TCP, ma.P_QUIC_V1, ma.P_WEBTRANSPORT, ma.P_WEBRTC_DIRECT:
			if c.Type == transport.ConnDirect { // a relayed address names the relay's transport first
				c.Transport = p.Protocol().Name
			}
		}
	}
	if c.Type == transport.ConnRelayed {
		c.Transport = "circuit-relay-v2"
	}
	return c
}

// HolePunches counts the hole punches this host took part in, by outcome.
func (t *Host) HolePunches() transport.HolePunches { return t.punches.stats() }
