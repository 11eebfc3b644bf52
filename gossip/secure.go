package gossip

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/privacy/secagg"
)

// secure is one D-PSGD node's secure aggregation: its sender side in
// each neighbour's round (by round, as a neighbour may still be
// unmasking a round this node has left) and its receiver side for its
// own round.
type secure struct {
	cfg     *SecureConfig
	senders map[uint64]map[PeerID]*secagg.Sender
	contrib map[uint64][]float32 // the node's contribution to each round (begin)
	early   map[uint64]map[PeerID]earlyAdvert
	rx      *secagg.Receiver
	// Degrees, over a live topology, from which both ends of an edge
	// compute the same Metropolis–Hastings weight for a round: this
	// node's at each round's start, each receiver's from its roster, and
	// the senders' of this node's round from their adverts.
	myDeg   map[uint64]int
	recvDeg map[uint64]map[PeerID]int
	sendDeg map[PeerID]int
	round   uint64
	phase   int // 0 adverts, 1 dealing, 2 contributions, 3 reveals, 4 done
	want    int // messages the phase waits for
	// phaseEnd is when the current phase closes without what it waits
	// for; behind is a later round some neighbour advertised while this
	// node's adverts were too few for a roster (0: none).
	start, phaseEnd time.Duration
	behind          uint64
	begun           bool // a round has begun (round is its number)
	got             int
	sum             []float32 // the decoded sum, when the round unmasked
	weight          float64   // the survivors' mixing weights
}

// earlyAdvert is an advert for a round this node has not begun.
type earlyAdvert struct {
	ad  secagg.Advert
	deg int
}

func newSecure(cfg *SecureConfig) *secure {
	return &secure{cfg: cfg, senders: map[uint64]map[PeerID]*secagg.Sender{}, contrib: map[uint64][]float32{},
		early: map[uint64]map[PeerID]earlyAdvert{}, myDeg: map[uint64]int{}, recvDeg: map[uint64]map[PeerID]int{}, phase: 4}
}

// senderWeight is the weight this node's contribution to receiver r's
// round carries: the configured one over a static graph, else the
// Metropolis–Hastings weight of the two degrees the round started with.
func (s *secure) senderWeight(d *dpsgd, round uint64, r PeerID) float64 {
	if !d.live() {
		return d.weights[r]
	}
	return merge.MetropolisHastings(s.myDeg[round], s.recvDeg[round][r])
}

// receiverWeight is the weight of member m in this node's round.
func (s *secure) receiverWeight(d *dpsgd, m PeerID) float64 {
	if !d.live() {
		return d.weights[m]
	}
	return merge.MetropolisHastings(s.myDeg[s.round], s.sendDeg[m])
}

// selfWeight is W_ii for this node's round: over a live topology, what
// the round's senders' weights leave.
func (s *secure) selfWeight(d *dpsgd) float64 {
	if !d.live() {
		return d.selfWeight()
	}
	w := 1.0
	for _, deg := range s.sendDeg {
		w -= merge.MetropolisHastings(s.myDeg[s.round], deg)
	}
	return w
}

// begin starts round n.round with contribution x (the round's starting
// parameters, or with --local-steps the local result): an advert to
// each neighbour as a sender, and this node's own round as a receiver.
func (s *secure) begin(n *Core, d *dpsgd, x []float32) {
	for r := range s.senders {
		if r+futureRounds+1 < n.round {
			delete(s.senders, r)
			delete(s.contrib, r)
			delete(s.myDeg, r)
			delete(s.recvDeg, r)
		}
	}
	s.contrib[n.round] = slices.Clone(x)
	s.myDeg[n.round], s.recvDeg[n.round], s.sendDeg = len(d.order), map[PeerID]int{}, map[PeerID]int{}
	s.senders[n.round] = map[PeerID]*secagg.Sender{}
	for _, p := range d.order {
		snd, ad, err := secagg.NewSender(s.cfg.Job, n.round, p, n.cfg.ID, s.cfg.Rand)
		if err == nil && s.cfg.Sign != nil {
			ad.Sig, err = s.cfg.Sign(secagg.AdvertMessage(s.cfg.Job, n.round, p, n.cfg.ID, ad.MaskKey, ad.ChannelKey))
		}
		if err != nil {
			n.drop(DropSecure, p, "drawing secrets or signing: "+err.Error())
			continue
		}
		s.senders[n.round][p] = snd
		n.send(Message{Kind: KindSecAdvert, To: p, Round: n.round, Weight: float64(len(d.order)), Secure: &SecureAgg{Receiver: p, Advert: ad}})
	}
	s.rx = secagg.NewReceiver(s.cfg.Job, n.round, n.cfg.ID, len(n.params), s.cfg.Fraction)
	s.round, s.phase, s.want, s.got, s.sum, s.weight = n.round, 0, len(d.order), 0, nil, 0
	s.start, s.phaseEnd, s.behind, s.begun = n.now, n.now+d.cfg.RoundTimeout/4, 0, true
	for _, from := range slices.Sorted(maps.Keys(s.early[n.round])) {
		e := s.early[n.round][from]
		s.accept(n, from, s.advert(n, from, e.ad, e.deg))
	}
	delete(s.early, n.round)
	for r := range s.early {
		if r < n.round {
			delete(s.early, r)
		}
	}
	s.advance(n, d)
}

