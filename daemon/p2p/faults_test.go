package p2p_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/daemon/p2p/p2ptest"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
)

// TestBrokenStreamIsAFault: a stream that ends in the middle of a frame
// (the sender died or the connection broke) is reported as a network
// fault, stream_broken, and not as bad input from the peer; a frame with
// a corrupt header is still a reject (bad_frame).
func TestBrokenStreamIsAFault(t *testing.T) {
	key, err := p2p.NewEphemeralKey()
	if err != nil {
		t.Fatal(err)
	}
	h, err := p2p.New(p2p.Config{Key: key, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: p2p.DHTOff, NoPEX: true, ReadTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	raw, err := p2ptest.New()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	to, err := raw.Connect(ctx, h.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	p2p.WriteFrame(&b, transport.Frame{Kind: uint8(gossip.KindParams), Payload: make([]byte, 64)})
	frame := b.Bytes()
	next := func() transport.Inbound {
		select {
		case in := <-h.Inbound():
			return in
		case <-ctx.Done():
			t.Fatal("no report from the host")
		}
		return transport.Inbound{}
	}
	// Half a frame, then the stream ends.
	if err := raw.SendRaw(ctx, to, p2p.ProtocolFor(transport.LaneParams), frame[:len(frame)-10]); err != nil {
		t.Fatal(err)
	}
	if in := next(); in.Fault != "stream_broken" || in.Reject != "" {
		t.Fatalf("a stream broken mid-frame: fault %q, reject %q (%v)", in.Fault, in.Reject, in.Err)
	}
	// A corrupt header is bad input.
	bad := bytes.Clone(frame)
	bad[10] ^= 1
	if err := raw.SendRaw(ctx, to, p2p.ProtocolFor(transport.LaneParams), bad); err != nil {
		t.Fatal(err)
	}
	if in := next(); in.Reject != "bad_frame" || in.Fault != "" {
		t.Fatalf("a corrupt header: fault %q, reject %q (%v)", in.Fault, in.Reject, in.Err)
	}
}
