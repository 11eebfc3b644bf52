package daemon_test

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
)

// TestPartialViewsAtScale runs GOSSIPD_SCALE_DAEMONS daemons (skipped when
// unset: `GOSSIPD_SCALE_DAEMONS=2000 GOSSIPD_SCALE_DATASET=fashion-mnist
// go test ./daemon -run AtScale -v -timeout 60m`) in one process over memnet, random
// walk under --sampling hyparview, on IID shards of GOSSIPD_SCALE_DATASET
// (digits, the default, has 1,438 examples: up to about 1,400 daemons;
// Fashion-MNIST is evaluated on the first 500 test examples), and
// reports for the fleet: the peers each daemon exchanged frames with in
// the last 10 s of virtual time (what it would hold connections to),
// active view sizes and in-degrees, isolated members, membership bytes
// per member in the minute after every daemon reached the target (and
// again after the kill), how long until every daemon is at
// GOSSIPD_SCALE_TARGET (0.8 on digits, 0.7 on Fashion-MNIST, whose shards
// are 30 examples at 2,000 daemons), and the
// same after 30% are killed at once. It asserts what must hold at any
// size: views bounded by 8, none isolated, every daemon learning.
func TestPartialViewsAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GOSSIPD_SCALE_DAEMONS"))
	if n == 0 {
		t.Skip("set GOSSIPD_SCALE_DAEMONS to the fleet size")
	}
	name := cmp.Or(os.Getenv("GOSSIPD_SCALE_DATASET"), "digits")
	target, lr := 0.8, 0.5
	if name != "digits" {
		target, lr = 0.7, gossip.DefaultLR
	}
	if s := os.Getenv("GOSSIPD_SCALE_TARGET"); s != "" {
		var err error
		if target, err = strconv.ParseFloat(s, 64); err != nil {
			t.Fatalf("GOSSIPD_SCALE_TARGET: %v", err)
		}
	}
	parts, test := shardsOf(t, name, n, 500)
	synctest.Test(t, func(t *testing.T) {
		r := startOn(t, memnet.New(), parts, test, func(i int, c *daemon.Config) {
			c.Job.Model = model.Spec{Kind: model.Softmax, Inputs: test.D, Classes: test.Classes}
			c.Local.LR = lr
			c.Job.DeltaMillis = 1000
			c.Job.Sampling = gossip.SamplingHyParView
			c.EvalInterval = 5 * time.Second
			c.Senders = 1
		})
		// minute measures each node's membership bytes over the next
		// minute of virtual time (in + out), per member.
		minute := func(nodes []*daemon.Node) float64 {
			total := func() float64 {
				b := 0.0
				for _, nd := range nodes {
					s := nd.Status()
					b += float64(s.MembershipBytes.In + s.MembershipBytes.Out)
				}
				return b
			}
			before := total()
			time.Sleep(time.Minute) // virtual time: the window measured, not a wait for an event
			return (total() - before) / float64(len(nodes))
		}
		report := func(what string, nodes []*daemon.Node, since time.Time) {
			var talk, view, in []int
			indeg := map[gossip.PeerID]int{}
			minAcc, meanAcc := 1.0, 0.0
			var ids []gossip.PeerID
			for _, nd := range nodes {
				s := nd.Status()
				ids = append(ids, s.PeerID)
				k := 0
				for _, tr := range s.Traffic {
					if time.Since(tr.Last) <= 10*time.Second {
						k++
					}
				}
				talk, view = append(talk, k), append(view, len(s.ActiveView))
				minAcc = min(minAcc, s.Accuracy)
				meanAcc += s.Accuracy / float64(len(nodes))
				for _, q := range s.ActiveView {
					indeg[q]++
				}
			}
			isolated := 0
			for _, id := range ids {
				in = append(in, indeg[id])
				if indeg[id] == 0 {
					isolated++
				}
			}
			slices.Sort(talk)
			slices.Sort(view)
			slices.Sort(in)
			t.Logf("%s: %d daemons after %v: peers talked to in the last 10 s median %d, max %d; active view min %d, median %d, max %d; in-degree min %d, median %d, max %d; %d isolated; accuracy now least %.3f, mean %.3f",
				what, len(nodes), time.Since(since).Round(time.Second), talk[len(talk)/2], talk[len(talk)-1], view[0], view[len(view)/2], view[len(view)-1],
				in[0], in[len(in)/2], in[len(in)-1], isolated, minAcc, meanAcc)
			if view[0] < 1 || view[len(view)-1] > gossip.DefaultActiveView {
				t.Errorf("%s: active views %d…%d, want 1…%d", what, view[0], view[len(view)-1], gossip.DefaultActiveView)
			}
		}
		// all holds once every node has been at acc at least once since
		// it was made (a random walk's model is the last one merged, so
		// a member's accuracy moves up and down around the fleet's).
		all := func(nodes []*daemon.Node, acc float64) func() bool {
			reached := make([]bool, len(nodes))
			from, logged := time.Now(), time.Now()
			return func() bool {
				k := 0
				for i, nd := range nodes {
					reached[i] = reached[i] || nd.Status().Accuracy >= acc
					if reached[i] {
						k++
					}
				}
				if time.Since(logged) >= time.Minute {
					logged = time.Now()
					var behind []string
					for i, nd := range nodes {
						if !reached[i] && len(behind) < 5 {
							s := nd.Status()
							behind = append(behind, fmt.Sprintf("%s (accuracy %.3f, active view %d, messages in %d, updates %d)", s.PeerID, s.Accuracy, len(s.ActiveView), s.MessagesIn, s.Updates))
						}
					}
					t.Logf("%v of virtual time: %d of %d daemons have been at ≥ %.2f; behind: %v", time.Since(from).Round(time.Second), k, len(nodes), acc, behind)
				}
				return k == len(nodes)
			}
		}
		t0 := time.Now()
		waitEvery(t, fmt.Sprintf("every daemon at ≥ %.2f at least once", target), 1200*time.Second, time.Second, all(r.nodes, target))
		report("all up", r.nodes, t0)
		t.Logf("membership in the minute after: %.1f KB per member (in + out)", minute(r.nodes)/1e3)
		report("a minute later", r.nodes, t0)
		var live []*daemon.Node
		for i, nd := range r.nodes {
			if i%10 < 3 { // 30%
				r.kill(i)
				continue
			}
			live = append(live, nd)
		}
		t1 := time.Now()
		waitEvery(t, "no survivor isolated, none naming a dead peer", 120*time.Second, 100*time.Millisecond, func() bool {
			for _, nd := range live {
				v := nd.Status().ActiveView
				if len(v) == 0 {
					return false
				}
				for _, q := range v {
					var i int
					if _, err := fmtSscan(q, &i); err == nil && i%10 < 3 {
						return false
					}
				}
			}
			return true
		})
		report("views healed after 30% killed", live, t1)
		waitEvery(t, fmt.Sprintf("every survivor at ≥ %.2f at least once since the kill", target), 300*time.Second, time.Second, all(live, target))
		report(fmt.Sprintf("survivors at %.2f", target), live, t1)
		t.Logf("membership in the minute after: %.1f KB per member (in + out)", minute(live)/1e3)
		report("a minute later", live, t1)
	})
}

// fmtSscan reads the index out of a test daemon's ID ("d042").
func fmtSscan(id gossip.PeerID, i *int) (int, error) {
	v, err := strconv.Atoi(id[1:])
	*i = v
	return 1, err
}
