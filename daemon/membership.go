package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/gossip"
)

// The membership layer: who is in the job right now. A daemon's live
// members are itself and every peer that
//
//   - announced this job within LiveTimeout (announcements go out every
//     AnnounceInterval; LiveTimeout defaults to three of them),
//   - has not said goodbye (a daemon stopped by SIGTERM announces that it
//     is leaving before it exits),
//   - is connected to this daemon, and
//   - is admitted (the members allowlist; a consortium's gater admits
//     only its members before that).
//
// The set, with each member's incarnation, goes to the core as an event
// (gossip.Core.SetMembers), which builds its topology over it. A peer
// that dies is dropped when its connection closes or, at the latest, when
// its announcements stop for LiveTimeout. Daemons that see the same
// announcements and connections derive the same set; while they briefly
// disagree, D-PSGD's advertised degrees keep the mixing symmetric.

// newIncarnation draws this start's incarnation (never 0, which means
// unknown).
func newIncarnation() uint64 {
	for {
		if v := rand.Uint64(); v != 0 {
			return v
		}
	}
}

// The connected peers fall into three groups, and only the first is
// gossiped with:
//
//   - members: live members of this node's job (above); the core's
//     peers (gossip.Core.SetPeers, random walk's view) and its topology
//     (SetMembers) are built over them alone;
//   - other jobs: peers whose latest announcement is of another job. mDNS
//     connects every gossipd on a LAN, and the DHT, relays and peer
//     exchange connect daemons of any job: such connections are kept (they
//     carry announcements and routing) but no model goes over them;
//   - unknown: the rest, not heard announcing this job: a daemon that
//     just started (no announcement heard yet), one whose announcements
//     stopped for LiveTimeout, one that said goodbye, one the allowlist
//     does not admit.
//
// A daemon therefore sends nothing to a peer until it has heard that peer
// announce the job: right after start-up, until the first announcements
// arrive (they go out at start and every AnnounceInterval), it trains
// alone. Without a transport that carries announcements (a Broadcaster),
// every admitted connected peer is taken to run the job.

// roster is how the membership layer sorts the connected peers (core
// goroutine).
type roster struct {
	// members are the connected live members but this node, with their
	// incarnations, sorted: the gossip targets.
	members []gossip.Member
	// otherJobs and unknown are the other connected peers (see above),
	// sorted.
	otherJobs, unknown []gossip.PeerID
	// partial: the job keeps partial views (see allows).
	partial bool
	// inJob holds every peer that announced this job within LiveTimeout,
	// connected or not, and otherJob every peer whose latest
	// announcement is of another job: what mayGossip consults. Both are
	// nil without announcements.
	inJob, otherJob map[gossip.PeerID]bool
}

// ids returns the members' IDs, sorted.
func (r *roster) ids() []gossip.PeerID {
	out := make([]gossip.PeerID, len(r.members))
	for i, m := range r.members {
		out[i] = m.ID
	}
	return out
}

// sortPeers sorts connected peers into a roster: with announcements
// (withAnns: anns are the latest heard from each peer), a peer is a
// member once it announced job within liveTimeout of now, is not leaving
// and is admitted; without, every admitted peer is. Pure, for tests.
func sortPeers(connected []gossip.PeerID, anns []transport.Announcement, withAnns bool, job string, now time.Time, liveTimeout time.Duration, admit func(gossip.PeerID) bool) roster {
	var r roster
	if !withAnns {
		for _, p := range connected {
			if admit(p) {
				r.members = append(r.members, gossip.Member{ID: p})
			} else {
				r.unknown = append(r.unknown, p)
			}
		}
		return r
	}
	r.inJob, r.otherJob = map[gossip.PeerID]bool{}, map[gossip.PeerID]bool{}
	inc := map[gossip.PeerID]uint64{}
	for _, a := range anns {
		switch {
		case a.JobID != job:
			r.otherJob[a.Peer] = true
		case !a.Leaving && a.Live(now, liveTimeout) && admit(a.Peer):
			r.inJob[a.Peer] = true
			inc[a.Peer] = a.Incarnation
		}
	}
	for _, p := range connected {
		switch {
		case r.inJob[p]:
			r.members = append(r.members, gossip.Member{ID: p, Incarnation: inc[p]})
		case r.otherJob[p]:
			r.otherJobs = append(r.otherJobs, p)
		default:
			r.unknown = append(r.unknown, p)
		}
	}
	return r
}

