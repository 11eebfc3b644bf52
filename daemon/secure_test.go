package daemon_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
)

// kindCounter is a memnet endpoint that counts the frames it sends by
// kind and, once mute is set, loses its masked contributions: a member
// that deals its shares and then vanishes before it contributes.
type kindCounter struct {
	*memnet.Endpoint
	mu   sync.Mutex
	sent map[gossip.Kind]int
	// signed counts the adverts sent with a signature.
	signed int
	mute   atomic.Bool
}

func (k *kindCounter) Send(ctx context.Context, to transport.PeerID, f transport.Frame) error {
	kind := gossip.Kind(f.Kind)
	if kind == gossip.KindSecMasked && k.mute.Load() {
		return nil // lost on the way
	}
	k.mu.Lock()
	k.sent[kind]++
	if kind == gossip.KindSecAdvert {
		if m, err := gossip.Decode(f.Payload, gossip.DecodeLimits{}); err == nil && len(m.Secure.Advert.Sig) > 0 {
			k.signed++
		}
	}
	k.mu.Unlock()
	return k.Endpoint.Send(ctx, to, f)
}

func (k *kindCounter) count(kind gossip.Kind) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sent[kind]
}

// TestSecureAggregationDaemons: four daemons run secure D-PSGD on a
// complete graph (each receiver's threshold: 2 of its 3 neighbours) on
// memnet, on the virtual clock. They learn (0.85 on digits) and no
// model or parameters ever go out in the clear: every exchange is one
// of the secure kinds, every advert signed (memnet's stand-in for the
// identity key). Then d003's masked contributions are lost for a
// while, after it has dealt its shares: every other receiver removes its
// masks with the survivors' shares (counted as recovered dropouts in
// /status) and goes on summing; then d003 crashes, and the three
// survivors go on summing each other. No round is corrupted: the
// survivors keep their accuracy. The same with four local steps a round
// and the outer Nesterov step (the local results go out masked).
func TestSecureAggregationDaemons(t *testing.T) {
	t.Run("one step a round", func(t *testing.T) { secureDaemons(t, nil) })
	t.Run("local steps", func(t *testing.T) {
		secureDaemons(t, &gossip.OuterConfig{Steps: 4, Method: gossip.OuterNesterov, LR: gossip.DefaultOuterLR, Momentum: gossip.DefaultOuterMomentum})
	})
}

func secureDaemons(t *testing.T, outer *gossip.OuterConfig) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		counters := make([]*kindCounter, n)
		r := start(t, memnet.New(), n, func(i int, c *daemon.Config) {
			c.Job.Protocol, c.Job.Topology, c.Job.DeltaMillis, c.Job.SecureAggregation, c.Job.Outer = gossip.DPSGD, "complete", 50, true, outer
			if err := c.Job.Validate(); err != nil {
				t.Fatal(err)
			}
			counters[i] = &kindCounter{Endpoint: c.Transport.(*memnet.Endpoint), sent: map[gossip.Kind]int{}}
			c.Transport = counters[i]
		})
		secure := func(i int) gossip.SecureCounts {
			s := r.nodes[i].Status()
			if s.Secure == nil {
				t.Fatalf("%s: /status has no secure rounds", s.PeerID)
			}
			return *s.Secure
		}
		waitFor(t, "every daemon at 0.85 with 20 secure rounds summed", 60*time.Second, func() bool {
			for i, nd := range r.nodes {
				if nd.Status().Accuracy < 0.85 || secure(i).Summed < 20 {
					return false
				}
			}
			return true
		})
		for i, c := range counters {
			if m, p := c.count(gossip.KindModel), c.count(gossip.KindParams); m+p > 0 || c.count(gossip.KindSecMasked) == 0 {
				t.Errorf("d%03d sent %d models and %d parameter vectors in the clear, %d masked", i, m, p, c.count(gossip.KindSecMasked))
			}
			c.mu.Lock()
			if ads := c.sent[gossip.KindSecAdvert]; c.signed != ads || ads == 0 {
				t.Errorf("d%03d signed %d of its %d adverts", i, c.signed, ads)
			}
			c.mu.Unlock()
			if s := secure(i); s.Recovered != 0 || s.ClearWithheld != 0 {
				t.Errorf("d%03d: %d dropouts recovered with nothing lost, %d clear messages withheld", i, s.Recovered, s.ClearWithheld)
			}
		}
		// d003 deals, then loses its contributions, for a while.
		counters[3].mute.Store(true)
		before := make([]gossip.SecureCounts, n)
		for i := range before {
			before[i] = secure(i)
		}
		waitFor(t, "every other daemon summing a round with d003's masks removed", 60*time.Second, func() bool {
			for i := range 3 {
				if s := secure(i); s.Recovered == before[i].Recovered || s.Summed < before[i].Summed+3 {
					return false
				}
			}
			return true
		})
		counters[3].mute.Store(false)
		for i := range before {
			before[i] = secure(i)
		}
		waitFor(t, "every daemon summing 10 more rounds, d003's contributions in again", 60*time.Second, func() bool {
			for i := range n {
				if secure(i).Summed < before[i].Summed+10 {
					return false
				}
			}
			return true
		})
		// d003 crashes; the others sum each other's.
		r.kill(3)
		for i := range 3 {
			before[i] = secure(i)
		}
		waitFor(t, "the survivors summing 20 more rounds", 60*time.Second, func() bool {
			for i := range 3 {
				if secure(i).Summed < before[i].Summed+20 {
					return false
				}
			}
			return true
		})
		for i := range 3 {
			s := r.nodes[i].Status()
			if s.Accuracy < 0.85 {
				t.Errorf("%s: accuracy %.3f after the dropouts", s.PeerID, s.Accuracy)
			}
			if s.Rejected["secure"] > 0 || s.Rejected["unmasked"] > 0 {
				t.Errorf("%s: rejected %v", s.PeerID, s.Rejected)
			}
			t.Logf("%s: %+v, accuracy %.3f, rejected %v", s.PeerID, *s.Secure, s.Accuracy, s.Rejected)
		}
	})
}
