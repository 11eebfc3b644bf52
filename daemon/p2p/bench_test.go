package p2p

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
	gpeer "github.com/gossipd/gossipd/peer"
)

const rawProto protocol.ID = "/gossipd-bench/raw/1.0.0"

// BenchmarkGoodput compares, in one run over TCP on 127.0.0.1, a raw libp2p
// stream (bytes written and drained, nothing else; measured before and
// after) with gossipd's model exchange: encode a 1M-parameter model message
// (peer.EncodeWire, as the daemon's peer driver does), frame it, send it (frames pipeline on one long-lived stream), receive,
// decode it and hand its buffer back (as the daemon does once its core has
// merged a model); the clock stops when the last one is decoded. A third
// raw variant reads every message into a fresh buffer, as every receiver
// did before buffers were recycled. MB/s counts model payload.
func BenchmarkGoodput(b *testing.B) {
	const params = 1 << 20
	a, c := newHostB(b), newHostB(b)
	msg := &gossip.Message{Kind: gossip.KindModel, From: a.ID(), Params: make([]float32, params), Age: 1}
	for i := range msg.Params {
		msg.Params[i] = float32(i)
	}
	payload, _ := gossip.Encode(msg)
	ai := peer.AddrInfo{ID: c.h.ID(), Addrs: c.h.Addrs()}
	if err := a.h.Connect(context.Background(), ai); err != nil {
		b.Fatal(err)
	}
	// rawStream writes the encoded model again and again on one stream;
	// the receiver drains it (keep false) or, to show what landing the
	// bytes in fresh memory costs, reads each message into a new buffer.
	rawStream := func(keep bool) func(b *testing.B) {
		return func(b *testing.B) {
			done := make(chan int64, 1)
			c.h.SetStreamHandler(rawProto, func(s network.Stream) {
				var n int64
				if keep {
					for {
						k, err := io.ReadFull(s, make([]byte, len(payload)))
						n += int64(k)
						if err != nil {
							break
						}
					}
				} else {
					n, _ = io.Copy(io.Discard, s)
				}
				s.Close()
				done <- n
			})
			s, err := a.h.NewStream(context.Background(), c.h.ID(), rawProto)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if _, err := s.Write(payload); err != nil {
					b.Fatal(err)
				}
			}
			s.CloseWrite()
			<-done
			s.Close()
		}
	}
	b.Run("raw-stream", rawStream(false))
	// One receiver for the whole benchmark: b.Run may call the function
	// below more than once. It decodes every frame, as the daemon does.
	recvd := make(chan struct{}, 1024)
	go func() {
		for in := range c.Inbound() {
			if _, err := gossip.Decode(in.Payload, gossip.DecodeLimits{Borrow: true, SkipChecksum: in.Authenticated}); err != nil {
				panic(err)
			}
			in.Done() // as the daemon does once its core has merged the model
			recvd <- struct{}{}
		}
	}()
	b.Run("model-exchange", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		ctx := context.Background()
		sent := 0
		enc := wireEncoding(a.Authenticates())
		for b.Loop() {
			// As the daemon does: the peer driver encodes the message
			// into a pooled buffer, a sender hands the transport the bytes
			// and releases the buffer.
			f, w := encodeFrame(b, enc, msg)
			if err := a.Send(ctx, c.ID(), f); err != nil {
				panic(err)
			}
			w.Release()
			sent++
		}
		for ; sent > 0; sent-- { // the clock runs until the last frame is decoded
			<-recvd
		}
	})
	b.Run("raw-stream-again", rawStream(false))
	b.Run("raw-stream-fresh-buffers", rawStream(true))
}

