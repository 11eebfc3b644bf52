package simulation

import (
	"errors"
	"fmt"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/peer"
)

// world is the simulator's side of one peer's driver: messages travel
// through the simulated network, training runs at once and its result
// arrives as an event when the peer's compute speed says it would be done
// (at the same instant by default: compute.go), and commits, rejects and
// halts are counted.
type world struct {
	s *sim
	i int
}

// do carries out what the peer asked, in order.
func (w *world) do(ds []peer.Do) {
	for _, d := range ds {
		switch {
		case d.Send != nil:
			w.Send(d.Send)
		case d.Train != nil:
			w.Train(d.Train)
		case d.Commit != nil:
			w.Commit(*d.Commit)
		case d.SaveAccounts != nil:
			w.SaveAccounts(*d.SaveAccounts)
		case d.Reject != nil:
			w.Reject(d.Reject.Reason, d.Reject.From, d.Reject.Err)
		case d.Halt != nil:
			w.Halt(d.Halt)
		}
	}
}

// The simulated peer's events: each time, the world carries out what the
// peer asks in return.

func (p *simPeer) Tick(now time.Duration)          { p.w.do(p.Peer.Tick(now)) }
func (p *simPeer) SetPeers(ids []gossip.PeerID)    { p.w.do(p.Peer.SetPeers(ids)) }
func (p *simPeer) SetMembers(ms []gossip.Member)   { p.w.do(p.Peer.SetMembers(ms)) }
func (p *simPeer) Undelivered(m *gossip.Message)   { p.w.do(p.Peer.Undelivered(m)) }
func (p *simPeer) Leave()                          { p.w.do(p.Peer.Leave()) }
func (p *simPeer) Depart()                         { p.w.do(p.Peer.Depart()) }
func (p *simPeer) TrainDone(r *gossip.TrainResult) { p.w.do(p.Peer.TrainDone(r)) }

// Receive hands the peer an arriving message (peer.Peer.Receive).
func (p *simPeer) Receive(e peer.Envelope) (stepped, kept bool) {
	r := p.Peer.Receive(e)
	p.w.do(r.Do)
	return r.Stepped, r.Kept
}

// Deliver hands the peer a message in memory (peer.Peer.Deliver).
func (p *simPeer) Deliver(from gossip.PeerID, m *gossip.Message) (stepped, kept bool) {
	r := p.Peer.Deliver(from, m)
	p.w.do(r.Do)
	return r.Stepped, r.Kept
}

func (w *world) Send(m *gossip.Message) {
	if w.s.late != "" {
		if w.s.err == nil {
			w.s.err = sendLate(w.s.late)
		}
		return
	}
	if err := w.s.send(w.i, m); err != nil && w.s.err == nil {
		w.s.err = err
	}
}

func (w *world) Train(req *gossip.TrainRequest) {
	p := w.s.peers[w.i]
	if w.s.batch != nil && p.tr.Batchable(req) {
		// The update waits for its batch (batch.go); its done event
		// starts the batch if it comes up first.
		job := w.s.batch.add(p.tr, req, p.ID())
		w.s.q.push(&event{at: w.s.now + w.s.trainTime(w.i, p.tr.Work(req)), kind: evTrainDone, peer: w.i, job: job})
		return
	}
	if w.s.pool != nil {
		// The update runs on the pool while the simulation goes on, and
		// its done event, due when the update would finish in virtual
		// time (compute.go) or at once (overlap.go), waits for it.
		job := w.s.pool.run(p.tr, req, w.s.mixer)
		w.s.q.push(&event{at: w.s.now + w.s.trainTime(w.i, p.tr.Work(req)), kind: evTrainDone, peer: w.i, job: job})
		return
	}
	r, err := func() (r *gossip.TrainResult, err error) {
		defer deviceFailure(w.s.gpu, "an update", &err)
		if w.s.mixer != nil {
			w.s.mixer.hostValues(req.Params) // a mix still pending
		}
		if w.s.batch != nil {
			// Its models may have been left on the device by a batch.
			if err := w.s.batch.fetch(append([][]float32{req.Params, req.MixWith}, req.MixInputs...)); err != nil {
				return nil, err
			}
		}
		return p.Run(req)
	}()
	if err != nil {
		if w.s.err == nil {
			w.s.err = fmt.Errorf("peer %s: %w", p.ID(), err)
		}
		return
	}
	w.s.q.push(&event{at: w.s.now + w.s.trainTime(w.i, p.tr.Work(req)), kind: evTrainDone, peer: w.i, result: r})
}

func (w *world) Commit(gossip.Commit) { w.s.stats.Updates++ }

// SaveAccounts: simulated peers keep their state in memory.
func (w *world) SaveAccounts(gossip.Accounts) {}

func (w *world) Reject(reason string, _ gossip.PeerID, _ error) { w.s.stats.Rejected[reason]++ }

func (w *world) Halt(err error) {
	if errors.Is(err, peer.ErrBudgetSpent) {
		w.s.stats.Halted++
		return
	}
	if w.s.err == nil {
		w.s.err = err
	}
}

// settleBytes counts the bytes of the top-k steps' indices sent
// (sim.lateBytes): with wait all of them, making the steps not made yet
// (before a row or the result reads the counts), else those of the
// steps made already (every round, so that the others are not held
// long; a step in the making is not waited for).
func (s *sim) settleBytes(wait bool) {
	if wait && len(s.lateBytes) > 0 && s.mixer != nil {
		s.mixer.resolvePending() // side by side, not one by one
	}
	kept := s.lateBytes[:0]
	for _, f := range s.lateBytes {
		if b, ok := f(wait); ok {
			s.stats.Bytes += uint64(b)
		} else {
			kept = append(kept, f)
		}
	}
	clear(s.lateBytes[len(kept):])
	s.lateBytes = kept
}

