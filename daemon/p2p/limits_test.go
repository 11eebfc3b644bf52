package p2p

import (
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestPeerLimiter, on a virtual clock: a peer's burst passes at once, the
// next frames wait for their allowance (the waits are what the rates say),
// a frame that would wait longer than the bound is refused without using
// the allowance, and other peers are unaffected.
func TestPeerLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	var slept []time.Duration
	pl := newPeerLimiter(Limits{PeerBytes: 250, PeerFrames: 4}, 2000, time.Second)
	pl.now = func() time.Time { return now }
	pl.sleep = func(d time.Duration) { slept = append(slept, d); now = now.Add(d) }
	a, b := peer.ID("a"), peer.ID("b")
	for k := 0; k < 4; k++ { // the frame burst (4), 400 of 2000 bytes
		if err := pl.admit(a, 100); err != nil {
			t.Fatal(err)
		}
	}
	if len(slept) != 0 {
		t.Fatalf("the burst waited: %v", slept)
	}
	if err := pl.admit(a, 100); err != nil { // one frame at 4/s: 250 ms
		t.Fatal(err)
	}
	if len(slept) != 1 || slept[0] != 250*time.Millisecond {
		t.Fatalf("waits %v, want [250ms]", slept)
	}
	// 1,562.5 bytes are left (2,000 − 500 + 62.5 refilled): 2,000 more
	// would wait 1.75 s, over the 1 s bound.
	if err := pl.admit(a, 2000); !errors.Is(err, errRateLimited) {
		t.Fatalf("a frame needing a 2 s wait: %v", err)
	}
	if err := pl.admit(b, 2000); err != nil { // another peer has its own allowance
		t.Fatal(err)
	}
	if err := pl.admit(a, 1500); err != nil {
		t.Fatal(err)
	}
	if got := slept[len(slept)-1]; got != 250*time.Millisecond {
		t.Fatalf("wait %v after a refused frame, want 250ms (the refusal must not use the allowance)", got)
	}
	off := newPeerLimiter(Limits{PeerBytes: -1, PeerFrames: -1}, 2000, time.Second)
	for k := 0; k < 1000; k++ {
		if err := off.admit(a, 2000); err != nil {
			t.Fatal(err)
		}
	}
}
