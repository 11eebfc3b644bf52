package p2p

import (
	"slices"
	"strings"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
)

// SetPartialViews says whether the job keeps partial views (HyParView):
// then the host no longer connects to every member it hears announce
// the job or learns of by peer exchange, but keeps their addresses and
// dials a member when the daemon first sends to it, and it closes
// connections beyond the neighbours it is told to keep (Keep) and
// PartialHeadroom more, so that a member holds connections to its few
// neighbours rather than to the whole job.
//
// With --dht auto the DHT is then closed: a Kademlia node keeps its
// routing table by querying, and so connecting to, peers it holds no
// connection to, which the trim closes again; at 150 members on one host
// that was several new connections per member per second, most of the
// CPU, and no member stayed within its bound. A member asked for the DHT
// (--dht client or server) keeps it.
func (t *Host) SetPartialViews(on bool) {
	t.partial.Store(on)
	if on && t.cfg.DHT == DHTAuto && t.dht != nil && t.dhtOff.CompareAndSwap(false, true) {
		t.dht.Close()
		t.log.Info("partial views: the DHT is off (--dht auto); give --dht client or server to keep it")
	}
}

// PartialHeadroom is how many connections a host of partial views holds
// beyond its neighbours: bootstrap peers, gossipsub's, and a shuffle's or
// a join's short exchange with a peer that is no neighbour.
const PartialHeadroom = 8

// TrimEvery is how often a host of partial views closes the connections
// beyond its neighbours and PartialHeadroom; a connection younger than
// TrimGrace is left alone (a joiner's first connection must last until
// it has heard an announcement and sent its join).
const (
	TrimEvery = time.Second
	TrimGrace = 10 * time.Second
)

// dialLater, under partial views, keeps the addresses of a peer heard of
// (an announcement, peer exchange, the DHT) until the daemon first sends
// to it, and reports true; a full mesh dials such a peer at once.
func (t *Host) dialLater(id peer.ID, addrs []ma.Multiaddr) bool {
	if !t.partial.Load() {
		return false
	}
	t.h.Peerstore().AddAddrs(id, addrs, peerstore.RecentlyConnectedAddrTTL)
	return true
}

// Keep names the neighbours whose connections stay open under partial
// views (transport.Keeper).
func (t *Host) Keep(peers []transport.PeerID) {
	m := make(map[peer.ID]bool, len(peers))
	for _, p := range peers {
		if id, err := peer.Decode(string(p)); err == nil {
			m[id] = true
		}
	}
	t.keep.Store(&m)
}

// hasNeighbours reports whether a neighbour to keep is connected.
func (t *Host) hasNeighbours() bool {
	k := t.keep.Load()
	if k == nil {
		return false
	}
	for id := range *k {
		if t.h.Network().Connectedness(id) == network.Connected {
			return true
		}
	}
	return false
}

// trim closes, under partial views, the connections beyond the kept
// neighbours and PartialHeadroom others. The headroom goes first to
// connections younger than TrimGrace (a shuffle's, a join's), which are
// never closed, then to bootstrap peers, then to the oldest: a member
// holds connections to its neighbours and to at most
// max(PartialHeadroom, those opened in the last TrimGrace) others.
func (t *Host) trim(boot []peer.AddrInfo) {
	if !t.partial.Load() {
		return
	}
	keep := map[peer.ID]bool{}
	if k := t.keep.Load(); k != nil {
		keep = *k
	}
	var others []otherConn
	kept := 0
	for _, id := range t.h.Network().Peers() {
		if keep[id] {
			kept++
			continue
		}
		c := otherConn{id: id, boot: slices.ContainsFunc(boot, func(a peer.AddrInfo) bool { return a.ID == id })}
		for _, conn := range t.h.Network().ConnsToPeer(id) {
			if o := conn.Stat().Opened; o.After(c.opened) {
				c.opened = o
			}
		}
		others = append(others, c)
	}
	closed := toTrim(others, time.Now())
	for _, id := range closed {
		t.h.Network().ClosePeer(id)
	}
	t.log.Debug("closed connections beyond the partial view", "closed", len(closed), "neighbours", kept)
}

// otherConn is a connection to a peer that is no neighbour: when the
// newest to it was opened, and whether the peer is a bootstrap peer.
type otherConn struct {
	id     peer.ID
	opened time.Time
	boot   bool
}

// toTrim picks, of the connections to peers that are no neighbours, those
// trim closes at now: all but PartialHeadroom, the young (TrimGrace) ones
// kept first and never closed, then bootstrap peers, then the oldest.
func toTrim(others []otherConn, now time.Time) []peer.ID {
	if len(others) <= PartialHeadroom {
		return nil
	}
	young := func(c otherConn) bool { return now.Sub(c.opened) < TrimGrace }
	others = slices.Clone(others)
	slices.SortFunc(others, func(a, b otherConn) int {
		switch {
		case young(a) != young(b): // the young ones take the headroom first
			if young(a) {
				return 1
			}
			return -1
		case a.boot != b.boot: // bootstrap peers close last
			if a.boot {
				return 1
			}
			return -1
		case !a.opened.Equal(b.opened): // the newest first
			return b.opened.Compare(a.opened)
		}
		return strings.Compare(string(a.id), string(b.id))
	})
	var out []peer.ID
	for _, c := range others[:len(others)-PartialHeadroom] {
		if !young(c) {
			out = append(out, c.id)
		}
	}
	return out
}