// send accounts a message and schedules its delivery: encoded, through
// the wire codec, when Config.Codec is set.
func (s *sim) send(from int, m *gossip.Message) error {
	if s.adv != nil {
		s.adv.tamper(s, from, m) // first: its vector is encoded too
	}
	if s.mixer != nil && s.cfg.Codec {
		s.mixer.hostValues(m.Params) // encoded here
		if p := m.Packed; p != nil && p.Deferred != nil {
			// Compressed here, to be encoded (fp16 and int8 draw no
			// randomness; rand-k's values are the kept ones, its
			// indices drawn from the seed it carries).
			s.mixer.hostValues(p.Deferred)
			compress.Settle(p)
		}
	}
	to, ok := s.index(m.To)
	if !ok {
		return fmt.Errorf("peer %s sent to unknown peer %q", m.From, m.To)
	}
	// A top-k step's indices are counted once the step is made
	// (settleBytes). Under a bandwidth its delivery's time needs them:
	// unless made already, they are taken at the earliest time it could
	// come (an evSized event), which the step is made by, mostly.
	size, later := gossip.EncodedSizeLater(m)
	if later != nil && s.cfg.Bandwidth > 0 {
		if b, ok := later(false); ok {
			size, later = size+b, nil
		}
	}
	if later != nil {
		s.lateBytes = append(s.lateBytes, later)
	}
	ev := &event{kind: evDeliver, peer: to, from: from, msg: m, orig: m}
	if s.cfg.Codec {
		b, err := peer.Encode(m)
		if err != nil {
			return err
		}
		ev.msg, ev.buf, ev.msgKind = nil, b, m.Kind
	}
	s.stats.Messages++
	s.stats.Bytes += uint64(size)
	if m.Kind.Membership() {
		s.stats.MembershipMessages++
		s.stats.MembershipBytes += uint64(size)
	}
	s.stats.BytesUncompressed += uint64(gossip.UncompressedSize(m))
	if s.cfg.Drop > 0 && s.rng.Float64() < s.cfg.Drop {
		s.stats.Dropped++
		return nil
	}
	lat := s.lat(s.rng)
	if later != nil && s.cfg.Bandwidth > 0 {
		z := &sizing{sentAt: s.now, lat: lat, size: size, atLeast: gossip.LateBytesAtLeast(m), late: later, seq: s.q.reserve()}
		ev.kind, ev.sizing = evSized, z
		ev.at = s.now + s.transfer(lat, size+z.atLeast)
		s.q.push(ev)
		return nil
	}
	ev.at = s.now + s.transfer(lat, size)
	s.q.push(ev)
	return nil
}

// transfer is the delay of a message of size bytes after the latency
// lat: lat, plus its bytes at the bandwidth.
func (s *sim) transfer(lat time.Duration, size int) time.Duration {
	if s.cfg.Bandwidth > 0 {
		lat += time.Duration(float64(size) / s.cfg.Bandwidth * float64(time.Second))
	}
	return lat
}

// sized schedules the delivery of the message of the evSized event e,
// now its size is taken (made if it was not yet), at the time and in the
// place of the order it would have taken with its size known when sent.
// That time is no earlier than now: the size lies at or above the
// bound that e's time was taken for.
func (s *sim) sized(e *event) {
	z := e.sizing
	s.sizedLate++
	b, ok := z.late(false)
	if !ok {
		s.waitedSize++
		b, ok = z.late(true) // not where the device failed
	}
	if ok && b < z.atLeast && s.err == nil {
		s.err = fmt.Errorf("simulation: a top-k message's %d kept indices counted as %d bytes", z.atLeast, b)
	}
	e.kind, e.sizing = evDeliver, nil // at the bound, at the earliest
	e.at = z.sentAt + s.transfer(z.lat, z.size+max(b, z.atLeast))
	s.q.pushAt(e, z.seq)
}

// deliver hands a message to its receiver, unless the receiver is offline
// or cut off from the sender. An encoded message goes through the driver's
// decoding and checks; once the core says it did not keep the encoding,
// it is overwritten with NaNs, as a recycled receive buffer would be.
func (s *sim) deliver(p *simPeer, e *event) {
	if !p.online || s.split(e.from, e.peer) {
		s.stats.Dropped++
		// The sender finds out, as a daemon's failed send does (a lossy
		// link, Drop, is silent).
		if from := s.peers[e.from]; from.online && e.orig != nil {
			from.Undelivered(e.orig)
			s.schedule(e.from)
		}
		return
	}
	from := s.peers[e.from].ID()
	if e.buf == nil {
		if stepped, _ := p.Deliver(from, e.msg); stepped && e.msg.Kind.CarriesModel() {
			p.modelsIn++
		}
		return
	}
	stepped, kept := p.Receive(peer.Envelope{From: from, Kind: e.msgKind, Payload: e.buf})
	if stepped && e.msgKind.CarriesModel() {
		p.modelsIn++
	}
	if !kept {
		for i := range e.buf {
			e.buf[i] = 0xFF // a NaN in every float
		}
	}
}

// split reports whether a netsplit separates peers a and b now.
func (s *sim) split(a, b int) bool {
	r := int(s.now / s.cfg.Delta)
	for _, ns := range s.cfg.Netsplits {
		if r >= ns.From && r < ns.To && a%ns.Groups != b%ns.Groups {
			return true
		}
	}
	return false
}
