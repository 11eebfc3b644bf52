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
	// evSized: a message whose delivery waits on its size (a top-k
	// step's, under a bandwidth) reaches the earliest time it could be
	// delivered at; its size is taken and its delivery scheduled.
	evSized
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
	// sizing, for an evSized event, is how its delivery's time is taken.
	sizing *sizing
}

// sizing is what an evSized event needs to schedule its delivery at the
// time a known size would have: sent at sentAt, lat the latency drawn,
// size the bytes known at the send, late the rest (gossip.EncodedSizeLater),
// at least atLeast of them (gossip.LateBytesAtLeast), and seq the place
// in the queue the delivery took when it was sent.
type sizing struct {
	sentAt, lat   time.Duration
	size, atLeast int
	late          func(wait bool) (int, bool)
	seq           uint64
}

// queued is an event in the queue, with its order kept beside it, so
// that ordering the queue reads no event.
type queued struct {
	at  time.Duration
	seq uint64
	e   *event
}

func (a queued) before(b queued) bool { return a.at < b.at || (a.at == b.at && a.seq < b.seq) }

// queue is the simulator's event queue: by time, then by the order of
// scheduling. Its keys are distinct, so any heap gives the same order.
// Events scheduled for the time of the last event taken (a message at no
// latency, the next step of the same moment) go to a list in the order
// they come, which is their order, instead of the heap: at 10,000 peers
// most events are, and the list takes and gives each without the heap's
// dozen comparisons of memory far apart. The first event is the earlier
// of the list's first and the heap's.
type queue struct {
	h    []queued
	now  []queued // events at time at, by seq; now[head:] are queued
	head int
	at   time.Duration // the time of the last event taken
	seq  uint64
}

// push schedules e at e.at, which must not change while e is queued.
func (q *queue) push(e *event) { q.pushAt(e, q.reserve()) }

// reserve returns the next place in the order of scheduling, for an
// event scheduled later in the place it would have taken now (pushAt).
func (q *queue) reserve() uint64 {
	q.seq++
	return q.seq
}

// pushAt schedules e at e.at in the place seq (reserve) of the order of
// scheduling: after every event queued at e.at before seq was reserved,
// before those queued after. The list of the moment takes it only where
// it goes last there.
func (q *queue) pushAt(e *event, seq uint64) {
	x := queued{e.at, seq, e}
	if e.at == q.at && seq == q.seq && (q.head == len(q.now) || q.now[len(q.now)-1].at == e.at) {
		q.now = append(q.now, x)
		return
	}
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

// fromList reports whether the first event is the list's.
func (q *queue) fromList() bool {
	return q.head < len(q.now) && (len(q.h) == 0 || q.now[q.head].before(q.h[0]))
}

// pop removes the first event and returns it.
func (q *queue) pop() *event {
	if q.fromList() {
		x := q.now[q.head]
		q.now[q.head] = queued{}
		if q.head++; q.head == len(q.now) {
			q.now, q.head = q.now[:0], 0
		}
		q.at = x.at
		return x.e
	}
	h := q.h
	top := h[0]
	q.at = top.at
	n := len(h) - 1
	x := h[n]
	h[n] = queued{}
	h = h[:n]
	q.h = h
	if n == 0 {
		return top.e
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
	return top.e
}

// peek returns the first event, or nil.
func (q *queue) peek() *event {
	if q.fromList() {
		return q.now[q.head].e
	}
	if len(q.h) == 0 {
		return nil
	}
	return q.h[0].e
}

// each calls f on every event queued, in no order.
func (q *queue) each(f func(*event)) {
	for _, x := range q.now[q.head:] {
		f(x.e)
	}
	for _, x := range q.h {
		f(x.e)
	}
}
