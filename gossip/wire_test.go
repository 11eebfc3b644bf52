package gossip_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/privacy/secagg"
)

func sampleMessages() []gossip.Message {
	return []gossip.Message{
		{Kind: gossip.KindModel, From: "a", Params: []float32{1, -2, 3.5}, Age: 42},
		{Kind: gossip.KindPushSum, From: "peer-b", Round: 7, Params: []float32{0.5}, Weight: 0.25},
		{Kind: gossip.KindFactors, From: "c", Round: 3, Params: []float32{1, 2},
			Factors: []model.Factors{{Weight: "fc1.weight", K: 2, J: 1, D: 3, U: []float32{1, 2}, V: []float32{1, 2, 3, 4, 5, 6}}}},
		{Kind: gossip.KindModel, From: "e", Params: []float32{7, 8}, Indices: []uint32{3, 90}, Age: 1},
		{Kind: gossip.KindModel, From: "f", Params: []float32{7, 8}, Partition: 3, Age: 2},
		{Kind: gossip.KindViewPush, From: "d", View: []gossip.Descriptor{{ID: "x", Age: 7}, {ID: "y", Age: 3}}},
		{Kind: gossip.KindParams, From: "g", Round: 4, Packed: &compress.Payload{Kind: compress.FP16, N: 2, Half: []uint16{0x3c00, 0xc000}}},
		{Kind: gossip.KindModel, From: "h", Age: 3, Packed: &compress.Payload{Kind: compress.Int8, N: 3, Scales: []float32{0.5}, Bytes: []int8{1, -2, 127}}},
		{Kind: gossip.KindPushSum, From: "i", Weight: 0.5, Packed: &compress.Payload{Kind: compress.TopK, N: 300, Indices: []uint32{1, 170, 299}, Values: []float32{1, 2, 3}}},
		{Kind: gossip.KindModel, From: "j", Age: 5, Packed: &compress.Payload{Kind: compress.RandKInt8, N: 50, Seed: 99, Scales: []float32{0.25}, Bytes: []int8{3, -4}}},
		{Kind: gossip.KindHVForwardJoin, From: "k", View: []gossip.Descriptor{{ID: "joiner", Age: 6}}},
		{Kind: gossip.KindHVShuffle, From: "l", View: []gossip.Descriptor{{ID: "origin", Age: 3}, {ID: "x"}, {ID: "y"}}},
		{Kind: gossip.KindHVNeighbor, From: "m", Round: 1},
		{Kind: gossip.KindSecAdvert, From: "n", Round: 2, Secure: &gossip.SecureAgg{Receiver: "r", Advert: secagg.Advert{MaskKey: key(1), ChannelKey: key(2)}}},
		{Kind: gossip.KindSecRoster, From: "r", Round: 2, Secure: &gossip.SecureAgg{Receiver: "r", Roster: secagg.Roster{Members: []string{"n", "o"}, MaskKeys: [][]byte{key(1), key(3)}, ChannelKeys: [][]byte{key(2), key(4)}, Threshold: 2}}},
		{Kind: gossip.KindSecAdvert, From: "n", Round: 3, Secure: &gossip.SecureAgg{Receiver: "r", Advert: secagg.Advert{MaskKey: key(1), ChannelKey: key(2), Sig: bytes.Repeat([]byte{5}, 64)}}},
		{Kind: gossip.KindSecRoster, From: "r", Round: 3, Secure: &gossip.SecureAgg{Receiver: "r", Roster: secagg.Roster{Members: []string{"n", "o"}, MaskKeys: [][]byte{key(1), key(3)}, ChannelKeys: [][]byte{key(2), key(4)}, Threshold: 2,
			Sigs: [][]byte{bytes.Repeat([]byte{5}, 64), bytes.Repeat([]byte{6}, 64)}}}},
		{Kind: gossip.KindSecDealt, From: "n", Round: 2, Secure: &gossip.SecureAgg{Receiver: "r", Dealt: secagg.Dealt{Sealed: []secagg.Sealed{nil, []byte("sealed for o")}}}},
		{Kind: gossip.KindSecRelay, From: "r", Round: 2, Secure: &gossip.SecureAgg{Receiver: "r", Relay: secagg.Relay{Dealers: []int{0, 1}, Sealed: []secagg.Sealed{nil, []byte("from o")}}}},
		{Kind: gossip.KindSecMasked, From: "n", Round: 2, Weight: 0.5, Secure: &gossip.SecureAgg{Receiver: "r", Masked: []uint32{1, 1 << 31, 0xffffffff}}},
		{Kind: gossip.KindSecRequest, From: "r", Round: 2, Secure: &gossip.SecureAgg{Receiver: "r", Request: secagg.Request{Survivors: []int{0, 1}}}},
		{Kind: gossip.KindSecReveal, From: "n", Round: 2, Secure: &gossip.SecureAgg{Receiver: "r", Reveal: secagg.Reveal{
			Self: map[int]secagg.Share{0: {X: 1, Y: []byte{9, 8}}}, Key: map[int]secagg.Share{1: {X: 1, Y: []byte{7}}}}}},
	}
}

