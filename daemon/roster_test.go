package daemon

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gossipd/gossipd/daemon/memnet"
	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/peer"
)

// TestSortPeers: the connected peers fall into members of the job (heard
// announcing it within the live timeout, not leaving, admitted), peers of
// other jobs (their latest announcement is of another job) and unknown
// peers (never heard, silent too long, leaving, or not admitted); only
// the members are gossip targets. Without announcements every admitted
// peer is a member.
func TestSortPeers(t *testing.T) {
	now := time.Unix(1000, 0)
	const job, other = "aaaa", "bbbb"
	live := 15 * time.Second
	anns := []transport.Announcement{
		{Peer: "m1", JobID: job, Heard: now.Add(-time.Second), Incarnation: 7},
		{Peer: "m2", JobID: job, Heard: now.Add(-live)},                  // just live
		{Peer: "stale", JobID: job, Heard: now.Add(-live - time.Second)}, // silent too long
		{Peer: "bye", JobID: job, Heard: now, Leaving: true},
		{Peer: "x1", JobID: other, Heard: now},
		{Peer: "x2", JobID: other, Heard: now.Add(-time.Hour)}, // an old announcement of another job still says so
		{Peer: "banned", JobID: job, Heard: now},
		{Peer: "far", JobID: job, Heard: now}, // a member not connected
	}
	connected := []gossip.PeerID{"banned", "bye", "m1", "m2", "new", "stale", "x1", "x2"}
	admit := func(p gossip.PeerID) bool { return p != "banned" }
	r := sortPeers(connected, anns, true, job, now, live, admit)
	if got, want := r.ids(), []gossip.PeerID{"m1", "m2"}; !slices.Equal(got, want) {
		t.Errorf("members %v, want %v", got, want)
	}
	if r.members[0].Incarnation != 7 {
		t.Errorf("m1's incarnation %d, want 7 from its announcement", r.members[0].Incarnation)
	}
	if want := []gossip.PeerID{"x1", "x2"}; !slices.Equal(r.otherJobs, want) {
		t.Errorf("other jobs %v, want %v", r.otherJobs, want)
	}
	if want := []gossip.PeerID{"banned", "bye", "new", "stale"}; !slices.Equal(r.unknown, want) {
		t.Errorf("unknown %v, want %v", r.unknown, want)
	}
	if !r.inJob["far"] || r.inJob["x1"] || r.inJob["new"] || !r.otherJob["x2"] {
		t.Errorf("inJob %v, otherJob %v", r.inJob, r.otherJob)
	}

	plain := sortPeers(connected, nil, false, job, now, live, admit)
	if got := plain.ids(); len(got) != len(connected)-1 || slices.Contains(got, "banned") {
		t.Errorf("without announcements: members %v, want every admitted peer", got)
	}
	if !slices.Equal(plain.unknown, []gossip.PeerID{"banned"}) || plain.inJob != nil {
		t.Errorf("without announcements: unknown %v, inJob %v", plain.unknown, plain.inJob)
	}
}

