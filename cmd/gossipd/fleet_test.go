//go:build fleet

package main

// The fleet benchmark, `make fleet` (not part of `make test`): many real
// daemons on 127.0.0.1 in one job, over the libp2p transport, bootstrapped
// through the first; then 30% of them killed at once (SIGKILL). It
// reports, before and after the kill, what a fleet's operator watches:
// connections per member, membership bytes per member per minute, how
// long until every member has reached the target accuracy, isolated
// members and the spread of active-view in-degrees.
//
//	FLEET=150 go test -tags fleet -run '^TestFleet$' -count=1 -timeout 1h -v ./cmd/gossipd
//
// Knobs (environment): FLEET (daemons, default 150), FLEET_DATASET
// (default fashion-mnist), FLEET_TARGET (default 0.75), FLEET_SAMPLING
// (default hyparview; cyclon runs the full mesh), FLEET_DELTA (default
// 1s), FLEET_LIMIT (how long every member may take to reach the target,
// default 15m), FLEET_GOMAXPROCS (each daemon's, default 1),
// FLEET_ARGS (more flags for every daemon, e.g. "--dht off"),
// FLEET_EVAL_INTERVAL (how often each daemon evaluates its
// model on the whole test split, default 5s), FLEET_REPORT (a markdown file the rows are appended to).
//
// It asserts what must hold at any size: every member reaches the target
// within FLEET_LIMIT, none is isolated, and under partial views none
// holds connections to more than its active view's bound plus
// p2p.PartialHeadroom plus what one trim interval opens.

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/gossip"
)

func envOr(k, def string) string { return cmp.Or(os.Getenv(k), def) }

// fleetRow is one phase's figures.
type fleetRow struct {
	phase                     string
	members                   int
	connMean                  float64
	connMax                   int
	memPerMin                 float64 // bytes per member per minute
	reached                   time.Duration
	isolated                  int
	inMin, inMedian, inMax    int
	accMin, accMedian, accMax float64
	// by is memPerMin by what carried the bytes, largest first.
	by string
}

// String is the row as the log and the report give it.
func (r fleetRow) String(target float64) string {
	return fmt.Sprintf("%s: %d members; connections per member mean %.1f, max %d; membership %.1f KB per member per minute (%s); every member ≥ %.2f after %v; %d isolated; in-degree %d/%d/%d; accuracy %.3f/%.3f/%.3f",
		r.phase, r.members, r.connMean, r.connMax, r.memPerMin/1e3, strings.TrimSpace(r.by), target, r.reached.Round(time.Second), r.isolated, r.inMin, r.inMedian, r.inMax, r.accMin, r.accMedian, r.accMax)
}

func TestFleet(t *testing.T) {
	n, err := strconv.Atoi(envOr("FLEET", "150"))
	if err != nil || n < 2 {
		t.Fatalf("FLEET=%q: want a count of daemons ≥ 2", os.Getenv("FLEET"))
	}
	target, err := strconv.ParseFloat(envOr("FLEET_TARGET", "0.75"), 64)
	if err != nil {
		t.Fatalf("FLEET_TARGET: %v", err)
	}
	limit, err := time.ParseDuration(envOr("FLEET_LIMIT", "15m"))
	if err != nil {
		t.Fatalf("FLEET_LIMIT: %v", err)
	}
	dataset, sampling, delta := envOr("FLEET_DATASET", "fashion-mnist"), envOr("FLEET_SAMPLING", "hyparview"), envOr("FLEET_DELTA", "1s")
	bin := buildBinary(t)
	// Many daemons share this host's few cores: one thread each runs
	// Go's scheduler on fewer threads per process.
	t.Setenv("GOMAXPROCS", envOr("FLEET_GOMAXPROCS", "1"))
	started := time.Now()
	args := append([]string{"--dataset", dataset, "--sampling", sampling, "--lr", strconv.FormatFloat(gossip.DefaultLR, 'g', -1, 64),
		"--announce-interval", "5s", "--eval-interval", envOr("FLEET_EVAL_INTERVAL", "5s")}, strings.Fields(os.Getenv("FLEET_ARGS"))...)
	ds := startCluster(t, bin, t.TempDir(), n, delta, args...)
	t.Logf("%d daemons started in %v", n, time.Since(started).Round(time.Second))

	reached := watchTarget(t, ds, target, limit)
	rows := []fleetRow{measure(t, "all running", ds, reached.Sub(started), sampling)}
	t.Log(rows[0].String(target))

	var dead, live []*proc
	for i, d := range ds {
		if i > 0 && i%10 < 3 { // 30%, never the bootstrap daemon
			dead = append(dead, d)
		} else {
			live = append(live, d)
		}
	}
	deadIDs := map[string]bool{}
	for _, d := range dead {
		if s, err := d.status(); err == nil {
			deadIDs[s.PeerID] = true
		}
		d.cmd.Process.Kill()
	}
	for _, d := range dead {
		d.cmd.Wait()
	}
	killed := time.Now()
	healed := waitHealed(t, live, deadIDs, sampling, 5*time.Minute)
	t.Logf("%d of %d killed at once; views healed (no survivor isolated or naming a dead peer) after %v", len(dead), n, healed.Sub(killed).Round(100*time.Millisecond))
	again := watchTarget(t, live, target, limit)
	rows = append(rows, measure(t, "30% killed", live, again.Sub(killed), sampling))

	t.Log(rows[1].String(target))
	report := fmt.Sprintf("| %d | %s | %s | %s |\n", n, dataset, sampling, delta)
	for _, r := range rows {
		report += "- " + r.String(target) + "\n"
		if r.isolated > 0 {
			t.Errorf("%s: %d members isolated", r.phase, r.isolated)
		}
		if bound := gossip.DefaultActiveView + p2p.PartialHeadroom + 4; sampling == gossip.SamplingHyParView && r.connMax > bound {
			t.Errorf("%s: a member holds connections to %d peers; partial views bound them by %d", r.phase, r.connMax, bound)
		}
	}
	if f := os.Getenv("FLEET_REPORT"); f != "" {
		w, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(w, report)
		w.Close()
	}
}