// announcedMembers are the live members heard announcing job, connected
// or not, sorted: a job whose members keep partial views (HyParView)
// connects to a few of them only, so that a member need not be
// connected to count. Pure, for tests.
func announcedMembers(anns []transport.Announcement, job string, now time.Time, liveTimeout time.Duration, admit func(gossip.PeerID) bool, self gossip.PeerID) []gossip.Member {
	var ms []gossip.Member
	for _, a := range anns {
		if a.JobID == job && a.Peer != self && !a.Leaving && a.Live(now, liveTimeout) && admit(a.Peer) {
			ms = append(ms, gossip.Member{ID: a.Peer, Incarnation: a.Incarnation})
		}
	}
	slices.SortFunc(ms, func(a, b gossip.Member) int { return strings.Compare(a.ID, b.ID) })
	return slices.CompactFunc(ms, func(a, b gossip.Member) bool { return a.ID == b.ID })
}

// sortPartial is sortPeers for a job of partial views: its members are
// every live announcer of the job, connected or not (announcedMembers),
// and only the peers of other jobs are kept apart (allows), so it keeps
// no map of the members, which may be thousands. It also returns the
// connected members. Pure, for tests.
func sortPartial(connected []gossip.PeerID, anns []transport.Announcement, job string, now time.Time, liveTimeout time.Duration, admit func(gossip.PeerID) bool, self gossip.PeerID) (roster, []gossip.PeerID) {
	r := roster{partial: true, inJob: map[gossip.PeerID]bool{}, otherJob: map[gossip.PeerID]bool{}}
	r.members = announcedMembers(anns, job, now, liveTimeout, admit, self)
	for _, a := range anns {
		if a.JobID != job {
			r.otherJob[a.Peer] = true
		}
	}
	var conn []gossip.PeerID
	for _, p := range connected {
		_, member := slices.BinarySearchFunc(r.members, p, func(m gossip.Member, id gossip.PeerID) int { return strings.Compare(m.ID, id) })
		switch {
		case member:
			conn = append(conn, p)
		case r.otherJob[p]:
			r.otherJobs = append(r.otherJobs, p)
		default:
			r.unknown = append(r.unknown, p)
		}
	}
	slices.Sort(conn)
	return r, conn
}

// refreshMembers sorts the connected peers (roster) and hands the live
// members to the core (core goroutine).
func (n *Node) refreshMembers() {
	var anns []transport.Announcement
	b, withAnns := n.cfg.Transport.(transport.Broadcaster)
	now := n.cfg.Now()
	if n.partial && withAnns && n.anns != nil && now.Sub(n.annsAt) < n.cfg.AnnounceInterval {
		// Under partial views the members are the contacts of a job that
		// may have thousands: they, and the connections sorted by them,
		// are read again every AnnounceInterval, not every
		// MembershipInterval (the active view, which the core keeps,
		// notices a dead neighbour itself, and the sends to a neighbour
		// are let through whatever the roster: allows).
		return
	}
	connected := slices.DeleteFunc(n.cfg.Transport.Peers(), func(p gossip.PeerID) bool { return p == n.cfg.Transport.ID() })
	if withAnns {
		anns = b.Announcements()
		n.anns, n.annsAt = anns, now
	}
	var connectedMembers []gossip.PeerID
	if n.partial && withAnns {
		n.roster, connectedMembers = sortPartial(connected, anns, n.job.String(), now, n.cfg.LiveTimeout, n.cfg.Local.IsMember, n.cfg.Transport.ID())
	} else {
		n.roster = sortPeers(connected, anns, withAnns, n.job.String(), now, n.cfg.LiveTimeout, n.cfg.Local.IsMember)
		connectedMembers = n.roster.ids()
	}
	r := n.roster
	n.sendRoster.Store(&r)
	n.mu.Lock()
	// The status lists the connected members: under partial views the
	// roster's members are every announcer, thousands in a large job.
	n.status.Peers, n.status.OtherJobPeers, n.status.UnknownPeers = len(connectedMembers), len(n.roster.otherJobs), len(n.roster.unknown)
	n.status.MemberPeers = connectedMembers
	n.mu.Unlock()
	n.met.peers.Set(float64(len(n.roster.members)))
	n.met.otherJobPeers.Set(float64(len(n.roster.otherJobs)))
	n.met.unknownPeers.Set(float64(len(n.roster.unknown)))
	n.setMembers(slices.Clone(n.roster.members))
}

