package p2p

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
)

// TestDHTDiscovery: with peer exchange and mDNS off, two hosts that know
// only a bootstrap node find each other through the Kademlia DHT (its
// routing-table lookups, and the job's provider records once both join it).
func TestDHTDiscovery(t *testing.T) {
	mk := func(boot ...string) *Host {
		h, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Bootstrap: boot, NoPEX: true,
			DHT: DHTServer, DiscoveryInterval: 500 * time.Millisecond, ReadTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	boot := mk()
	a, b := mk(boot.Addrs()...), mk(boot.Addrs()...)
	job := transport.JobID{'d', 'h', 't'}
	for _, h := range []*Host{a, b} {
		if err := h.Join(job); err != nil {
			t.Fatal(err)
		}
	}
	pb, _ := peer.Decode(string(b.ID()))
	waitFor(t, "a and b connected through the DHT", func() bool {
		return a.h.Network().Connectedness(pb) == 1 // network.Connected
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Send(ctx, b.ID(), transport.Frame{Job: job, Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: []byte("found you")}); err != nil {
		t.Fatal(err)
	}
	if in := <-b.Inbound(); string(in.Payload) != "found you" || in.From != a.ID() {
		t.Fatalf("received %+v", in)
	}
}

// TestRelay: a host behind a (simulated) NAT reserves a slot on a
// circuit-relay v2 relay; a peer that knows only its relayed address
// reaches it through the relay and delivers a frame.
func TestRelay(t *testing.T) {
	relay, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NAT: NATConfig{RelayService: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	natted, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true,
		NAT: NATConfig{Relays: relay.Addrs(), ForcePrivate: true, HolePunching: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natted.Close() })
	dialer, err := New(Config{Key: mustKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, NoPEX: true, NAT: NATConfig{HolePunching: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dialer.Close() })
	rid, _ := peer.Decode(string(relay.ID()))
	nid, _ := peer.Decode(string(natted.ID()))
	circuit := ma.StringCast(relay.h.Addrs()[0].String() + "/p2p/" + rid.String() + "/p2p-circuit")
	dialer.h.Peerstore().AddAddrs(nid, []ma.Multiaddr{circuit}, peerstore.PermanentAddrTTL)
	msg := bytes.Repeat([]byte("relayed "), 100)
	// The reservation is made in the background (and loopback relay
	// addresses are not advertised): retry, bounded, until it is in place.
	waitFor(t, "a send through the relay", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return dialer.Send(ctx, natted.ID(), transport.Frame{Kind: uint8(gossip.KindViewPush), Lane: transport.LaneView, Payload: msg}) == nil
	})
	in := <-natted.Inbound()
	if !bytes.Equal(in.Payload, msg) || in.From != dialer.ID() {
		t.Fatalf("received %+v", in)
	}
	conns := dialer.h.Network().ConnsToPeer(nid)
	if len(conns) == 0 {
		t.Fatal("no connection to the natted host")
	}
	if _, err := conns[0].RemoteMultiaddr().ValueForProtocol(ma.P_CIRCUIT); err != nil {
		t.Fatalf("connection %s is not relayed", conns[0].RemoteMultiaddr())
	}
	// /status shows it as relayed, and the relay itself as direct.
	types := map[transport.PeerID]string{}
	for _, c := range dialer.Conns() {
		types[c.Peer] += c.Type + "/" + c.Transport + " "
	}
	if got := types[natted.ID()]; got != "relayed/circuit-relay-v2 " {
		t.Errorf("connection to the natted host reported as %q, want relayed", got)
	}
}
