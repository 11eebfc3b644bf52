package gossip_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
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
	}
}

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
		m, err := gossip.Decode(b, gossip.DecodeLimits{MaxBytes: 1 << 20})
		if err != nil {
			return
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