// mayGossip says whether m may go to its addressee by the current
// roster (core goroutine).
func (n *Node) mayGossip(to gossip.PeerID, kind gossip.Kind) bool {
	return n.roster.allows(to, kind, n.cfg.Local.IsMember)
}

// allows says whether m may go to its addressee: a broadcast goes to
// the job, a message to a live member of the job, and an answer (a view,
// state or averaging reply) also to a peer not known to run another job
// (the request carried this job's ID, and the asker may not have been
// heard announcing yet). Without announcements every admitted peer may be
// sent to. Safe for concurrent use: a stored roster is never mutated.
func (r *roster) allows(to gossip.PeerID, kind gossip.Kind, admitted func(gossip.PeerID) bool) bool {
	if to == gossip.Broadcast {
		return true
	}
	if !admitted(to) {
		return false
	}
	if r.inJob == nil { // no announcements
		return true
	}
	if r.inJob[to] {
		return true
	}
	if r.partial {
		// A partial view's neighbour may reach this node before its
		// first announcement does; only a peer known to run another job
		// is kept apart.
		return !r.otherJob[to]
	}
	switch kind {
	case gossip.KindViewReply, gossip.KindStateReply, gossip.KindAvgReply:
		return !r.otherJob[to]
	}
	return false
}

// setMembers hands the live members to the core and the status.
func (n *Node) setMembers(ms []gossip.Member) {
	slices.SortFunc(ms, func(a, b gossip.Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	ids := make([]gossip.PeerID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	if n.cfg.Job.Protocol == gossip.SFB && len(ids)+1 > gossip.SFBMaxPeers && !n.sfbTooBig {
		n.sfbTooBig = true
		n.log.Error("this sfb job is larger than sfb runs well: every update goes to every member", "members", len(ids)+1, "max", gossip.SFBMaxPeers)
	}
	if old := n.live.Load(); old == nil || !slices.Equal(*old, ids) {
		n.log.Info("live members", "members", len(ids)+1, "peers", ids)
		n.live.Store(&ids)
		n.peer.SetPeers(ids) // at once: random walk's view is seeded from them
	}
	n.peer.SetMembers(ms)
	n.mu.Lock()
	n.status.Members = len(ids) + 1
	n.status.Neighbors = len(n.peer.Core().Config().Neighbors)
	n.mu.Unlock()
}

// announcement is what the daemon tells the network now.
func (n *Node) announcement(leaving bool) transport.Announcement {
	s := n.Status()
	return transport.Announcement{JobID: s.JobID, Name: n.cfg.Job.Name, Protocol: s.Protocol, Model: n.cfg.Job.Model.String(),
		Members: s.Members, Updates: s.Updates, Round: s.Round, Accuracy: s.Accuracy, Time: n.cfg.Now().Unix(),
		Spec: n.spec, Creator: n.creator, CreatorSig: n.creatorSig, Incarnation: n.incarnation, Leaving: leaving}
}

// goodbye tells the job's peers that this daemon is leaving, so that they
// rewire at once instead of after LiveTimeout.
func (n *Node) goodbye() {
	b, ok := n.cfg.Transport.(transport.Broadcaster)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := b.Announce(ctx, n.announcement(true)); err != nil {
		n.log.Warn("could not say goodbye: peers drop this node after their timeout", "err", err)
		return
	}
	n.log.Info("said goodbye to the job's peers")
}

// signSpec sets the spec the daemon's announcements carry: the one it
// joined from (its creator's signature forwarded), or its own job's,
// signed by itself as the creator.
func (n *Node) signSpec() error {
	if o := n.cfg.Origin; o != nil {
		n.spec, n.creator, n.creatorSig = o.Spec, o.Creator, o.CreatorSig
		return nil
	}
	n.spec = n.cfg.Job.Canonical()
	if s, ok := n.cfg.Transport.(transport.SpecSigner); ok {
		sig, err := s.SignSpec(n.spec)
		if err != nil {
			return err
		}
		n.creator, n.creatorSig = n.cfg.Transport.ID(), sig
	}
	return nil
}

// leave ends the node's part in the job (core goroutine, once ctx is
// done): it says goodbye, so that its peers rewire at once; a push-sum
// node then stops pushing, keeps taking the shares in flight to it for
// LeaveGrace, and hands its weight beyond one unit to its out-neighbours
// (gossip.Core.Depart) before it goes.
func (n *Node) leave() {
	n.goodbye()
	if !gossip.PushesSums(n.cfg.Job.Protocol) {
		return
	}
	n.peer.Leave()
	grace := time.NewTimer(n.cfg.LeaveGrace)
	defer grace.Stop()
	for done := false; !done; {
		select {
		case <-grace.C:
			done = true
		case in, ok := <-n.cfg.Transport.Inbound():
			if !ok {
				done = true
				break
			}
			n.handle(in)
		case r := <-n.doneCh:
			n.peer.TrainDone(r)
		case m := <-n.undeliveredCh:
			n.peer.Undelivered(m)
		}
	}
	n.peer.Depart()
	n.refreshStatus()
	n.log.Info("left the job", "pushsum_weight", n.peer.Core().PushSumWeight())
}

// watchAlone warns once when the daemon has had no other live member of
// its job for Config.AloneWarning (a wrong bootstrap address, another
// network key, mDNS off on a LAN, the job's other daemons not started,
// or a job ID that differs from theirs), and says when members come (core
// goroutine). Connections to daemons of other jobs do not count.
func (n *Node) watchAlone() {
	now := n.cfg.Now()
	members := len(n.roster.members)
	switch {
	case members > 0:
		if n.aloneWarned {
			n.log.Info("peers found: no longer training alone", "peers", members)
		}
		n.aloneSince, n.aloneWarned = time.Time{}, false
	case n.aloneSince.IsZero():
		n.aloneSince = now
	case !n.aloneWarned && now.Sub(n.aloneSince) >= n.cfg.AloneWarning:
		n.aloneWarned = true
		msg := "no peers: training alone, no other daemon of this job is connected. Check --bootstrap (multiaddrs ending in /p2p/ID), " +
			"that the job's other daemons run and are reachable, and the consortium file (network key and members) if any"
		if k := len(n.roster.otherJobs); k > 0 {
			msg += fmt.Sprintf("; the %d connected daemon(s) run other jobs (see /announcements): "+
				"to take part in one of them, start with --join JOB_ID, or with exactly its job flags", k)
		}
		n.log.Warn(msg, "for", now.Sub(n.aloneSince).Round(time.Second).String(), "job", n.job.Short(),
			"other_job_peers", len(n.roster.otherJobs), "unknown_peers", len(n.roster.unknown))
	}
}

// withhold counts a message that the roster r kept back; a push-sum
// share goes back to the core, so that its weight is not lost. Any
// goroutine: the core's (mayGossip) or a sender's (a frame whose
// addressee left the job while it waited).
func (n *Node) withhold(o outgoing, r *roster) {
	n.withheld.Add(1)
	n.met.withheld.Inc()
	n.log.Debug("not sent: the addressee is not a live member of the job", "to", o.to, "kind", o.kind.String(),
		"other_job", r.otherJob[o.to])
	n.giveBack(o)
}
