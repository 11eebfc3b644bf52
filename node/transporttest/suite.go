// Package transporttest is the conformance suite every node.Transport must
// pass: delivery with the sender's identity, payload integrity, large
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

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/node"
)

// Factory makes n transports that can all reach each other.
type Factory func(t *testing.T, n int) []node.Transport

// timeout bounds every wait in the suite.
const timeout = 20 * time.Second

func recv(t *testing.T, tr node.Transport) node.Inbound {
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
	return node.Inbound{}
}

// Run runs the suite.
func Run(t *testing.T, makeN Factory) {
	t.Run("Deliver", func(t *testing.T) {
		trs := makeN(t, 2)
		a, b := trs[0], trs[1]
		f := node.Frame{Job: node.JobID{1, 2, 3}, Kind: gossip.KindModel, Payload: []byte("hello")}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := a.Send(ctx, b.ID(), f); err != nil {
			t.Fatal(err)
		}
		in := recv(t, b)
		if in.From != a.ID() || in.Job != f.Job || in.Kind != f.Kind || !bytes.Equal(in.Payload, f.Payload) {
			t.Fatalf("received %+v, sent %+v from %s", in, f, a.ID())
		}
		if !slices.Contains(a.Peers(), b.ID()) {
			t.Fatalf("%s does not list %s among its peers %v", a.ID(), b.ID(), a.Peers())
		}
	})
	t.Run("LargeFrame", func(t *testing.T) {
		trs := makeN(t, 2)
		big := bytes.Repeat([]byte{0xAB, 0xCD, 0xEF}, 3<<20/3) // 3 MiB
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := trs[0].Send(ctx, trs[1].ID(), node.Frame{Kind: gossip.KindParams, Payload: big}); err != nil {
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
					if err := s.Send(ctx, trs[2].ID(), node.Frame{Kind: gossip.KindModel, Payload: p}); err != nil {
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
			err := trs[0].Send(ctx, gone, node.Frame{Kind: gossip.KindModel, Payload: []byte("x")})
			if err != nil {
				if !errors.Is(err, node.ErrUnreachable) {
					t.Fatalf("send to a closed peer: %v, want ErrUnreachable", err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("sends to a closed peer kept succeeding")
			}
		}
		if err := trs[0].Send(ctx, "no-such-peer", node.Frame{}); !errors.Is(err, node.ErrUnreachable) {
			t.Fatalf("send to an unknown peer: %v", err)
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