// TestMayGossip: a message goes to a live member of the job; to a peer
// of another job or an unknown one only if it answers a request (view,
// state, averaging replies), and then never to a peer known to run
// another job; broadcasts always; without announcements, to every
// admitted peer.
func TestMayGossip(t *testing.T) {
	now := time.Unix(1000, 0)
	anns := []transport.Announcement{{Peer: "m", JobID: "j", Heard: now}, {Peer: "x", JobID: "k", Heard: now}}
	n := &Node{cfg: Config{Local: Local{Members: []string{"m", "x", "u"}}}}
	if err := n.cfg.Local.Validate(); err != nil {
		t.Fatal(err)
	}
	n.roster = sortPeers([]gossip.PeerID{"m", "u", "x"}, anns, true, "j", now, time.Minute, n.cfg.Local.IsMember)
	for _, c := range []struct {
		to   gossip.PeerID
		kind gossip.Kind
		want bool
	}{
		{"m", gossip.KindModel, true},
		{"m", gossip.KindViewPush, true},
		{"x", gossip.KindModel, false},
		{"x", gossip.KindViewPush, false},
		{"x", gossip.KindViewReply, false},
		{"x", gossip.KindStateReply, false},
		{"u", gossip.KindModel, false},
		{"u", gossip.KindPushSum, false},
		{"u", gossip.KindStateRequest, false},
		{"u", gossip.KindStateReply, true},
		{"u", gossip.KindViewReply, true},
		{"u", gossip.KindViewPush, false}, // a Cyclon shuffle goes to members only (a dead one's entry is the oldest)
		{"u", gossip.KindAvgReply, true},
		{"outsider", gossip.KindStateReply, false}, // not on the allowlist
		{gossip.Broadcast, gossip.KindFactors, true},
	} {
		if got := n.mayGossip(c.to, c.kind); got != c.want {
			t.Errorf("%s to %s: %v, want %v", c.kind, c.to, got, c.want)
		}
	}
	n.roster = sortPeers([]gossip.PeerID{"m", "u", "x"}, nil, false, "j", now, time.Minute, n.cfg.Local.IsMember)
	if !n.mayGossip("u", gossip.KindModel) || n.mayGossip("outsider", gossip.KindModel) {
		t.Error("without announcements: want every admitted peer and no other")
	}
}

