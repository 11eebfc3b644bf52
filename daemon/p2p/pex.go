package p2p

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
)

// Peer exchange: a peer answers /gossipd/pex/1.0.0 with the addresses of the
// gossipd peers it is connected to, so a cluster bootstrapped through one
// node becomes fully reachable without a DHT.

// maxPEX bounds the peers one answer lists and the bytes it may take.
const (
	maxPEX      = 64
	maxPEXBytes = 1 << 20
)

type pexEntry struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs"`
}

func (t *Host) handlePEX(s network.Stream) {
	defer s.Close()
	var out []pexEntry
	for _, p := range t.Peers() {
		pid, err := peer.Decode(string(p))
		if err != nil || pid == s.Conn().RemotePeer() {
			continue
		}
		e := pexEntry{ID: pid.String()}
		for _, a := range t.h.Peerstore().Addrs(pid) {
			e.Addrs = append(e.Addrs, a.String())
		}
		out = append(out, e)
		if len(out) == maxPEX {
			break
		}
	}
	s.SetWriteDeadline(time.Now().Add(t.cfg.ReadTimeout))
	json.NewEncoder(s).Encode(out)
}

// exchangePeers asks one random connected peer for its peers and connects
// to the ones not connected yet (under partial views: keeps their
// addresses, to be dialled when sent to).
func (t *Host) exchangePeers(ctx context.Context) {
	peers := t.h.Network().Peers()
	if len(peers) == 0 {
		return
	}
	p := peers[rand.IntN(len(peers))]
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := t.h.NewStream(cctx, p, ProtoPEX)
	if err != nil {
		return
	}
	defer s.Close()
	s.SetReadDeadline(time.Now().Add(t.cfg.ReadTimeout))
	var got []pexEntry
	if err := json.NewDecoder(io.LimitReader(s, maxPEXBytes)).Decode(&got); err != nil {
		t.log.Debug("peer exchange failed", "peer", p, "err", err)
		return
	}
	for _, ai := range parsePEX(got, t.h.ID()) {
		if t.h.Network().Connectedness(ai.ID) == network.Connected {
			continue
		}
		if t.dialLater(ai.ID, ai.Addrs) {
			continue
		}
		t.h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
		t.wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			t.h.Connect(c, ai)
		})
	}
}

// parsePEX turns a (remote, untrusted) peer-exchange answer into address
// infos: at most maxPEX entries, skipping this host, unparsable IDs and
// addresses, and entries left without an address.
func parsePEX(entries []pexEntry, self peer.ID) []peer.AddrInfo {
	var out []peer.AddrInfo
	for i, e := range entries {
		if i == maxPEX {
			break
		}
		id, err := peer.Decode(e.ID)
		if err != nil || id == self {
			continue
		}
		ai := peer.AddrInfo{ID: id}
		for k, a := range e.Addrs {
			if k == maxPEX {
				break
			}
			if m, err := ma.NewMultiaddr(a); err == nil {
				ai.Addrs = append(ai.Addrs, m)
			}
		}
		if len(ai.Addrs) > 0 {
			out = append(out, ai)
		}
	}
	return out
}
