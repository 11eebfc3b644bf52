package simulation

import (
	"fmt"
	"slices"

	"github.com/gossipd/gossipd/gossip"
)

// Instant updates on every core. With updates that take no virtual time
// (the default), an update's result is due at the instant it was asked
// for, so taken in event order it would be waited for at once, and
// training would use one core. But a random walk's update changes only
// its own peer (gossip.Core.QuietTrainDone: it sends nothing), so its
// done event can be set aside while the update runs on the pool
// (trainPool) and the events of other peers go on; it is taken when the
// next event that involves the peer comes up (a tick, a delivery to it or
// one it sent that failed, churn), or at the end of the round, in any
// case before anything reads the peer. Taking it later changes nothing
// it does: nothing has reached the peer in between but Cyclon's
// shuffles, its model is its own, and it sends nothing (a message sent
// from a set-aside update ends the run with an error). The shuffles,
// delivered or started by a tick, go on beside it
// (gossip.Core.StepsBeside, TicksBeside): they touch the view alone, and
// the update does not, so the result waits for the next event that needs
// it, which lets a batch of updates on a GPU grow (batch.go). The only
// difference from strict event order is the tie-break of events the
// update schedules (its next tick) against other events at the very same
// nanosecond, and the runs stay the same whatever the number of cores: what is set aside depends on the events alone,
// never on which update finishes first. Updates that do send (D-PSGD's,
// or a random walk's that owes token replies) are taken in event order
// as before, but their updates still run on the pool, so a round's
// updates asked for at the same instant run side by side.

// overlapUpdates says whether instant updates run on the pool. Runs with
// attackers that read honest models (ipm, alie) or a changing roster
// (whose events involve every peer) keep strict event order; tests turn
// it off to compare.
func (s *sim) overlapUpdates() bool {
	return !sequentialUpdates && s.speed == nil && s.adv == nil && s.cfg.Turnover == 0
}

// sequentialUpdates, set by tests, trains on the event loop, in strict
// event order.
var sequentialUpdates bool

// maxAside bounds the results set aside at once: each holds its peer's
// old model and its new one (two vectors where strict order holds one),
// and a few dozen keep two cores busy. When more are set aside, the
// oldest is handed over. The bound does not depend on the machine (tests
// lower it).
var maxAside = 64

// asideBound is how many results may be set aside: maxAside, or with
// updates in batches (batch.go) as many as a batch holds, up to
// asideBudget bytes of the models they keep, so that a batch can fill
// before the oldest result set aside is taken (which would start its
// batch early). Each keeps about two models.
func (s *sim) asideBound() int {
	if s.batch == nil {
		return maxAside
	}
	return max(maxAside, min(s.batch.size, asideBudget/(8*len(s.init))))
}

// asideBudget bounds the models set-aside results keep in batched runs.
const asideBudget = 128 << 20

// setAside keeps e, a done event of an update of a quiet peer, for later.
func (s *sim) setAside(e *event) error {
	if s.deferred == nil {
		s.deferred = make([]*event, len(s.peers))
	}
	s.deferred[e.peer] = e
	s.deferredN++
	s.setAsides++
	s.asideOrder = append(s.asideOrder, e)
	for s.deferredN > s.asideBound() {
		old := s.asideOrder[0]
		s.asideOrder = s.asideOrder[1:]
		if s.deferred[old.peer] == old { // not handed over yet
			if err := s.takeResult(old.peer); err != nil {
				return err
			}
		}
	}
	if len(s.asideOrder) > 4*s.asideBound() { // drop the handed-over entries
		s.asideOrder = slices.DeleteFunc(s.asideOrder, func(x *event) bool { return s.deferred[x.peer] != x })
	}
	return nil
}

// takeSetAside hands their results to the peers that the event e involves,
// but where their cores take e beside them (stepsBeside), and reports
// whether it did: the queue may then hold earlier events.
func (s *sim) takeSetAside(e *event) (bool, error) {
	if e.kind == evSized {
		return false, nil // it takes a size and involves no peer
	}
	took := false
	involved := append(make([]int, 0, 2), e.peer) // no allocation
	// A failed delivery tells its sender.
	if e.kind == evDeliver {
		involved = append(involved, e.from)
	}
	for _, k := range involved {
		switch {
		case s.deferred[k] == nil:
		case s.stepsBeside(k, e):
			s.besides++
		default:
			if err := s.takeResult(k); err != nil {
				return false, err
			}
			took = true
		}
	}
	return took, nil
}

// stepsBeside reports whether peer k's core may take the event e before
// its set-aside result (gossip.Core.StepsBeside, TicksBeside): a tick or
// a delivery of Cyclon's shuffle alone.
func (s *sim) stepsBeside(k int, e *event) bool {
	switch e.kind {
	case evTick:
		return s.peers[k].Core().TicksBeside(e.at)
	case evDeliver:
		kind := e.msgKind
		if e.buf == nil {
			kind = e.msg.Kind
		}
		return s.peers[k].Core().StepsBeside(kind)
	}
	return false
}

// takeAll hands every set-aside result to its peer, in peer order.
func (s *sim) takeAll() error {
	for k := 0; s.deferredN > 0 && k < len(s.deferred); k++ {
		if s.deferred[k] != nil {
			if err := s.takeResult(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// takeResult hands peer k its set-aside result at the virtual time it was
// due.
func (s *sim) takeResult(k int) error {
	e := s.deferred[k]
	s.deferred[k] = nil
	s.deferredN--
	p := s.peers[k]
	res := e.job.promise // handed over before it is computed (promise.go)
	if res == nil {
		s.await(e.job)
		if e.job.err != nil {
			return fmt.Errorf("peer %s: %w", p.ID(), e.job.err)
		}
		res = e.job.res
	}
	now := s.now
	s.now, s.late = e.at, p.ID()
	p.TrainDone(res)
	if s.err == nil && p.online {
		s.schedule(k)
	}
	s.now, s.late = now, ""
	return s.err
}

// sendLate is the error of a message sent while a set-aside result is
// taken: the peer's core called the update quiet.
func sendLate(id gossip.PeerID) error {
	return fmt.Errorf("simulation: peer %s sent a message from an update its core called quiet (gossip.Core.QuietTrainDone)", id)
}