// statuses reads every daemon's status at once, three tries each (a
// busy host may not answer within the client's timeout; a read that
// fails three times is an empty status).
func statuses(ds []*proc) []status {
	out := make([]status, len(ds))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, d := range ds {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for range 3 {
				var err error
				if out[i], err = d.status(); err == nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return out
}

// watchTarget polls until every daemon has been at target at least once
// and returns when the last one got there.
func watchTarget(t *testing.T, ds []*proc, target float64, limit time.Duration) time.Time {
	t.Helper()
	began := time.Now()
	deadline, logged := began.Add(limit), began
	got := make([]bool, len(ds))
	left := len(ds)
	for {
		all := statuses(ds)
		for i, s := range all {
			if !got[i] && s.Accuracy >= target {
				got[i] = true
				left--
			}
		}
		if left == 0 {
			return time.Now()
		}
		if over := time.Now().After(deadline); over || time.Since(logged) >= time.Minute {
			logged = time.Now()
			var behind []string
			for i, s := range all {
				if !got[i] && len(behind) < 5 {
					behind = append(behind, fmt.Sprintf("n%d (accuracy %.3f, active view %d, messages in %d, updates %d, members %d)",
						i, s.Accuracy, len(s.ActiveView), s.MessagesIn, s.Updates, s.Members))
				}
			}
			msg := fmt.Sprintf("after %v, %d of %d daemons have not been at %.2f: %s", time.Since(began).Round(time.Second),
				left, len(ds), target, strings.Join(behind, "; "))
			if over {
				t.Fatal(msg)
			}
			t.Log(msg)
		}
		time.Sleep(2 * time.Second)
	}
}

// neighbours are whom a daemon gossips with: its active view under
// partial views, else its connected live members.
func neighbours(s status, sampling string) []string {
	if sampling == gossip.SamplingHyParView {
		return s.ActiveView
	}
	return s.MemberPeers
}

// waitHealed polls until no daemon is isolated or names a dead peer
// among its neighbours.
func waitHealed(t *testing.T, ds []*proc, dead map[string]bool, sampling string, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	began, logged := time.Now(), time.Now()
	for {
		var bad []string
		for i, s := range statuses(ds) {
			nb := neighbours(s, sampling)
			var named []string
			for _, p := range nb {
				if dead[p] {
					named = append(named, p[len(p)-6:])
				}
			}
			if len(nb) == 0 || len(named) > 0 {
				connected := 0
				for _, c := range s.Connections {
					if slices.Contains(nb, c.Peer) {
						connected++
					}
				}
				bad = append(bad, fmt.Sprintf("%s (%d neighbours, %d of them connected, dead: %v, status read: %t)",
					ds[i].log[strings.LastIndex(ds[i].log, "/")+1:], len(nb), connected, named, s.PeerID != ""))
			}
		}
		if len(bad) == 0 {
			return time.Now()
		}
		if over := time.Now().After(deadline); over || time.Since(logged) >= time.Minute {
			logged = time.Now()
			msg := fmt.Sprintf("after %v, %d daemons isolated or naming a dead peer: %s", time.Since(began).Round(time.Second), len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
			if over {
				t.Fatal(msg)
			}
			t.Log(msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// measure takes a phase's figures; membership bytes over one minute.
func measure(t *testing.T, phase string, ds []*proc, reached time.Duration, sampling string) fleetRow {
	t.Helper()
	before, t0 := statuses(ds), time.Now()
	time.Sleep(time.Minute) // the window the traffic is measured over
	after, minutes := statuses(ds), time.Since(t0).Minutes()
	r := fleetRow{phase: phase, members: len(ds), reached: reached}
	indeg := map[string]int{}
	by := map[string]float64{}
	var mem float64
	var accs []float64
	conns := 0
	for i, s := range after {
		k := s.connectedPeers()
		conns += k
		r.connMax = max(r.connMax, k)
		mem += float64(s.MembershipBytes.In+s.MembershipBytes.Out) - float64(before[i].MembershipBytes.In+before[i].MembershipBytes.Out)
		for p, x := range s.MembershipBytes.By {
			b := before[i].MembershipBytes.By[p]
			by[p] += float64(x.In+x.Out) - float64(b.In+b.Out)
		}
		for _, q := range neighbours(s, sampling) {
			indeg[q]++
		}
		accs = append(accs, s.Accuracy)
	}
	var in []int
	for _, s := range after {
		in = append(in, indeg[s.PeerID])
		if len(neighbours(s, sampling)) == 0 {
			r.isolated++
		}
	}
	slices.Sort(in)
	slices.Sort(accs)
	r.connMean = float64(conns) / float64(len(ds))
	r.memPerMin = mem / float64(len(ds)) / minutes
	keys := slices.Collect(maps.Keys(by))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(by[b], by[a]) })
	for _, p := range keys {
		r.by += fmt.Sprintf(" %s %.1f KB;", p, by[p]/float64(len(ds))/minutes/1e3)
	}
	r.inMin, r.inMedian, r.inMax = in[0], in[len(in)/2], in[len(in)-1]
	r.accMin, r.accMedian, r.accMax = accs[0], accs[len(accs)/2], accs[len(accs)-1]
	return r
}
