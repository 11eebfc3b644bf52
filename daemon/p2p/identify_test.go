package p2p

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"

	"github.com/gossipd/gossipd/daemon/transport"
)

// TestUnidentifiedClosed: a peer that does not answer identify leaves
// nothing known of its protocols, so it is no gossipd peer however long
// its connection stays. The host closes such a connection, and dials
// again (here: its bootstrap round), so that a peer that answered too
// late once is identified on the next connection.
func TestUnidentifiedClosed(t *testing.T) {
	mute, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	mute.RemoveStreamHandler(identify.ID)
	addr := mute.Addrs()[0].String() + "/p2p/" + mute.ID().String()
	h, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Bootstrap: []string{addr}, DHT: DHTOff, NoPEX: true,
		PEXInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitFor(t, "the unidentified connection closed, dialled again and closed again", func() bool { return h.unidentified.Load() >= 2 })
	for _, p := range h.Peers() {
		if p == transport.PeerID(mute.ID().String()) {
			t.Fatalf("a peer never identified is listed as a gossipd peer: %v", h.Peers())
		}
	}

	// A peer that answers is identified and kept.
	other := newHost(t, addr)
	h2, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Bootstrap: other.Addrs(), DHT: DHTOff, NoPEX: true,
		PEXInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	waitFor(t, "an identified gossipd peer", func() bool { return len(h2.Peers()) == 1 })
	if n := h2.unidentified.Load(); n != 0 {
		t.Fatalf("%d connections to a peer that answers identify closed as unidentified", n)
	}
}
