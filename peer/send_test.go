package peer_test

import (
	"bytes"
	"errors"
	"testing"

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

// TestEncoderBytes: over a channel that does not authenticate, an
// Encoder's bytes are gossip.Encode's; over one that does, the same with
// a zero checksum trailer (gossip.WriteMessageUnchecked), which decodes
// only with the checksum skipped. One buffer serves every message.
func TestEncoderBytes(t *testing.T) {
	checked, unchecked := peer.NewEncoder(false), peer.NewEncoder(true)
	for _, m := range sendMessages() {
		want, err := gossip.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := checked.Encode(m)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: unauthenticated encoding differs from gossip.Encode (%v)", m.Kind, err)
		}
		var w bytes.Buffer
		if err := gossip.WriteMessageUnchecked(&w, m); err != nil {
			t.Fatal(err)
		}
		got, err = unchecked.Encode(m)
		if err != nil || !bytes.Equal(got, w.Bytes()) {
			t.Fatalf("%s: authenticated encoding differs from gossip.WriteMessageUnchecked (%v)", m.Kind, err)
		}
		if _, err := gossip.Decode(got, gossip.DecodeLimits{}); !errors.Is(err, gossip.ErrWire) {
			t.Fatalf("%s: zero checksum accepted: %v", m.Kind, err)
		}
		d, err := gossip.Decode(got, gossip.DecodeLimits{SkipChecksum: true})
		if err != nil || d.Kind != m.Kind || len(d.Params) != len(m.Params) {
			t.Fatalf("%s: %v", m.Kind, err)
		}
	}
}

// TestEncoderReusesItsBuffer: once it has encoded the largest message, an
// Encoder encodes the others into the same memory.
func TestEncoderReusesItsBuffer(t *testing.T) {
	enc := peer.NewEncoder(true)
	ms := sendMessages()
	first, err := enc.Encode(ms[0]) // the largest
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[1:] {
		b, err := enc.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if &b[0] != &first[0] {
			t.Fatalf("%s: encoded into new memory", m.Kind)
		}
	}
}

func BenchmarkEncoder(b *testing.B) {
	m := &gossip.Message{Kind: gossip.KindModel, From: "a", Params: make([]float32, 1<<20), Age: 1}
	for _, auth := range []bool{true, false} {
		name := "checked"
		if auth {
			name = "authenticated"
		}
		b.Run(name, func(b *testing.B) {
			enc := peer.NewEncoder(auth)
			b.SetBytes(int64(gossip.EncodedSize(m)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.Encode(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