// ahead is the latest round for which neighbours have advertised to
// this node ahead of it (0, false: none).
func (s *secure) ahead(n *Core) (uint64, bool) {
	var r uint64
	found := false
	for k := range s.early {
		if k >= n.round && (!found || k > r) {
			r, found = k, true
		}
	}
	return r, found
}

// catchUp, as a round begins, jumps to the neighbours' round when they
// have advertised a later one: a node that fell behind (a round that
// waited for its deadline) joins their rounds again instead of missing
// each one's roster by a round.
func (s *secure) catchUp(n *Core) {
	if r, ok := s.ahead(n); ok && r > n.round {
		n.trace("catch-up", "", fmt.Sprintf("round %d → %d (the neighbours' adverts)", n.round, r), float64(r-n.round))
		n.round = r
	}
}

// done reports whether this node's own round has its sum (or was
// skipped).
func (s *secure) done() bool { return s.phase == 4 }

// wake is the current phase's deadline: a quarter of RoundTimeout from
// the phase's start, except that adverts too few for a roster (fewer
// than two) are waited for until the round's whole RoundTimeout. A node
// whose neighbours are slower so waits for them rather than skipping
// ahead at its own pace (its rounds would then drift away from theirs);
// one that is behind jumps to their round (step, catchUp).
func (s *secure) wake(d *dpsgd) time.Duration {
	switch {
	case s.phase == 4:
		return Never
	case s.phase == 0 && s.got < 2:
		return max(s.phaseEnd, s.start+d.cfg.RoundTimeout)
	}
	return s.phaseEnd
}

// accept counts a message the receiver took, or drops one it refused.
func (s *secure) accept(n *Core, from PeerID, err error) {
	if err != nil {
		n.drop(DropSecure, from, err.Error())
		return
	}
	s.got++
}

