package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
)

// TestMemberProtocols: four daemons on memnet run each protocol that mixes
// over a topology (D-PSGD on a ring, AD-PSGD, push-sum, SFB by broadcast)
// with no member list: each builds its graph over the live members it
// learns from announcements; all reach 0.9 accuracy.
func TestMemberProtocols(t *testing.T) {
	const n = 4
	for _, m := range testModels {
		for _, proto := range []string{gossip.DPSGD, gossip.ADPSGD, gossip.PushSum, gossip.SFB} {
			memberProtocol(t, m, proto, n)
		}
	}
}

// memberProtocol runs one model and protocol of TestMemberProtocols.
func memberProtocol(t *testing.T, m model.Spec, proto string, n int) {
	t.Run(m.Kind+"/"+proto, func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := start(t, memnet.New(), n, func(i int, c *daemon.Config) {
				c.Job.Protocol, c.Job.Model, c.Local.LR = proto, m, 0.3
				c.AnnounceInterval = 100 * time.Millisecond
				if proto == gossip.SFB {
					c.Local.LR = 0.5
				}
			})
			waitFor(t, proto+": every daemon at ≥ 0.9 accuracy", 90*time.Second, func() bool {
				for _, nd := range r.nodes {
					if nd.Status().Accuracy < 0.9 {
						return false
					}
				}
				return true
			})
			for _, nd := range r.nodes {
				if s := nd.Status(); s.MessagesIn == 0 || s.Updates == 0 || s.ModelAge == 0 || s.Members != n || s.Neighbors == 0 {
					t.Fatalf("%s: %+v", s.PeerID, s)
				}
			}
		})
	})
}

// TestNonMember: a daemon whose ID is not on its own allowlist refuses to
// start, and daemons with an allowlist reject frames from outsiders.
func TestNonMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		parts, test := shards(t, 2)
		ep, err := net.Join("outsider", 16)
		if err != nil {
			t.Fatal(err)
		}
		j := testJob()
		j.Protocol = gossip.DPSGD
		allow := daemon.Local{Members: []string{"d000", "d001"}}
		_, err = daemon.New(daemon.Config{Job: j, Local: allow, Train: parts[0], Test: test, Transport: ep, Logger: quiet(), Backend: virtualCPU()})
		if err == nil || !strings.Contains(err.Error(), "not among the 2 peers of its own members allowlist") {
			t.Fatalf("a non-member started: %v", err)
		}
		r := start(t, net, 2, func(i int, c *daemon.Config) { c.Local.Members = allow.Members })
		msg, _ := gossip.Encode(&gossip.Message{Kind: gossip.KindModel, From: "outsider", Params: make([]float32, 650)})
		jid := r.nodes[0].JobID()
		waitFor(t, "the outsider's frame rejected as not_member", 10*time.Second, func() bool {
			ep.Send(t.Context(), "d000", transport.Frame{Job: jid, Kind: uint8(gossip.KindModel), Lane: transport.LaneModel, Payload: msg})
			return r.nodes[0].Status().Rejected["not_member"] > 0
		})
	})
}

// TestGoodbye: a daemon stopped on purpose says goodbye, and its peers
// rewire at once. The live timeout is an hour and the leaver's endpoint
// stays connected, so only the goodbye can take it out of their view.
func TestGoodbye(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		parts, test := shards(t, 3)
		var nodes []*daemon.Node
		var cancels []context.CancelFunc
		var wg sync.WaitGroup
		for i := range 3 {
			ep, err := net.Join(fmt.Sprintf("d%03d", i), 1024)
			if err != nil {
				t.Fatal(err)
			}
			j := testJob()
			j.Protocol = gossip.DPSGD
			nd, err := daemon.New(daemon.Config{Job: j, Local: daemon.Local{LR: 0.3}, Train: parts[i], Test: test, Transport: ep, Logger: quiet(),
				AnnounceInterval: 50 * time.Millisecond, LiveTimeout: time.Hour, Backend: virtualCPU()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			nodes, cancels = append(nodes, nd), append(cancels, cancel)
			wg.Go(func() { nd.Run(ctx) })
		}
		defer func() {
			for _, c := range cancels {
				c()
			}
			wg.Wait()
		}()
		for _, nd := range nodes {
			waitFor(t, "three live members", 10*time.Second, func() bool { return nd.Status().Members == 3 && nd.Status().Neighbors == 2 })
		}
		cancels[2]()
		for _, nd := range nodes[:2] {
			waitFor(t, "the leaver gone from the view (its goodbye)", 10*time.Second, func() bool {
				s := nd.Status()
				return s.Members == 2 && s.Neighbors == 1
			})
		}
		// The two that stay still learn: their rounds close without waiting
		// for the leaver's deadline.
		r0 := nodes[0].Status().Round
		waitFor(t, "rounds going on", 10*time.Second, func() bool { return nodes[0].Status().Round > r0+5 })
	})
}

// TestPauseEveryProtocol: for every protocol, a paused daemon stays in its
// job (its rounds or updates go on, its peers keep hearing from it, and
// nobody rejects anything: a skipped step is not a bad training result),
// resumes, and then leaves through Leave: Run returns nil and its peers
// drop it.
func TestPauseEveryProtocol(t *testing.T) {
	const n = 3
	for _, proto := range []string{gossip.RandomWalk, gossip.DPSGD, gossip.ADPSGD, gossip.PushSum, gossip.SFB} {
		t.Run(proto, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := start(t, memnet.New(), n, func(i int, c *daemon.Config) {
					c.Job.Protocol, c.Local.LR = proto, 0.3
					c.AnnounceInterval = 100 * time.Millisecond
				})
				p := r.nodes[0]
				waitFor(t, "three members", 30*time.Second, func() bool { return p.Status().Members == n && p.Status().Updates > 0 })
				if err := p.Pause(t.Context()); err != nil {
					t.Fatal(err)
				}
				s := p.Status()
				if !s.Paused {
					t.Fatal("Status().Paused is false after Pause")
				}
				heard := func() uint64 { return r.nodes[1].Status().Traffic[p.Status().PeerID].MessagesIn }
				h0 := heard()
				waitFor(t, "the paused daemon still in the job", 30*time.Second, func() bool {
					now := p.Status()
					return now.Updates+now.Round >= s.Updates+s.Round+5 && heard() >= h0+5 && now.Members == n
				})
				if err := p.Resume(t.Context()); err != nil || p.Status().Paused {
					t.Fatalf("resume: %v, paused %v", err, p.Status().Paused)
				}
				for _, nd := range r.nodes {
					if rej := nd.Status().Rejected; len(rej) != 0 {
						t.Errorf("%s rejected %v", nd.Status().PeerID, rej)
					}
				}
				p.Leave()
				select {
				case <-p.Left():
				case <-time.After(30 * time.Second):
					t.Fatal("Run did not return within 30 s of Leave")
				}
				if err := p.Pause(t.Context()); err != daemon.ErrNotRunning {
					t.Errorf("Pause after leaving: %v, want ErrNotRunning", err)
				}
				waitFor(t, "the others drop the leaver", 30*time.Second, func() bool {
					return r.nodes[1].Status().Members == n-1 && r.nodes[2].Status().Members == n-1
				})
			})
		})
	}
}
