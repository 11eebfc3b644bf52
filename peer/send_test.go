package peer_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/peer"
)

func sendMessages() []*gossip.Message {
	big := make([]float32, 5000)
	for i := range big {
		big[i] = float32(i) / 7
	}
	return []*gossip.Message{
		{Kind: gossip.KindModel, From: "a", Params: big, Age: 3},
		{Kind: gossip.KindViewPush, From: "d", View: []gossip.Descriptor{{ID: "x", Age: 7}}},
		{Kind: gossip.KindPushSum, From: "b", Params: []float32{0.5, 1}, Weight: 0.25},
		{Kind: gossip.KindModel, From: "a", Params: big[:100], Age: 4},
	}
}

// TestEncodeWireBytes: over a channel that does not authenticate, the
// wire bytes are gossip.Encode's; over one that does, the same with a
// zero checksum trailer (gossip.WriteMessageUnchecked), which decodes
// only with the checksum skipped. A released buffer serves the next
// message.
func TestEncodeWireBytes(t *testing.T) {
	for _, m := range sendMessages() {
		want, err := gossip.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		w, err := peer.EncodeWire(m, peer.EncodeChecksummed)
		if err != nil || !bytes.Equal(w.Bytes, want) {
			t.Fatalf("%s: unauthenticated encoding differs from gossip.Encode (%v)", m.Kind, err)
		}
		w.Release()
		var buf bytes.Buffer
		if err := gossip.WriteMessageUnchecked(&buf, m); err != nil {
			t.Fatal(err)
		}
		w, err = peer.EncodeWire(m, peer.EncodeAuthenticated)
		if err != nil || !bytes.Equal(w.Bytes, buf.Bytes()) {
			t.Fatalf("%s: authenticated encoding differs from gossip.WriteMessageUnchecked (%v)", m.Kind, err)
		}
		if _, err := gossip.Decode(w.Bytes, gossip.DecodeLimits{}); !errors.Is(err, gossip.ErrWire) {
			t.Fatalf("%s: zero checksum accepted: %v", m.Kind, err)
		}
		d, err := gossip.Decode(w.Bytes, gossip.DecodeLimits{SkipChecksum: true})
		if err != nil || d.Kind != m.Kind || len(d.Params) != len(m.Params) {
			t.Fatalf("%s: %v", m.Kind, err)
		}
		w.Release()
	}
	if _, err := peer.EncodeWire(sendMessages()[0], peer.EncodeNone); err == nil {
		t.Error("EncodeWire without an encoding: no error")
	}
}

// TestPeerEncodesWhatItSends: a peer configured with an encoding hands
// its world every message together with its encoding (Do.Wire), so that
// the world only writes bytes; without one, messages come as values.
func TestPeerEncodesWhatItSends(t *testing.T) {
	for _, enc := range []peer.Encoding{peer.EncodeNone, peer.EncodeChecksummed, peer.EncodeAuthenticated} {
		p, _ := newPeer(t, gossip.Config{ID: "me", Protocol: gossip.DPSGD, Delta: time.Second,
			Neighbors: []gossip.Neighbor{{ID: "n", Weight: 0.25}, {ID: "o", Weight: 0.25}}, SelfWeight: 0.5}, func(c *peer.Config) {
			c.Encoding = enc
		})
		sends := 0
		for _, d := range p.Tick(0) { // round 0: parameters to both neighbours
			if d.Send == nil {
				if d.Wire != nil {
					t.Fatalf("encoding %d: a Wire without a Send", enc)
				}
				continue
			}
			sends++
			if enc == peer.EncodeNone {
				if d.Wire != nil {
					t.Fatalf("encoding none: the peer encoded a %s", d.Send.Kind)
				}
				continue
			}
			if d.Wire == nil {
				t.Fatalf("encoding %d: a %s to %s came without its encoding", enc, d.Send.Kind, d.Send.To)
			}
			got, err := gossip.Decode(d.Wire.Bytes, gossip.DecodeLimits{SkipChecksum: enc == peer.EncodeAuthenticated})
			if err != nil {
				t.Fatalf("encoding %d: %v", enc, err)
			}
			if got.Kind != d.Send.Kind || got.From != "me" || got.Round != d.Send.Round || len(got.Params) != len(d.Send.Params) {
				t.Errorf("encoding %d: decoded %s from %s round %d (%d params), sent %s round %d (%d params)",
					enc, got.Kind, got.From, got.Round, len(got.Params), d.Send.Kind, d.Send.Round, len(d.Send.Params))
			}
			d.Wire.Release()
		}
		if sends != 2 {
			t.Errorf("encoding %d: %d messages in round 0, want 2 (one per neighbour)", enc, sends)
		}
	}
}

// BenchmarkEncodeWire: encoding a 1M-parameter model into a pooled
// buffer, released after each (as a sender worker does once written).
func BenchmarkEncodeWire(b *testing.B) {
	m := &gossip.Message{Kind: gossip.KindModel, From: "a", Params: make([]float32, 1<<20), Age: 1}
	for _, enc := range []peer.Encoding{peer.EncodeAuthenticated, peer.EncodeChecksummed} {
		name := "checked"
		if enc == peer.EncodeAuthenticated {
			name = "authenticated"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(gossip.EncodedSize(m)))
			b.ReportAllocs()
			for b.Loop() {
				w, err := peer.EncodeWire(m, enc)
				if err != nil {
					b.Fatal(err)
				}
				w.Release()
			}
		})
	}
}