// key is a 32-byte test key.
func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestWireRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b, err := gossip.Encode(&m)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != gossip.EncodedSize(&m) {
			t.Fatalf("%s: %d bytes, EncodedSize %d", m.Kind, len(b), gossip.EncodedSize(&m))
		}
		got, err := gossip.Decode(b, gossip.DecodeLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", *got, m)
		}
	}
}

func TestWireErrors(t *testing.T) {
	m := sampleMessages()[0]
	good, _ := gossip.Encode(&m)
	flip := bytes.Clone(good)
	flip[20] ^= 1
	badVersion := bytes.Clone(good)
	badVersion[4] = 9
	for name, c := range map[string]struct {
		b    []byte
		lim  gossip.DecodeLimits
		want string
	}{
		"short":     {good[:6], gossip.DecodeLimits{}, "too short"},
		"magic":     {append([]byte("XXXX"), good[4:]...), gossip.DecodeLimits{}, "bad magic"},
		"version":   {badVersion, gossip.DecodeLimits{}, "version 9"},
		"checksum":  {flip, gossip.DecodeLimits{}, "checksum"},
		"truncated": {good[:len(good)-5], gossip.DecodeLimits{}, "checksum"},
		"too big":   {good, gossip.DecodeLimits{MaxBytes: 10}, "limit"},
	} {
		_, err := gossip.Decode(c.b, c.lim)
		if !errors.Is(err, gossip.ErrWire) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrWire mentioning %q", name, err, c.want)
		}
	}
}

// FuzzDecode: no input panics the decoder, and whatever decodes re-encodes
// to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		b, _ := gossip.Encode(&m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The fast path (borrowed floats, checksum left to the transport)
		// must never crash either, and must agree with the checked path
		// on everything but the checksum.
		fast, ferr := gossip.Decode(slices.Clone(b), gossip.DecodeLimits{MaxBytes: 1 << 20, Borrow: true, SkipChecksum: true})
		m, err := gossip.Decode(b, gossip.DecodeLimits{MaxBytes: 1 << 20})
		if err != nil {
			return
		}
		if ferr != nil || !reflect.DeepEqual(fast, m) {
			t.Fatalf("fast decode: %v, %+v; checked decode %+v", ferr, fast, m)
		}
		again, err := gossip.Encode(m)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// TestWriteMessageMatchesEncode: the streaming encoder writes exactly what
