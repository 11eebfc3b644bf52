package node

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/node/transport"
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
// (gossip.Node.SetMembers), which builds its topology over it. A peer
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

// refreshMembers computes the live members and hands them to the core
// (core goroutine).
func (n *Node) refreshMembers() {
	b, ok := n.cfg.Transport.(transport.Broadcaster)
	if !ok {
		// Without announcements, every admitted connected peer is taken
		// to run the job (memnet tests without a broadcaster).
		var ms []gossip.Member
		for _, p := range n.admitted(n.cfg.Transport.Peers()) {
			ms = append(ms, gossip.Member{ID: p})
		}
		n.setMembers(ms)
		return
	}
	connected := n.cfg.Transport.Peers()
	now := n.cfg.Now()
	var ms []gossip.Member
	for _, a := range b.Announcements() {
		if a.JobID != n.job.String() || a.Leaving || now.Sub(a.Heard) > n.cfg.LiveTimeout || !n.cfg.Local.IsMember(a.Peer) {
			continue
		}
		if _, ok := slices.BinarySearch(connected, a.Peer); !ok {
			continue
		}
		ms = append(ms, gossip.Member{ID: a.Peer, Incarnation: a.Incarnation})
	}
	n.setMembers(ms)
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
	if old := n.live.Load(); old == nil || !slices.Equal(*old, ids) {
		n.log.Info("live members", "members", len(ids)+1, "peers", ids)
		n.live.Store(&ids)
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
// (gossip.Node.Depart) before it goes.
func (n *Node) leave() {
	n.goodbye()
	if n.cfg.Job.Protocol != gossip.PushSum {
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

// AloneWarning is how long a daemon may have no peer before it says so.
const AloneWarning = 30 * time.Second

// watchAlone warns once when the daemon has had no peer for AloneWarning
// (a wrong bootstrap address, another network key, mDNS off on a LAN),
// and says when peers come (core goroutine).
func (n *Node) watchAlone(peers int) {
	now := n.cfg.Now()
	switch {
	case peers > 0:
		if n.aloneWarned {
			n.log.Info("peers found", "peers", peers)
		}
		n.aloneSince, n.aloneWarned = time.Time{}, false
	case n.aloneSince.IsZero():
		n.aloneSince = now
	case !n.aloneWarned && now.Sub(n.aloneSince) >= AloneWarning:
		n.aloneWarned = true
		n.log.Warn("no peers: training alone. Check --bootstrap (multiaddrs ending in /p2p/ID), that the peers run and are reachable, "+
			"and the consortium file (network key and members) if any", "for", now.Sub(n.aloneSince).Round(time.Second).String())
	}
}