// advance closes the receiver's phases whose messages are all in or
// whose deadline passed.
func (s *secure) advance(n *Core, d *dpsgd) {
	for s.phase < 4 && (s.got >= s.want || n.now >= s.wake(d) || s.behind > 0) {
		var err error
		switch s.phase {
		case 0:
			var ro secagg.Roster
			if s.behind > 0 {
				err = fmt.Errorf("%w: %d advert(s), and a neighbour is in round %d already", secagg.ErrTooFew, s.got, s.behind)
			} else if ro, err = s.rx.Roster(); err == nil {
				if len(ro.Members) > s.cfg.Ring.MaxTerms() {
					err = fmt.Errorf("%w: %d members, more than the ring sums (%d)", secagg.ErrTooFew, len(ro.Members), s.cfg.Ring.MaxTerms())
					break
				}
				for _, m := range ro.Members {
					n.send(Message{Kind: KindSecRoster, To: m, Round: s.round, Weight: float64(s.myDeg[s.round]), Secure: &SecureAgg{Receiver: n.cfg.ID, Roster: ro}})
				}
				s.want = len(ro.Members)
			}
		case 1:
			var rel map[string]secagg.Relay
			if rel, err = s.rx.Relays(); err == nil {
				for _, m := range slices.Sorted(maps.Keys(rel)) {
					n.send(Message{Kind: KindSecRelay, To: m, Round: s.round, Secure: &SecureAgg{Receiver: n.cfg.ID, Relay: rel[m]}})
				}
				s.want = len(rel)
			}
		case 2:
			var req secagg.Request
			var to []string
			if req, to, err = s.rx.Request(); err == nil {
				for _, m := range to {
					n.send(Message{Kind: KindSecRequest, To: m, Round: s.round, Secure: &SecureAgg{Receiver: n.cfg.ID, Request: req}})
				}
				s.want = len(to)
			}
		case 3:
			var sum []uint32
			var names []string
			if sum, names, err = s.rx.Sum(); err == nil {
				s.sum = make([]float32, len(sum))
				s.cfg.Ring.Decode(s.sum, sum)
				for _, m := range names {
					s.weight += s.receiverWeight(d, m)
				}
				n.trace("secure-sum", "", fmt.Sprintf("round %d: the sum of %d of %d neighbours", s.round, len(names), len(d.order)), float64(len(names)))
				if k := s.rx.Dropped(); k > 0 {
					n.trace("secure-recovered", "", fmt.Sprintf("round %d: the masks of %d members that dealt but sent no contribution removed with the others' shares", s.round, k), float64(k))
				}
			}
		}
		s.phase++
		s.got, s.phaseEnd = 0, n.now+d.cfg.RoundTimeout/4
		if err != nil {
			s.phase = 4
			if !errors.Is(err, secagg.ErrTooFew) {
				n.drop(DropSecure, "", fmt.Sprintf("round %d: %v", s.round, err))
			}
			n.trace("secure-skipped", "", fmt.Sprintf("round %d: %v", s.round, err), 0)
		}
	}
}

// advert takes a member's advert for this node's round, with the degree
// its round started with: signed by the member, where members sign (an
// honest receiver relays no key its member did not sign; the members
// check again before they deal).
func (s *secure) advert(n *Core, from PeerID, ad secagg.Advert, deg int) error {
	if s.cfg.Verify != nil {
		msg := secagg.AdvertMessage(s.cfg.Job, s.round, n.cfg.ID, from, ad.MaskKey, ad.ChannelKey)
		if err := s.cfg.Verify(from, msg, ad.Sig); err != nil {
			return fmt.Errorf("%w: an advert from %s not signed by it: %w", secagg.ErrMessage, from, err)
		}
	}
	if err := s.rx.Advert(from, ad); err != nil {
		return err
	}
	s.sendDeg[from] = deg
	return nil
}

// receiverPhase is the receiver's phase that takes each kind sent to it.
var receiverPhase = map[Kind]int{KindSecAdvert: 0, KindSecDealt: 1, KindSecMasked: 2, KindSecReveal: 3}