// Encode builds, for every kind of field (small and bulk float vectors).
func TestWriteMessageMatchesEncode(t *testing.T) {
	big := make([]float32, 5000)
	for i := range big {
		big[i] = float32(i) * 0.5
	}
	for _, m := range []*gossip.Message{
		{Kind: gossip.KindModel, From: "a", Params: big, Age: 3, Indices: []uint32{1, 2}},
		{Kind: gossip.KindFactors, From: "peer", Round: 9, Params: []float32{1, 2},
			Factors: []model.Factors{{Weight: "w1", K: 2, J: 3, D: 40, U: big[:6], V: big[:80]}}},
		{Kind: gossip.KindViewPush, From: "v", View: []gossip.Descriptor{{ID: "x", Age: 4}}},
	} {
		want, err := gossip.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := gossip.WriteMessage(&b, m); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), want) || len(want) != gossip.EncodedSize(m) {
			t.Fatalf("%s: streamed %d bytes, encoded %d (EncodedSize %d), equal %v", m.Kind, b.Len(), len(want), gossip.EncodedSize(m), bytes.Equal(b.Bytes(), want))
		}
		// Unchecked: the same bytes but a zero trailer; it decodes only
		// with SkipChecksum.
		var u bytes.Buffer
		if err := gossip.WriteMessageUnchecked(&u, m); err != nil {
			t.Fatal(err)
		}
		n := len(want) - 4
		if !bytes.Equal(u.Bytes()[:n], want[:n]) || !bytes.Equal(u.Bytes()[n:], []byte{0, 0, 0, 0}) {
			t.Fatalf("%s: unchecked encoding differs beyond its trailer", m.Kind)
		}
		if _, err := gossip.Decode(u.Bytes(), gossip.DecodeLimits{}); !errors.Is(err, gossip.ErrWire) {
			t.Fatalf("%s: a zero trailer passed the checksum: %v", m.Kind, err)
		}
		if _, err := gossip.Decode(u.Bytes(), gossip.DecodeLimits{SkipChecksum: true}); err != nil {
			t.Fatalf("%s: %v", m.Kind, err)
		}
	}
}

// TestDecodeBorrowAndSkipChecksum: Borrow shares the input's memory (when
// aligned), SkipChecksum accepts a wrong trailer but still rejects bad
// framing.
func TestDecodeBorrowAndSkipChecksum(t *testing.T) {
	// A 52-character sender, as libp2p Ed25519 IDs are, puts the
	// parameters at offset 88: 4-byte aligned.
	from := gossip.PeerID(strings.Repeat("p", 52))
	b, _ := gossip.Encode(&gossip.Message{Kind: gossip.KindModel, From: from, Params: []float32{1, 2, 3}})
	m, err := gossip.Decode(b, gossip.DecodeLimits{Borrow: true})
	if err != nil {
		t.Fatal(err)
	}
	m.Params[0] = 42
	if c, err := gossip.Decode(b, gossip.DecodeLimits{SkipChecksum: true}); err != nil || c.Params[0] != 42 {
		t.Fatalf("borrowed parameters are a copy: %v", err)
	}
	bad := slices.Clone(b)
	bad[len(bad)-1] ^= 0xff
	if _, err := gossip.Decode(bad, gossip.DecodeLimits{}); !errors.Is(err, gossip.ErrWire) {
		t.Fatalf("wrong checksum accepted: %v", err)
	}
	if _, err := gossip.Decode(bad, gossip.DecodeLimits{SkipChecksum: true}); err != nil {
		t.Fatalf("SkipChecksum: %v", err)
	}
	if _, err := gossip.Decode(bad[:len(bad)-9], gossip.DecodeLimits{SkipChecksum: true}); !errors.Is(err, gossip.ErrWire) {
		t.Fatalf("truncated message accepted: %v", err)
	}
}

// FuzzEdgeList: any bytes give a graph of n nodes whose edges are in range
// and symmetric, or an error.
func FuzzEdgeList(f *testing.F) {
	f.Add([]byte("# ring\n0 1\n1 2\n2 3\n3 0\n"))
	f.Add([]byte("0 9\n"))
	f.Add([]byte("a b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := gossip.EdgeList(b, 4)
		if err != nil {
			return
		}
		if g.N != 4 || len(g.Out) != 4 {
			t.Fatalf("graph of %d nodes", g.N)
		}
		for i, out := range g.Out {
			for _, j := range out {
				if j < 0 || j >= 4 || j == i || !slices.Contains(g.Out[j], i) {
					t.Fatalf("edge %d–%d in %v", i, j, g)
				}
			}
		}
	})
}
