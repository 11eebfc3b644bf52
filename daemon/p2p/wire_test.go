package p2p

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/model"
	gpeer "github.com/gossipd/gossipd/peer"
)

// wireMessages are the messages of TestWireGolden.
func wireMessages() map[string]*gossip.Message {
	p70 := make([]float32, 70) // over the 64 floats the streaming encoder writes through
	for i := range p70 {
		p70[i] = float32(i) - 3
	}
	big := make([]float32, 1<<20)
	for i := range big {
		big[i] = float32(i) * 0.5
	}
	return map[string]*gossip.Message{
		"model": {Kind: gossip.KindModel, From: "a", Params: p70, Age: 42, Sent: 1.5},
		"factors": {Kind: gossip.KindFactors, From: "c", Round: 3, Params: []float32{1, 2},
			Factors: []model.Factors{{Weight: "fc1.weight", K: 2, J: 1, D: 3, U: []float32{1, 2}, V: []float32{1, 2, 3, 4, 5, 6}}}},
		"view-push": {Kind: gossip.KindViewPush, From: "d", View: []gossip.Descriptor{{ID: "x", Age: 7}, {ID: "y", Age: 3}}},
		"params":    {Kind: gossip.KindParams, From: "g", Round: 4, Packed: &compress.Payload{Kind: compress.FP16, N: 2, Half: []uint16{0x3c00, 0xc000}}},
		"big-model": {Kind: gossip.KindModel, From: "big", Params: big, Age: 1},
	}
}

// TestWireGolden pins the bytes a daemon writes on a libp2p stream for a
// message: the frame header, then the payload the peer driver encoded for
// a transport that authenticates (Host.Authenticates: the message's
// CRC-32C trailer left zero). The bytes were recorded when the transport
// still encoded the message itself as it wrote it (peer.Body); they must
// not change without a new FrameVersion or gossip.WireVersion.
func TestWireGolden(t *testing.T) {
	golden := map[string]string{
		"model": "" +
			"5d01000001010102030000000000000000000000000000000000000000000000000000000000a11e380f475350440401" +
			"000000000000000000000000000045400000000000000000000000000000f83f01006146000000000040c0000000c000" +
			"0080bf000000000000803f0000004000004040000080400000a0400000c0400000e04000000041000010410000204100" +
			"00304100004041000050410000604100007041000080410000884100009041000098410000a0410000a8410000b04100" +
			"00b8410000c0410000c8410000d0410000d8410000e0410000e8410000f0410000f84100000042000004420000084200" +
			"000c4200001042000014420000184200001c4200002042000024420000284200002c4200003042000034420000384200" +
			"003c4200004042000044420000484200004c4200005042000054420000584200005c4200006042000064420000684200" +
			"006c4200007042000074420000784200007c420000804200008242000084420000000000000000000000000000000000" +
			"00000000000000",
		"factors": "" +
			"8500000001060102030000000000000000000000000000000000000000000000000000000000d8226d89475350440406" +
			"0300000000000000000000000000000000000000000000000000000000000000010063020000000000803f0000004000" +
			"0000000000000001000a006663312e7765696768740200000001000000030000000000803f000000400000803f000000" +
			"4000004040000080400000a0400000c0400000000000000000000000000000",
		"view-push": "" +
			"5b000000010701020300000000000000000000000000000000000000000000000000000000002155eaa5475350440407" +
			"000000000000000000000000000000000000000000000000000000000000000001006400000000000000000000000000" +
			"00020001007807000000000000000100790300000000000000000000000000000000000000",
		"params": "" +
			"4e00000001020102030000000000000000000000000000000000000000000000000000000000d62bcdf5475350440402" +
			"040000000000000000000000000000000000000000000000000000000000000001006700000000000000000000000000" +
			"000000090000000102000000003c00c00000000000000000",
	}
	bigSHA := "ead18e8a20b7b83242690d3e6fd7911d1df7835dd96cf8303ad2a6f525da421a"
	h := &Host{}
	enc := wireEncoding(h.Authenticates())
	for name, m := range wireMessages() {
		w, err := gpeer.EncodeWire(m, enc)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteFrame(&b, transport.Frame{Job: transport.JobID{1, 2, 3}, Kind: uint8(m.Kind), Lane: transport.LaneModel, Payload: w.Bytes}); err != nil {
			t.Fatal(err)
		}
		w.Release()
		if name == "big-model" {
			if got := sha256.Sum256(b.Bytes()); hex.EncodeToString(got[:]) != bigSHA {
				t.Errorf("%s: frame of %d bytes hashes to %x, want %s", name, b.Len(), got, bigSHA)
			}
			continue
		}
		if got := hex.EncodeToString(b.Bytes()); got != golden[name] {
			t.Errorf("%s: frame\n%s\nwant\n%s", name, got, golden[name])
		}
		// What arrives decodes with the checksum skipped (Inbound.Authenticated).
		f, err := ReadFrame(&b, DefaultMaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gossip.Decode(f.Payload, gossip.DecodeLimits{SkipChecksum: true}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