// BenchmarkGoodputRatio measures the same two paths as BenchmarkGoodput
// but interleaved — batches of messages on the raw stream, then as many
// model exchanges, alternately — so that a machine whose speed drifts (a
// shared VM) slows both alike. It reports model-exchange goodput as a
// fraction of the raw stream's ("model/raw") and both rates.
func BenchmarkGoodputRatio(b *testing.B) {
	const params, batch = 1 << 20, 16
	a, c := newHostB(b), newHostB(b)
	msg := &gossip.Message{Kind: gossip.KindModel, From: a.ID(), Params: make([]float32, params), Age: 1}
	for i := range msg.Params {
		msg.Params[i] = float32(i)
	}
	payload, _ := gossip.Encode(msg)
	if err := a.h.Connect(context.Background(), peer.AddrInfo{ID: c.h.ID(), Addrs: c.h.Addrs()}); err != nil {
		b.Fatal(err)
	}
	rawGot := make(chan struct{}, batch)
	c.h.SetStreamHandler(rawProto, func(s network.Stream) {
		defer s.Close()
		for {
			if _, err := io.CopyN(io.Discard, s, int64(len(payload))); err != nil {
				return
			}
			rawGot <- struct{}{}
		}
	})
	modelGot := make(chan struct{}, batch)
	go func() {
		for in := range c.Inbound() {
			if _, err := gossip.Decode(in.Payload, gossip.DecodeLimits{Borrow: true, SkipChecksum: in.Authenticated}); err != nil {
				panic(err)
			}
			in.Done()
			modelGot <- struct{}{}
		}
	}()
	raw, err := a.h.NewStream(context.Background(), c.h.ID(), rawProto)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	ctx := context.Background()
	enc := wireEncoding(a.Authenticates())
	var rawT, modelT time.Duration
	b.SetBytes(int64(2 * batch * len(payload)))
	for b.Loop() {
		t0 := time.Now()
		for range batch {
			if _, err := raw.Write(payload); err != nil {
				b.Fatal(err)
			}
		}
		for range batch {
			<-rawGot
		}
		t1 := time.Now()
		for range batch {
			f, w := encodeFrame(b, enc, msg)
			if err := a.Send(ctx, c.ID(), f); err != nil {
				b.Fatal(err)
			}
			w.Release()
		}
		for range batch {
			<-modelGot
		}
		rawT += t1.Sub(t0)
		modelT += time.Since(t1)
	}
	mb := float64(b.N*batch*len(payload)) / 1e6
	b.ReportMetric(rawT.Seconds()/modelT.Seconds(), "model/raw")
	b.ReportMetric(mb/rawT.Seconds(), "raw-MB/s")
	b.ReportMetric(mb/modelT.Seconds(), "model-MB/s")
}

// wireEncoding is the peer driver's encoding over a transport that
// authenticates, or not (as daemon.New chooses it).
func wireEncoding(authenticated bool) gpeer.Encoding {
	if authenticated {
		return gpeer.EncodeAuthenticated
	}
	return gpeer.EncodeChecksummed
}

// encodeFrame encodes msg as the daemon's peer driver does (peer.Do.Wire),
// into a pooled buffer to Release once sent.
func encodeFrame(b *testing.B, enc gpeer.Encoding, msg *gossip.Message) (transport.Frame, *gpeer.Wire) {
	w, err := gpeer.EncodeWire(msg, enc)
	if err != nil {
		b.Fatal(err)
	}
	return transport.Frame{Kind: uint8(msg.Kind), Lane: transport.LaneModel, Payload: w.Bytes}, w
}

func newHostB(b *testing.B) *Host {
	// The per-peer rate limits (256 MiB/s, 200 frames/s by default) are
	// off: the benchmark measures how fast frames can go, not the policy.
	h, err := New(Config{Key: mustKey(b), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, ReadTimeout: time.Minute, PEXInterval: time.Hour,
		Limits: Limits{PeerBytes: -1, PeerFrames: -1}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}

// copyWriter stands for a stream: it copies what it is given (as a
// secure channel's encrypting writer does) into one reused buffer.
type copyWriter struct{ buf []byte }

func (w *copyWriter) Write(p []byte) (int, error) {
	for q := p; len(q) > 0; {
		q = q[copy(w.buf, q):]
	}
	return len(p), nil
}

// BenchmarkFrameOut is the sender's side of BenchmarkGoodput without the
// network: encode a 1M-parameter model message (peer.EncodeWire, as the
// daemon's peer driver does) and write its frame to a writer that copies it.
func BenchmarkFrameOut(b *testing.B) {
	msg := &gossip.Message{Kind: gossip.KindModel, From: "12D3KooWExample", Params: make([]float32, 1<<20), Age: 1}
	w := &copyWriter{buf: make([]byte, 256<<10)}
	enc := gpeer.EncodeAuthenticated
	b.SetBytes(int64(gossip.EncodedSize(msg)))
	b.ReportAllocs()
	for b.Loop() {
		f, wire := encodeFrame(b, enc, msg)
		if err := WriteFrame(w, f); err != nil {
			b.Fatal(err)
		}
		wire.Release()
	}
}
