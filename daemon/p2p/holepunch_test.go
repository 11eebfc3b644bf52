package p2p

import (
	"maps"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// fakeConn is a connection with given addresses.
type fakeConn struct {
	network.Conn
	local, remote ma.Multiaddr
}

func (c fakeConn) LocalMultiaddr() ma.Multiaddr  { return c.local }
func (c fakeConn) RemoteMultiaddr() ma.Multiaddr { return c.remote }

// TestPuncherObserves: the hole-punching service is offered only the
// public addresses peers saw a listening socket's connections come from.
func TestPuncherObserves(t *testing.T) {
	h, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/0.0.0.0/udp/0/quic-v1", "/ip4/0.0.0.0/tcp/0"}, DHT: DHTOff, NoPEX: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p := &puncher{t: h}
	var quic, tcp ma.Multiaddr
	for _, a := range h.h.Network().ListenAddresses() {
		switch transportOf(a) {
		case "quic-v1":
			quic = a
		case "tcp":
			tcp = a
		}
	}
	relay := ma.StringCast("/ip4/203.0.114.7/udp/4001/quic-v1")
	at := func(local ma.Multiaddr, obs string) {
		p.observe(fakeConn{local: local, remote: relay}, ma.StringCast(obs))
	}
	at(quic, "/ip4/198.20.1.1/udp/"+portOf(quic)+"/quic-v1")                                                           // kept
	at(tcp, "/ip4/198.20.1.1/tcp/"+portOf(tcp))                                                                        // kept
	at(ma.StringCast("/ip4/0.0.0.0/tcp/1"), "/ip4/198.20.1.1/tcp/55555")                                               // not a listening socket
	at(quic, "/ip4/10.1.2.3/udp/"+portOf(quic)+"/quic-v1")                                                             // private
	at(quic, "/ip4/198.20.1.1/tcp/"+portOf(quic))                                                                      // another transport
	at(quic, "/ip4/203.0.114.7/udp/4001/quic-v1/p2p/12D3KooWRP1m4r8V9EQp11BeqcJ3PkHPDDGCBWJZ8zjBByH5Ncah/p2p-circuit") // relayed
	p.observe(fakeConn{local: quic, remote: ma.StringCast("/ip4/203.0.114.7/udp/4001/quic-v1/p2p/12D3KooWRP1m4r8V9EQp11BeqcJ3PkHPDDGCBWJZ8zjBByH5Ncah/p2p-circuit")},
		ma.StringCast("/ip4/198.20.9.9/udp/"+portOf(quic)+"/quic-v1")) // seen through a relay
	got := map[string]bool{}
	for _, a := range p.publicAddrs() {
		got[a.String()] = true
	}
	want := map[string]bool{"/ip4/198.20.1.1/udp/" + portOf(quic) + "/quic-v1": true, "/ip4/198.20.1.1/tcp/" + portOf(tcp): true}
	for _, a := range h.h.Addrs() { // a machine with a public interface address offers it too
		if manet.IsPublicAddr(a) && !isRelayed(a) {
			want[a.String()] = true
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("public addresses %v, want %v", got, want)
	}
	for range maxObserved + 3 { // bounded
		at(quic, "/ip4/198.20.1.1/udp/"+portOf(quic)+"/quic-v1")
	}
	if len(p.observed) > maxObserved {
		t.Fatalf("%d observed addresses kept", len(p.observed))
	}
}
