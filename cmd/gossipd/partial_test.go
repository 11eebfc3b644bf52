package main

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/gossip"
)

// TestDaemonPartialViews: 24 real daemons on one host, random walk with
// --sampling hyparview, bootstrapped through the first. Every daemon
// learns (≥ 0.85 on its digits shard's test split), keeps an active view
// of 3 to 8 neighbours held at both ends, and holds connections to at
// most 8 + p2p.PartialHeadroom peers after a trim, plus connections
// younger than p2p.TrimGrace: fewer than the 23 a full mesh holds. The
// bootstrap daemon is no exception.
func TestDaemonPartialViews(t *testing.T) {
	t.Parallel() // daemons in their own processes: they wait more than they compute
	const n = 24
	bin := buildBinary(t)
	ds := startCluster(t, bin, t.TempDir(), n, "500ms", "--sampling", "hyparview")
	for _, d := range ds {
		poll(t, d, "daemon learning (≥ 0.85)", 120*time.Second, func(s status) bool { return s.Accuracy >= 0.85 })
	}
	bound := gossip.DefaultActiveView + p2p.PartialHeadroom + 4
	var views map[string][]string
	// A daemon with room in its view asks passive peers, backing off
	// after refusals (up to 16 periods, 8 s here), so on a loaded machine
	// the views can take up to two minutes to settle.
	deadline := time.Now().Add(120 * time.Second)
	for {
		views = map[string][]string{}
		worst, fewest, most, asym := 0, n, 0, 0
		for _, d := range ds {
			s, err := d.status()
			if err != nil {
				t.Fatal(err)
			}
			views[s.PeerID] = s.ActiveView
			worst = max(worst, s.connectedPeers())
			fewest, most = min(fewest, len(s.ActiveView)), max(most, len(s.ActiveView))
		}
		for id, v := range views {
			for _, q := range v {
				if !slices.Contains(views[q], id) {
					asym++
				}
			}
		}
		if worst <= bound && fewest >= 3 && most <= gossip.DefaultActiveView && asym == 0 {
			t.Logf("%d daemons: active views %d…%d, at most %d peers connected (a full mesh: %d)", n, fewest, most, worst, n-1)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d daemons: active views %d…%d (want 3…%d), %d links held at one end only, up to %d peers connected (want ≤ %d)",
				n, fewest, most, gossip.DefaultActiveView, asym, worst, bound)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestDaemonTokenAccount: random walk's token account (--tokens, part of
// the job) runs in real daemons: four of them with --tokens 2:4 all learn
// (≥ 0.85) and agree on one job ID, which differs from the same job
// without tokens.
func TestDaemonTokenAccount(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ds := startCluster(t, bin, t.TempDir(), 4, "200ms", "--tokens", "2:4")
	var job string
	for _, d := range ds {
		s := poll(t, d, "daemon learning (≥ 0.85)", 120*time.Second, func(s status) bool { return s.Accuracy >= 0.85 })
		if job != "" && s.JobID != job {
			t.Fatalf("job IDs %s and %s", job, s.JobID)
		}
		job = s.JobID
	}
	plain := startCluster(t, bin, t.TempDir(), 1, "200ms")
	if s := poll(t, plain[0], "a daemon without tokens up", 60*time.Second, func(s status) bool { return s.JobID != "" }); s.JobID == job {
		t.Errorf("the job with tokens has the ID of the job without: %s", job)
	}
}

// TestDaemonGoSGD: GoSGD (--protocol gosgd: push-sum to one peer of the
// view each round) runs in real daemons over HyParView views: six of them
// all learn (≥ 0.85), each has pushed shares to a peer, and their
// push-sum weights, read one after another while shares fly, come to
// within 0.05 of six (mass is neither lost nor made up).
func TestDaemonGoSGD(t *testing.T) {
	t.Parallel()
	const n = 6
	bin := buildBinary(t)
	ds := startCluster(t, bin, t.TempDir(), n, "200ms", "--protocol", "gosgd", "--sampling", "hyparview")
	for _, d := range ds {
		poll(t, d, "daemon learning (≥ 0.85) and pushing shares", 120*time.Second, func(s status) bool {
			var out uint64
			for _, tr := range s.Traffic {
				out += tr.MessagesOut
			}
			return s.Accuracy >= 0.85 && out > 0
		})
	}
	var sum float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		sum = 0
		for _, d := range ds {
			s, err := d.status()
			if err != nil {
				t.Fatal(err)
			}
			sum += s.PushSumWeight
		}
		if math.Abs(sum-n) < 0.05 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("push-sum weights sum to %.4f, want %d", sum, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
