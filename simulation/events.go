package simulation

import (
	"time"

	"github.com/gossipd/gossipd/gossip"
)

type eventKind uint8

const (
	evTick eventKind = iota
	evDeliver
	evTrainDone
	evChurn
	evUp   // trace-driven: the peer comes online
	evDown // trace-driven: the peer goes offline
	// Turnover (turnover.go): a member is replaced; a leaver's grace ends;
	// a dead member times out.
	evTurnover
	evDepart
	evDrop
)

// event is one thing that happens at a virtual time. Events at equal times
// run in the order they were scheduled (queue), which makes runs
// reproducible.
type event struct {
	at   time.Duration
	kind eventKind
	peer int
	// A delivery: from the sender's index, the message, or its encoding
	// and kind when it goes through the codec (Config.Codec).
	from    int
	msg     *gossip.Message
	buf     []byte
	msgKind gossip.Kind
	// orig is the message as sent, for the sender's undelivered notice.
	orig   *gossip.Message
	result *gossip.TrainResult
	// job, for an update that takes virtual time, is its run on the
	// training pool; result is its result once done.
	job *trainJob
}

// queued is an event in the queue, with its order kept beside it, so
// that ordering the queue reads no event.
type queued struct {
	at  time.Duration
	seq uint64
	e   *event
}

func (a queued) before(b queued) bool { return a.at < b.at || (a.at == b.at && a.seq < b.seq) }

// queue is the simulator's event queue: a binary heap by time, then by
// the order of scheduling. Its keys are distinct, so any heap gives the
// same order.
type queue struct {
	h   []queued
	seq uint64
}

// push schedules e at e.at, which must not change while e is queued.
func (q *queue) push(e *event) {
	q.seq++
	x := queued{e.at, q.seq, e}
	i := len(q.h)
	q.h = append(q.h, x)
	for i > 0 {
		up := (i - 1) / 2
		if !x.before(q.h[up]) {
			break
		}
		q.h[i] = q.h[up]
		i = up
	}
	q.h[i] = x
}

// pop removes the first event and returns it.
func (q *queue) pop() *event {
	h := q.h
	top := h[0].e
	n := len(h) - 1
	x := h[n]
	h[n] = queued{}
	h = h[:n]
	q.h = h
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].before(h[c]) {
			c = r
		}
		if !h[c].before(x) {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = x
	return top
}

func (q *queue) peek() *event {
	if len(q.h) == 0 {
		return nil
	}
	return q.h[0].e
}
