// Package transporttest is the conformance suite every transport.Transport must
// pass: delivery with the sender's identity, payload integrity (and
// Inbound.Authenticated as the transport's Authenticates says), large
// frames, concurrency, unreachable peers, and Close.
package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
)

// Factory makes n transports that can all reach each other.
type Factory func(t *testing.T, n int) []transport.Transport

// timeout bounds every wait in the suite.
const timeout = 20 * time.Second

func recv(t *testing.T, tr transport.Transport) transport.Inbound {
	t.Helper()
	select {
	case in, ok := <-tr.Inbound():
		if !ok {
			t.Fatal("inbound closed")
		}
		return in
	case <-time.After(timeout):
		t.Fatalf("%s: nothing received in %v", tr.ID(), timeout)
	}
	return transport.Inbound{}
}

// Run runs the suite.
func Run(t *testing.T, makeN Factory) {
	t.Run("Deliver", func(t *testing.T) {
		trs := makeN(t, 2)
		a, b := trs[0], trs[1]
		f := transport.Frame{Job: transport.JobID{1, 2, 3}, Kind: 1, Lane: transport.LaneModel, Payload: []byte("hello")}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := a.Send(ctx, b.ID(), f); err != nil {
			t.Fatal(err)
		}
		in := recv(t, b)
		if in.From != a.ID() || in.Job != f.Job || in.Kind != f.Kind || !bytes.Equal(in.Payload, f.Payload) {
			t.Fatalf("received %+v, sent %+v from %s", in, f, a.ID())
		}
		if in.Authenticated != b.Authenticates() {
			t.Fatalf("received a frame with Authenticated %v from a transport whose Authenticates is %v", in.Authenticated, b.Authenticates())
		}
		if !slices.Contains(a.Peers(), b.ID()) {
			t.Fatalf("%s does not list %s among its peers %v", a.ID(), b.ID(), a.Peers())
		}
	})
	t.Run("PayloadNotRetained", func(t *testing.T) {
		trs := makeN(t, 2)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		buf := bytes.Repeat([]byte{7}, 1<<20)
		for k := byte(1); k <= 3; k++ { // reuse one buffer, as the daemon does
			for i := range buf {
				buf[i] = k
			}
			if err := trs[0].Send(ctx, trs[1].ID(), transport.Frame{Kind: 1, Lane: transport.LaneModel, Payload: buf}); err != nil {
				t.Fatal(err)
			}
		}
		for k := byte(1); k <= 3; k++ {
			in := recv(t, trs[1])
			if !bytes.Equal(in.Payload, bytes.Repeat([]byte{k}, 1<<20)) {
				t.Fatalf("frame %d altered after Send returned (starts %v)", k, in.Payload[:4])
			}
		}
	})
	t.Run("LargeFrame", func(t *testing.T) {
		trs := makeN(t, 2)
		big := bytes.Repeat([]byte{0xAB, 0xCD, 0xEF}, 3<<20/3) // 3 MiB
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := trs[0].Send(ctx, trs[1].ID(), transport.Frame{Kind: 2, Lane: transport.LaneParams, Payload: big}); err != nil {
			t.Fatal(err)
		}
		if in := recv(t, trs[1]); !bytes.Equal(in.Payload, big) {
			t.Fatalf("3 MiB frame arrived as %d bytes, altered", len(in.Payload))
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		trs := makeN(t, 3)
		const per = 20
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		for _, s := range trs[:2] {
			wg.Go(func() {
				for k := 0; k < per; k++ {
					p := []byte(fmt.Sprintf("%s-%d", s.ID(), k))
					if err := s.Send(ctx, trs[2].ID(), transport.Frame{Kind: 1, Lane: transport.LaneModel, Payload: p}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		got := map[string]bool{}
		for k := 0; k < 2*per; k++ {
			in := recv(t, trs[2])
			want := string(in.From) + "-"
			if !bytes.HasPrefix(in.Payload, []byte(want)) {
				t.Fatalf("payload %q from %s", in.Payload, in.From)
			}
			got[string(in.Payload)] = true
		}
		if len(got) != 2*per {
			t.Fatalf("%d distinct frames of %d", len(got), 2*per)
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		trs := makeN(t, 2)
		gone := trs[1].ID()
		if err := trs[1].Close(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		deadline := time.Now().Add(timeout)
		for {
			err := trs[0].Send(ctx, gone, transport.Frame{Kind: 1, Lane: transport.LaneModel, Payload: []byte("x")})
			if err != nil {
				if !errors.Is(err, transport.ErrUnreachable) {
					t.Fatalf("send to a closed peer: %v, want ErrUnreachable", err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("sends to a closed peer kept succeeding")
			}
		}
		if err := trs[0].Send(ctx, "no-such-peer", transport.Frame{}); !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("send to an unknown peer: %v", err)
		}
	})
	t.Run("Broadcast", func(t *testing.T) {
		trs := makeN(t, 4)
		bs := make([]transport.Broadcaster, len(trs))
		for i, tr := range trs {
			b, ok := tr.(transport.Broadcaster)
			if !ok {
				t.Skipf("%T does not implement transport.Broadcaster", tr)
			}
			bs[i] = b
		}
		jobX, jobY := transport.JobID{'x'}, transport.JobID{'y'}
		for _, b := range bs[:3] {
			if err := b.Join(jobX); err != nil {
				t.Fatal(err)
			}
		}
		if err := bs[3].Join(jobY); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		// Subscriptions propagate asynchronously: publish until each member
		// of X has one frame (bounded by the suite's timeout).
		fx := transport.Frame{Job: jobX, Kind: 6, Lane: transport.LaneFactors, Payload: []byte("to all of x")}
		publishUntil(t, ctx, bs[0], fx, bs[1], bs[2])
		fy := transport.Frame{Job: jobY, Kind: 6, Lane: transport.LaneFactors, Payload: []byte("to all of y")}
		publishUntil(t, ctx, bs[0], fy, bs[3])

		a := transport.Announcement{JobID: jobX.String(), Name: "suite", Protocol: "sfb", Updates: 7}
		deadline := time.Now().Add(timeout)
		for {
			if err := bs[0].Announce(ctx, a); err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(bs[1].Announcements(), func(x transport.Announcement) bool { return x.Peer == bs[0].ID() })
			if i >= 0 {
				got := bs[1].Announcements()[i]
				if got.JobID != a.JobID || got.Updates != 7 || got.Name != "suite" {
					t.Fatalf("announcement %+v, sent %+v", got, a)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("announcement never heard")
			}
			time.Sleep(50 * time.Millisecond) // poll interval of a bounded wait
		}
	})
	t.Run("CloseEndsInbound", func(t *testing.T) {
		trs := makeN(t, 1)
		if err := trs[0].Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case _, ok := <-trs[0].Inbound():
			if ok {
				t.Fatal("frame after Close")
			}
		case <-time.After(timeout):
			t.Fatal("Inbound not closed by Close")
		}
	})
}

// publishUntil publishes f from src until every one of dst has received it
// as its first frame (the first frame each receives must be f, from src:
// frames of other jobs must not leak in).
func publishUntil(t *testing.T, ctx context.Context, src transport.Broadcaster, f transport.Frame, dst ...transport.Broadcaster) {
	t.Helper()
	pending := slices.Clone(dst)
	deadline := time.Now().Add(timeout)
	for len(pending) > 0 {
		if err := src.Publish(ctx, f); err != nil {
			t.Fatal(err)
		}
		wait := time.After(100 * time.Millisecond)
	collect:
		for len(pending) > 0 {
			cases := pending
			got := false
			for i, d := range cases {
				select {
				case in := <-d.Inbound():
					if in.From != src.ID() || in.Job != f.Job || in.Kind != f.Kind || !bytes.Equal(in.Payload, f.Payload) {
						t.Fatalf("%s received %+v, want %q from %s", d.ID(), in, f.Payload, src.ID())
					}
					if in.Authenticated != d.Authenticates() {
						t.Fatalf("%s received a broadcast with Authenticated %v, its Authenticates is %v", d.ID(), in.Authenticated, d.Authenticates())
					}
					pending = slices.Delete(pending, i, i+1)
					drain(d)
					got = true
				default:
				}
				if got {
					break
				}
			}
			if got {
				continue
			}
			select {
			case <-wait:
				break collect
			case <-time.After(5 * time.Millisecond):
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("published frame not received by %d peer(s)", len(pending))
		}
	}
}

// drain discards frames already queued (repeated publishes).
func drain(d transport.Transport) {
	for {
		select {
		case <-d.Inbound():
		default:
			return
		}
	}
}
