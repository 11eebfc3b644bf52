package simulation

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/gossip"
)

// Turnover: members depart and new peers join while the job runs, in
// virtual time, through the same core events as in the daemon: a joiner
// asks a live member for its state (gossip.Config.Join), a leaver says
// goodbye (its peers rewire at once), keeps taking what is in flight for
// a grace period and departs (gossip.Core.Leave, Depart), and a member
// that dies is dropped from the others' view after MemberTimeout. The
// live members are handed to every core (gossip.Core.SetMembers), which
// builds its topology over them.

// Departures.
const (
	DepartLeave = "leave"
	DepartDie   = "die"
)

// leaveGrace is how long a leaving peer keeps taking what arrives before
// it departs, in Δ.
const leaveGrace = 2

func (c *Config) validateTurnover() error {
	switch {
	case !(c.Turnover >= 0 && c.Turnover <= 1):
		return fmt.Errorf("%w: turnover %v not in [0,1]", ErrConfig, c.Turnover)
	case c.Departure != DepartLeave && c.Departure != DepartDie:
		return fmt.Errorf("%w: departure %q, want %s|%s", ErrConfig, c.Departure, DepartLeave, DepartDie)
	case c.MemberTimeout < 0:
		return fmt.Errorf("%w: negative member timeout", ErrConfig)
	case c.Turnover == 0:
		return nil
	case !slices.Contains(gossip.Protocols, c.Protocol):
		return fmt.Errorf("%w: turnover is for the gossip protocols, not the %s baseline", ErrConfig, c.Protocol)
	case c.Churn > 0 || len(c.ChurnTrace) > 0 || c.Byzantine > 0 || c.EdgeList != nil:
		return fmt.Errorf("%w: turnover cannot be combined with churn, a churn trace, attackers or an edge list", ErrConfig)
	case c.turnovers() == 0:
		return fmt.Errorf("%w: turnover %v of %d peers replaces nobody", ErrConfig, c.Turnover, c.Peers)
	}
	return nil
}

// turnovers is how many members are replaced.
func (c *Config) turnovers() int { return int(math.Round(c.Turnover * float64(c.Peers))) }

// turnoverRound is when the k-th of n replacements happens.
func turnoverRound(k, n, rounds int) time.Duration {
	f := 0.2
	if n > 1 {
		f += 0.5 * float64(k) / float64(n-1)
	}
	return time.Duration(f * float64(rounds))
}

// roster is a run's membership when it changes.
type roster struct {
	live   []int // the members' indices, sorted (their IDs sort alike)
	parts  [][]int
	next   int // the next joiner's index
	joined int
	// LastChange is when the last member left or joined.
	lastChange time.Duration
}

// startRoster sets up turnover: the first Peers slots are the members,
// joiners take the next ones; the topology protocols build their graph
// over the live members.
func (s *sim) startRoster(parts [][]int) {
	n := s.cfg.turnovers()
	s.roster = &roster{parts: parts, next: s.cfg.Peers}
	for i := range s.cfg.Peers {
		s.roster.live = append(s.roster.live, i)
	}
	for k := range n {
		s.q.push(&event{at: turnoverRound(k, n, s.cfg.Rounds) * s.cfg.Delta, kind: evTurnover})
	}
	s.setMembers()
}

// liveTopology is the core's Config.Topology under turnover.
func (s *sim) liveTopology() string {
	switch {
	case s.roster == nil:
		return ""
	case s.cfg.Protocol == gossip.SFB:
		return "complete"
	case gossip.NeedsTopology(s.cfg.Protocol):
		return s.cfg.Topology
	}
	return ""
}

// setMembers hands the live members to every live peer's core.
func (s *sim) setMembers() {
	ms := make([]gossip.Member, len(s.roster.live))
	ids := make([]gossip.PeerID, len(s.roster.live))
	for k, i := range s.roster.live {
		ms[k] = gossip.Member{ID: peerName(i)}
		ids[k] = peerName(i)
	}
	for _, i := range s.roster.live {
		p := s.peers[i]
		p.SetMembers(ms)
		if gossip.SamplesPeers(s.cfg.Protocol) && s.cfg.Sampling == gossip.SamplingOracle {
			p.SetPeers(ids)
		}
		if p.online {
			s.schedule(i)
		}
	}
	s.roster.lastChange = s.now
}

// turnover replaces one member: a random live member departs and a new
// peer joins.
func (s *sim) turnover() error {
	r := s.roster
	victim := r.live[s.rng.IntN(len(r.live))]
	r.live = slices.DeleteFunc(r.live, func(i int) bool { return i == victim })
	v := s.peers[victim]
	switch s.cfg.Departure {
	case DepartLeave:
		// The goodbye takes it out of every view at once; it keeps taking
		// what arrives for the grace period, then departs.
		v.Leave()
		s.q.push(&event{at: s.now + leaveGrace*s.cfg.Delta, kind: evDepart, peer: victim})
	case DepartDie:
		v.online = false
		s.q.push(&event{at: s.now + s.cfg.MemberTimeout, kind: evDrop, peer: victim})
	}
	j := r.next
	r.next++
	// The joiner brings the data of the member it replaces (a device
	// swapped for another): the run differs from a static one in its
	// membership only.
	p, err := s.newPeer(j, r.parts[victim%len(r.parts)], true)
	if err != nil {
		return err
	}
	s.peers = append(s.peers, p)
	r.live = append(r.live, j)
	r.joined++
	if gossip.SamplesPeers(s.cfg.Protocol) {
		ids := make([]gossip.PeerID, 0, len(r.live))
		for _, i := range r.live {
			ids = append(ids, peerName(i))
		}
		p.SetPeers(s.sample(j, ids))
	}
	if s.cfg.Departure == DepartDie {
		// The dead member stays in the others' view until its timeout.
		s.setMembersWith(victim)
	} else {
		s.setMembers()
	}
	p.Tick(s.now)
	s.schedule(j)
	return nil
}

// setMembersWith hands out the live members and, still, a member that
// died and has not yet timed out.
func (s *sim) setMembersWith(dead int) {
	r := s.roster
	live := r.live
	r.live = append(slices.Clone(live), dead)
	slices.Sort(r.live)
	s.setMembers()
	r.live = live
}

// sample picks a random-walk joiner's first contacts among ids.
func (s *sim) sample(i int, ids []gossip.PeerID) []gossip.PeerID {
	if s.cfg.Sampling == gossip.SamplingOracle {
		return ids
	}
	out := []gossip.PeerID{}
	for _, k := range s.rng.Perm(len(ids))[:min(5, len(ids))] {
		if ids[k] != peerName(i) {
			out = append(out, ids[k])
		}
	}
	return out
}

// evalPeers samples k of the live members (all when k is 0 or more than
// there are), seeded by the round.
func (r *roster) evalPeers(k int, seed uint64, round int) []int {
	if k == 0 || k >= len(r.live) {
		return slices.Clone(r.live)
	}
	rng := dataset.NewRand(seed ^ uint64(round)<<20 ^ 0x6c697665)
	out := make([]int, k)
	for j, x := range rng.Perm(len(r.live))[:k] {
		out[j] = r.live[x]
	}
	slices.Sort(out)
	return out
}
