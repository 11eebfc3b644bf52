package daemon_test

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/gossip"
)

// TestPartialViewsAtScale runs GOSSIPD_SCALE_DAEMONS daemons (skipped when
// unset: `GOSSIPD_SCALE_DAEMONS=2000 go test ./daemon -run AtScale -v`)
// in one process over memnet, random walk under --sampling hyparview, and
// reports for the fleet: the peers each daemon exchanged frames with in
// the last 10 s of virtual time (what it would hold connections to),
// active view sizes, how long until every daemon is at 0.8, and the same
// after a third are killed at once. It asserts what must hold at any
// size: views bounded by 8, none isolated, every daemon learning.
func TestPartialViewsAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GOSSIPD_SCALE_DAEMONS"))
	if n == 0 {
		t.Skip("set GOSSIPD_SCALE_DAEMONS to the fleet size")
	}
	synctest.Test(t, func(t *testing.T) {
		r := start(t, memnet.New(), n, func(i int, c *daemon.Config) {
			c.Job.DeltaMillis = 1000
			c.Job.Sampling = gossip.SamplingHyParView
			c.EvalInterval = 5 * time.Second
			c.Senders = 1
		})
		report := func(what string, nodes []*daemon.Node, since time.Time) {
			var talk, view []int
			minAcc := 1.0
			for _, nd := range nodes {
				s := nd.Status()
				k := 0
				for _, tr := range s.Traffic {
					if time.Since(tr.Last) <= 10*time.Second {
						k++
					}
				}
				talk, view = append(talk, k), append(view, len(s.ActiveView))
				minAcc = min(minAcc, s.Accuracy)
			}
			slices.Sort(talk)
			slices.Sort(view)
			t.Logf("%s: %d daemons after %v: peers talked to in the last 10 s median %d, max %d; active view min %d, median %d, max %d; least accuracy %.3f",
				what, len(nodes), time.Since(since).Round(time.Second), talk[len(talk)/2], talk[len(talk)-1], view[0], view[len(view)/2], view[len(view)-1], minAcc)
			if view[0] < 1 || view[len(view)-1] > gossip.DefaultActiveView {
				t.Errorf("%s: active views %d…%d, want 1…%d", what, view[0], view[len(view)-1], gossip.DefaultActiveView)
			}
		}
		all := func(nodes []*daemon.Node, acc float64) func() bool {
			return func() bool {
				for _, nd := range nodes {
					if nd.Status().Accuracy < acc {
						return false
					}
				}
				return true
			}
		}
		t0 := time.Now()
		waitFor(t, "every daemon at ≥ 0.8", 600*time.Second, all(r.nodes, 0.8))
		report("all up", r.nodes, t0)
		var live []*daemon.Node
		for i, nd := range r.nodes {
			if i%3 == 0 {
				r.kill(i)
				continue
			}
			live = append(live, nd)
		}
		t1 := time.Now()
		waitFor(t, "no survivor isolated, none naming a dead peer", 120*time.Second, func() bool {
			for _, nd := range live {
				v := nd.Status().ActiveView
				if len(v) == 0 {
					return false
				}
				for _, q := range v {
					var i int
					if _, err := fmtSscan(q, &i); err == nil && i%3 == 0 {
						return false
					}
				}
			}
			return true
		})
		report("views healed after a third killed", live, t1)
		waitFor(t, "every survivor at ≥ 0.8", 120*time.Second, all(live, 0.8))
		report("survivors at 0.8", live, t1)
	})
}

// fmtSscan reads the index out of a test daemon's ID ("d042").
func fmtSscan(id gossip.PeerID, i *int) (int, error) {
	v, err := strconv.Atoi(id[1:])
	*i = v
	return 1, err
}
