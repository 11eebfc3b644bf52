package daemon_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/gossip"
)

// TestPartialViews: 60 daemons (race builds: 24) in one process over
// memnet run a random-walk job, then a D-PSGD and a push-sum job, with
// --sampling hyparview (D-PSGD and push-sum mix with the active view). Each keeps an
// active view of at most 8 neighbours, which settles to 3 or more with
// links held at both ends, and every daemon learns: the mean accuracy
// passes 0.85 and none is left at its initial model. Then a third of them
// stop at once; the survivors drop every stopped peer from their active
// views, none is left isolated, and they keep learning.
func TestPartialViews(t *testing.T) {
	for _, proto := range []string{gossip.RandomWalk, gossip.DPSGD, gossip.PushSum} {
		t.Run(proto, func(t *testing.T) { testPartialViews(t, proto) })
	}
}

func testPartialViews(t *testing.T, proto string) {
	synctest.Test(t, func(t *testing.T) {
		n := 60
		if raceEnabled {
			n = 24
		}
		r := start(t, memnet.New(), n, func(i int, c *daemon.Config) {
			c.Job.DeltaMillis = 100
			c.Job.Protocol, c.Job.Sampling = proto, gossip.SamplingHyParView
			c.EvalInterval = 500 * time.Millisecond
			c.Senders = 2
		})
		views := func(nodes []*daemon.Node) (minView, maxView, asym int, ids map[gossip.PeerID][]gossip.PeerID) {
			ids = map[gossip.PeerID][]gossip.PeerID{}
			for _, nd := range nodes {
				s := nd.Status()
				ids[s.PeerID] = s.ActiveView
			}
			minView = 1 << 30
			for id, v := range ids {
				minView, maxView = min(minView, len(v)), max(maxView, len(v))
				for _, q := range v {
					if back, ok := ids[q]; ok && !slices.Contains(back, id) {
						asym++
					}
				}
			}
			return minView, maxView, asym, ids
		}
		mean := func(nodes []*daemon.Node) (float64, int) {
			s, stuck := 0.0, 0
			for _, nd := range nodes {
				st := nd.Status()
				s += st.Accuracy
				if st.Updates == 0 {
					stuck++
				}
			}
			return s / float64(len(nodes)), stuck
		}
		waitFor(t, "active views of 3…8 held at both ends", 60*time.Second, func() bool {
			lo, hi, asym, _ := views(r.nodes)
			return lo >= 3 && hi <= gossip.DefaultActiveView && asym == 0
		})
		waitFor(t, "mean accuracy ≥ 0.85, every daemon updated", 120*time.Second, func() bool {
			m, stuck := mean(r.nodes)
			return m >= 0.85 && stuck == 0
		})
		m, _ := mean(r.nodes)
		lo, hi, _, _ := views(r.nodes)
		t.Logf("%d daemons: active views %d…%d, mean accuracy %.3f", n, lo, hi, m)

		// A third stop at once (no goodbye: their endpoints close).
		dead := map[gossip.PeerID]bool{}
		var live []*daemon.Node
		for i, nd := range r.nodes {
			if i%3 == 0 {
				dead[nd.Status().PeerID] = true
				r.kill(i)
				continue
			}
			live = append(live, nd)
		}
		waitFor(t, "no survivor's active view names a stopped daemon, none isolated", 60*time.Second, func() bool {
			lo, hi, _, ids := views(live)
			for _, v := range ids {
				for _, q := range v {
					if dead[q] {
						return false
					}
				}
			}
			return lo >= 1 && hi <= gossip.DefaultActiveView
		})
		before := map[gossip.PeerID]uint64{}
		for _, nd := range live {
			s := nd.Status()
			before[s.PeerID] = s.Updates
		}
		waitFor(t, "every survivor updates again", 30*time.Second, func() bool {
			for _, nd := range live {
				s := nd.Status()
				if s.Updates <= before[s.PeerID] {
					return false
				}
			}
			return true
		})
		lo, hi, _, _ = views(live)
		t.Logf("after %d of %d stopped: survivors' active views %d…%d", len(dead), n, lo, hi)
	})
}