// step takes a secure-aggregation message.
func (s *secure) step(n *Core, d *dpsgd, m *Message) {
	sec := m.Secure
	switch m.Kind {
	case KindSecRoster, KindSecRelay, KindSecRequest:
		// To this node as a sender, from the receiver whose round it is.
		snd := s.senders[m.Round][m.From]
		if sec.Receiver != m.From || snd == nil {
			n.trace("secure-late", m.From, fmt.Sprintf("%s of round %d, which this node has no part in", m.Kind, m.Round), 0)
			return
		}
		var err error
		switch m.Kind {
		case KindSecRoster:
			if sec.Roster.Threshold < s.cfg.MinThreshold {
				// Too few contributions would add up in this sum for
				// the noise this node adds (distributed DP).
				n.trace("secure-abstained", m.From, fmt.Sprintf("round %d: threshold %d, below the %d distributed DP needs", m.Round, sec.Roster.Threshold, s.cfg.MinThreshold), 0)
				return
			}
			if s.recvDeg[m.Round] != nil {
				s.recvDeg[m.Round][m.From] = int(m.Weight)
			}
			if s.cfg.Verify != nil {
				if err = sec.Roster.VerifyAdverts(s.cfg.Job, m.Round, m.From, n.cfg.ID, s.cfg.Verify); err != nil {
					break
				}
			}
			var dealt secagg.Dealt
			if dealt, err = snd.Deal(sec.Roster, secagg.Threshold(len(sec.Roster.Members), s.cfg.Fraction)); err == nil {
				n.send(Message{Kind: KindSecDealt, To: m.From, Round: m.Round, Secure: &SecureAgg{Receiver: m.From, Dealt: dealt}})
			}
		case KindSecRelay:
			v := make([]uint32, len(n.params))
			if c := s.cfg.Ring.Encode(v, s.contrib[m.Round], s.senderWeight(d, m.Round, m.From)); c > 0 {
				n.trace("secure-clipped", m.From, fmt.Sprintf("round %d: %d values clipped to ±%v", m.Round, c, s.cfg.Ring.Clip), float64(c))
			}
			if err = snd.Mask(sec.Relay, v); err == nil {
				n.send(Message{Kind: KindSecMasked, To: m.From, Round: m.Round, Secure: &SecureAgg{Receiver: m.From, Masked: v}})
			}
		case KindSecRequest:
			var rv secagg.Reveal
			if rv, err = snd.Reveal(sec.Request); err == nil {
				n.send(Message{Kind: KindSecReveal, To: m.From, Round: m.Round, Secure: &SecureAgg{Receiver: m.From, Reveal: rv}})
			}
		}
		if err != nil {
			n.drop(DropSecure, m.From, err.Error())
		}
		return
	}
	// To this node as the receiver.
	if sec.Receiver != n.cfg.ID {
		n.drop(DropSecure, m.From, fmt.Sprintf("%s for %s's round, sent to this node", m.Kind, sec.Receiver))
		return
	}
	if m.Round != s.round || s.phase == 4 {
		if m.Kind == KindSecAdvert && (m.Round > s.round || !s.begun) {
			if m.Round > s.round+futureRounds {
				// A neighbour far ahead: this node was cut off, or its
				// rounds ran slower than a neighbour's that skipped
				// them. Its next round jumps there (catchUp), as plain
				// D-PSGD's does; one such round is kept at most.
				for r := range s.early {
					if r > s.round+futureRounds && r != m.Round {
						delete(s.early, r)
					}
				}
			}
			if s.early[m.Round] == nil {
				s.early[m.Round] = map[PeerID]earlyAdvert{}
			}
			s.early[m.Round][m.From] = earlyAdvert{sec.Advert, int(m.Weight)}
			if s.phase == 0 && s.got < 2 && m.Round > s.round {
				// Too few adverts here for a roster, and the neighbours
				// have moved on: skip this round now and join theirs.
				s.behind = max(s.behind, m.Round)
				s.advance(n, d)
				d.tryFinish(n)
			}
			return
		}
		n.trace("secure-late", m.From, fmt.Sprintf("%s of round %d at round %d", m.Kind, m.Round, s.round), 0)
		return
	}
	if p := receiverPhase[m.Kind]; p < s.phase {
		// Honest, but after its phase closed at the deadline.
		n.trace("secure-late", m.From, fmt.Sprintf("%s of round %d after its phase closed", m.Kind, m.Round), 0)
		return
	}
	var err error
	switch m.Kind {
	case KindSecAdvert:
		err = s.advert(n, m.From, sec.Advert, int(m.Weight))
	case KindSecDealt:
		err = s.rx.Dealt(m.From, sec.Dealt)
	case KindSecMasked:
		if s.cfg.Ring.LooksUnmasked(sec.Masked) {
			n.drop(DropUnmasked, m.From, fmt.Sprintf("a contribution to round %d whose values lie within the clipping bound: sent without its masks", m.Round))
			return
		}
		n.keep()
		err = s.rx.Masked(m.From, sec.Masked)
	case KindSecReveal:
		err = s.rx.Reveal(m.From, sec.Reveal)
	}
	s.accept(n, m.From, err)
	s.advance(n, d)
	d.tryFinish(n)
}

// mix is the round's average: (W_ii·x + the neighbours' weighted sum) /
// (W_ii + their weights), or x alone for a skipped round.
func (s *secure) mix(x []float32, self float64) []float32 {
	out := slices.Clone(x)
	if s.sum == nil {
		return out
	}
	total := self + s.weight
	for k := range out {
		out[k] = float32((self*float64(x[k]) + float64(s.sum[k])) / total)
	}
	return out
}
