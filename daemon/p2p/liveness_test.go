package p2p

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// fakeNet is three peers as the liveness check sees them: one that keeps
// talking, one that is silent but answers pings, and one that talks and
// then dies (its pings then go unanswered until they time out).
type fakeNet struct {
	mu      sync.Mutex
	present map[peer.ID]bool
	dead    map[peer.ID]bool
	pings   map[peer.ID]int
	dropped map[peer.ID]time.Time
}

func (f *fakeNet) peers() []peer.ID {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []peer.ID
	for p := range f.present {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (f *fakeNet) ping(ctx context.Context, p peer.ID) error {
	f.mu.Lock()
	f.pings[p]++
	dead := f.dead[p]
	f.mu.Unlock()
	if !dead {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (f *fakeNet) drop(p peer.ID, _ error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.present, p)
	f.dropped[p] = time.Now()
}

// TestLivenessBound checks the stated bound on virtual time: a peer that
// dies just after its last frame is dropped no sooner than Liveness +
// PingTimeout and no later than DeadPeerBound after it; a silent peer that
// answers and a talking one are never dropped, and the talking one is
// pinged only every rttEvery, for its round-trip time.
func TestLivenessBound(t *testing.T) {
	for _, c := range []struct{ interval, timeout, lastFrame time.Duration }{
		{DefaultLiveness, DefaultPingTimeout, 10 * time.Second},
		{DefaultLiveness, DefaultPingTimeout, 10*time.Second + 590*time.Millisecond},
		{time.Second, 500 * time.Millisecond, 7*time.Second + 10*time.Millisecond},
	} {
		synctest.Test(t, func(t *testing.T) {
			const talker, quiet, dying = peer.ID("talker"), peer.ID("quiet"), peer.ID("dying")
			f := &fakeNet{present: map[peer.ID]bool{talker: true, quiet: true, dying: true},
				dead: map[peer.ID]bool{}, pings: map[peer.ID]int{}, dropped: map[peer.ID]time.Time{}}
			l := &liveness{interval: c.interval, timeout: c.timeout, peers: f.peers, ping: f.ping, drop: f.drop}
			ctx, cancel := context.WithCancel(t.Context())
			start := time.Now()
			var wg sync.WaitGroup
			wg.Go(func() { l.run(ctx) })
			wg.Go(func() { // the talker and, until it dies, the dying peer send a frame every 100 ms
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
					l.heard(talker)
					if time.Since(start) <= c.lastFrame {
						l.heard(dying)
					}
				}
			})
			time.Sleep(c.lastFrame + 50*time.Millisecond)
			f.mu.Lock()
			f.dead[dying] = true
			f.mu.Unlock()
			const run = 65 * time.Second
			time.Sleep(run - c.lastFrame - 50*time.Millisecond)
			cancel()
			wg.Wait()

			last := start.Add(c.lastFrame.Truncate(100 * time.Millisecond)) // the ticker's last frame
			at, ok := f.dropped[dying]
			if !ok {
				t.Fatalf("liveness %v, ping timeout %v: the dead peer was never dropped", c.interval, c.timeout)
			}
			after := at.Sub(last)
			if lo, hi := c.interval+c.timeout, DeadPeerBound(c.interval, c.timeout); after < lo || after > hi {
				t.Errorf("liveness %v, ping timeout %v: the dead peer was dropped %v after its last frame, want within [%v, %v]",
					c.interval, c.timeout, after, lo, hi)
			}
			if len(f.dropped) != 1 || l.dropped.Load() != 1 {
				t.Errorf("dropped %v (counted %d), want the dead peer only", f.dropped, l.dropped.Load())
			}
			if f.pings[quiet] < int(run/c.interval)-2 {
				t.Errorf("the quiet peer was pinged %d times in %v, want about one per %v", f.pings[quiet], run, c.interval)
			}
			if want := int(run/rttEvery) + 1; f.pings[talker] != want {
				t.Errorf("the talking peer was pinged %d times in %v, want %d (its RTT every %v)", f.pings[talker], run, want, rttEvery)
			}
		})
	}
}