// TestSenderWithholdsFromLeaver: a message the core sent while its
// addressee was a member, still queued when the addressee left the job
// (its announcements stopped, or it said goodbye), is not written: the
// sender looks at the latest roster, counts it withheld, and gives a
// push-sum share back to the core. A message to a member still goes.
func TestSenderWithholdsFromLeaver(t *testing.T) {
	net := memnet.New()
	self, err := net.Join("a", 8)
	if err != nil {
		t.Fatal(err)
	}
	stay, err := net.Join("m", 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Join("dead", 8); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	n := &Node{
		cfg:           Config{Transport: self, SendTimeout: time.Second, Now: func() time.Time { return now }},
		met:           newMetrics(),
		log:           slog.New(slog.DiscardHandler),
		sendCh:        make(chan outgoing, 4),
		undeliveredCh: make(chan *gossip.Message, 4),
	}
	// When the core sent, both were members; since, "dead" fell silent.
	anns := []transport.Announcement{{Peer: "m", JobID: "j", Heard: now}, {Peer: "dead", JobID: "j", Heard: now.Add(-time.Minute)}}
	r := sortPeers([]gossip.PeerID{"dead", "m"}, anns, true, "j", now, 3*time.Second, n.cfg.Local.IsMember)
	n.sendRoster.Store(&r)
	for _, m := range []*gossip.Message{
		{Kind: gossip.KindModel, To: "dead", Params: []float32{1}},
		{Kind: gossip.KindPushSum, To: "dead", Params: []float32{1}, Weight: 0.5},
		{Kind: gossip.KindModel, To: "m", Params: []float32{1}},
	} {
		w, err := peer.EncodeWire(m, peer.EncodeChecksummed)
		if err != nil {
			t.Fatal(err)
		}
		o := outgoing{to: m.To, kind: m.Kind, wire: w}
		if m.Kind == gossip.KindPushSum {
			o.share = m
		}
		n.sendCh <- o
	}
	close(n.sendCh)
	n.sendLoop(t.Context())
	if got := n.withheld.Load(); got != 2 {
		t.Errorf("withheld %d messages, want the 2 to the peer that left", got)
	}
	tr := n.traffic.snapshot(now)
	if tr["dead"].MessagesOut != 0 || tr["m"].MessagesOut != 1 {
		t.Errorf("sent %d to the peer that left and %d to the member, want 0 and 1", tr["dead"].MessagesOut, tr["m"].MessagesOut)
	}
	select {
	case m := <-n.undeliveredCh:
		if m.Kind != gossip.KindPushSum || m.To != "dead" {
			t.Errorf("gave back %s to %s, want the push-sum share to dead", m.Kind, m.To)
		}
	default:
		t.Error("the withheld push-sum share did not go back to the core")
	}
	select {
	case in := <-stay.Inbound():
		if in.From != "a" {
			t.Errorf("the member got a frame from %s", in.From)
		}
	default:
		t.Error("the member got nothing")
	}
}

// TestPartialRosterAllows: in a job of partial views a message may go to
// an admitted peer not heard announcing yet (a neighbour that reached
// this node before its first announcement did), never to one known to
// run another job.
func TestPartialRosterAllows(t *testing.T) {
	now := time.Unix(1000, 0)
	anns := []transport.Announcement{{Peer: "m", JobID: "j", Heard: now}, {Peer: "x", JobID: "other", Heard: now}}
	admit := func(gossip.PeerID) bool { return true }
	r := sortPeers([]gossip.PeerID{"m", "x"}, anns, true, "j", now, time.Minute, admit)
	if r.allows("new", gossip.KindModel, admit) {
		t.Error("full mesh: a model to a peer not heard announcing was allowed")
	}
	r.partial = true
	if !r.allows("new", gossip.KindModel, admit) || !r.allows("m", gossip.KindModel, admit) {
		t.Error("partial views: a model to a new neighbour or a member was withheld")
	}
	if r.allows("x", gossip.KindModel, admit) || r.allows("x", gossip.KindHVShuffle, admit) {
		t.Error("partial views: a message to another job's peer was allowed")
	}
}

// TestAnnounceBudget: under partial views a job's members announce
// together about AnnounceBudget times per AnnounceInterval whatever its
// size, so what each hears stays flat from 50 to 2,000 members (within
// 2×); a full-mesh job, or a small one, announces every interval; and an
// announcement counts for three of its announcer's intervals, so that a
// slow announcer of a large job stays a member between announcements.
func TestAnnounceBudget(t *testing.T) {
	const base = 5 * time.Second
	heard := func(members int) float64 { // announcements a member hears per base interval
		return float64(members) * float64(base) / float64(announceEvery(base, true, members))
	}
	lo, hi := heard(50), heard(50)
	for _, n := range []int{50, 150, 500, 2000} {
		lo, hi = min(lo, heard(n)), max(hi, heard(n))
		if full := announceEvery(base, false, n); full != base {
			t.Errorf("full mesh of %d: announces every %v, want %v", n, full, base)
		}
	}
	if hi > 2*lo || hi > 2*AnnounceBudget {
		t.Errorf("announcements heard per interval range %.1f…%.1f from 50 to 2,000 members; want flat within 2× and near %d", lo, hi, AnnounceBudget)
	}
	if got := announceEvery(base, true, AnnounceBudget); got != base {
		t.Errorf("a partial job of %d members announces every %v, want %v", AnnounceBudget, got, base)
	}
	now := time.Unix(1e9, 0)
	every := announceEvery(base, true, 2000)
	a := transport.Announcement{Peer: "p", JobID: "j", EveryMS: every.Milliseconds(), Heard: now.Add(-2 * every)}
	if ms := announcedMembers([]transport.Announcement{a}, "j", now, 3*base, func(gossip.PeerID) bool { return true }, "me"); len(ms) != 1 {
		t.Errorf("an announcement two of its %v intervals old no longer counts", every)
	}
	a.Heard = now.Add(-4 * every)
	if ms := announcedMembers([]transport.Announcement{a}, "j", now, 3*base, func(gossip.PeerID) bool { return true }, "me"); len(ms) != 0 {
		t.Errorf("an announcement four of its %v intervals old still counts", every)
	}
	a.EveryMS, a.Heard = int64(24*time.Hour/time.Millisecond), now.Add(-4*transport.MaxAnnounceEvery)
	if a.Live(now, 3*base) {
		t.Errorf("an announcer claiming a day's interval is live %v after it was heard; the bound is %v", 4*transport.MaxAnnounceEvery, 3*transport.MaxAnnounceEvery)
	}
}
