package daemon_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
)

// lockedBuffer is a log sink safe for a daemon and a test at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestJobsKeptApart: two jobs on one network where every daemon is
// connected to every other (memnet, as mDNS does on a LAN). Job X has
// two daemons, job Y one. X's daemons gossip with each other only: after
// dozens of exchanges neither has sent (or tried to send) a message to
// Y's daemon, which has received none (no wrong_job rejects) and, with no
// other member of its job, warns that it trains alone. Each counts the
// connections to the other job apart from its peers.
func TestJobsKeptApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		var ylog lockedBuffer
		x := start(t, net, 2, func(i int, c *daemon.Config) { c.AnnounceInterval = 100 * time.Millisecond })
		parts, test := shards(t, 1)
		jy := testJob()
		jy.Name = "another job"
		if daemon.JobID(jy.ID()) == x.nodes[0].JobID() {
			t.Fatal("the two jobs have one ID")
		}
		ep, err := net.Join("y000", 1024)
		if err != nil {
			t.Fatal(err)
		}
		y, err := daemon.New(daemon.Config{Job: jy, Local: daemon.Local{LR: 0.5}, Train: parts[0], Test: test, Transport: ep,
			Logger: slog.New(slog.NewTextHandler(&ylog, nil)), AnnounceInterval: 100 * time.Millisecond, AloneWarning: 500 * time.Millisecond,
			Backend: virtualCPU()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { y.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })

		waitFor(t, "X's daemons exchanging models", 30*time.Second, func() bool {
			for _, nd := range x.nodes {
				if s := nd.Status(); s.MessagesIn < 30 || s.OtherJobPeers != 1 {
					return false
				}
			}
			return true
		})
		waitFor(t, "Y's daemon warning that it trains alone", 30*time.Second, func() bool {
			return strings.Contains(ylog.String(), `level=WARN msg="no peers: training alone`)
		})
		if l := ylog.String(); !strings.Contains(l, "run other jobs") || !strings.Contains(l, "other_job_peers=2") {
			t.Errorf("the warning does not mention the daemons of the other job:\n%s", l)
		}
		for _, nd := range x.nodes {
			s := nd.Status()
			if tr := s.Traffic["y000"]; tr.MessagesOut != 0 || tr.SendErrors != 0 {
				t.Errorf("%s sent %d messages to the other job's daemon (%d failed)", s.PeerID, tr.MessagesOut, tr.SendErrors)
			}
			if s.Peers != 1 || s.OtherJobPeers != 1 || s.UnknownPeers != 0 || len(s.MemberPeers) != 1 || s.Members != 2 {
				t.Errorf("%s: %d peers %v, %d of other jobs, %d unknown, %d members; want 1 peer of its job, 1 of another, 2 members",
					s.PeerID, s.Peers, s.MemberPeers, s.OtherJobPeers, s.UnknownPeers, s.Members)
			}
			if s.Rejected["wrong_job"] != 0 {
				t.Errorf("%s rejected %d messages of the other job", s.PeerID, s.Rejected["wrong_job"])
			}
		}
		s := y.Status()
		if s.Rejected["wrong_job"] != 0 || s.MessagesIn != 0 || s.MessagesOut != 0 {
			t.Errorf("the lone daemon of Y: %d wrong_job rejects, %d messages in, %d out; want none", s.Rejected["wrong_job"], s.MessagesIn, s.MessagesOut)
		}
		if s.Peers != 0 || s.OtherJobPeers != 2 || s.Members != 1 {
			t.Errorf("the lone daemon of Y: %d peers, %d of other jobs, %d members; want 0, 2, 1", s.Peers, s.OtherJobPeers, s.Members)
		}
	})
}

// TestUnknownPeerGetsNothing: a connected peer that has not announced the
// job gets no model and no view (a fresh daemon does not spray models at
// whoever is connected), but its requests of the job are answered; a peer
// that announces another job gets not even that; once the first one
// announces the job, it is gossiped with.
func TestUnknownPeerGetsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		r := start(t, net, 2, func(i int, c *daemon.Config) { c.AnnounceInterval = 100 * time.Millisecond })
		late, _ := net.Join("late", 1024)
		alien, _ := net.Join("alien", 1024)
		jid := r.nodes[0].JobID()
		other := testJob()
		other.Name = "elsewhere"
		alien.Announce(t.Context(), transport.Announcement{JobID: other.ID().String(), Incarnation: 1})
		waitFor(t, "the daemons exchanging models", 30*time.Second, func() bool {
			for _, nd := range r.nodes {
				if s := nd.Status(); s.MessagesIn < 30 || s.UnknownPeers != 1 || s.OtherJobPeers != 1 {
					return false
				}
			}
			return true
		})
		if n, m := len(late.Inbound()), len(alien.Inbound()); n != 0 || m != 0 {
			t.Fatalf("the unannounced peer got %d frames and the other job's %d; want none", n, m)
		}
		withheld := r.nodes[0].Status().Withheld
		req, _ := gossip.Encode(&gossip.Message{Kind: gossip.KindStateRequest, From: "alien"})
		alien.Send(t.Context(), "d000", transport.Frame{Job: jid, Kind: uint8(gossip.KindStateRequest), Payload: req})
		waitFor(t, "the reply to the other job's peer withheld", 10*time.Second, func() bool { return r.nodes[0].Status().Withheld > withheld })
		if m := len(alien.Inbound()); m != 0 {
			t.Fatalf("the other job's peer got %d frames", m)
		}
		req, _ = gossip.Encode(&gossip.Message{Kind: gossip.KindStateRequest, From: "late"})
		late.Send(t.Context(), "d000", transport.Frame{Job: jid, Kind: uint8(gossip.KindStateRequest), Payload: req})
		select {
		case in := <-late.Inbound():
			if in.From != "d000" || gossip.Kind(in.Kind) != gossip.KindStateReply {
				t.Fatalf("the unannounced peer's request was answered by a %s from %s, want a state reply from d000", gossip.Kind(in.Kind), in.From)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the unannounced peer's state request was not answered")
		}
		late.Announce(t.Context(), transport.Announcement{JobID: jid.String(), Incarnation: 1})
		deadline := time.After(20 * time.Second)
		for {
			select {
			case in := <-late.Inbound():
				if in.Job != jid {
					t.Fatalf("a frame of job %s", in.Job.Short())
				}
				if k := gossip.Kind(in.Kind); k == gossip.KindModel || k == gossip.KindViewPush {
					return // gossiped with once announced
				}
			case <-deadline:
				t.Fatal("a peer that announced the job got no model or view")
			}
		}
	})
}
